//===- Resize.cpp - ampc.resize's axes read against its input -------------===//

#include "ampc/Dialect/Resize.h"

#include "ampc/Dialect/Compose.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;

namespace ampc {

FailureOr<SmallVector<ResizeAxis>>
readResize(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes,
           ArrayRef<int64_t> sizes, ArrayRef<double> scales,
           ArrayRef<double> roi, bool roiF32, bool crop, std::string &error) {
  auto fail = [&](const std::string &message) {
    error = message;
    return failure();
  };
  int64_t rank = static_cast<int64_t>(shape.size());
  size_t count = axes.size();
  for (auto [i, axis] : llvm::enumerate(axes))
    if (axis < 0 || axis >= rank ||
        llvm::is_contained(axes.take_front(i), axis))
      return fail("'axes' " + formatDims(axes) +
                  " must be distinct dimensions of the rank-" +
                  std::to_string(rank) + " input");
  if (sizes.size() != count)
    return fail("'sizes' has " + std::to_string(sizes.size()) +
                " values for " + std::to_string(count) + " axes");
  if (scales.size() != count)
    return fail("'scales' has " + std::to_string(scales.size()) +
                " values for " + std::to_string(count) + " axes");
  size_t roiCount = crop ? 2 * count : 0;
  if (roi.size() != roiCount)
    return fail("'roi' has " + std::to_string(roi.size()) +
                " values; tf_crop_and_resize needs 2 per axis (starts, "
                "then ends), other modes none");
  if (roiF32 && !crop)
    return fail("'roi_f32' without tf_crop_and_resize");
  SmallVector<ResizeAxis> plan;
  for (size_t i = 0; i < count; ++i) {
    ResizeAxis a;
    a.axis = axes[i];
    a.in = shape[a.axis];
    a.out = sizes[i];
    a.scale = scales[i];
    if (!(a.scale > 0) || !std::isfinite(a.scale))
      return fail("'scales' must be positive and finite");
    if (a.in == 0 ? a.out != 0 : (a.out < 1 || a.out > kMaxResizedSize))
      return fail("'sizes' value " + std::to_string(a.out) + " for dim " +
                  std::to_string(a.axis) + " of " + std::to_string(a.in) +
                  " must be " +
                  (a.in == 0 ? "0" : "between 1 and 2^24"));
    if (crop) {
      a.roiStart = roi[i];
      a.roiEnd = roi[i + count];
      a.roiF32 = roiF32;
    }
    plan.push_back(a);
  }
  return plan;
}

} // namespace ampc
