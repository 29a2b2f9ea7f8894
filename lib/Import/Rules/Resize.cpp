//===- Resize.cpp - Resize and Upsample -----------------------------------===//
//
// Resize and Upsample as gathers and weighted sums along each axis.
//
//===----------------------------------------------------------------------===//

#include "ImportRules.h"
#include "TensorConversion.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

using namespace mlir;

namespace ampc::detail {

namespace {

/// A constant of `element` and `shape` holding `values` (rounded from
/// double to the element type).
Value floatConstant(NodeContext &nc, Type element, ArrayRef<double> values,
                    ArrayRef<int64_t> shape) {
  if (failed(checkComputedConstant(nc, shape, element,
                                   "a weight constant of " +
                                       Twine(values.size()) + " elements")))
    return Value();
  SmallVector<Attribute> attrs;
  for (double v : values)
    attrs.push_back(nc.b.getFloatAttr(element, v));
  auto type = RankedTensorType::get(shape, element);
  FailureOr<Outputs> c = constant(nc, DenseElementsAttr::get(type, attrs));
  return failed(c) ? Value() : (*c)[0];
}

/// The shape of a vector of `n` elements along `axis` of a rank-`rank`
/// tensor, ones elsewhere: it broadcasts along that axis.
SmallVector<int64_t> alongAxis(int64_t rank, int64_t axis, int64_t n) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  return shape;
}

/// One resized axis: its input and output sizes, the scale, and the crop
/// of tf_crop_and_resize (roi, as fractions of the input).
struct ResizeAxis {
  int64_t axis = 0, in = 0, out = 0;
  double scale = 1; // output / input, as ONNX's reference uses it
  double roiStart = 0, roiEnd = 1;
  bool roiF32 = false; // roi given as float32
};

/// Resize's attributes that decide the taps of each output position.
struct ResizeMode {
  std::string mode, coordinates, nearest;
  double cubicA = -0.75;
  bool excludeOutside = false;
};

/// x_original of output position `x` (ONNX reference, _interpolate_1d_with_x:
/// the output width there is scale * input, a double, not the integer
/// size); nullopt outside tf_crop_and_resize's crop.
std::optional<double> sourceCoordinate(const ResizeMode &m,
                                       const ResizeAxis &a, double x) {
  double in = static_cast<double>(a.in), width = a.scale * in;
  const std::string &c = m.coordinates;
  if (c == "half_pixel")
    return (x + 0.5) / a.scale - 0.5;
  if (c == "half_pixel_symmetric") {
    double adjustment = static_cast<double>(a.out) / width;
    double offset = in / 2 * (1 - adjustment);
    return offset + (x + 0.5) / a.scale - 0.5;
  }
  if (c == "pytorch_half_pixel")
    return width == 1 ? -0.5 : (x + 0.5) / a.scale - 0.5;
  if (c == "align_corners")
    return width == 1 ? 0.0 : x * (in - 1) / (width - 1);
  if (c == "asymmetric")
    return x / a.scale;
  if (c == "tf_half_pixel_for_nn")
    return (x + 0.5) / a.scale;
  // tf_crop_and_resize. The reference computes the float32 roi's span,
  // the centre of a width of 1 and the start's offset in float32, the
  // rest in double; ties of nearest rounding depend on it.
  double span = a.roiEnd - a.roiStart, start = a.roiStart * (in - 1), r;
  if (a.roiF32) {
    float spanF = static_cast<float>(a.roiEnd) - static_cast<float>(a.roiStart);
    float inF = static_cast<float>(a.in - 1);
    span = spanF;
    start = static_cast<float>(a.roiStart) * inF;
    r = width == 1 ? spanF * inF / 2 : x * span * (in - 1) / (width - 1);
  } else {
    r = width == 1 ? span * (in - 1) / 2 : x * span * (in - 1) / (width - 1);
  }
  r += start;
  if (!std::isfinite(r) || r < 0 || r > in - 1)
    return std::nullopt;
  return r;
}

/// The taps of source coordinate `xo` on an axis of `in` elements: the `n`
/// positions nearest to it in the input edge-padded by ceil(n / 2) (ties to
/// the lower one, ONNX reference _get_neighbor), as clamped source indices
/// with the mode's coefficients.
void resizeTaps(const ResizeMode &m, double xo, int64_t in,
                SmallVectorImpl<int64_t> &index, SmallVectorImpl<double> &weight) {
  int n = m.mode == "cubic" ? 4 : 2;
  int64_t pad = (n + 1) / 2, limit = in + 2 * pad;
  double xp = xo + static_cast<double>(pad);
  // The n nearest lie within n of floor(xp) clamped into [0, limit).
  double center = std::floor(std::clamp(xp, -1.0, static_cast<double>(limit)));
  int64_t c = std::clamp<int64_t>(static_cast<int64_t>(center), 0, limit - 1);
  SmallVector<int64_t, 16> candidates;
  for (int64_t i = std::max<int64_t>(0, c - n);
       i < std::min<int64_t>(limit, c + n + 1); ++i)
    candidates.push_back(i);
  llvm::stable_sort(candidates, [&](int64_t a, int64_t b) {
    double da = std::fabs(xp - static_cast<double>(a));
    double db = std::fabs(xp - static_cast<double>(b));
    return da < db || (da == db && a < b);
  });
  candidates.resize(n);
  llvm::sort(candidates);

  double floorX = std::floor(xo);
  double ratio = xo == floorX ? 1.0 : xo - floorX;
  SmallVector<double, 4> coeffs;
  if (m.mode == "linear") {
    coeffs = {1 - ratio, ratio};
  } else if (m.mode == "nearest") {
    bool upper;
    if (ratio == 1.0 || m.nearest == "ceil")
      upper = true;
    else if (m.nearest == "floor")
      upper = false;
    else if (m.nearest == "round_prefer_ceil")
      upper = ratio >= 0.5;
    else // round_prefer_floor
      upper = ratio > 0.5;
    coeffs = {upper ? 0.0 : 1.0, upper ? 1.0 : 0.0};
  } else {
    double a = m.cubicA, r1 = ratio + 1, s = 1 - ratio, s1 = s + 1;
    coeffs = {((a * r1 - 5 * a) * r1 + 8 * a) * r1 - 4 * a,
              ((a + 2) * ratio - (a + 3)) * ratio * ratio + 1,
              ((a + 2) * s - (a + 3)) * s * s + 1,
              ((a * s1 - 5 * a) * s1 + 8 * a) * s1 - 4 * a};
  }
  if (m.excludeOutside) {
    double sum = 0;
    for (auto [i, p] : llvm::enumerate(candidates)) {
      if (p - pad < 0 || p - pad >= in)
        coeffs[i] = 0;
      sum += coeffs[i];
    }
    if (sum != 0)
      for (double &w : coeffs)
        w /= sum;
  }
  for (auto [p, w] : llvm::zip(candidates, coeffs)) {
    index.push_back(std::clamp<int64_t>(p - pad, 0, in - 1));
    weight.push_back(w);
  }
}

/// `v` resized along one axis: nearest is one Gather of the chosen source
/// positions; linear and cubic sum, over the taps, a Gather times a
/// constant weight vector along the axis (taps with all weights 0 are left
/// out, weights of 1 need no Mul); positions outside tf_crop_and_resize's
/// crop get weight 0 and extrapolation_value added.
Value resizeAxis(NodeContext &nc, Value v, const ResizeMode &m,
                 const ResizeAxis &a, double extrapolation) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rank = type.getRank();
  Type element = type.getElementType();
  int taps = m.mode == "nearest" ? 1 : m.mode == "linear" ? 2 : 4;
  SmallVector<SmallVector<int64_t>> index(taps);
  SmallVector<SmallVector<double>> weight(taps);
  SmallVector<double> outside;
  bool anyOutside = false;
  for (int64_t x = 0; x < a.out; ++x) {
    std::optional<double> xo = sourceCoordinate(m, a, static_cast<double>(x));
    SmallVector<int64_t, 4> idx;
    SmallVector<double, 4> w;
    if (xo) {
      resizeTaps(m, *xo, a.in, idx, w);
    } else {
      idx.assign(m.mode == "cubic" ? 4 : 2, 0);
      w.assign(idx.size(), 0.0);
    }
    outside.push_back(xo ? 0.0 : extrapolation);
    anyOutside |= !xo;
    if (m.mode == "nearest") {
      // The tap whose coefficient is 1.
      index[0].push_back(w[1] != 0 ? idx[1] : idx[0]);
      weight[0].push_back(xo ? 1.0 : 0.0);
      continue;
    }
    for (int t = 0; t < taps; ++t) {
      index[t].push_back(idx[t]);
      weight[t].push_back(w[t]);
    }
  }
  SmallVector<int64_t> vectorShape = alongAxis(rank, a.axis, a.out);
  Value sum;
  for (int t = 0; t < taps; ++t) {
    bool zeros = llvm::all_of(weight[t], [](double w) { return w == 0; });
    bool ones = llvm::all_of(weight[t], [](double w) { return w == 1; });
    // A tap that never counts is skipped, unless no tap counts at all.
    if (zeros && (sum || t + 1 < taps))
      continue;
    Value term = gatherAlong(nc, v, a.axis, index[t]);
    if (!ones) {
      Value w = floatConstant(nc, element, weight[t], vectorShape);
      term = w ? part<ampc::MulOp>(nc, {term, w}) : Value();
    }
    sum = sum ? part<ampc::AddOp>(nc, {sum, term}) : term;
    if (!sum)
      return Value();
  }
  if (anyOutside && extrapolation != 0) {
    Value e = floatConstant(nc, element, outside, vectorShape);
    sum = e ? part<ampc::AddOp>(nc, {sum, e}) : Value();
  }
  return sum;
}

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
/// cubic, one pass per resized axis (resizeAxis), innermost first as
/// ONNX's reference interpolates. Upsample and Resize-10 take source
/// positions as `asymmetric` with nearest rounding down (output i reads
/// input floor(i / scale)).
FailureOr<Outputs> importResize(NodeContext &nc, bool upsample) {
  Value x = nc.input(0);
  auto in = cast<RankedTensorType>(x.getType());
  int64_t rank = in.getRank();
  bool legacy = upsample || nc.opset < 11;

  ResizeMode m;
  m.mode = nc.getString("mode", "nearest");
  if (upsample && m.mode == "bilinear")
    m.mode = "linear";
  if (m.mode != "nearest" && m.mode != "linear" &&
      (legacy || m.mode != "cubic"))
    return nc.error("'mode' must be nearest, linear" +
                    Twine(legacy ? "" : " or cubic") + ", got '" + m.mode +
                    "'");
  m.coordinates = legacy ? "asymmetric"
                         : nc.getString("coordinate_transformation_mode",
                                        "half_pixel");
  static const char *const kCoordinates[] = {
      "half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
      "align_corners", "asymmetric", "tf_half_pixel_for_nn",
      "tf_crop_and_resize"};
  if (!llvm::is_contained(kCoordinates, StringRef(m.coordinates)))
    return nc.error("'coordinate_transformation_mode' must be half_pixel, "
                    "half_pixel_symmetric, pytorch_half_pixel, "
                    "align_corners, asymmetric, tf_half_pixel_for_nn or "
                    "tf_crop_and_resize, got '" +
                    m.coordinates + "'");
  m.nearest = legacy ? "floor" : nc.getString("nearest_mode", "round_prefer_floor");
  if (m.nearest != "round_prefer_floor" && m.nearest != "round_prefer_ceil" &&
      m.nearest != "floor" && m.nearest != "ceil")
    return nc.error("'nearest_mode' must be round_prefer_floor, "
                    "round_prefer_ceil, floor or ceil, got '" +
                    m.nearest + "'");
  m.cubicA = nc.getFloat("cubic_coeff_a", -0.75f);
  m.excludeOutside = nc.getInt("exclude_outside", 0) != 0;
  if (nc.getInt("antialias", 0) != 0)
    return nc.error("'antialias' is not supported (only 0)");
  if (m.mode != "nearest" && !isa<FloatType>(in.getElementType()))
    return nc.error("'" + m.mode + "' mode needs float data");

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
    if (!legacy && m.coordinates == "tf_crop_and_resize") {
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
    if (!roi.empty()) {
      a.roiStart = roi[i];
      a.roiEnd = roi[i + count];
      a.roiF32 = roiF32;
    }
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

  Value v = x;
  double extrapolation = nc.getFloat("extrapolation_value", 0.0f);
  for (const ResizeAxis &a : llvm::reverse(plan)) {
    if (a.in == 0 ||
        (a.in == a.out && a.scale == 1.0 && m.coordinates != "tf_crop_and_resize"))
      continue;
    v = resizeAxis(nc, v, m, a, extrapolation);
    if (!v)
      return failure();
  }
  return Outputs{v};
}

} // namespace

FailureOr<Outputs> importResizeOp(NodeContext &nc) {
  return importResize(nc, /*upsample=*/false);
}

FailureOr<Outputs> importUpsample(NodeContext &nc) {
  return importResize(nc, /*upsample=*/true);
}

} // namespace ampc::detail
