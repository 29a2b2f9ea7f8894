//===- Resize.cpp - Resize and Upsample -----------------------------------===//
//
// Resize and Upsample as one ampc.resize each, with the node's scales,
// sizes and roi read and resolved per axis; ampc-decompose-resize
// (lib/Transforms/DecomposeResize.cpp) lowers it to gathers and weighted
// sums along each axis.
//
//===----------------------------------------------------------------------===//

#include "ImportRules.h"
#include "TensorConversion.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Resize.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>

using namespace mlir;

namespace ampc::detail {

namespace {

static_assert(kMaxComposedAxis == ampc::kMaxResizedSize,
              "ampc.resize accepts the sizes the rule accepts");

/// The float values of constant input `i` (empty when the input is absent
/// or holds no elements).
FailureOr<SmallVector<double>> constantFloats(NodeContext &nc, size_t i,
                                              StringRef what) {
  if (!nc.input(i))
    return SmallVector<double>();
  FailureOr<DenseElementsAttr> value = nc.constantInput(i, what);
  if (failed(value))
    return failure();
  if (!isa<FloatType>(value->getElementType()))
    return nc.error("input " + Twine(i) + " (" + what + ") must be float");
  SmallVector<double> out;
  for (Attribute v : value->getValues<Attribute>())
    out.push_back(cast<FloatAttr>(v).getValueAsDouble());
  return out;
}

/// Resize (opset 10: X, scales; 11+: X, roi, scales, sizes) and Upsample
/// (opset 7: the `scales` attribute; 9: X, scales): nearest, linear or
/// cubic, one ampc.resize whose output sizes and scales are resolved here
/// from scales or sizes (and keep_aspect_ratio_policy). Upsample and
/// Resize-10 take source positions as `asymmetric` with nearest rounding
/// down (output i reads input floor(i / scale)).
FailureOr<Outputs> importResize(NodeContext &nc, bool upsample) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  int64_t rank = in.getRank();
  bool legacy = upsample || nc.opset < 11;

  std::string mode = nc.getString("mode", "nearest");
  if (upsample && mode == "bilinear")
    mode = "linear";
  if (mode != "nearest" && mode != "linear" && (legacy || mode != "cubic"))
    return nc.error("'mode' must be nearest, linear" +
                    Twine(legacy ? "" : " or cubic") + ", got '" + mode +
                    "'");
  std::string coordinates =
      legacy ? "asymmetric"
             : nc.getString("coordinate_transformation_mode", "half_pixel");
  std::optional<ResizeCoordinates> coordinateMode =
      symbolizeResizeCoordinates(coordinates);
  if (!coordinateMode)
    return nc.error("'coordinate_transformation_mode' must be half_pixel, "
                    "half_pixel_symmetric, pytorch_half_pixel, "
                    "align_corners, asymmetric, tf_half_pixel_for_nn or "
                    "tf_crop_and_resize, got '" +
                    coordinates + "'");
  bool crop = *coordinateMode == ResizeCoordinates::TfCropAndResize;
  std::string nearest =
      legacy ? "floor" : nc.getString("nearest_mode", "round_prefer_floor");
  std::optional<ResizeNearest> nearestMode = symbolizeResizeNearest(nearest);
  if (!nearestMode)
    return nc.error("'nearest_mode' must be round_prefer_floor, "
                    "round_prefer_ceil, floor or ceil, got '" +
                    nearest + "'");
  float cubicA = nc.getFloat("cubic_coeff_a", -0.75f);
  bool excludeOutside = nc.getInt("exclude_outside", 0) != 0;
  if (nc.getInt("antialias", 0) != 0)
    return nc.error("'antialias' is not supported (only 0)");
  if (mode != "nearest" && !isa<FloatType>(in.getElementType()))
    return nc.error("'" + mode + "' mode needs float data");

  // The resized axes, in the order scales, sizes and roi list them.
  SmallVector<int64_t> axes;
  if (auto given = nc.getInts("axes")) {
    for (int64_t axis : *given) {
      std::optional<int64_t> a = ampc::normalizeAxis(axis, rank);
      if (!a || llvm::is_contained(axes, *a))
        return nc.error("'axes' " + formatDims(*given) +
                        " must be distinct axes of the rank-" + Twine(rank) +
                        " input");
      axes.push_back(*a);
    }
  } else {
    for (int64_t a = 0; a < rank; ++a)
      axes.push_back(a);
  }
  size_t count = axes.size();

  SmallVector<double> scales;
  SmallVector<int64_t> sizes;
  SmallVector<double> roi;
  bool roiF32 = false;
  if (upsample && nc.opset < 9) {
    const auto *attr = nc.attr("scales");
    if (!attr)
      return nc.error("attribute 'scales' is required");
    scales.assign(attr->floats().begin(), attr->floats().end());
  } else {
    size_t scalesInput = legacy ? 1 : 2;
    if (legacy && nc.attr("scales"))
      return nc.error("'scales' is an input from opset 9, not an attribute");
    if (!nc.input(scalesInput) && legacy)
      return nc.error("input " + Twine(scalesInput) + " (scales) is required");
    FailureOr<SmallVector<double>> s = constantFloats(nc, scalesInput, "scales");
    if (failed(s))
      return failure();
    scales = *s;
    if (!legacy && nc.input(3)) {
      FailureOr<SmallVector<int64_t>> z = nc.constantInts(3, "sizes");
      if (failed(z))
        return failure();
      sizes = *z;
    }
    if (!legacy && crop) {
      FailureOr<SmallVector<double>> r = constantFloats(nc, 1, "roi");
      if (failed(r))
        return failure();
      roi = *r;
      roiF32 = nc.input(1) && cast<RankedTensorType>(nc.input(1).getType())
                                  .getElementType()
                                  .isF32();
      if (roi.size() != 2 * count)
        return nc.error("'roi' needs " + Twine(2 * count) +
                        " values (starts, then ends), got " +
                        Twine(roi.size()));
    }
  }
  if (scales.empty() == sizes.empty())
    return nc.error("exactly one of 'scales' and 'sizes' must be given");
  if (!scales.empty() && scales.size() != count)
    return nc.error("'scales' has " + Twine(scales.size()) +
                    " values for " + Twine(count) + " axes");
  if (!sizes.empty() && sizes.size() != count)
    return nc.error("'sizes' has " + Twine(sizes.size()) + " values for " +
                    Twine(count) + " axes");

  // Output sizes and scales: floor(input * scale) from scales; from sizes,
  // scale = size / input, one common scale under keep_aspect_ratio_policy.
  std::string policy = nc.getString("keep_aspect_ratio_policy", "stretch");
  if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller")
    return nc.error("'keep_aspect_ratio_policy' must be stretch, not_larger "
                    "or not_smaller, got '" + policy + "'");
  SmallVector<ResizeAxis> plan;
  std::optional<double> common;
  for (size_t i = 0; i < count; ++i) {
    ResizeAxis a;
    a.axis = axes[i];
    a.in = in.getDimSize(a.axis);
    // An empty dim stays empty: floor(0 * scale), or a size of 0.
    if (!sizes.empty() && !(a.in == 0 && sizes[i] == 0)) {
      if (a.in == 0)
        return nc.error("cannot resize the empty dim " + Twine(a.axis) +
                        " to " + Twine(sizes[i]));
      if (sizes[i] < 1 || sizes[i] > kMaxComposedAxis)
        return nc.error("'sizes' value " + Twine(sizes[i]) + " for dim " +
                        Twine(a.axis) + " must be between 1 and 2^24");
      double ratio = static_cast<double>(sizes[i]) / static_cast<double>(a.in);
      common = !common ? ratio
               : policy == "not_larger" ? std::min(*common, ratio)
                                        : std::max(*common, ratio);
    }
    plan.push_back(a);
  }
  for (auto [i, a] : llvm::enumerate(plan)) {
    double out;
    if (!sizes.empty()) {
      if (a.in == 0)
        continue;
      a.scale = policy == "stretch"
                    ? static_cast<double>(sizes[i]) / static_cast<double>(a.in)
                    : *common;
      out = policy == "stretch" ? static_cast<double>(sizes[i])
                                : std::round(*common * static_cast<double>(a.in));
    } else {
      a.scale = scales[i];
      if (!(a.scale > 0) || !std::isfinite(a.scale))
        return nc.error("'scales' must be positive and finite, got " +
                        formatNumber(a.scale));
      if (a.in == 0)
        continue;
      out = std::floor(a.scale * static_cast<double>(a.in));
    }
    if (!(out >= 1 && out <= static_cast<double>(kMaxComposedAxis)))
      return nc.error("dim " + Twine(a.axis) + " of " + Twine(a.in) +
                      " would be resized to " + formatNumber(out) +
                      " elements; ampc resizes dims to 1 to 2^24 elements");
    a.out = static_cast<int64_t>(out);
  }

  SmallVector<int64_t> outSizes;
  SmallVector<double> axisScales;
  for (const ResizeAxis &a : plan) {
    outSizes.push_back(a.out);
    axisScales.push_back(a.scale);
  }
  MLIRContext *ctx = nc.b.getContext();
  SmallVector<NamedAttribute> attrs = {
      nc.b.getNamedAttr("mode", ResizeModeAttr::get(
                                    ctx, *symbolizeResizeMode(mode))),
      nc.b.getNamedAttr("coordinate_transformation_mode",
                        ResizeCoordinatesAttr::get(ctx, *coordinateMode)),
      nc.b.getNamedAttr("nearest_mode",
                        ResizeNearestAttr::get(ctx, *nearestMode)),
      nc.ints("axes", axes),
      nc.ints("sizes", outSizes),
      nc.b.getNamedAttr("scales", nc.b.getF64ArrayAttr(axisScales)),
      nc.f32("cubic_coeff_a", cubicA),
      nc.f32("extrapolation_value",
             nc.getFloat("extrapolation_value", 0.0f))};
  if (crop)
    attrs.push_back(nc.b.getNamedAttr("roi", nc.b.getF64ArrayAttr(roi)));
  if (roiF32)
    attrs.push_back(nc.b.getNamedAttr("roi_f32", nc.b.getUnitAttr()));
  if (excludeOutside)
    attrs.push_back(nc.b.getNamedAttr("exclude_outside", nc.b.getUnitAttr()));
  return nc.build<ampc::ResizeOp>({x}, attrs);
}

} // namespace

FailureOr<Outputs> importResizeOp(NodeContext &nc) {
  return importResize(nc, /*upsample=*/false);
}

FailureOr<Outputs> importUpsample(NodeContext &nc) {
  return importResize(nc, /*upsample=*/true);
}

} // namespace ampc::detail
