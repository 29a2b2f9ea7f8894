//===- DecomposeResize.cpp - ampc.resize as gathers and weighted sums -----===//
//
// ampc-decompose-resize: each ampc.resize becomes what the importer once
// built for Resize and Upsample: one pass per resized axis, innermost
// first as ONNX's reference interpolates, each a Gather of the source
// positions (nearest) or a sum over the taps of a Gather times a constant
// weight vector (linear, cubic), the positions and weights computed here
// from the op's attributes. The ops are built by a Composer (Compose.h)
// and so folded as they are made, as at import.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Compose.h"
#include "ampc/Dialect/Resize.h"
#include "ampc/Transforms/Decompose.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace ampc {
#define GEN_PASS_DEF_DECOMPOSERESIZEPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::Composer;
using ampc::ResizeAxis;
using ampc::ResizeCoordinates;
using ampc::ResizeMode;
using ampc::ResizeNearest;

namespace {

/// The attributes of an ampc.resize that decide the taps of each output
/// position.
struct Taps {
  ResizeMode mode;
  ResizeCoordinates coordinates;
  ResizeNearest nearest;
  double cubicA;
  bool excludeOutside;
};

/// A constant op holding `value`; null after an error.
Value constant(Composer &c, DenseElementsAttr value) {
  return ampc::part<ampc::ConstantOp>(
      c, {}, {c.b.getNamedAttr("value", value)});
}

/// A constant of `element` and `shape` holding `values` (rounded from
/// double to the element type).
Value floatConstant(Composer &c, Type element, ArrayRef<double> values,
                    ArrayRef<int64_t> shape) {
  SmallVector<Attribute> attrs;
  for (double v : values)
    attrs.push_back(c.b.getFloatAttr(element, v));
  auto type = RankedTensorType::get(shape, element);
  return constant(c, DenseElementsAttr::get(type, attrs));
}

/// `v` gathered along `axis` at the constant `indices` (none when they
/// read the axis as it is).
Value gatherAlong(Composer &c, Value v, int64_t axis,
                  ArrayRef<int64_t> indices) {
  if (!v)
    return Value();
  auto type = cast<RankedTensorType>(v.getType());
  bool same = static_cast<int64_t>(indices.size()) == type.getDimSize(axis);
  for (auto [i, index] : llvm::enumerate(indices))
    same = same && index == static_cast<int64_t>(i);
  if (same)
    return v;
  auto indexType = RankedTensorType::get(
      {static_cast<int64_t>(indices.size())}, c.b.getI64Type());
  Value idx = constant(c, DenseElementsAttr::get(indexType, indices));
  return idx ? ampc::part<ampc::GatherOp>(c, {v, idx}, {c.i64("axis", axis)})
             : Value();
}

/// The shape of a vector of `n` elements along `axis` of a rank-`rank`
/// tensor, ones elsewhere: it broadcasts along that axis.
SmallVector<int64_t> alongAxis(int64_t rank, int64_t axis, int64_t n) {
  SmallVector<int64_t> shape(rank, 1);
  shape[axis] = n;
  return shape;
}

/// x_original of output position `x` (ONNX reference, _interpolate_1d_with_x:
/// the output width there is scale * input, a double, not the integer
/// size); nullopt outside tf_crop_and_resize's crop.
std::optional<double> sourceCoordinate(const Taps &m, const ResizeAxis &a,
                                       double x) {
  double in = static_cast<double>(a.in), width = a.scale * in;
  switch (m.coordinates) {
  case ResizeCoordinates::HalfPixel:
    return (x + 0.5) / a.scale - 0.5;
  case ResizeCoordinates::HalfPixelSymmetric: {
    double adjustment = static_cast<double>(a.out) / width;
    double offset = in / 2 * (1 - adjustment);
    return offset + (x + 0.5) / a.scale - 0.5;
  }
  case ResizeCoordinates::PytorchHalfPixel:
    return width == 1 ? -0.5 : (x + 0.5) / a.scale - 0.5;
  case ResizeCoordinates::AlignCorners:
    return width == 1 ? 0.0 : x * (in - 1) / (width - 1);
  case ResizeCoordinates::Asymmetric:
    return x / a.scale;
  case ResizeCoordinates::TfHalfPixelForNn:
    return (x + 0.5) / a.scale;
  case ResizeCoordinates::TfCropAndResize:
    break;
  }
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
void resizeTaps(const Taps &m, double xo, int64_t in,
                SmallVectorImpl<int64_t> &index, SmallVectorImpl<double> &weight) {
  int n = m.mode == ResizeMode::Cubic ? 4 : 2;
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
  if (m.mode == ResizeMode::Linear) {
    coeffs = {1 - ratio, ratio};
  } else if (m.mode == ResizeMode::Nearest) {
    bool upper;
    if (ratio == 1.0 || m.nearest == ResizeNearest::Ceil)
      upper = true;
    else if (m.nearest == ResizeNearest::Floor)
      upper = false;
    else if (m.nearest == ResizeNearest::RoundPreferCeil)
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
Value resizeAxis(Composer &c, Value v, const Taps &m, const ResizeAxis &a,
                 double extrapolation) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t rank = type.getRank();
  Type element = type.getElementType();
  int taps = m.mode == ResizeMode::Nearest  ? 1
             : m.mode == ResizeMode::Linear ? 2
                                            : 4;
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
      idx.assign(m.mode == ResizeMode::Cubic ? 4 : 2, 0);
      w.assign(idx.size(), 0.0);
    }
    outside.push_back(xo ? 0.0 : extrapolation);
    anyOutside |= !xo;
    if (m.mode == ResizeMode::Nearest) {
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
    Value term = gatherAlong(c, v, a.axis, index[t]);
    if (!ones) {
      Value w = floatConstant(c, element, weight[t], vectorShape);
      term = w ? ampc::part<ampc::MulOp>(c, {term, w}) : Value();
    }
    sum = sum ? ampc::part<ampc::AddOp>(c, {sum, term}) : term;
    if (!sum)
      return Value();
  }
  if (anyOutside && extrapolation != 0) {
    Value e = floatConstant(c, element, outside, vectorShape);
    sum = e ? ampc::part<ampc::AddOp>(c, {sum, e}) : Value();
  }
  return sum;
}

/// The op's axes (readResize, which its shape rule has run), resized one
/// by one from the last (resizeAxis); an empty axis, and one whose size
/// and scale stay (outside tf_crop_and_resize), are left as they are.
/// Null after an error at the op.
Value decompose(Composer &c, ampc::ResizeOp op) {
  SmallVector<double> scales, roi;
  for (Attribute a : op.getScales())
    scales.push_back(cast<FloatAttr>(a).getValueAsDouble());
  for (Attribute a : op.getRoi())
    roi.push_back(cast<FloatAttr>(a).getValueAsDouble());
  bool crop = op.getCoordinateTransformationMode() ==
              ResizeCoordinates::TfCropAndResize;
  std::string error;
  FailureOr<SmallVector<ResizeAxis>> plan = ampc::readResize(
      op.getInput().getType().getShape(), op.getAxes(), op.getSizes(), scales,
      roi, op.getRoiF32(), crop, error);
  if (failed(plan)) {
    (void)c.error(error);
    return Value();
  }
  Taps m{op.getMode(), op.getCoordinateTransformationMode(),
         op.getNearestMode(), op.getCubicCoeffA().convertToDouble(),
         op.getExcludeOutside()};
  double extrapolation = op.getExtrapolationValue().convertToDouble();
  Value v = op.getInput();
  for (const ResizeAxis &a : llvm::reverse(*plan)) {
    if (a.in == 0 || (a.in == a.out && a.scale == 1.0 && !crop))
      continue;
    v = resizeAxis(c, v, m, a, extrapolation);
    if (!v)
      return Value();
  }
  return v;
}

/// The resize's one result, as a replacement.
ampc::Replacement lower(Composer &c, ampc::ResizeOp op) {
  Value r = decompose(c, op);
  return r ? ampc::Replacement{r} : ampc::Replacement{};
}

struct DecomposeResizePass
    : ampc::impl::DecomposeResizePassBase<DecomposeResizePass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(ampc::decomposeEach<
               ampc::DecomposePattern<ampc::ResizeOp, lower>>(
            getOperation(), maxTensorBytes)))
      signalPassFailure();
  }
};

} // namespace
