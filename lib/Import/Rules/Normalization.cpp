//===- Normalization.cpp - softmax, normalizations and losses -------------===//
//
// Softmax and LogSoftmax, the normalizations (Layer, Batch, Instance,
// Group, MeanVariance, Lp, LRN), Dropout and the two losses.
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

FailureOr<Outputs> importSoftmax(NodeContext &nc) {
  return buildSame<ampc::SoftmaxOp>(nc,
                                    {nc.i64("axis", nc.getInt("axis", -1))});
}

FailureOr<Outputs> importLogSoftmax(NodeContext &nc) {
  return buildSame<ampc::LogSoftmaxOp>(nc,
                                       {nc.i64("axis", nc.getInt("axis", -1))});
}

FailureOr<Outputs> importLayerNormalization(NodeContext &nc) {
  return buildSame<ampc::LayerNormalizationOp>(
      nc,
      {nc.i64("axis", nc.getInt("axis", -1)),
       nc.f32("epsilon", nc.getFloat("epsilon", 1e-5f)),
       nc.i64("stash_type", nc.getInt("stash_type", 1))},
      3);
}

FailureOr<Outputs> importBatchNormalization(NodeContext &nc) {
  if (nc.getInt("spatial", 1) != 1)
    return nc.error("'spatial' = 0 is not supported");
  int64_t training = nc.getInt("training_mode", 0);
  if (nc.opset < 14 && nc.numOutputs() > 1)
    return nc.error("the training outputs of BatchNormalization before opset "
                    "14 are not supported");
  return buildSame<ampc::BatchNormalizationOp>(
      nc,
      {nc.f32("epsilon", nc.getFloat("epsilon", 1e-5f)),
       nc.f32("momentum", nc.getFloat("momentum", 0.9f)),
       nc.i64("training_mode", training)},
      3);
}

FailureOr<Outputs> importDropout(NodeContext &nc) {
  float ratio = nc.getFloat("ratio", 0.5f);
  int64_t training = 0;
  if (nc.opset >= 12) {
    if (nc.input(1)) {
      FailureOr<DenseElementsAttr> r = nc.constantInput(1, "ratio");
      if (failed(r))
        return failure();
      if (!isa<FloatType>(r->getElementType()) || r->getNumElements() != 1)
        return nc.error("input 1 (ratio) must be a float scalar");
      ratio = (*r->getValues<APFloat>().begin()).convertToFloat();
    }
    if (nc.input(2)) {
      FailureOr<DenseElementsAttr> t = nc.constantInput(2, "training_mode");
      if (failed(t))
        return failure();
      if (!t->getElementType().isInteger(1) || t->getNumElements() != 1)
        return nc.error("input 2 (training_mode) must be a bool scalar");
      training = *t->getValues<bool>().begin();
    }
  }
  SmallVector<NamedAttribute> attrs = {nc.f32("ratio", ratio),
                                       nc.i64("training_mode", training)};
  if (nc.attr("seed"))
    attrs.push_back(nc.i64("seed", nc.getInt("seed", 0)));
  FailureOr<Outputs> results = nc.build<ampc::DropoutOp>(nc.input(0), attrs, 2);
  if (failed(results) || nc.opset >= 10 || !nc.outputUsed(1))
    return results;
  // Before opset 10 the mask has the data's float type, not bool.
  FailureOr<Outputs> mask =
      nc.build<ampc::CastOp>((*results)[1], {}, 1, nc.input(0).getType());
  if (failed(mask))
    return failure();
  return Outputs{(*results)[0], (*mask)[0]};
}

namespace {

/// `v` normalised over the dimensions from 1 on of its (rows, ...) view
/// `rows` x (the rest), by LayerNormalization with a unit scale: the
/// statistics in FP32, as autocast computes instance and group norms.
Value normalizedRows(NodeContext &nc, Value v, int64_t rows, float epsilon,
                     int64_t stashType = 1) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t total = type.getNumElements();
  Value flat = reshaped(nc, v, {rows, rows ? total / rows : 0});
  Value one = scalarOf(nc, type.getElementType(), 1.0);
  if (!flat || !one)
    return Value();
  FailureOr<Outputs> r = nc.build<ampc::LayerNormalizationOp>(
      {flat, one},
      {nc.i64("axis", 1), nc.f32("epsilon", epsilon),
       nc.i64("stash_type", stashType)},
      3);
  return failed(r) ? Value() : reshaped(nc, (*r)[0], type.getShape());
}

/// `y` * scale + bias with per-channel (C) vectors broadcast over an
/// (N, C, D1, ...) tensor.
Value channelAffine(NodeContext &nc, Value y, Value scale, Value bias) {
  auto type = cast<RankedTensorType>(y.getType());
  SmallVector<int64_t> shape(type.getRank() - 1, 1);
  shape[0] = type.getDimSize(1);
  if (scale)
    y = part<ampc::MulOp>(nc, {y, reshaped(nc, scale, shape)});
  if (bias && y)
    y = part<ampc::AddOp>(nc, {y, reshaped(nc, bias, shape)});
  return y;
}

/// Checks that input `i` is a vector of `n` elements.
LogicalResult checkVector(NodeContext &nc, size_t i, StringRef what,
                          int64_t n) {
  auto t = cast<RankedTensorType>(nc.input(i).getType());
  if (t.getRank() != 1 || t.getDimSize(0) != n)
    return nc.error("input " + Twine(i) + " (" + what + ") must have shape [" +
                    Twine(n) + "], got " + formatDims(t.getShape()));
  return success();
}

} // namespace

/// InstanceNormalization: each (n, c) plane normalised (LayerNormalization
/// of the (N C, D1 ...) view), then the per-channel scale and bias.
FailureOr<Outputs> importInstanceNormalization(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 3)
    return nc.error("needs an (N, C, D1, ...) input of rank 3 or more");
  int64_t c = in.getDimSize(1);
  if (failed(checkVector(nc, 1, "scale", c)) ||
      failed(checkVector(nc, 2, "B", c)))
    return failure();
  Value y = normalizedRows(nc, nc.input(0), in.getDimSize(0) * c,
                           nc.getFloat("epsilon", 1e-5f));
  y = y ? channelAffine(nc, y, nc.input(1), nc.input(2)) : Value();
  if (!y)
    return failure();
  return Outputs{y};
}

/// GroupNormalization (opsets 18 and 21): each group of C / G channels of
/// each sample normalised (LayerNormalization of the (N G, ...) view), then
/// the scale and bias per channel (opset 21) or per group (opset 18, each
/// repeated over its channels).
FailureOr<Outputs> importGroupNormalization(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 3)
    return nc.error("needs an (N, C, D1, ...) input of rank 3 or more");
  if (!nc.attr("num_groups"))
    return nc.error("attribute 'num_groups' is required");
  int64_t groups = nc.getInt("num_groups", 1);
  int64_t c = in.getDimSize(1);
  if (groups <= 0 || c % groups)
    return nc.error("'num_groups' " + Twine(groups) +
                    " must be positive and divide the " + Twine(c) +
                    " channels");
  bool perGroup = nc.opset < 21;
  int64_t n = perGroup ? groups : c;
  if (failed(checkVector(nc, 1, "scale", n)) ||
      failed(checkVector(nc, 2, "bias", n)))
    return failure();
  Value scale = nc.input(1), bias = nc.input(2);
  if (perGroup && groups != c) {
    auto repeat = [&](Value v) {
      auto t = cast<RankedTensorType>(v.getType());
      Value r = reshaped(nc, v, {groups, 1});
      r = r ? part<ampc::ExpandOp>(nc, r, {}, t.clone({groups, c / groups}))
            : Value();
      return r ? reshaped(nc, r, {c}) : Value();
    };
    scale = repeat(scale);
    bias = repeat(bias);
  }
  Value y = normalizedRows(nc, nc.input(0), in.getDimSize(0) * groups,
                           nc.getFloat("epsilon", 1e-5f),
                           nc.getInt("stash_type", 1));
  y = y && scale && bias ? channelAffine(nc, y, scale, bias) : Value();
  if (!y)
    return failure();
  return Outputs{y};
}

/// MeanVarianceNormalization: (X - mean) / (sqrt(variance) + 1e-9) over
/// `axes` (default 0, 2, 3), as ONNX's function body, with the variance
/// of the centred values (the body's E[X^2] - E[X]^2 can go negative in
/// rounding).
FailureOr<Outputs> importMeanVarianceNormalization(NodeContext &nc) {
  SmallVector<int64_t> axes =
      nc.getInts("axes").value_or(SmallVector<int64_t>{0, 2, 3});
  auto mean = [&](Value v) {
    return part<ampc::ReduceMeanOp>(
        nc, v, {nc.ints("axes", axes), nc.i64("keepdims", 1)});
  };
  Value x = nc.input(0);
  Value centred = part<ampc::SubOp>(nc, {x, mean(x)});
  Value deviation =
      part<ampc::SqrtOp>(nc, mean(part<ampc::MulOp>(nc, {centred, centred})));
  auto element = cast<RankedTensorType>(x.getType()).getElementType();
  Value y = part<ampc::DivOp>(
      nc, {centred,
           part<ampc::AddOp>(nc, {deviation, scalarOf(nc, element, 1e-9)})});
  if (!y)
    return failure();
  return Outputs{y};
}

/// LpNormalization: X divided by its L1 or L2 norm along `axis` (p = 1 or
/// 2), kept for broadcasting.
FailureOr<Outputs> importLpNormalization(NodeContext &nc) {
  int64_t p = nc.getInt("p", 2);
  if (p != 1 && p != 2)
    return nc.error("'p' must be 1 or 2, got " + Twine(p));
  Value x = nc.input(0);
  auto attrs = {nc.ints("axes", {nc.getInt("axis", -1)}),
                nc.i64("keepdims", 1)};
  Value norm =
      p == 1 ? part<ampc::ReduceSumOp>(nc, part<ampc::AbsOp>(nc, x), attrs)
             : part<ampc::SqrtOp>(
                   nc, part<ampc::ReduceSumOp>(
                           nc, part<ampc::MulOp>(nc, {x, x}), attrs));
  Value y = part<ampc::DivOp>(nc, {x, norm});
  if (!y)
    return failure();
  return Outputs{y};
}

/// LRN: X / (bias + alpha / size * S)^beta, S the sum of squares over the
/// `size` channels around each one (floor((size - 1) / 2) before, the rest
/// after): an AveragePool of the squares, counting the zero padding, over
/// the (N, 1, C, D1 ...) view.
FailureOr<Outputs> importLRN(NodeContext &nc) {
  auto in = cast<RankedTensorType>(nc.input(0).getType());
  if (in.getRank() < 2)
    return nc.error("needs an (N, C, ...) input of rank 2 or more");
  if (!nc.attr("size"))
    return nc.error("attribute 'size' is required");
  int64_t size = nc.getInt("size", 1);
  if (size <= 0 || size > (int64_t(1) << 30))
    return nc.error("'size' must be in [1, 2^30], got " + Twine(size));
  int64_t n = in.getDimSize(0), c = in.getDimSize(1);
  int64_t rest = 1;
  for (int64_t d : in.getShape().drop_front(2))
    rest *= d;
  float alpha = nc.getFloat("alpha", 1e-4f), beta = nc.getFloat("beta", 0.75f),
        bias = nc.getFloat("bias", 1.0f);
  Value x = nc.input(0);
  Value squares = reshaped(nc, part<ampc::MulOp>(nc, {x, x}), {n, 1, c, rest});
  int64_t lo = (size - 1) / 2, hi = size - 1 - lo;
  Value mean = part<ampc::AveragePoolOp>(
      nc, squares,
      {nc.ints("kernel_shape", {size, 1}), nc.ints("strides", {1, 1}),
       nc.ints("pads", {lo, 0, hi, 0}), nc.i64("count_include_pad", 1)});
  mean = mean ? reshaped(nc, mean, in.getShape()) : Value();
  Type element = in.getElementType();
  Value base = part<ampc::AddOp>(
      nc, {part<ampc::MulOp>(nc, {mean, scalarOf(nc, element, alpha)}),
           scalarOf(nc, element, bias)});
  Value y = part<ampc::DivOp>(
      nc, {x, part<ampc::PowOp>(nc, {base, scalarOf(nc, element, beta)})});
  if (!y)
    return failure();
  return Outputs{y};
}

namespace {

/// Both ONNX losses take the same attributes.
FailureOr<SmallVector<NamedAttribute>> lossAttributes(NodeContext &nc) {
  FailureOr<NamedAttribute> reduction =
      nc.enumAttr<ampc::Reduction, ampc::ReductionAttr>("reduction", "mean");
  if (failed(reduction))
    return failure();
  SmallVector<NamedAttribute> attrs = {*reduction};
  if (nc.attr("ignore_index"))
    attrs.push_back(nc.i64("ignore_index", nc.getInt("ignore_index", 0)));
  return attrs;
}

} // namespace

FailureOr<Outputs> importSoftmaxCrossEntropyLoss(NodeContext &nc) {
  FailureOr<SmallVector<NamedAttribute>> attrs = lossAttributes(nc);
  if (failed(attrs))
    return failure();
  return buildSame<ampc::SoftmaxCrossEntropyLossOp>(nc, *attrs, 2);
}

FailureOr<Outputs> importNegativeLogLikelihoodLoss(NodeContext &nc) {
  FailureOr<SmallVector<NamedAttribute>> attrs = lossAttributes(nc);
  if (failed(attrs))
    return failure();
  return buildSame<ampc::NegativeLogLikelihoodLossOp>(nc, *attrs);
}

} // namespace ampc::detail
