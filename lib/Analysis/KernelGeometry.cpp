//===- KernelGeometry.cpp - op geometry both targets' kernels take -------===//
//
// See include/ampc/Analysis/KernelGeometry.h. A library of its own (on the
// dialect alone): the memory plan uses it as well as the emitters.
//
//===----------------------------------------------------------------------===//

#include "ampc/Analysis/KernelGeometry.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/ChannelsLast.h"
#include "ampc/Kernels/Common/KernelMath.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <initializer_list>
#include <limits>

using namespace mlir;
using llvm::ArrayRef;
using llvm::SmallVector;
using llvm::StringRef;

namespace ampc::emit {

RankedTensorType tensorOf(Value v) { return cast<RankedTensorType>(v.getType()); }
Type elementOf(Value v) { return tensorOf(v).getElementType(); }

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

SmallVector<int64_t> rowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

SmallVector<int64_t> broadcastStrides(ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> out) {
  SmallVector<int64_t> strides(out.size(), 0);
  int64_t stride = 1;
  for (int64_t i = shape.size() - 1, o = out.size() - 1; i >= 0; --i, --o) {
    strides[o] = shape[i] == 1 && out[o] != 1 ? 0 : stride;
    stride *= shape[i];
  }
  return strides;
}

StringRef accumulation(Operation *op) {
  auto type = op->getAttrOfType<TypeAttr>(ampc::kAccumulateAttr);
  if (type && type.getValue().isInteger(64))
    return type.getValue().isUnsignedInteger() ? "uint64_t" : "int64_t";
  return type && type.getValue().isF64() ? "double" : "float";
}

bool isChannelsLast(Operation *op) {
  // The unit attribute of ampc.conv, its adjoints, the pools and
  // BatchNormalization (ampc-channels-last sets it).
  return op->hasAttr("channels_last");
}

int64_t accumulationBytes(Operation *op) {
  return accumulation(op) == "float" ? 4 : 8;
}

int64_t WindowGeometry::inSize() const { return product(in); }
int64_t WindowGeometry::outSize() const { return product(out); }
int64_t WindowGeometry::kernelSize() const { return product(kernel); }

bool WindowGeometry::isIdentity() const {
  if (kernelSize() != 1)
    return false;
  for (size_t d = 0; d < rank(); ++d)
    if (strides[d] != 1 || padBegin[d] != 0 || in[d] != out[d])
      return false;
  return true;
}

namespace {

ArrayRef<int64_t> shapeOf(Value v) { return tensorOf(v).getShape(); }

int64_t axisOf(int64_t axis, ArrayRef<int64_t> shape) {
  return *ampc::normalizeAxis(axis, shape.size());
}

/// A Slice of a tensor of `shape` as a strided view of it: the input
/// stride times the step along each sliced axis, the first element's
/// offset.
StridedView sliceOf(ArrayRef<int64_t> shape, ArrayRef<int64_t> viewDims,
                    ArrayRef<int64_t> starts, ArrayRef<int64_t> axes,
                    ArrayRef<int64_t> steps) {
  StridedView view;
  view.dims.assign(viewDims.begin(), viewDims.end());
  SmallVector<int64_t> inStrides = rowMajorStrides(shape);
  view.strides = inStrides;
  for (auto [i, a] : llvm::enumerate(axes)) {
    int64_t axis = axisOf(a, shape);
    int64_t dim = shape[axis], step = steps[i];
    int64_t start = starts[i];
    if (start < 0)
      start += dim;
    start = step > 0 ? std::clamp<int64_t>(start, 0, dim)
                     : std::clamp<int64_t>(start, 0, dim - 1);
    view.offset += start * inStrides[axis];
    view.strides[axis] = inStrides[axis] * step;
  }
  return view;
}

/// The spatial dims of a shape: after N and C, or between N and C when
/// `channelsLast`.
ArrayRef<int64_t> spatialOf(ArrayRef<int64_t> shape, bool channelsLast) {
  return channelsLast ? shape.slice(1, shape.size() - 2) : shape.drop_front(2);
}

WindowGeometry window(ArrayRef<int64_t> inShape, ArrayRef<int64_t> outShape,
                      ArrayRef<int64_t> kernel,
                      std::optional<ArrayRef<int64_t>> strides,
                      std::optional<ArrayRef<int64_t>> pads,
                      std::optional<ArrayRef<int64_t>> dilations,
                      bool channelsLast) {
  WindowGeometry g;
  ArrayRef<int64_t> in = spatialOf(inShape, channelsLast),
                    out = spatialOf(outShape, channelsLast);
  size_t n = in.size();
  g.in.assign(in.begin(), in.end());
  g.out.assign(out.begin(), out.end());
  g.kernel.assign(kernel.begin(), kernel.end());
  g.strides.assign(n, 1);
  g.dilations.assign(n, 1);
  g.padBegin.assign(n, 0);
  g.padEnd.assign(n, 0);
  if (strides)
    g.strides.assign(strides->begin(), strides->end());
  if (dilations)
    g.dilations.assign(dilations->begin(), dilations->end());
  if (pads) {
    g.padBegin.assign(pads->begin(), pads->begin() + n);
    g.padEnd.assign(pads->begin() + n, pads->end());
  }
  const int64_t c = channelsLast ? inShape.back() : inShape[1];
  g.planes = inShape[0] * c;
  g.channels = channelsLast ? c : 0;
  return g;
}

/// The windows of the ops that carry their attributes under the ONNX
/// names: over `in` (the forward input) giving `out`.
template <typename Op>
WindowGeometry attributeWindow(Op op, Value in, Value out,
                               ArrayRef<int64_t> kernel) {
  return window(shapeOf(in), shapeOf(out), kernel, op.getStrides(),
                op.getPads(), op.getDilations(), isChannelsLast(op));
}

} // namespace


AxisSplit splitAt(ArrayRef<int64_t> shape, int64_t axis) {
  return {product(shape.take_front(axis)), shape[axis],
          product(shape.drop_front(axis + 1))};
}

AxisSplit softmaxGeometry(Operation *op) {
  ArrayRef<int64_t> shape = shapeOf(op->getOperand(0));
  return splitAt(
      shape, axisOf(op->getAttrOfType<IntegerAttr>("axis").getInt(), shape));
}

StridedView stridedView(Operation *op) {
  return llvm::TypeSwitch<Operation *, StridedView>(op)
      .Case([](ampc::TransposeOp t) {
        StridedView view;
        ArrayRef<int64_t> out = shapeOf(t.getOutput());
        view.dims.assign(out.begin(), out.end());
        SmallVector<int64_t> inStrides = rowMajorStrides(shapeOf(t.getInput()));
        for (int64_t p : t.getPerm())
          view.strides.push_back(inStrides[p]);
        return view;
      })
      .Case([](ampc::SliceOp s) {
        return sliceOf(shapeOf(s.getInput()), shapeOf(s.getOutput()),
                       s.getStarts(), s.getAxes(), s.getSteps());
      })
      .Case([](ampc::SliceGradOp s) {
        return sliceOf(shapeOf(s.getOutput()), shapeOf(s.getGrad()),
                       s.getStarts(), s.getAxes(), s.getSteps());
      })
      .Default([](Operation *) -> StridedView {
        llvm_unreachable("not a strided view");
      });
}

int64_t ReduceGeometry::keptCount() const { return product(keptDims); }
int64_t ReduceGeometry::reducedCount() const { return product(reducedDims); }

ReduceGeometry reduceGeometry(Operation *op) {
  ArrayRef<int64_t> shape = shapeOf(op->getOperand(0));
  ReduceGeometry g;
  SmallVector<bool> reduced;
  if (isa<ampc::GlobalAveragePoolOp>(op)) {
    reduced.assign(shape.size(), true);
    reduced[0] = reduced[1] = false;
    g.kind = "ReduceMean";
  } else {
    auto axes = op->getAttrOfType<DenseI64ArrayAttr>("axes").asArrayRef();
    reduced.assign(shape.size(), axes.empty());
    for (int64_t a : axes)
      reduced[axisOf(a, shape)] = true;
    g.kind = isa<ampc::ReduceSumOp>(op)    ? "ReduceSum"
             : isa<ampc::ReduceMeanOp>(op) ? "ReduceMean"
             : isa<ampc::ReduceProdOp>(op) ? "ReduceProd"
                                           : "ReduceMax";
  }
  // Kept dimensions in output order (keepdims does not change the layout).
  SmallVector<int64_t> strides = rowMajorStrides(shape);
  for (size_t d = 0; d < shape.size(); ++d) {
    (reduced[d] ? g.reducedDims : g.keptDims).push_back(shape[d]);
    (reduced[d] ? g.reducedStrides : g.keptStrides).push_back(strides[d]);
  }
  return g;
}

WindowGeometry windowGeometry(Operation *op) {
  if (isa<ampc::ConvOp, ampc::ConvBackwardDataOp, ampc::ConvBackwardWeightOp>(
          op))
    return convGeometry(op).window;
  return llvm::TypeSwitch<Operation *, WindowGeometry>(op)
      .Case([](ampc::MaxPoolOp o) {
        return attributeWindow(o, o.getInput(), o.getOutput(),
                               o.getKernelShape());
      })
      .Case([](ampc::AveragePoolOp o) {
        return attributeWindow(o, o.getInput(), o.getOutput(),
                               o.getKernelShape());
      })
      .Case([](ampc::AveragePoolGradOp o) {
        return attributeWindow(o, o.getOutput(), o.getGrad(),
                               o.getKernelShape());
      })
      .Case([](ampc::MaxPoolGradOp o) {
        return attributeWindow(o, o.getOutput(), o.getGrad(),
                               o.getKernelShape());
      })
      .Default([](Operation *) -> WindowGeometry {
        llvm_unreachable("not a window op");
      });
}

ConvGeometry convGeometry(Operation *op) {
  ConvGeometry g;
  auto fill = [&](auto o, Value x, Value w, Value y) {
    g.input = x, g.weight = w, g.output = y;
    g.group = o.getGroup();
    // W is (m, c/group, kernel...), or (m, kernel..., c/group) (OHWI).
    g.window = attributeWindow(o, x, y,
                               spatialOf(shapeOf(w), isChannelsLast(o)));
  };
  if (auto o = dyn_cast<ampc::ConvOp>(op))
    fill(o, o.getInput(), o.getWeight(), o.getOutput());
  else if (auto o = dyn_cast<ampc::ConvBackwardDataOp>(op))
    fill(o, o.getOutput(), o.getWeight(), o.getGrad());
  else {
    auto b = cast<ampc::ConvBackwardWeightOp>(op);
    fill(b, b.getInput(), b.getOutput(), b.getGrad());
  }
  ArrayRef<int64_t> xs = shapeOf(g.input);
  g.n = xs[0], g.channels = g.window.channels ? xs.back() : xs[1];
  g.filters = shapeOf(g.weight)[0];
  return g;
}

int64_t cpuConvImagesPerGemm(Operation *op) {
  ConvGeometry g = convGeometry(op);
  int64_t outSize = g.window.outSize();
  if (isa<ampc::ConvBackwardWeightOp>(op) || g.n <= 1 || outSize <= 0 ||
      outSize >= kCpuConvNarrowPlane)
    return 1;
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int64_t images = std::min(g.n, ceilDiv(kCpuConvChunkColumns, outSize));
  return ceilDiv(g.n, ceilDiv(g.n, images));
}

int64_t cudnnWorkspaceBudget(Operation *op) {
  ConvGeometry g = convGeometry(op);
  int64_t largest = 0;
  for (Value v : {g.input, g.weight, g.output})
    largest = std::max(largest, tensorOf(v).getNumElements() *
                                    static_cast<int64_t>(
                                    (elementOf(v).getIntOrFloatBitWidth() + 7) /
                                    8));
  return std::clamp(largest, kCudnnWorkspaceFloor, kCudnnWorkspaceCeiling);
}

bool concatPadsWithZeros(Operation *op) {
  auto concat = dyn_cast<ampc::ConcatOp>(op);
  if (!concat || concat->getNumOperands() != 2)
    return false;
  Value zeros = concat->getOperand(1);
  if (auto expand = zeros.getDefiningOp<ampc::ExpandOp>())
    zeros = expand.getInput();
  auto constant = zeros.getDefiningOp<ampc::ConstantOp>();
  if (!constant)
    return false;
  auto values = dyn_cast<DenseElementsAttr>(constant.getValue());
  return values && values.isSplat() &&
         isa<FloatType>(values.getElementType()) &&
         values.getSplatValue<APFloat>().isPosZero();
}

bool cudnnConvolves(Operation *op) {
  ConvGeometry g = convGeometry(op);
  const WindowGeometry &w = g.window;
  if (w.rank() < 1 || w.rank() > 3 || w.padBegin != w.padEnd)
    return false;
  for (size_t d = 0; d < w.rank(); ++d)
    if (w.out[d] != (w.in[d] + 2 * w.padBegin[d] -
                     w.dilations[d] * (w.kernel[d] - 1) - 1) /
                            w.strides[d] +
                        1)
      return false;
  Type t = elementOf(g.input);
  if (accumulation(op) != (t.isF64() ? "double" : "float"))
    return false;
  // cuDNN's dimensions are positive ints.
  constexpr int64_t kLimit = int64_t(1) << 31;
  for (Value v : {g.input, g.weight, g.output}) {
    int64_t count = product(shapeOf(v));
    if (count <= 0 || count >= kLimit)
      return false;
  }
  return true;
}

ConcatGeometry concatGeometry(Operation *op) {
  auto concat = cast<ampc::ConcatOp>(op);
  ArrayRef<int64_t> shape = shapeOf(concat.getOutput());
  int64_t axis = axisOf(concat.getAxis(), shape);
  AxisSplit split = splitAt(shape, axis);
  ConcatGeometry g{split.outer, split.size * split.inner, {}};
  int64_t offset = 0;
  for (Value in : concat.getInputs()) {
    int64_t block = shapeOf(in)[axis] * split.inner;
    g.parts.push_back({in, block, offset});
    offset += block;
  }
  return g;
}

GatherGeometry gatherGeometry(Operation *op) {
  Value data, indices;
  int64_t axis;
  if (auto gather = dyn_cast<ampc::GatherOp>(op)) {
    data = gather.getData(), indices = gather.getIndices();
    axis = gather.getAxis();
  } else if (auto scatter = dyn_cast<ampc::ScatterOp>(op)) {
    data = scatter.getData(), indices = scatter.getIndices();
    axis = scatter.getAxis();
  } else {
    auto grad = cast<ampc::GatherGradOp>(op);
    data = grad.getOutput(), indices = grad.getIndices();
    axis = grad.getAxis();
  }
  ArrayRef<int64_t> shape = shapeOf(data);
  return {splitAt(shape, axisOf(axis, shape)),
          tensorOf(indices).getNumElements()};
}

StringRef scatterReductionName(Operation *op) {
  return llvm::StringSwitch<StringRef>(cast<ampc::ScatterOp>(op).getReduction())
      .Case("add", "ScatterAdd")
      .Case("mul", "ScatterMul")
      .Case("max", "ScatterMax")
      .Case("min", "ScatterMin")
      .Default("ScatterNone");
}

TopKGeometry topKGeometry(Operation *op) {
  auto topK = cast<ampc::TopKOp>(op);
  ArrayRef<int64_t> shape = shapeOf(topK.getInput());
  return {splitAt(shape, axisOf(topK.getAxis(), shape)),
          static_cast<int64_t>(topK.getK()),
          topK.getLargest() != 0};
}

AttentionGeometry attentionGeometry(Operation *op) {
  Value q, k, v, o, bias;
  ArrayRef<int64_t> qp, kp, vp, op_;
  double dropoutRatio;
  int64_t dropoutSeed;
  bool packed;
  if (auto a = dyn_cast<ampc::AttentionOp>(op)) {
    q = a.getQ(), k = a.getK(), v = a.getV(), o = a.getO(), bias = a.getBias();
    qp = a.getQPerm(), kp = a.getKPerm(), vp = a.getVPerm(), op_ = a.getOPerm();
    dropoutRatio = a.getDropoutRatio().convertToDouble();
    dropoutSeed = a.getDropoutSeed();
    packed = a.getPackedQkv();
  } else {
    auto g = cast<ampc::AttentionGradOp>(op);
    q = g.getQ(), k = g.getK(), v = g.getV(), o = g.getO(), bias = g.getBias();
    qp = g.getQPerm(), kp = g.getKPerm(), vp = g.getVPerm(), op_ = g.getOPerm();
    dropoutRatio = g.getDropoutRatio().convertToDouble();
    dropoutSeed = g.getDropoutSeed();
    packed = g.getPackedQkv();
  }
  SmallVector<int64_t, 4> lq = ampc::attentionLogicalShape(shapeOf(q), qp);
  SmallVector<int64_t, 4> lk = ampc::attentionLogicalShape(shapeOf(k), kp);
  SmallVector<int64_t, 4> lv = ampc::attentionLogicalShape(shapeOf(v), vp);
  if (packed) {
    // Q, K, V: the heads [0, H), [H, 2H), [2H, 3H) of one operand.
    lq[1] /= 3;
    lk = lq;
    lv = lq;
  }
  AttentionGeometry g;
  g.batch = lq[0], g.heads = lq[1], g.sq = lq[2], g.sk = lk[2], g.d = lq[3];
  g.dv = lv[3];
  g.dropoutRatio = dropoutRatio;
  g.dropoutSeed = static_cast<uint64_t>(dropoutSeed);
  g.q = ampc::attentionLogicalStrides(shapeOf(q), qp);
  g.k = ampc::attentionLogicalStrides(shapeOf(k), kp);
  g.v = ampc::attentionLogicalStrides(shapeOf(v), vp);
  g.o = ampc::attentionLogicalStrides(shapeOf(o), op_);
  if (packed) {
    g.kOffset = g.heads * g.q[1];
    g.vOffset = 2 * g.heads * g.q[1];
  }
  g.bias.assign(4, 0);
  if (bias) {
    SmallVector<int64_t> s =
        broadcastStrides(shapeOf(bias), {g.batch, g.heads, g.sq, g.sk});
    g.bias.assign(s.begin(), s.end());
  }
  return g;
}

LayerNormGeometry layerNormGeometry(Operation *op) {
  Value x, scale, bias, mean;
  int64_t axis;
  if (auto o = dyn_cast<ampc::LayerNormalizationOp>(op)) {
    x = o.getInput(), scale = o.getScale(), bias = o.getBias();
    mean = o.getMean(), axis = o.getAxis();
  } else if (auto o = dyn_cast<ampc::AddLayerNormOp>(op)) {
    x = o.getInput(), scale = o.getScale(), bias = o.getBias();
    mean = o.getMean(), axis = o.getAxis();
  } else {
    auto g = cast<ampc::LayerNormGradOp>(op);
    x = g.getInput(), scale = g.getScale(), mean = g.getMean();
    axis = g.getAxis();
  }
  ArrayRef<int64_t> shape = shapeOf(x);
  axis = axisOf(axis, shape);
  ArrayRef<int64_t> normalized = shape.drop_front(axis);
  LayerNormGeometry g;
  g.outer = product(shape.take_front(axis));
  g.size = product(normalized);
  g.normalized.assign(normalized.begin(), normalized.end());
  g.scaleStrides = broadcastStrides(shapeOf(scale), normalized);
  if (bias)
    g.biasStrides = broadcastStrides(shapeOf(bias), normalized);
  g.compute = accumulation(op);
  return g;
}

BatchNormGeometry batchNormGeometry(Operation *op) {
  // Statistics in the compute type whatever their storage (under autocast
  // the data is f16/bf16 and the statistics FP32).
  Value x, statistics;
  if (auto norm = dyn_cast<ampc::BatchNormalizationOp>(op)) {
    x = norm.getInput(), statistics = norm.getInputMean();
  } else {
    auto grad = cast<ampc::BatchNormGradOp>(op);
    x = grad.getInput(), statistics = grad.getScale();
  }
  // Channels-last: the channel is the last axis, so n is N·spatial and
  // inner 1 (a channel's elements in the same order as NCHW's).
  ArrayRef<int64_t> shape = shapeOf(x);
  AxisSplit split =
      splitAt(shape, isChannelsLast(op) ? shape.size() - 1 : 1);
  return {split.outer, split.size, split.inner, accumulation(op)};
}

std::pair<int64_t, int64_t> unscaleLayout(Operation *op, unsigned i) {
  auto unscale = cast<ampc::UnscaleOp>(op);
  if (!unscale.isChannelsLast(i))
    return {0, 0};
  return ampc::channelsLastLayout(shapeOf(unscale.getGrads()[i]));
}

LossGeometry lossGeometry(Operation *op) {
  LossGeometry g;
  std::optional<uint64_t> ignore;
  SmallVector<Type, 2> computed;
  if (auto o = dyn_cast<ampc::SoftmaxCrossEntropyLossOp>(op)) {
    g.scores = o.getScores(), g.labels = o.getLabels();
    g.weights = o.getWeights(), g.logProb = o.getLogProb();
    g.reduction = o.getReduction(), ignore = o.getIgnoreIndex();
  } else if (auto o = dyn_cast<ampc::NegativeLogLikelihoodLossOp>(op)) {
    g.scores = o.getInput(), g.labels = o.getTarget();
    g.weights = o.getWeight();
    g.reduction = o.getReduction(), ignore = o.getIgnoreIndex();
  } else {
    auto grad = cast<ampc::NllLossGradOp>(op);
    g.scores = grad.getOutput(), g.labels = grad.getTarget();
    g.weights = grad.getWeight();
    g.reduction = grad.getReduction(), ignore = grad.getIgnoreIndex();
    computed.push_back(elementOf(grad.getGrad()));
  }
  computed.push_back(elementOf(g.scores));
  if (ignore)
    g.ignoreIndex = static_cast<int64_t>(*ignore);
  AxisSplit split = splitAt(shapeOf(g.scores), 1);
  g.n = split.outer, g.classes = split.size, g.inner = split.inner;
  g.compute = accumulation(op);
  return g;
}

void ScratchLayout::add(StringRef name, int64_t count, int64_t elementBytes) {
  slots.push_back({name.str(), size});
  // Saturating: a hostile window (a huge kernel over a huge input) makes a
  // layout the memory plan refuses as larger than its limit, not an
  // overflow.
  constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max() / 2;
  int64_t bytes;
  if (llvm::MulOverflow(count, elementBytes, bytes) || bytes > kSaturated ||
      size > kSaturated - bytes) {
    size = kSaturated;
    return;
  }
  bytes = std::max<int64_t>(bytes, 1);
  size += (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

std::optional<int64_t> ScratchLayout::offset(StringRef name) const {
  for (const auto &[slot, at] : slots)
    if (slot == name)
      return at;
  return std::nullopt;
}

namespace {

int64_t countOf(Value v) { return tensorOf(v).getNumElements(); }

bool isHalfFloat(Type t) { return t.isF16() || t.isBF16(); }

/// The CPU kernels compute GEMMs and convolutions on FP32 copies of 16-bit
/// operands: one slot "wI" per distinct 16-bit float operand I.
void addWidenedOperands(Operation *op, ScratchLayout &layout) {
  for (auto [i, v] : llvm::enumerate(op->getOperands())) {
    bool seen = llvm::any_of(op->getOperands().take_front(i),
                             [&](Value earlier) { return earlier == v; });
    if (!seen && isHalfFloat(elementOf(v)))
      layout.add("w" + std::to_string(i), countOf(v), 4);
  }
}

ScratchLayout cpuScratch(Operation *op) {
  ScratchLayout l;
  int64_t acc = accumulationBytes(op);
  llvm::TypeSwitch<Operation *>(op)
      .Case<ampc::GemmOp, ampc::BatchedGemmOp, ampc::MatMulOp>([&](auto) {
        // FP32 copies of 16-bit operands; the product accumulates in `acc`
        // and is rounded once when stored.
        addWidenedOperands(op, l);
        l.add("acc", countOf(op->getResult(0)), acc);
      })
      .Case<ampc::ConvOp, ampc::ConvBackwardDataOp,
            ampc::ConvBackwardWeightOp>([&](auto) {
        addWidenedOperands(op, l);
        Type out = elementOf(op->getResult(0));
        if (!out.isF32() && !out.isF64())
          l.add("acc", countOf(op->getResult(0)), 4);
        // im2col's columns of a chunk of images (none for an identity
        // window and one image) and the chunk's product or grad side by
        // side.
        ConvGeometry g = convGeometry(op);
        const WindowGeometry &w = g.window;
        int64_t images = launchInt(op, "images_per_gemm");
        int64_t width = images * w.outSize();
        if (!w.isIdentity() || images > 1)
          l.add("columns", g.channels / g.group * w.kernelSize() * width,
                acc);
        if (images > 1)
          l.add("staging", g.filters / g.group * width, acc);
      })
      .Case([&](ampc::MaxPoolOp o) {
        WindowGeometry w = windowGeometry(op);
        l.add("offsets", w.outSize() * w.kernelSize(), 8);
        if (o.getStorageOrder() != 0)
          l.add("reported", w.outSize() * w.kernelSize(), 8);
      })
      .Case([&](ampc::AveragePoolOp) {
        WindowGeometry w = windowGeometry(op);
        l.add("offsets", w.outSize() * w.kernelSize(), 8);
      })
      .Case([&](ampc::MaxPoolGradOp o) {
        l.add("acc", countOf(o.getOutput()), acc);
      })
      .Case([&](ampc::AveragePoolGradOp o) {
        WindowGeometry w = windowGeometry(op);
        l.add("offsets", w.outSize() * w.kernelSize(), 8);
        l.add("counts", w.outSize(), 8);
        l.add("acc", countOf(o.getOutput()), acc);
      })
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp>([&](auto) {
        // The input offset of each reduced element.
        l.add("reduced", reduceGeometry(op).reducedCount(), 8);
      })
      .Case([&](ampc::TopKOp) {
        // One row's positions, partly sorted.
        l.add("order", topKGeometry(op).input.size, 8);
      })
      .Case([&](ampc::BatchNormalizationOp o) {
        int64_t c = batchNormGeometry(op).channels;
        for (StringRef name : {"scale", "bias", "mean", "variance"})
          l.add(name, c, acc);
        if (o.getTrainingMode() != 0) {
          l.add("batchMean", c, acc);
          l.add("batchVariance", c, acc);
        }
        if (o.getSavedStatistics())
          l.add("invStdDev", c, acc);
      })
      .Case([&](ampc::BatchNormGradOp) {
        int64_t c = batchNormGeometry(op).channels;
        for (StringRef name : {"scale", "mean", "invStdDev"})
          l.add(name, c, acc);
        l.add("gradScale", c, acc);
        l.add("gradBias", c, acc);
      })
      .Case([&](ampc::AttentionOp) {
        // One query row's scores and its output accumulators.
        AttentionGeometry g = attentionGeometry(op);
        l.add("scores", g.sk, acc);
        l.add("acc", g.dv, acc);
      })
      .Case([&](ampc::AttentionGradOp) {
        // A query row's dQ; one head's dK and dV.
        AttentionGeometry g = attentionGeometry(op);
        l.add("dq", g.d, acc);
        l.add("dk", g.sk * g.d, acc);
        l.add("dv", g.sk * g.dv, acc);
      })
      .Case<ampc::LayerNormalizationOp, ampc::AddLayerNormOp>([&](auto o) {
        int64_t size = layerNormGeometry(op).size;
        l.add("scale", size, acc);
        if (o.getBias())
          l.add("bias", size, acc);
      })
      .Case([&](ampc::LayerNormGradOp) {
        l.add("scale", layerNormGeometry(op).size, acc);
      })
      .Case<ampc::SoftmaxCrossEntropyLossOp,
            ampc::NegativeLogLikelihoodLossOp>([&](auto) {
        LossGeometry g = lossGeometry(op);
        l.add("logp", countOf(g.scores), acc);
        if (g.weights)
          l.add("weights", g.classes, acc);
        l.add("loss", countOf(op->getResult(0)), acc);
        // Each element's loss and weight before the reduction.
        l.add("values", g.n * g.inner, acc);
        l.add("used", g.n * g.inner, acc);
      })
      .Case([&](ampc::NllLossGradOp o) {
        l.add("grad", countOf(o.getGrad()), acc);
        if (o.getWeight())
          l.add("weights", countOf(o.getWeight()), acc);
        l.add("out", countOf(o.getOutput()), acc);
        if (o.getLogProb())
          l.add("logp", countOf(o.getLogProb()), acc);
      })
      .Case([&](ampc::GatherGradOp o) {
        l.add("grad", countOf(o.getGrad()), acc);
        l.add("out", countOf(o.getOutput()), acc);
      });
  return l;
}

ScratchLayout cudaScratch(Operation *op) {
  ScratchLayout l;
  int64_t acc = accumulationBytes(op);
  llvm::TypeSwitch<Operation *>(op)
      .Case<ampc::ConvOp, ampc::ConvBackwardDataOp,
            ampc::ConvBackwardWeightOp>([&](auto) {
        // A cuDNN call: its workspace (cudnnWorkspaceBudget). Otherwise
        // im2col columns of every image (in the data type; for the data
        // gradient the GEMM's products in the accumulation type, which
        // col2im sums), and the weight gradient's sum over the images.
        if (launchFlag(op, "cudnn")) {
          l.add("workspace", launchInt(op, "workspace"), 1);
          return;
        }
        ConvGeometry g = convGeometry(op);
        const WindowGeometry &w = g.window;
        int64_t columns = g.n * g.channels * w.kernelSize() * w.outSize();
        Type t = elementOf(g.input);
        if (isa<ampc::ConvBackwardDataOp>(op))
          l.add("columns", columns, acc);
        else if (!w.isIdentity())
          l.add("columns", columns, (t.getIntOrFloatBitWidth() + 7) / 8);
        if (isa<ampc::ConvBackwardWeightOp>(op))
          l.add("sum", countOf(op->getResult(0)), acc);
      })
      .Case([&](ampc::AttentionGradOp) {
        // The backward's pre-pass: delta = rowsum(dO ∘ O), one FP32 per
        // query row (CudaAttention.cuh).
        AttentionGeometry g = attentionGeometry(op);
        l.add("delta", g.batch * g.heads * g.sq, 4);
      })
      .Case([&](ampc::LayerNormGradOp o) {
        // The row groups' shares of the Scale and B adjoints.
        if (o.getParamGrads() > 0) {
          LayerNormGeometry g = layerNormGeometry(op);
          l.add("partials", 2 * g.size * launchInt(op, "groups"), acc);
        }
      })
      .Case([&](ampc::GatherGradOp) {
        // The rows' starts and fill cursors, and the indices bucketed by
        // row (CudaKernels.cuh, gatherGrad*).
        GatherGeometry g = gatherGeometry(op);
        l.add("buckets", 2 * g.data.size + 1, 8);
        l.add("order", g.indexCount, 8);
      })
      .Case<ampc::BatchNormalizationOp, ampc::BatchNormGradOp>(
          [&](Operation *) {
            // Each block's two partials: the moments of its node of the
            // channel (training-mode BatchNormalization), or its nodes of
            // batch_norm_grad's two sums.
            auto bn = dyn_cast<ampc::BatchNormalizationOp>(op);
            if (bn && bn.getTrainingMode() == 0)
              return;
            BatchNormGeometry g = batchNormGeometry(op);
            l.add("partials", 2 * g.channels * launchInt(op, "splits"), acc);
          })
      .Case([&](ampc::SoftmaxCrossEntropyLossOp o) {
        if (!launchFlag(op, "log_prob"))
          l.add("logp", countOf(o.getScores()), acc);
      })
      .Case([&](ampc::ClipGradNormOp) {
        // The sum of squares, and a partial sum per block of the
        // multi-tensor pass (cudaClipPartials) that one block adds in order.
        l.add("sum", 1, 8);
        l.add("partials", launchInt(op, "partials"), acc);
      })
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp, ampc::GlobalAveragePoolOp>([&](Operation *) {
        // Each output's shares when the reduction is split over blocks.
        int64_t outputs = countOf(op->getResult(0));
        int64_t splits = launchInt(op, "splits");
        if (splits > 1)
          l.add("partials", outputs * splits, acc);
      });
  return l;
}

} // namespace

int64_t cudaBatchNormSplits(const BatchNormGeometry &g) {
  // A power of two, at most a block's threads (the partials combine in
  // one block), and no deeper than pairwiseSum's tree over the channel
  // splits (every node above the blocks' has more than 64 terms).
  int64_t count = g.n * g.inner;
  int64_t want = std::min<int64_t>(cudaReduceSplits(g.channels, count),
                                   kCudaThreads);
  int64_t splits = 1;
  while (splits * 2 <= want && count / splits > 64)
    splits *= 2;
  return splits;
}

int64_t cudaBatchNormThreads(const BatchNormGeometry &g) {
  // channelNodeSum cuts the tree at the depth where nodes have at most 64
  // terms, at most log2(splits · threads) deep: the nodes below a block
  // are 2^(depth - log2 splits), each a thread's.
  int64_t count = g.n * g.inner, splits = cudaBatchNormSplits(g);
  int64_t nodes = 1;
  while (nodes < kCudaThreads && count / (nodes * splits) > 64)
    nodes *= 2;
  int64_t threads = 32;
  while (threads < std::max(nodes, splits) && threads < kCudaThreads)
    threads *= 2;
  return threads;
}

int64_t cudaReduceSplits(int64_t outputs, int64_t count) {
  constexpr int64_t kMinShare = 8192, kTargetBlocks = 512;
  if (outputs <= 0 || outputs >= kTargetBlocks / 4 || count < 2 * kMinShare)
    return 1;
  return std::min((count + kMinShare - 1) / kMinShare,
                  std::max<int64_t>(1, kTargetBlocks / outputs));
}

StringRef parallelismName(Parallelism p) {
  switch (p) {
  case Parallelism::Element:
    return "element";
  case Parallelism::RowByThread:
    return "row-by-thread";
  case Parallelism::RowByWarp:
    return "row-by-warp";
  case Parallelism::RowByBlock:
    return "row-by-block";
  case Parallelism::Split:
    return "split";
  case Parallelism::Serial:
    return "serial";
  }
  return "element";
}

Parallelism cudaRowParallelism(int64_t length, bool exactSum) {
  if (length >= kCudaBlockRowMinLength)
    return Parallelism::RowByBlock;
  if (length >= kCudaWarpRowMinLength && !exactSum)
    return Parallelism::RowByWarp;
  return Parallelism::RowByThread;
}

int64_t cudaLayerNormGradGroups(int64_t rows, int64_t length) {
  int64_t leaves = math::pairwiseLeafCount(std::max<int64_t>(rows, 1));
  if (length >= kCudaBlockRowMinLength)
    return leaves;
  constexpr int64_t kWarps = 8;
  return (leaves + kWarps - 1) / kWarps * kWarps;
}

KernelParallelism cudaParallelRows(Operation *op) {
  auto rows = [](int64_t count, int64_t length) {
    return KernelParallelism{Parallelism::Element, count, length};
  };
  return llvm::TypeSwitch<Operation *, KernelParallelism>(op)
      .Case<ampc::SoftmaxOp, ampc::LogSoftmaxOp>([&](Operation *) {
        AxisSplit g = softmaxGeometry(op);
        return rows(g.outer * g.inner, g.size);
      })
      .Case<ampc::LayerNormalizationOp, ampc::AddLayerNormOp,
            ampc::LayerNormGradOp>([&](Operation *) {
        LayerNormGeometry g = layerNormGeometry(op);
        return rows(g.outer, g.size);
      })
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp, ampc::GlobalAveragePoolOp>([&](Operation *) {
        ReduceGeometry g = reduceGeometry(op);
        return rows(g.keptCount(), g.reducedCount());
      })
      .Case<ampc::BatchNormalizationOp, ampc::BatchNormGradOp>(
          [&](Operation *) {
            auto bn = dyn_cast<ampc::BatchNormalizationOp>(op);
            if (bn && bn.getTrainingMode() == 0)
              return KernelParallelism{};
            BatchNormGeometry g = batchNormGeometry(op);
            return rows(g.channels, g.n * g.inner);
          })
      .Case<ampc::SoftmaxCrossEntropyLossOp, ampc::NegativeLogLikelihoodLossOp,
            ampc::NllLossGradOp>([&](Operation *) {
        LossGeometry g = lossGeometry(op);
        if (g.reduction == ampc::Reduction::None &&
            !isa<ampc::NllLossGradOp>(op))
          return rows(g.n * g.inner, g.classes);
        return rows(1, g.n * g.inner);
      })
      .Default([](Operation *) { return KernelParallelism{}; });
}

namespace {
/// How cudaParallelism spreads `op`'s kernels over its rows `p`.
Parallelism parallelismOf(Operation *op, const KernelParallelism &p) {
  return llvm::TypeSwitch<Operation *, Parallelism>(op)
      .Case<ampc::SoftmaxOp, ampc::LogSoftmaxOp>(
          [&](Operation *) { return cudaRowParallelism(p.length); })
      .Case<ampc::LayerNormalizationOp, ampc::AddLayerNormOp,
            ampc::LayerNormGradOp>([&](Operation *) {
        Parallelism kind = cudaRowParallelism(p.length);
        auto grad = dyn_cast<ampc::LayerNormGradOp>(op);
        if (grad && grad.getParamGrads() > 0 &&
            kind == Parallelism::RowByThread)
          return Parallelism::RowByWarp;
        return kind;
      })
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp, ampc::GlobalAveragePoolOp>([&](Operation *) {
        if (cudaReduceSplits(p.rows, p.length) > 1)
          return Parallelism::Split;
        return cudaRowParallelism(p.length, /*exactSum=*/true);
      })
      // The batch statistics and their adjoint's sums: a block per
      // channel, or split over blocks (cudaBatchNormSplits); the rest of
      // both ops a thread per element. Eval-mode BatchNormalization is
      // elementwise.
      .Case<ampc::BatchNormalizationOp, ampc::BatchNormGradOp>(
          [&](Operation *) {
            auto bn = dyn_cast<ampc::BatchNormalizationOp>(op);
            if (bn && bn.getTrainingMode() == 0)
              return Parallelism::Element;
            return cudaBatchNormSplits(batchNormGeometry(op)) > 1
                       ? Parallelism::Split
                       : Parallelism::RowByBlock;
          })
      // Still a thread looping over the whole batch (docs/design.md,
      // "Row-parallel normalisation"): the losses' reduction over the
      // batch (one thread, in index order as on the CPU) and the mean's
      // weight sum in their adjoint.
      .Case<ampc::SoftmaxCrossEntropyLossOp,
            ampc::NegativeLogLikelihoodLossOp, ampc::NllLossGradOp>(
          [&](Operation *) {
            LossGeometry g = lossGeometry(op);
            if (g.reduction == ampc::Reduction::None &&
                !isa<ampc::NllLossGradOp>(op))
              return cudaRowParallelism(p.length);
            return Parallelism::Serial;
          })
      .Default([](Operation *) { return Parallelism::Element; });
}
} // namespace

KernelParallelism cudaParallelism(Operation *op) {
  KernelParallelism p = cudaParallelRows(op);
  p.kind = parallelismOf(op, p);
  return p;
}

bool cudaLossReadsLogProb(Operation *op) {
  auto loss = dyn_cast<ampc::SoftmaxCrossEntropyLossOp>(op);
  if (!loss || !loss.getLogProb())
    return false;
  Type t = elementOf(loss.getLogProb());
  return accumulation(op) == (t.isF64() ? "double" : t.isF32() ? "float" : "");
}

int64_t cudaClipPartials(ValueRange grads) {
  int64_t partials = 0;
  for (Value g : grads)
    partials += cudaListBlocks(countOf(g));
  return partials;
}

SmallVector<StringRef, 3> launchKeys(Operation *op, ampc::KernelTarget target) {
  using Keys = SmallVector<StringRef, 3>;
  bool conv =
      isa<ampc::ConvOp, ampc::ConvBackwardDataOp, ampc::ConvBackwardWeightOp>(
          op);
  if (target == ampc::KernelTarget::Cpu)
    return conv ? Keys{"images_per_gemm"} : Keys{};
  if (conv)
    return {"cudnn", "workspace"};
  if (isa<ampc::ClipGradNormOp>(op))
    return {"partials"};
  if (auto bn = dyn_cast<ampc::BatchNormalizationOp>(op))
    return bn.getTrainingMode() == 0 ? Keys{}
                                     : Keys{"parallelism", "splits", "threads"};
  return llvm::TypeSwitch<Operation *, Keys>(op)
      .Case<ampc::SoftmaxOp, ampc::LogSoftmaxOp, ampc::LayerNormalizationOp,
            ampc::AddLayerNormOp, ampc::NegativeLogLikelihoodLossOp,
            ampc::NllLossGradOp>(
          [](Operation *) { return Keys{"parallelism"}; })
      .Case([](ampc::LayerNormGradOp o) {
        return o.getParamGrads() > 0 ? Keys{"parallelism", "groups"}
                                     : Keys{"parallelism"};
      })
      .Case<ampc::ReduceSumOp, ampc::ReduceMeanOp, ampc::ReduceMaxOp,
            ampc::ReduceProdOp, ampc::GlobalAveragePoolOp>([](Operation *) {
        return Keys{"parallelism", "splits"};
      })
      .Case([](ampc::BatchNormGradOp) {
        return Keys{"parallelism", "splits", "threads"};
      })
      .Case([](ampc::SoftmaxCrossEntropyLossOp) {
        return Keys{"parallelism", "log_prob"};
      })
      .Default([](Operation *) { return Keys{}; });
}

namespace {
std::optional<Parallelism> parseParallelism(StringRef name) {
  for (Parallelism p :
       {Parallelism::Element, Parallelism::RowByThread, Parallelism::RowByWarp,
        Parallelism::RowByBlock, Parallelism::Split, Parallelism::Serial})
    if (parallelismName(p) == name)
      return p;
  return std::nullopt;
}

Attribute launchEntry(Operation *op, StringRef key) {
  auto launch = op->getAttrOfType<DictionaryAttr>(ampc::kLaunchAttr);
  return launch ? launch.get(key) : Attribute();
}
} // namespace

LogicalResult checkLaunchGeometry(Operation *op, ampc::KernelTarget target) {
  // The dialect verifies each key's type; a parallelism's name is this
  // file's.
  for (StringRef key : launchKeys(op, target)) {
    Attribute value = launchEntry(op, key);
    auto name = dyn_cast_or_null<StringAttr>(value);
    if (!value || (key == "parallelism" &&
                   (!name || !parseParallelism(name.getValue())))) {
      StringRef t = target == ampc::KernelTarget::Cpu ? "cpu" : "cuda";
      return op->emitError() << "has no launch geometry '" << key
                             << "' for the " << t
                             << " target (ampc-assign-launch-geometry target="
                             << t << ")";
    }
  }
  return success();
}

int64_t launchInt(Operation *op, StringRef key) {
  auto value = dyn_cast_or_null<IntegerAttr>(launchEntry(op, key));
  if (!value)
    llvm::report_fatal_error(
        ("launch geometry '" + key + "' read unchecked").str().c_str());
  return value.getInt();
}

bool launchFlag(Operation *op, StringRef key) {
  auto value = dyn_cast_or_null<BoolAttr>(launchEntry(op, key));
  if (!value)
    llvm::report_fatal_error(
        ("launch geometry '" + key + "' read unchecked").str().c_str());
  return value.getValue();
}

KernelParallelism launchParallelism(Operation *op) {
  auto name = dyn_cast_or_null<StringAttr>(launchEntry(op, "parallelism"));
  if (!name)
    return KernelParallelism{};
  KernelParallelism p = cudaParallelRows(op);
  p.kind = parseParallelism(name.getValue()).value_or(Parallelism::Element);
  return p;
}

ScratchLayout scratchLayout(Operation *op, ampc::KernelTarget target) {
  return target == ampc::KernelTarget::Cpu ? cpuScratch(op) : cudaScratch(op);
}

namespace {
/// The size of a struct of arrays each aligned to 128 bytes (`arrays`,
/// bytes each), then `tail` bytes of 4-byte values, rounded up to 128.
int64_t sharedStructBytes(std::initializer_list<int64_t> arrays,
                          int64_t tail) {
  auto alignUp = [](int64_t n) { return (n + 127) / 128 * 128; };
  int64_t offset = 0;
  for (int64_t bytes : arrays)
    offset = alignUp(offset) + bytes;
  return alignUp(offset + tail);
}
} // namespace

CudaAttentionGeometry cudaAttentionGeometry(int64_t d, bool backward) {
  constexpr int64_t t = 2, f = 4; // bytes of T (FP16/BF16) and of float
  CudaAttentionGeometry g;
  if (!backward) {
    // ForwardShared: q, k, v, s, p, o; m, l.
    const int64_t r = d <= 128 ? 32 : 16, c = r;
    g.rows = r;
    g.keys = c;
    g.sharedBytes = sharedStructBytes(
        {r * d * t, c * d * t, c * d * t, r * c * f, r * c * t, r * d * f},
        2 * r * f);
    return g;
  }
  // BackwardShared: the union of a dQ block's and a dK/dV block's arrays.
  const int64_t r = d <= 64 ? 32 : 16, c = r;
  g.rows = r;
  g.keys = c;
  g.sharedBytes = std::max(
      sharedStructBytes({r * d * t, r * d * t, c * d * t, c * d * t, r * c * f,
                         r * c * f, r * c * t, r * d * f},
                        2 * r * f),
      sharedStructBytes({c * d * t, c * d * t, r * d * t, r * d * t, r * c * f,
                         r * c * f, r * c * t, r * c * t, c * d * f,
                         c * d * f},
                        2 * r * f));
  return g;
}

} // namespace ampc::emit
