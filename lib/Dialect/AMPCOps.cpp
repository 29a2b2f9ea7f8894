//===- AMPCOps.cpp - ampc op verifiers and result-type inference ----------===//
//
// Each op's shape rule lives in its inferReturnTypes: the importer builds ops
// without result types and asks the op, and the verifier checks a written
// result type against the same rule, so the two can never disagree.
// Attribute checks that the shape rule needs are made there too; messages
// name the op, as the importer reports them verbatim at the ONNX node.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/ChannelsLast.h"
#include "ampc/Dialect/Einsum.h"
#include "ampc/Dialect/Resize.h"
#include "ampc/Dialect/Quantization.h"
#include "ampc/Dialect/Indexing.h"
#include "ampc/Dialect/TensorSize.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallSet.h"

#include <limits>

using namespace mlir;
using namespace ampc;

namespace {
using Types = SmallVectorImpl<Type>;
using OptLoc = std::optional<Location>;

/// Formats a list of integers as "[1, 2, 3]" for messages.
std::string formatList(ArrayRef<int64_t> values) {
  std::string s = "[";
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

std::string formatType(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Reports an invalid op at `loc` as "ampc.<op>: <message>".
template <typename OpTy>
LogicalResult fail(OptLoc loc, const Twine &message) {
  return emitOptionalError(loc, OpTy::getOperationName(), ": ", message);
}

/// The ranked tensor type of `value`, or failure with a message.
template <typename OpTy>
FailureOr<RankedTensorType> rankedType(OptLoc loc, Value value,
                                       StringRef what) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape()) {
    (void)fail<OpTy>(loc, Twine(what) +
                              " must be a statically shaped tensor, got " +
                              formatType(value.getType()));
    return failure();
  }
  return type;
}

template <typename OpTy>
LogicalResult checkBinaryFlag(OptLoc loc, StringRef name, int64_t value) {
  if (value != 0 && value != 1)
    return fail<OpTy>(loc, "'" + name + "' must be 0 or 1, got " +
                               Twine(value));
  return success();
}

template <typename OpTy>
FailureOr<int64_t> checkAxis(OptLoc loc, StringRef name, int64_t axis,
                             int64_t rank) {
  std::optional<int64_t> normalized = normalizeAxis(axis, rank);
  if (!normalized) {
    (void)fail<OpTy>(loc, "'" + name + "' " + Twine(axis) +
                              " is out of range for rank " + Twine(rank));
    return failure();
  }
  return *normalized;
}

/// Normalises a list of distinct axes against `rank`.
template <typename OpTy>
FailureOr<SmallVector<int64_t>> checkAxes(OptLoc loc, ArrayRef<int64_t> axes,
                                          int64_t rank) {
  SmallVector<int64_t> result;
  llvm::SmallSet<int64_t, 8> seen;
  for (int64_t axis : axes) {
    FailureOr<int64_t> a = checkAxis<OpTy>(loc, "axes", axis, rank);
    if (failed(a))
      return failure();
    if (!seen.insert(*a).second) {
      (void)fail<OpTy>(loc, "'axes' " + formatList(axes) +
                                " names dimension " + Twine(*a) + " twice");
      return failure();
    }
    result.push_back(*a);
  }
  return result;
}

template <typename OpTy>
LogicalResult inferSameType(OptLoc loc, Value input, Types &types) {
  FailureOr<RankedTensorType> type = rankedType<OpTy>(loc, input, "input");
  if (failed(type))
    return failure();
  types.push_back(*type);
  return success();
}

/// Elementwise ops with multidirectional broadcasting. The result element
/// type is `resultElement` when given, else the common operand element type.
template <typename OpTy>
LogicalResult inferBroadcast(OptLoc loc, ValueRange operands,
                             Type resultElement, bool sameElementTypes,
                             Types &types) {
  SmallVector<ArrayRef<int64_t>> shapes;
  Type element;
  for (Value v : operands) {
    FailureOr<RankedTensorType> t = rankedType<OpTy>(loc, v, "operand");
    if (failed(t))
      return failure();
    shapes.push_back(t->getShape());
    if (!sameElementTypes)
      continue;
    if (element && element != t->getElementType())
      return fail<OpTy>(loc, "operand element types differ: " +
                                 formatType(element) + " vs " +
                                 formatType(t->getElementType()));
    element = t->getElementType();
  }
  std::optional<SmallVector<int64_t>> shape = broadcastShapes(shapes);
  if (!shape) {
    std::string list;
    for (auto [i, s] : llvm::enumerate(shapes))
      list += (i ? " and " : "") + formatList(s);
    return fail<OpTy>(loc, "shapes " + list + " do not broadcast");
  }
  if (!resultElement)
    resultElement = element;
  types.push_back(RankedTensorType::get(*shape, resultElement));
  return success();
}

/// Output size of one spatial dimension of a convolution or pooling window.
/// Computed in 128 bits: attributes near INT64_MAX must give an error, not
/// wrap into a plausible size. Returns 0 when no window fits.
int64_t windowOutputSize(int64_t in, int64_t kernel, int64_t stride,
                         int64_t padBegin, int64_t padEnd, int64_t dilation,
                         bool ceilMode) {
  using Wide = __int128;
  Wide span = Wide(kernel - 1) * dilation + 1;
  Wide numerator = Wide(in) + padBegin + padEnd - span;
  if (numerator < 0)
    return 0;
  Wide out = (ceilMode ? (numerator + stride - 1) / stride
                       : numerator / stride) +
             1;
  if (out > std::numeric_limits<int32_t>::max())
    return 0;
  // A window that would start entirely in the end padding is dropped.
  if (ceilMode && (out - 1) * stride >= Wide(in) + padBegin)
    --out;
  return static_cast<int64_t>(out);
}

/// Shared by Conv and the pooling ops: validates the window attributes for
/// `spatial` dimensions and computes the spatial output sizes.
template <typename OpTy>
FailureOr<SmallVector<int64_t>>
inferWindow(OptLoc loc, ArrayRef<int64_t> inputSpatial,
            ArrayRef<int64_t> kernel, std::optional<ArrayRef<int64_t>> strides,
            std::optional<ArrayRef<int64_t>> pads,
            std::optional<ArrayRef<int64_t>> dilations, bool ceilMode) {
  size_t n = inputSpatial.size();
  auto checkList = [&](StringRef name, std::optional<ArrayRef<int64_t>> list,
                       size_t size, int64_t minimum) -> LogicalResult {
    if (!list)
      return success();
    if (list->size() != size)
      return fail<OpTy>(loc, "'" + name + "' has " + Twine(list->size()) +
                                 " values, expected " + Twine(size));
    for (int64_t v : *list)
      if (v < minimum)
        return fail<OpTy>(loc, "'" + name + "' values must be >= " +
                                   Twine(minimum) + ", got " +
                                   formatList(*list));
    return success();
  };
  if (failed(checkList("kernel_shape", kernel, n, 1)) ||
      failed(checkList("strides", strides, n, 1)) ||
      failed(checkList("pads", pads, 2 * n, 0)) ||
      failed(checkList("dilations", dilations, n, 1)))
    return failure();
  SmallVector<int64_t> out;
  for (size_t i = 0; i < n; ++i) {
    int64_t stride = strides ? (*strides)[i] : 1;
    int64_t dilation = dilations ? (*dilations)[i] : 1;
    int64_t padBegin = pads ? (*pads)[i] : 0;
    int64_t padEnd = pads ? (*pads)[i + n] : 0;
    int64_t size = windowOutputSize(inputSpatial[i], kernel[i], stride,
                                    padBegin, padEnd, dilation, ceilMode);
    if (size <= 0)
      return fail<OpTy>(loc, "window " + formatList(kernel) +
                                 " does not fit input spatial shape " +
                                 formatList(inputSpatial));
    out.push_back(size);
  }
  return out;
}

/// ODS builders that infer result types call inferReturnTypes before the
/// default-valued attributes are filled in; this fills them, so the shape
/// rules can use every getter whichever way the op is being built.
template <typename OpTy>
typename OpTy::Adaptor withDefaults(MLIRContext *ctx,
                                    typename OpTy::Adaptor adaptor) {
  typename OpTy::Properties props = adaptor.getProperties();
  OpTy::populateDefaultProperties(
      OperationName(OpTy::getOperationName(), ctx), props);
  return typename OpTy::Adaptor(adaptor.getOperands(), adaptor.getAttributes(),
                                props);
}

/// Floating-point type named by an ONNX TensorProto data type code.
Type floatTypeFromOnnxCode(MLIRContext *ctx, int64_t code) {
  switch (code) {
  case 1:
    return Float32Type::get(ctx);
  case 10:
    return Float16Type::get(ctx);
  case 11:
    return Float64Type::get(ctx);
  case 16:
    return BFloat16Type::get(ctx);
  default:
    return {};
  }
}
} // namespace

//===----------------------------------------------------------------------===//
// Constants and parameters
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                           Adaptor adaptor, Types &types) {
  auto type = dyn_cast_or_null<RankedTensorType>(
      adaptor.getValue() ? adaptor.getValue().getType() : Type());
  if (!type)
    return fail<ConstantOp>(loc, "value must be a ranked tensor attribute");
  types.push_back(type);
  return success();
}

LogicalResult ParameterOp::verify() {
  if (getInitialValue().getType() != getType())
    return emitOpError("initial value has type ")
           << getInitialValue().getType() << ", expected " << getType();
  return success();
}

LogicalResult
LoadParameterOp::verifySymbolUses(SymbolTableCollection &symbolTable) {
  auto param = symbolTable.lookupNearestSymbolFrom<ParameterOp>(
      *this, getParameterAttr());
  if (!param)
    return emitOpError("'") << getParameter() << "' is not an ampc.parameter";
  if (param.getType() != getType())
    return emitOpError("result type ")
           << getType() << " does not match parameter type "
           << param.getType();
  return success();
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

#define AMPC_SAME_TYPE_INFERENCE(OP)                                           \
  LogicalResult OP::inferReturnTypes(MLIRContext *, OptLoc loc,                \
                                     Adaptor adaptor, Types &types) {          \
    return inferSameType<OP>(loc, adaptor.getInput(), types);                  \
  }
AMPC_SAME_TYPE_INFERENCE(NegOp)
AMPC_SAME_TYPE_INFERENCE(SqrtOp)
AMPC_SAME_TYPE_INFERENCE(ReciprocalOp)
AMPC_SAME_TYPE_INFERENCE(ExpOp)
AMPC_SAME_TYPE_INFERENCE(LogOp)
AMPC_SAME_TYPE_INFERENCE(ErfOp)
AMPC_SAME_TYPE_INFERENCE(ReluOp)
AMPC_SAME_TYPE_INFERENCE(SigmoidOp)
AMPC_SAME_TYPE_INFERENCE(TanhOp)
AMPC_SAME_TYPE_INFERENCE(IdentityOp)
AMPC_SAME_TYPE_INFERENCE(LeakyReluOp)
AMPC_SAME_TYPE_INFERENCE(AbsOp)
AMPC_SAME_TYPE_INFERENCE(SinOp)
AMPC_SAME_TYPE_INFERENCE(CosOp)
AMPC_SAME_TYPE_INFERENCE(TanOp)
AMPC_SAME_TYPE_INFERENCE(AsinOp)
AMPC_SAME_TYPE_INFERENCE(AcosOp)
AMPC_SAME_TYPE_INFERENCE(AtanOp)
AMPC_SAME_TYPE_INFERENCE(SinhOp)
AMPC_SAME_TYPE_INFERENCE(CoshOp)
AMPC_SAME_TYPE_INFERENCE(AsinhOp)
AMPC_SAME_TYPE_INFERENCE(AcoshOp)
AMPC_SAME_TYPE_INFERENCE(AtanhOp)
AMPC_SAME_TYPE_INFERENCE(SignOp)
AMPC_SAME_TYPE_INFERENCE(FloorOp)
AMPC_SAME_TYPE_INFERENCE(CeilOp)
AMPC_SAME_TYPE_INFERENCE(RoundOp)
AMPC_SAME_TYPE_INFERENCE(SoftplusOp)
AMPC_SAME_TYPE_INFERENCE(SoftsignOp)
AMPC_SAME_TYPE_INFERENCE(MishOp)
AMPC_SAME_TYPE_INFERENCE(HardSwishOp)
AMPC_SAME_TYPE_INFERENCE(EluOp)
AMPC_SAME_TYPE_INFERENCE(CeluOp)
AMPC_SAME_TYPE_INFERENCE(SeluOp)
AMPC_SAME_TYPE_INFERENCE(HardSigmoidOp)
AMPC_SAME_TYPE_INFERENCE(ThresholdedReluOp)
AMPC_SAME_TYPE_INFERENCE(ShrinkOp)
AMPC_SAME_TYPE_INFERENCE(StopGradientOp)
AMPC_SAME_TYPE_INFERENCE(NotOp)
#undef AMPC_SAME_TYPE_INFERENCE

#define AMPC_PREDICATE_INFERENCE(OP)                                           \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx, OptLoc loc,             \
                                     Adaptor adaptor, Types &types) {          \
    FailureOr<RankedTensorType> type =                                         \
        rankedType<OP>(loc, adaptor.getInput(), "input");                      \
    if (failed(type))                                                          \
      return failure();                                                        \
    types.push_back(type->clone(IntegerType::get(ctx, 1)));                    \
    return success();                                                          \
  }
AMPC_PREDICATE_INFERENCE(IsNaNOp)
AMPC_PREDICATE_INFERENCE(IsInfOp)
#undef AMPC_PREDICATE_INFERENCE

LogicalResult CeluOp::verify() {
  if (getAlpha().convertToFloat() == 0.0f)
    return emitOpError("alpha must not be 0 (Celu divides by it)");
  return success();
}

LogicalResult ModOp::verify() {
  if (getFmod() != 0 && getFmod() != 1)
    return emitOpError("fmod must be 0 or 1, got ") << getFmod();
  if (getFmod() == 0 && isa<FloatType>(getOutput().getType().getElementType()))
    return emitOpError("fmod 0 (the divisor's sign) is defined on integers "
                       "only; floats need fmod 1");
  return success();
}

LogicalResult BitShiftOp::verify() {
  if (getLeft() != 0 && getLeft() != 1)
    return emitOpError("left must be 0 or 1, got ") << getLeft();
  if (!getOutput().getType().getElementType().isUnsignedInteger())
    return emitOpError("shifts unsigned integers only, got ")
           << getOutput().getType().getElementType();
  return success();
}

// `approximate` is a GeluApproximate: the attribute's parser and type
// admit only its cases.
LogicalResult GeluOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                       Adaptor adaptor, Types &types) {
  return inferSameType<GeluOp>(loc, adaptor.getInput(), types);
}

#define AMPC_BROADCAST_INFERENCE(OP)                                           \
  LogicalResult OP::inferReturnTypes(MLIRContext *, OptLoc loc,                \
                                     Adaptor adaptor, Types &types) {          \
    return inferBroadcast<OP>(loc, adaptor.getOperands(), Type(),              \
                              /*sameElementTypes=*/true, types);               \
  }
AMPC_BROADCAST_INFERENCE(AddOp)
AMPC_BROADCAST_INFERENCE(SubOp)
AMPC_BROADCAST_INFERENCE(MulOp)
AMPC_BROADCAST_INFERENCE(DivOp)
AMPC_BROADCAST_INFERENCE(PReluOp)
AMPC_BROADCAST_INFERENCE(MaxOp)
AMPC_BROADCAST_INFERENCE(MinOp)
AMPC_BROADCAST_INFERENCE(ModOp)
AMPC_BROADCAST_INFERENCE(BitShiftOp)
AMPC_BROADCAST_INFERENCE(ClipOp)
#undef AMPC_BROADCAST_INFERENCE

// Comparisons and logic: i1 results of operands of one element type.
#define AMPC_COMPARISON_INFERENCE(OP)                                          \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx, OptLoc loc,             \
                                     Adaptor adaptor, Types &types) {          \
    return inferBroadcast<OP>(loc, adaptor.getOperands(),                      \
                              IntegerType::get(ctx, 1),                        \
                              /*sameElementTypes=*/true, types);               \
  }
AMPC_COMPARISON_INFERENCE(GreaterOp)
AMPC_COMPARISON_INFERENCE(LessOp)
AMPC_COMPARISON_INFERENCE(GreaterOrEqualOp)
AMPC_COMPARISON_INFERENCE(LessOrEqualOp)
AMPC_COMPARISON_INFERENCE(AndOp)
AMPC_COMPARISON_INFERENCE(OrOp)
AMPC_COMPARISON_INFERENCE(XorOp)
#undef AMPC_COMPARISON_INFERENCE

LogicalResult PowOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                      Adaptor adaptor, Types &types) {
  // The exponent may have another numeric type; the result is the base's.
  auto base = rankedType<PowOp>(loc, adaptor.getLhs(), "base");
  if (failed(base))
    return failure();
  return inferBroadcast<PowOp>(loc, adaptor.getOperands(),
                               base->getElementType(),
                               /*sameElementTypes=*/false, types);
}

LogicalResult EqualOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                        Adaptor adaptor, Types &types) {
  return inferBroadcast<EqualOp>(loc, adaptor.getOperands(),
                                 IntegerType::get(ctx, 1),
                                 /*sameElementTypes=*/true, types);
}

LogicalResult WhereOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                        Adaptor adaptor, Types &types) {
  auto x = rankedType<WhereOp>(loc, adaptor.getX(), "x");
  auto y = rankedType<WhereOp>(loc, adaptor.getY(), "y");
  if (failed(x) || failed(y))
    return failure();
  if (x->getElementType() != y->getElementType())
    return fail<WhereOp>(loc, "x and y element types differ: " +
                                  formatType(x->getElementType()) + " vs " +
                                  formatType(y->getElementType()));
  return inferBroadcast<WhereOp>(loc, adaptor.getOperands(),
                                 x->getElementType(),
                                 /*sameElementTypes=*/false, types);
}

LogicalResult CastOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (in.getShape() != out.getShape())
    return emitOpError("result shape ")
           << formatList(out.getShape()) << " differs from operand shape "
           << formatList(in.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// Quantization (ampc-decompose-quantization lowers these)
//===----------------------------------------------------------------------===//

/// The scale (a float tensor, its type returned in `scale`) and the zero
/// point (where given) of a (de)quantization of `x`: each a scalar or 1-D
/// along `axis` (quantizationParameterShape).
template <typename OpTy>
static LogicalResult checkQuantizationParameters(OptLoc loc, RankedTensorType x,
                                                 Value scaleValue,
                                                 Value zeroPoint, int64_t axis,
                                                 RankedTensorType &scale) {
  auto s = rankedType<OpTy>(loc, scaleValue, "the scale");
  if (failed(s))
    return failure();
  if (!isa<FloatType>(s->getElementType()))
    return fail<OpTy>(loc, "the scale must be a float tensor, got " +
                               formatType(s->getElementType()));
  std::string error;
  if (failed(quantizationParameterShape(x.getShape(), s->getShape(), axis,
                                        "the scale", error)))
    return fail<OpTy>(loc, error);
  if (zeroPoint) {
    auto z = rankedType<OpTy>(loc, zeroPoint, "the zero point");
    if (failed(z))
      return failure();
    if (failed(quantizationParameterShape(x.getShape(), z->getShape(), axis,
                                          "the zero point", error)))
      return fail<OpTy>(loc, error);
  }
  scale = *s;
  return success();
}

LogicalResult QuantizeLinearOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                                 Adaptor adaptor,
                                                 Types &types) {
  auto x = rankedType<QuantizeLinearOp>(loc, adaptor.getX(), "x");
  if (failed(x))
    return failure();
  RankedTensorType scale;
  if (failed(checkQuantizationParameters<QuantizeLinearOp>(
          loc, *x, adaptor.getScale(), adaptor.getZeroPoint(),
          adaptor.getAxis(), scale)))
    return failure();
  Type element = x->getElementType();
  if (!isa<IntegerType>(element) && element != scale.getElementType())
    return fail<QuantizeLinearOp>(
        loc, "x must be an integer tensor or of the scale's element type " +
                 formatType(scale.getElementType()) + ", got " +
                 formatType(element));
  Type zeroPoint;
  if (Value z = adaptor.getZeroPoint())
    zeroPoint = cast<RankedTensorType>(z.getType()).getElementType();
  std::string error;
  FailureOr<IntegerType> q = quantizedElementType(ctx, zeroPoint, error);
  if (failed(q))
    return fail<QuantizeLinearOp>(loc, error);
  types.push_back(x->clone(*q));
  types.push_back(x->clone(IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult DequantizeLinearOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                                   Adaptor adaptor,
                                                   Types &types) {
  auto x = rankedType<DequantizeLinearOp>(loc, adaptor.getX(), "x");
  if (failed(x))
    return failure();
  RankedTensorType scale;
  if (failed(checkQuantizationParameters<DequantizeLinearOp>(
          loc, *x, adaptor.getScale(), adaptor.getZeroPoint(),
          adaptor.getAxis(), scale)))
    return failure();
  types.push_back(x->clone(scale.getElementType()));
  return success();
}

LogicalResult DynamicQuantizeLinearOp::inferReturnTypes(MLIRContext *ctx,
                                                        OptLoc loc,
                                                        Adaptor adaptor,
                                                        Types &types) {
  auto x = rankedType<DynamicQuantizeLinearOp>(loc, adaptor.getX(), "x");
  if (failed(x))
    return failure();
  Type f = x->getElementType();
  if (std::string error = checkDynamicQuantizeInput(f); !error.empty())
    return fail<DynamicQuantizeLinearOp>(loc, error);
  auto u8 = IntegerType::get(ctx, 8, IntegerType::Unsigned);
  types.push_back(x->clone(u8));
  types.push_back(RankedTensorType::get({}, f));
  types.push_back(RankedTensorType::get({}, u8));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

LogicalResult EinsumOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &types) {
  if (adaptor.getInputs().empty())
    return fail<EinsumOp>(loc, "needs at least one operand");
  SmallVector<RankedTensorType> operands;
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : adaptor.getInputs()) {
    auto t = rankedType<EinsumOp>(loc, v, "an operand");
    if (failed(t))
      return failure();
    if (!operands.empty() &&
        t->getElementType() != operands.front().getElementType())
      return fail<EinsumOp>(loc, "operand element types differ: " +
                                     formatType(operands.front().getElementType()) +
                                     " vs " + formatType(t->getElementType()));
    operands.push_back(*t);
    shapes.push_back(operands.back().getShape());
  }
  std::string error;
  FailureOr<EinsumEquation> eq =
      readEinsum(adaptor.getEquation(), shapes, error);
  if (failed(eq))
    return fail<EinsumOp>(loc, error);
  types.push_back(RankedTensorType::get(eq->outputShape(),
                                        operands.front().getElementType()));
  return success();
}

LogicalResult ResizeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &types) {
  auto input = rankedType<ResizeOp>(loc, adaptor.getInput(), "input");
  if (failed(input))
    return failure();
  if (adaptor.getMode() != ResizeMode::Nearest &&
      !isa<FloatType>(input->getElementType()))
    return fail<ResizeOp>(loc, "'" + stringifyEnum(adaptor.getMode()) +
                                   "' mode needs float data, got " +
                                   formatType(input->getElementType()));
  SmallVector<double> scales, roi;
  for (Attribute a : adaptor.getScales())
    scales.push_back(cast<FloatAttr>(a).getValueAsDouble());
  for (Attribute a : adaptor.getRoi())
    roi.push_back(cast<FloatAttr>(a).getValueAsDouble());
  std::string error;
  FailureOr<SmallVector<ResizeAxis>> plan = readResize(
      input->getShape(), adaptor.getAxes(), adaptor.getSizes(), scales, roi,
      adaptor.getRoiF32(),
      adaptor.getCoordinateTransformationMode() ==
          ResizeCoordinates::TfCropAndResize,
      error);
  if (failed(plan))
    return fail<ResizeOp>(loc, error);
  SmallVector<int64_t> shape(input->getShape());
  for (const ResizeAxis &a : *plan)
    shape[a.axis] = a.out;
  types.push_back(input->clone(shape));
  return success();
}

LogicalResult MatMulOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &types) {
  auto a = rankedType<MatMulOp>(loc, adaptor.getLhs(), "lhs");
  auto b = rankedType<MatMulOp>(loc, adaptor.getRhs(), "rhs");
  if (failed(a) || failed(b))
    return failure();
  if (a->getElementType() != b->getElementType())
    return fail<MatMulOp>(loc, "operand element types differ: " +
                                   formatType(a->getElementType()) + " vs " +
                                   formatType(b->getElementType()));
  if (a->getRank() == 0 || b->getRank() == 0)
    return fail<MatMulOp>(loc, "operands must have rank >= 1");
  SmallVector<int64_t> sa(a->getShape()), sb(b->getShape());
  bool vectorA = sa.size() == 1, vectorB = sb.size() == 1;
  if (vectorA)
    sa.insert(sa.begin(), 1);
  if (vectorB)
    sb.push_back(1);
  int64_t k = sa.back(), k2 = sb[sb.size() - 2];
  if (k != k2)
    return fail<MatMulOp>(loc, "inner dimensions differ: " +
                                   formatList(a->getShape()) + " x " +
                                   formatList(b->getShape()));
  ArrayRef<int64_t> batchA = ArrayRef<int64_t>(sa).drop_back(2);
  ArrayRef<int64_t> batchB = ArrayRef<int64_t>(sb).drop_back(2);
  std::optional<SmallVector<int64_t>> batch =
      broadcastShapes({batchA, batchB});
  if (!batch)
    return fail<MatMulOp>(loc, "batch dimensions of " +
                                   formatList(a->getShape()) + " and " +
                                   formatList(b->getShape()) +
                                   " do not broadcast");
  SmallVector<int64_t> shape = *batch;
  if (!vectorA)
    shape.push_back(sa[sa.size() - 2]);
  if (!vectorB)
    shape.push_back(sb.back());
  types.push_back(RankedTensorType::get(shape, a->getElementType()));
  return success();
}

LogicalResult GemmOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                       Adaptor adaptor, Types &types) {
  adaptor = withDefaults<GemmOp>(ctx, adaptor);
  int64_t transA = adaptor.getTransA(), transB = adaptor.getTransB();
  if (failed(checkBinaryFlag<GemmOp>(loc, "transA", transA)) ||
      failed(checkBinaryFlag<GemmOp>(loc, "transB", transB)))
    return failure();
  auto a = rankedType<GemmOp>(loc, adaptor.getA(), "A");
  auto b = rankedType<GemmOp>(loc, adaptor.getB(), "B");
  if (failed(a) || failed(b))
    return failure();
  if (a->getRank() != 2 || b->getRank() != 2)
    return fail<GemmOp>(loc, "A and B must be matrices, got shapes " +
                                 formatList(a->getShape()) + " and " +
                                 formatList(b->getShape()));
  if (a->getElementType() != b->getElementType())
    return fail<GemmOp>(loc, "A and B element types differ");
  int64_t m = a->getDimSize(transA), k = a->getDimSize(1 - transA);
  int64_t k2 = b->getDimSize(transB), n = b->getDimSize(1 - transB);
  if (k != k2)
    return fail<GemmOp>(loc, "inner dimensions differ: op(A) is " +
                                 formatList({m, k}) + ", op(B) is " +
                                 formatList({k2, n}));
  if (Value c = adaptor.getC()) {
    auto ct = rankedType<GemmOp>(loc, c, "C");
    if (failed(ct))
      return failure();
    if (ct->getElementType() != a->getElementType())
      return fail<GemmOp>(loc, "C element type differs from A's");
    SmallVector<int64_t> result = {m, n};
    ArrayRef<int64_t> cs = ct->getShape();
    bool ok = cs.size() <= 2;
    for (size_t i = 0; ok && i < cs.size(); ++i) {
      int64_t want = result[2 - cs.size() + i];
      ok = cs[i] == want || cs[i] == 1;
    }
    if (!ok)
      return fail<GemmOp>(loc, "C of shape " + formatList(cs) +
                                   " does not broadcast to " +
                                   formatList(result));
  }
  types.push_back(RankedTensorType::get({m, n}, a->getElementType()));
  // The bias gradient of the backward epilogues: op(A)'s rows or op(B)'s
  // columns summed over k.
  GemmEpilogue epilogue = adaptor.getEpilogue();
  if (epilogue == GemmEpilogue::BiasGradA ||
      epilogue == GemmEpilogue::BiasGradB)
    types.push_back(RankedTensorType::get(
        {epilogue == GemmEpilogue::BiasGradA ? m : n}, a->getElementType()));
  // DRELU_BGRAD: the masked result's column sums; RELU_AUX: the bit mask.
  if (epilogue == GemmEpilogue::DReluBiasGrad)
    types.push_back(RankedTensorType::get({n}, a->getElementType()));
  if (epilogue == GemmEpilogue::ReluAux ||
      epilogue == GemmEpilogue::ReluAuxBias)
    types.push_back(ampc::reluMaskType(ctx, m, n));
  return success();
}

int64_t ampc::reluMaskBits(int64_t n) { return (n + 127) / 128 * 128; }

RankedTensorType ampc::reluMaskType(MLIRContext *ctx, int64_t m, int64_t n) {
  return RankedTensorType::get({m, reluMaskBits(n) / 8},
                               IntegerType::get(ctx, 8));
}

Value GemmOp::getBiasGrad() {
  GemmEpilogue e = getEpilogue();
  return e == GemmEpilogue::BiasGradA || e == GemmEpilogue::BiasGradB ||
                 e == GemmEpilogue::DReluBiasGrad
             ? getAux()
             : Value();
}

Value GemmOp::getReluMaskOut() {
  GemmEpilogue e = getEpilogue();
  return e == GemmEpilogue::ReluAux || e == GemmEpilogue::ReluAuxBias
             ? getAux()
             : Value();
}

/// The inferred types, or FP32 in place of FP16/BF16: an op that
/// accumulates 16-bit values in FP32 may write its accumulator (issue 37,
/// item 3: GEMMs and sums).
static bool sameOrWidenedToF32(TypeRange inferred, TypeRange actual) {
  if (inferred.size() != actual.size())
    return false;
  for (auto [want, got] : llvm::zip(inferred, actual)) {
    if (want == got)
      continue;
    auto w = dyn_cast<RankedTensorType>(want);
    auto g = dyn_cast<RankedTensorType>(got);
    if (!w || !g || w.getShape() != g.getShape() ||
        !(w.getElementType().isF16() || w.getElementType().isBF16()) ||
        !g.getElementType().isF32())
      return false;
  }
  return true;
}

bool ampc::isSixteenBitOfF32(Type wide, Type narrow) {
  auto w = dyn_cast<RankedTensorType>(wide);
  auto n = dyn_cast<RankedTensorType>(narrow);
  return w && n && w.getShape() == n.getShape() &&
         w.getElementType().isF32() &&
         (n.getElementType().isF16() || n.getElementType().isBF16());
}

bool GemmOp::isCompatibleReturnTypes(TypeRange inferred, TypeRange actual) {
  return sameOrWidenedToF32(inferred, actual);
}

LogicalResult GemmOp::verify() {
  GemmEpilogue epilogue = getEpilogue();
  auto out = cast<RankedTensorType>(getOutput().getType());
  bool drelu = epilogue == GemmEpilogue::DRelu ||
               epilogue == GemmEpilogue::DReluBiasGrad;
  if (getAux() && !getBiasGrad() && !getReluMaskOut())
    return emitOpError("has a bias gradient result without a bias gradient "
                       "epilogue");
  if (Value mask = getReluMask()) {
    if (!drelu)
      return emitOpError("takes a ReLU mask only with epilogue 'drelu' or "
                         "'drelu_bgrad'");
    Type want = ampc::reluMaskType(getContext(), out.getDimSize(0),
                                   out.getDimSize(1));
    if (mask.getType() != want)
      return emitOpError("needs the ReLU mask of its ")
             << out << " result, " << want << ", got " << mask.getType();
    if (getC() || !getAlpha().isExactlyValue(1.0))
      return emitOpError("epilogue '")
             << stringifyGemmEpilogue(epilogue) << "' takes no C and alpha 1";
  } else if (drelu) {
    return emitOpError("epilogue '")
           << stringifyGemmEpilogue(epilogue) << "' needs a ReLU mask";
  }
  if (Value grad = getBiasGrad()) {
    if (cast<RankedTensorType>(grad.getType()).getElementType() !=
        out.getElementType())
      return emitOpError("writes the bias gradient in the output's type (as "
                         "cuBLASLt does), got ")
             << grad.getType() << " and " << out;
    if (getC() || !getAlpha().isExactlyValue(1.0))
      return emitOpError("epilogue '")
             << stringifyGemmEpilogue(epilogue)
             << "' takes no C and alpha 1";
    return success();
  }
  if (epilogue != GemmEpilogue::Bias && epilogue != GemmEpilogue::ReluBias &&
      epilogue != GemmEpilogue::ReluAuxBias)
    return success();
  // The bias epilogue adds C once per row: a row vector of the output's
  // type, beta 1.
  int64_t n = out.getDimSize(1);
  auto c = getC() ? dyn_cast<RankedTensorType>(getC().getType()) : nullptr;
  bool rowVector =
      c && ((c.getRank() == 1 && c.getDimSize(0) == n) ||
            (c.getRank() == 2 && c.getDimSize(0) == 1 && c.getDimSize(1) == n));
  if (!rowVector || c.getElementType() != out.getElementType())
    return emitOpError("epilogue '")
           << stringifyGemmEpilogue(epilogue)
           << "' needs C as a row vector of " << n << " elements of "
           << out.getElementType();
  if (!getBeta().isExactlyValue(1.0))
    return emitOpError("epilogue '")
           << stringifyGemmEpilogue(epilogue) << "' needs beta 1, got "
           << getBeta().convertToFloat();
  return success();
}

/// One operand's strided matrices: `batch` matrices of rows x cols, element
/// (r, c) of matrix i at i * stride + r * ld + c.
struct MatrixLayout {
  StringRef name;
  int64_t rows, cols, ld, stride;
};

/// Checks that `layout` addresses only elements of `type` (`elements`
/// elements): ld covers a row, strides are not negative, the last element
/// is inside.
static LogicalResult verifyMatrixLayout(BatchedGemmOp op,
                                        const MatrixLayout &l, int64_t batch,
                                        int64_t elements) {
  if (l.ld < std::max<int64_t>(l.cols, 1))
    return op.emitOpError("ld") << l.name.lower() << " " << l.ld
                                << " is less than the " << l.cols
                                << " columns " << l.name << " is stored with";
  if (l.stride < 0)
    return op.emitOpError("stride")
           << l.name << " must not be negative, got " << l.stride;
  if (l.rows == 0 || l.cols == 0)
    return success();
  int64_t last = (batch - 1) * l.stride + (l.rows - 1) * l.ld + l.cols - 1;
  if (last >= elements)
    return op.emitOpError() << l.name << "'s layout reaches element " << last
                            << ", past its " << elements << " elements";
  return success();
}

LogicalResult BatchedGemmOp::verify() {
  int64_t m = getM(), n = getN(), k = getK(), batch = getBatch();
  if (m < 0 || n < 0 || k < 0 || batch < 1)
    return emitOpError("needs m, n, k >= 0 and batch >= 1, got m ")
           << m << ", n " << n << ", k " << k << ", batch " << batch;
  auto a = cast<RankedTensorType>(getA().getType());
  auto b = cast<RankedTensorType>(getB().getType());
  auto out = cast<RankedTensorType>(getType());
  if (a.getElementType() != b.getElementType())
    return emitOpError("needs A and B of one element type, got ")
           << a.getElementType() << " and " << b.getElementType();
  GemmEpilogue epilogue = getEpilogue();
  bool wantsBias =
      epilogue == GemmEpilogue::Bias || epilogue == GemmEpilogue::ReluBias;
  if (wantsBias != static_cast<bool>(getBias()))
    return emitOpError("epilogue '")
           << stringifyGemmEpilogue(epilogue) << "' "
           << (wantsBias ? "needs a" : "takes no") << " bias operand";
  if (auto bias = getBias() ? cast<RankedTensorType>(getBias().getType())
                            : nullptr;
      bias && (bias.getNumElements() != n ||
               bias.getElementType() != out.getElementType()))
    return emitOpError("the bias must be ")
           << n << " elements of " << out.getElementType() << ", got "
           << bias;
  // The attributes are unsigned; a value past INT64_MAX becomes negative
  // here and is refused below.
  auto i64 = [](uint64_t v) { return static_cast<int64_t>(v); };
  MatrixLayout layouts[] = {
      {"A", getTransA() ? k : m, getTransA() ? m : k, i64(getLda()),
       i64(getStrideA())},
      {"B", getTransB() ? n : k, getTransB() ? k : n, i64(getLdb()),
       i64(getStrideB())},
      {"D", m, n, i64(getLdd()), i64(getStrideD())}};
  int64_t elements[] = {a.getNumElements(), b.getNumElements(),
                        out.getNumElements()};
  for (int i = 0; i < 3; ++i)
    if (failed(verifyMatrixLayout(*this, layouts[i], batch, elements[i])))
      return failure();
  // D is the whole result, each element written once: as many elements as
  // the result, none written twice (the layout's dimensions, smallest
  // stride first, each step past the extent of the ones before).
  if (batch * m * n != out.getNumElements())
    return emitOpError("writes ")
           << batch << " x " << m << " x " << n
           << " elements, but the result has " << out.getNumElements();
  std::pair<int64_t, int64_t> dims[] = {
      {1, n}, {getLdd(), m}, {getStrideD(), batch}};
  llvm::sort(dims);
  int64_t extent = 0;
  for (auto [stride, size] : dims) {
    if (size == 1)
      continue;
    if (stride <= extent)
      return emitOpError("D's layout (ldd ")
             << getLdd() << ", strideD " << getStrideD()
             << ") writes some elements more than once";
    extent += (size - 1) * stride;
  }
  return success();
}

/// A channels-last tensor (N, spatial..., C) seen as channels-first
/// (N, C, spatial...), and back: the shape rules of the ops with
/// `channels_last` are the channels-first ones on these views. A weight
/// (M, k..., C/group) is viewed the same way.
static RankedTensorType channelsFirstView(RankedTensorType t) {
  return RankedTensorType::get(
      permuteShape(t.getShape(), channelsFirstPerm(t.getRank())),
      t.getElementType());
}
static RankedTensorType channelsLastView(RankedTensorType t) {
  return RankedTensorType::get(
      permuteShape(t.getShape(), channelsLastPerm(t.getRank())),
      t.getElementType());
}

/// `x` (named `name`) as channels-first: itself, or with `channelsLast`
/// its view, which needs the rank of a 2-D image (the layout the CUDA
/// target's kernels and cuDNN take).
template <typename OpTy>
static FailureOr<RankedTensorType> channelsFirst(OptLoc loc,
                                                 FailureOr<RankedTensorType> x,
                                                 bool channelsLast,
                                                 StringRef name,
                                                 StringRef layout = "N, H, W, C") {
  if (failed(x) || !channelsLast)
    return x;
  if (x->getRank() != 4)
    return fail<OpTy>(loc, "channels_last needs a rank-4 " + name + " (" +
                               layout + "), got shape " +
                               formatList(x->getShape()));
  return channelsFirstView(*x);
}

/// The Conv shape rule, shared with the backward convolutions (which check
/// their written result type with it). Messages name `OpTy`. With
/// `channelsLast`, X is (N, H, W, C), W (M, kH, kW, C/group) and the
/// result (N, oH, oW, M).
template <typename OpTy>
static FailureOr<RankedTensorType>
inferConvType(OptLoc loc, Value input, Value weight, Value bias,
              std::optional<ArrayRef<int64_t>> strides,
              std::optional<ArrayRef<int64_t>> pads,
              std::optional<ArrayRef<int64_t>> dilations, int64_t group,
              bool channelsLast) {
  auto x = channelsFirst<OpTy>(loc, rankedType<OpTy>(loc, input, "X"),
                               channelsLast, "X");
  if (failed(x))
    return failure();
  auto w = channelsFirst<OpTy>(loc, rankedType<OpTy>(loc, weight, "W"),
                               channelsLast, "W", "M, kH, kW, C/group");
  if (failed(w))
    return failure();
  if (x->getRank() < 3)
    return fail<OpTy>(loc, "X must be (N, C, spatial...), got shape " +
                               formatList(x->getShape()));
  if (w->getRank() != x->getRank())
    return fail<OpTy>(loc, "W rank " + Twine(w->getRank()) +
                               " differs from X rank " + Twine(x->getRank()));
  if (x->getElementType() != w->getElementType())
    return fail<OpTy>(loc, "X and W element types differ");
  int64_t channels = x->getDimSize(1), filters = w->getDimSize(0);
  if (group < 1)
    return fail<OpTy>(loc, "'group' must be >= 1, got " + Twine(group));
  if (channels % group != 0 || filters % group != 0 ||
      w->getDimSize(1) * group != channels)
    return fail<OpTy>(loc, "W of shape " + formatList(w->getShape()) +
                               " does not match " + Twine(channels) +
                               " input channels in " + Twine(group) +
                               " group(s)");
  if (bias) {
    auto bt = rankedType<OpTy>(loc, bias, "B");
    if (failed(bt))
      return failure();
    if (bt->getShape() != ArrayRef<int64_t>{filters})
      return fail<OpTy>(loc, "B must have shape [" + Twine(filters) +
                                 "], got " + formatList(bt->getShape()));
  }
  FailureOr<SmallVector<int64_t>> spatial = inferWindow<OpTy>(
      loc, x->getShape().drop_front(2), w->getShape().drop_front(2), strides,
      pads, dilations, /*ceilMode=*/false);
  if (failed(spatial))
    return failure();
  SmallVector<int64_t> shape = {x->getDimSize(0), filters};
  shape.append(*spatial);
  auto y = RankedTensorType::get(shape, x->getElementType());
  return channelsLast ? channelsLastView(y) : y;
}

LogicalResult ConvOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                       Adaptor adaptor, Types &types) {
  adaptor = withDefaults<ConvOp>(ctx, adaptor);
  FailureOr<RankedTensorType> y = inferConvType<ConvOp>(
      loc, adaptor.getInput(), adaptor.getWeight(), adaptor.getBias(),
      adaptor.getStrides(), adaptor.getPads(), adaptor.getDilations(),
      adaptor.getGroup(), adaptor.getChannelsLast());
  if (failed(y))
    return failure();
  types.push_back(*y);
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

/// Softmax and LogSoftmax: the operand's type, along a valid axis.
template <typename OpTy>
static LogicalResult inferAlongAxis(MLIRContext *ctx, OptLoc loc,
                                    typename OpTy::Adaptor adaptor,
                                    Types &types) {
  adaptor = withDefaults<OpTy>(ctx, adaptor);
  auto x = rankedType<OpTy>(loc, adaptor.getInput(), "input");
  if (failed(x) ||
      failed(checkAxis<OpTy>(loc, "axis", adaptor.getAxis(), x->getRank())))
    return failure();
  types.push_back(*x);
  return success();
}

LogicalResult SoftmaxOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                          Adaptor adaptor, Types &types) {
  return inferAlongAxis<SoftmaxOp>(ctx, loc, adaptor, types);
}

LogicalResult LogSoftmaxOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                             Adaptor adaptor, Types &types) {
  return inferAlongAxis<LogSoftmaxOp>(ctx, loc, adaptor, types);
}

namespace {
/// The shapes of ampc.attention (and its adjoint) checked, O's physical
/// type and LSE's type inferred.
template <typename Op>
LogicalResult inferAttention(OptLoc loc, Value q, Value k, Value v,
                             Value bias, ArrayRef<int64_t> qPerm,
                             ArrayRef<int64_t> kPerm, ArrayRef<int64_t> vPerm,
                             ArrayRef<int64_t> oPerm, APFloat dropoutRatio,
                             bool packed, Types &types) {
  // Dropout's own range: a ratio of 1 would keep nothing (and scale by
  // 1 / 0).
  float ratio = dropoutRatio.convertToFloat();
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return fail<Op>(loc, "'dropout_ratio' must be in [0, 1), got " +
                             std::to_string(ratio));
  auto tq = rankedType<Op>(loc, q, "Q");
  auto tk = rankedType<Op>(loc, k, "K");
  auto tv = rankedType<Op>(loc, v, "V");
  if (failed(tq) || failed(tk) || failed(tv))
    return failure();
  for (auto [name, perm] : {std::pair<StringRef, ArrayRef<int64_t>>{"q_perm", qPerm},
                            {"k_perm", kPerm},
                            {"v_perm", vPerm},
                            {"o_perm", oPerm}}) {
    SmallVector<int64_t> sorted(perm);
    llvm::sort(sorted);
    if (sorted != SmallVector<int64_t>{0, 1, 2, 3})
      return fail<Op>(loc, "'" + name +
                               "' must be a permutation of [0, 1, 2, 3], got " +
                               formatList(perm));
  }
  for (auto [name, t] : {std::pair<StringRef, RankedTensorType>{"Q", *tq},
                         {"K", *tk},
                         {"V", *tv}})
    if (t.getRank() != 4)
      return fail<Op>(loc, name + " must have rank 4, got " +
                               formatType(t));
  if (tk->getElementType() != tq->getElementType() ||
      tv->getElementType() != tq->getElementType())
    return fail<Op>(loc, "Q, K and V must have one element type, got " +
                             formatType(*tq) + ", " + formatType(*tk) +
                             " and " + formatType(*tv));
  SmallVector<int64_t, 4> lq = attentionLogicalShape(tq->getShape(), qPerm);
  SmallVector<int64_t, 4> lk = attentionLogicalShape(tk->getShape(), kPerm);
  SmallVector<int64_t, 4> lv = attentionLogicalShape(tv->getShape(), vPerm);
  if (packed) {
    // One operand holding Q, K and V as 3·H heads.
    if (q != k || q != v || qPerm != kPerm || qPerm != vPerm)
      return fail<Op>(loc, "with 'packed_qkv', Q, K and V must be one value "
                           "with one perm");
    if (lq[1] % 3 != 0)
      return fail<Op>(loc, "with 'packed_qkv', the operand's heads "
                           "dimension must hold 3 x H heads, got " +
                               Twine(lq[1]));
    lq[1] /= 3;
    lk = lq;
    lv = lq;
  }
  if (lk[0] != lq[0] || lk[1] != lq[1] || lk[3] != lq[3])
    return fail<Op>(loc, "K's logical shape " + formatList(lk) +
                             " must be [" + Twine(lq[0]) + ", " +
                             Twine(lq[1]) + ", Sk, " + Twine(lq[3]) +
                             "] for Q's " + formatList(lq));
  if (lv[0] != lq[0] || lv[1] != lq[1] || lv[2] != lk[2])
    return fail<Op>(loc, "V's logical shape " + formatList(lv) +
                             " must be [" + Twine(lq[0]) + ", " +
                             Twine(lq[1]) + ", " + Twine(lk[2]) +
                             ", Dv] for Q's " + formatList(lq) +
                             " and K's " + formatList(lk));
  if (bias) {
    auto tb = rankedType<Op>(loc, bias, "bias");
    if (failed(tb))
      return failure();
    SmallVector<int64_t> scores{lq[0], lq[1], lq[2], lk[2]};
    std::optional<SmallVector<int64_t>> b =
        broadcastShapes({scores, tb->getShape()});
    if (tb->getRank() > 4 || !b || *b != scores)
      return fail<Op>(loc, "bias of shape " + formatList(tb->getShape()) +
                               " does not broadcast to the scores' shape " +
                               formatList(scores));
  }
  Type element = tq->getElementType();
  types.push_back(RankedTensorType::get(
      attentionPhysicalShape({lq[0], lq[1], lq[2], lv[3]}, oPerm), element));
  Type stat = element.isF64() ? element : Float32Type::get(element.getContext());
  types.push_back(RankedTensorType::get({lq[0], lq[1], lq[2]}, stat));
  return success();
}
} // namespace

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                            Adaptor adaptor, Types &types) {
  adaptor = withDefaults<AttentionOp>(ctx, adaptor);
  return inferAttention<AttentionOp>(
      loc, adaptor.getQ(), adaptor.getK(), adaptor.getV(), adaptor.getBias(),
      adaptor.getQPerm(), adaptor.getKPerm(), adaptor.getVPerm(),
      adaptor.getOPerm(), adaptor.getDropoutRatio(), adaptor.getPackedQkv(),
      types);
}

LogicalResult AttentionGradOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                                Adaptor adaptor,
                                                Types &types) {
  adaptor = withDefaults<AttentionGradOp>(ctx, adaptor);
  using Op = AttentionGradOp;
  SmallVector<Type, 2> forward;
  if (failed(inferAttention<Op>(loc, adaptor.getQ(), adaptor.getK(),
                                adaptor.getV(), adaptor.getBias(),
                                adaptor.getQPerm(), adaptor.getKPerm(),
                                adaptor.getVPerm(), adaptor.getOPerm(),
                                adaptor.getDropoutRatio(),
                                adaptor.getPackedQkv(), forward)))
    return failure();
  for (auto [name, value, type] :
       {std::tuple<StringRef, Value, Type>{"grad", adaptor.getGrad(), forward[0]},
        {"O", adaptor.getO(), forward[0]},
        {"LSE", adaptor.getLse(), forward[1]}})
    if (value.getType() != type)
      return fail<Op>(loc, name + " must have type " + formatType(type) +
                               ", got " + formatType(value.getType()));
  types.push_back(adaptor.getQ().getType());
  if (adaptor.getPackedQkv())
    return success(); // dQ | dK | dV in the packed operand's layout
  types.push_back(adaptor.getK().getType());
  types.push_back(adaptor.getV().getType());
  return success();
}

LogicalResult LayerNormalizationOp::inferReturnTypes(MLIRContext *ctx,
                                                     OptLoc loc,
                                                     Adaptor adaptor,
                                                     Types &types) {
  adaptor = withDefaults<LayerNormalizationOp>(ctx, adaptor);
  using Op = LayerNormalizationOp;
  auto x = rankedType<Op>(loc, adaptor.getInput(), "X");
  if (failed(x))
    return failure();
  FailureOr<int64_t> axis =
      checkAxis<Op>(loc, "axis", adaptor.getAxis(), x->getRank());
  if (failed(axis))
    return failure();
  if (adaptor.getEpsilon().isNegative())
    return fail<Op>(loc, "'epsilon' must be >= 0");
  Type stash = floatTypeFromOnnxCode(ctx, adaptor.getStashType());
  if (!stash)
    return fail<Op>(loc, "'stash_type' must name a float type (1, 10, 11 "
                         "or 16), got " +
                             Twine(adaptor.getStashType()));
  ArrayRef<int64_t> normalized = x->getShape().drop_front(*axis);
  for (auto [name, v] : {std::pair<StringRef, Value>{"Scale", adaptor.getScale()},
                         {"B", adaptor.getBias()}}) {
    if (!v)
      continue;
    auto t = rankedType<Op>(loc, v, name);
    if (failed(t))
      return failure();
    std::optional<SmallVector<int64_t>> b =
        broadcastShapes({normalized, t->getShape()});
    if (!b || ArrayRef<int64_t>(*b) != normalized)
      return fail<Op>(loc, name + " of shape " + formatList(t->getShape()) +
                               " does not broadcast to the normalised shape " +
                               formatList(normalized));
  }
  SmallVector<int64_t> statShape(x->getShape());
  for (int64_t i = *axis; i < x->getRank(); ++i)
    statShape[i] = 1;
  types.push_back(*x);
  types.push_back(RankedTensorType::get(statShape, stash));
  types.push_back(RankedTensorType::get(statShape, stash));
  return success();
}

/// Y in X's type, or in 16 bits where X is FP32 (a cast folded in).
bool LayerNormalizationOp::isCompatibleReturnTypes(TypeRange inferred,
                                                   TypeRange actual) {
  if (inferred.size() != actual.size() || inferred.empty())
    return false;
  return (inferred[0] == actual[0] ||
          ampc::isSixteenBitOfF32(inferred[0], actual[0])) &&
         inferred.drop_front() == actual.drop_front();
}

/// The element type of BatchNorm's saved statistics for data of type `x`:
/// f64 for f64 data, else f32.
static Type batchNormStatisticsType(RankedTensorType x) {
  Type e = x.getElementType();
  return e.isF64() ? e : Float32Type::get(x.getContext());
}

/// BatchNorm's channel count: X's dimension 1, or its last with
/// `channels_last`.
static int64_t batchNormChannels(RankedTensorType x, bool channelsLast) {
  return channelsLast ? x.getShape().back() : x.getDimSize(1);
}

double BatchNormalizationOp::runningVarianceFactor() {
  if (!getUnbiasedRunningVar())
    return 1.0;
  auto x = cast<RankedTensorType>(getInput().getType());
  // The elements of a channel.
  int64_t count =
      x.getNumElements() / batchNormChannels(x, getChannelsLast());
  return count > 1 ? static_cast<double>(count) / static_cast<double>(count - 1)
                   : 1.0;
}

LogicalResult BatchNormalizationOp::inferReturnTypes(MLIRContext *ctx,
                                                     OptLoc loc,
                                                     Adaptor adaptor,
                                                     Types &types) {
  adaptor = withDefaults<BatchNormalizationOp>(ctx, adaptor);
  using Op = BatchNormalizationOp;
  if (failed(checkBinaryFlag<Op>(loc, "training_mode",
                                 adaptor.getTrainingMode())))
    return failure();
  auto x = rankedType<Op>(loc, adaptor.getInput(), "X");
  if (failed(x))
    return failure();
  if (x->getRank() < 2)
    return fail<Op>(loc, "X must be (N, C, ...), got shape " +
                             formatList(x->getShape()));
  if (failed(channelsFirst<Op>(loc, x, adaptor.getChannelsLast(), "X")))
    return failure();
  int64_t channels = batchNormChannels(*x, adaptor.getChannelsLast());
  StringRef names[] = {"scale", "B", "input_mean", "input_var"};
  Value values[] = {adaptor.getScale(), adaptor.getBias(),
                    adaptor.getInputMean(), adaptor.getInputVar()};
  for (auto [name, v] : llvm::zip(names, values)) {
    auto t = rankedType<Op>(loc, v, name);
    if (failed(t))
      return failure();
    if (t->getShape() != ArrayRef<int64_t>{channels})
      return fail<Op>(loc, name + " must have shape [" + Twine(channels) +
                               "], got " + formatList(t->getShape()));
  }
  // The epilogue's residual is added to Y elementwise, in Y's type.
  if (Value residual = adaptor.getResidual())
    if (residual.getType() != *x) {
      std::string message;
      llvm::raw_string_ostream os(message);
      os << "residual must have X's type " << *x << ", got "
         << residual.getType();
      return fail<Op>(loc, message);
    }
  types.push_back(*x);
  types.push_back(adaptor.getInputMean().getType());
  types.push_back(adaptor.getInputVar().getType());
  if (adaptor.getSavedStatistics()) {
    auto saved = RankedTensorType::get({channels},
                                       batchNormStatisticsType(*x));
    types.push_back(saved);
    types.push_back(saved);
  }
  return success();
}

LogicalResult DropoutOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                          Adaptor adaptor, Types &types) {
  adaptor = withDefaults<DropoutOp>(ctx, adaptor);
  float ratio = adaptor.getRatio().convertToFloat();
  if (!(ratio >= 0.0f && ratio < 1.0f))
    return fail<DropoutOp>(loc, "'ratio' must be in [0, 1), got " +
                                    std::to_string(ratio));
  if (failed(checkBinaryFlag<DropoutOp>(loc, "training_mode",
                                        adaptor.getTrainingMode())))
    return failure();
  auto x = rankedType<DropoutOp>(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  types.push_back(*x);
  types.push_back(RankedTensorType::get(x->getShape(), IntegerType::get(ctx, 1)));
  return success();
}

LogicalResult DropoutOp::canonicalize(DropoutOp op,
                                      PatternRewriter &rewriter) {
  if (!op.isIdentity())
    return failure();
  auto mask = ConstantOp::create(
      rewriter, op.getLoc(),
      DenseElementsAttr::get(cast<ShapedType>(op.getMask().getType()), true));
  rewriter.replaceOp(op, {op.getInput(), mask.getResult()});
  return success();
}

uint64_t DropoutOp::maskSeed() {
  if (getSeed())
    return static_cast<uint64_t>(*getSeed());
  uint64_t seed = 0xCBF29CE484222325ULL;
  for (char c : nodeDescription(getOperation()))
    seed = (seed ^ static_cast<unsigned char>(c)) * 0x100000001B3ULL;
  return seed;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

LogicalResult FusionOp::verify() {
  Block &body = getBody().front();
  if (body.getNumArguments() != getInputs().size())
    return emitOpError() << "has " << getInputs().size()
                         << " operands but its body takes "
                         << body.getNumArguments();
  for (auto [i, pair] :
       llvm::enumerate(llvm::zip(getInputs().getTypes(), body.getArgumentTypes())))
    if (std::get<0>(pair) != std::get<1>(pair))
      return emitOpError() << "operand " << i << " has type "
                           << std::get<0>(pair) << " but block argument " << i
                           << " has type " << std::get<1>(pair);
  auto yield = dyn_cast<YieldOp>(body.getTerminator());
  if (!yield)
    return emitOpError() << "body must end in ampc.yield";
  if (getOutputs().empty())
    return emitOpError() << "must return at least one value";
  if (yield.getValues().getTypes() != getOutputs().getTypes())
    return emitOpError() << "yields " << yield.getValues().getTypes()
                         << " but returns " << getOutputs().getTypes();
  auto shape = cast<RankedTensorType>(getOutputs()[0].getType()).getShape();
  for (Type t : getOutputs().getTypes())
    if (cast<RankedTensorType>(t).getShape() != shape)
      return emitOpError() << "returns values of different shapes: "
                           << getOutputs()[0].getType() << " and " << t;
  for (Operation &op : body.without_terminator()) {
    if (!op.hasTrait<Elementwise>() || op.getNumResults() != 1)
      return emitOpError() << "body holds '" << op.getName()
                           << "', which is not an elementwise op";
    if (cast<RankedTensorType>(op.getResult(0).getType()).getShape() != shape)
      return emitOpError() << "body value of type " << op.getResult(0).getType()
                           << " does not have the result's shape";
  }
  return success();
}

LogicalResult ReshapeOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type differs from the operand's");
  if (in.getNumElements() != out.getNumElements())
    return emitOpError("cannot reshape ")
           << formatList(in.getShape()) << " (" << in.getNumElements()
           << " elements) to " << formatList(out.getShape()) << " ("
           << out.getNumElements() << " elements)";
  return success();
}

LogicalResult AddLayerNormOp::verify() {
  // The LayerNorm of the sum: its own rule gives Mean's and InvStdDev's
  // types and checks the attributes, Scale and B.
  SmallVector<Type, 3> layerNorm;
  SmallVector<Value> operands = {getSum(), getScale()};
  if (getBias())
    operands.push_back(getBias());
  LayerNormalizationOp::Properties props;
  props.setAxis(getAxisAttr());
  props.setEpsilon(getEpsilonAttr());
  props.setStashType(getStashTypeAttr());
  if (failed(LayerNormalizationOp::inferReturnTypes(
          getContext(), getLoc(),
          LayerNormalizationOp::Adaptor(operands, (*this)->getAttrDictionary(),
                                        props),
          layerNorm)))
    return failure();
  auto x = cast<RankedTensorType>(getInput().getType());
  auto addend = cast<RankedTensorType>(getAddend().getType());
  auto y = cast<RankedTensorType>(getOutput().getType());
  if (getSum().getType() != x)
    return emitOpError("the sum must have the input's type ") << x;
  if (addend.getShape() != x.getShape())
    return emitOpError("the addend's shape ")
           << formatList(addend.getShape()) << " must be the input's "
           << formatList(x.getShape());
  if (y.getShape() != x.getShape())
    return emitOpError("Y's shape ") << formatList(y.getShape())
                                     << " must be the input's "
                                     << formatList(x.getShape());
  if (getMean().getType() != layerNorm[1] ||
      getInvStdDev().getType() != layerNorm[2])
    return emitOpError("Mean and InvStdDev must have type ") << layerNorm[1];
  return success();
}

LogicalResult SubviewOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type differs from the operand's");
  int64_t offset = getOffset();
  if (offset < 0 || offset > in.getNumElements() ||
      out.getNumElements() > in.getNumElements() - offset)
    return emitOpError("elements [")
           << offset << ", " << offset << " + " << out.getNumElements()
           << ") are not inside the operand's " << in.getNumElements();
  return success();
}

LogicalResult ExpandOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (in.getElementType() != out.getElementType())
    return emitOpError("result element type differs from the operand's");
  std::optional<SmallVector<int64_t>> b =
      broadcastShapes({in.getShape(), out.getShape()});
  if (!b || ArrayRef<int64_t>(*b) != out.getShape())
    return emitOpError("cannot expand ")
           << formatList(in.getShape()) << " to "
           << formatList(out.getShape());
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &types) {
  auto x = rankedType<TransposeOp>(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  ArrayRef<int64_t> perm = adaptor.getPerm();
  SmallVector<bool> used(x->getRank(), false);
  bool ok = static_cast<int64_t>(perm.size()) == x->getRank();
  for (int64_t p : perm) {
    ok = ok && p >= 0 && p < x->getRank() && !used[p];
    if (ok)
      used[p] = true;
  }
  if (!ok)
    return fail<TransposeOp>(loc, "'perm' " + formatList(perm) +
                                      " is not a permutation of rank " +
                                      Twine(x->getRank()));
  SmallVector<int64_t> shape;
  for (int64_t p : perm)
    shape.push_back(x->getDimSize(p));
  types.push_back(RankedTensorType::get(shape, x->getElementType()));
  return success();
}

LogicalResult FlattenOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                          Adaptor adaptor, Types &types) {
  adaptor = withDefaults<FlattenOp>(ctx, adaptor);
  auto x = rankedType<FlattenOp>(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  int64_t rank = x->getRank(), axis = adaptor.getAxis();
  if (axis < -rank || axis > rank)
    return fail<FlattenOp>(loc, "'axis' " + Twine(axis) +
                                    " is out of range for rank " + Twine(rank));
  if (axis < 0)
    axis += rank;
  std::optional<int64_t> outer =
      ampc::checkedProduct(x->getShape().take_front(axis));
  std::optional<int64_t> inner =
      ampc::checkedProduct(x->getShape().drop_front(axis));
  if (!outer || !inner)
    return fail<FlattenOp>(loc, "the input " + formatList(x->getShape()) +
                                    " has more than 2^63 elements");
  types.push_back(RankedTensorType::get({*outer, *inner}, x->getElementType()));
  return success();
}

LogicalResult SqueezeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                          Adaptor adaptor, Types &types) {
  auto x = rankedType<SqueezeOp>(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  FailureOr<SmallVector<int64_t>> axes =
      checkAxes<SqueezeOp>(loc, adaptor.getAxes(), x->getRank());
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < x->getRank(); ++i) {
    bool listed = llvm::is_contained(*axes, i);
    if (listed && x->getDimSize(i) != 1)
      return fail<SqueezeOp>(loc, "cannot squeeze dimension " + Twine(i) +
                                      " of size " + Twine(x->getDimSize(i)));
    bool squeezed = axes->empty() ? x->getDimSize(i) == 1 : listed;
    if (!squeezed)
      shape.push_back(x->getDimSize(i));
  }
  types.push_back(RankedTensorType::get(shape, x->getElementType()));
  return success();
}

LogicalResult UnsqueezeOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                            Adaptor adaptor, Types &types) {
  auto x = rankedType<UnsqueezeOp>(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  int64_t rank = x->getRank() + adaptor.getAxes().size();
  FailureOr<SmallVector<int64_t>> axes =
      checkAxes<UnsqueezeOp>(loc, adaptor.getAxes(), rank);
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape;
  ArrayRef<int64_t> in = x->getShape();
  for (int64_t i = 0; i < rank; ++i) {
    if (llvm::is_contained(*axes, i)) {
      shape.push_back(1);
    } else {
      shape.push_back(in.front());
      in = in.drop_front();
    }
  }
  types.push_back(RankedTensorType::get(shape, x->getElementType()));
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                         Adaptor adaptor, Types &types) {
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return fail<ConcatOp>(loc, "needs at least one input");
  auto first = rankedType<ConcatOp>(loc, inputs.front(), "input");
  if (failed(first))
    return failure();
  FailureOr<int64_t> axis =
      checkAxis<ConcatOp>(loc, "axis", adaptor.getAxis(), first->getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(first->getShape());
  shape[*axis] = 0;
  for (Value v : inputs) {
    auto t = rankedType<ConcatOp>(loc, v, "input");
    if (failed(t))
      return failure();
    if (t->getElementType() != first->getElementType())
      return fail<ConcatOp>(loc, "input element types differ");
    bool ok = t->getRank() == first->getRank();
    for (int64_t i = 0; ok && i < t->getRank(); ++i)
      ok = i == *axis || t->getDimSize(i) == first->getDimSize(i);
    if (!ok)
      return fail<ConcatOp>(loc, "input shapes " +
                                     formatList(first->getShape()) + " and " +
                                     formatList(t->getShape()) +
                                     " differ outside axis " + Twine(*axis));
    shape[*axis] += t->getDimSize(*axis);
  }
  types.push_back(RankedTensorType::get(shape, first->getElementType()));
  return success();
}

/// The Slice shape rule, shared with slice_grad. Messages name `OpTy`.
template <typename OpTy>
static FailureOr<RankedTensorType>
inferSliceType(OptLoc loc, Value input, ArrayRef<int64_t> starts,
               ArrayRef<int64_t> ends, ArrayRef<int64_t> axesAttr,
               ArrayRef<int64_t> steps) {
  auto x = rankedType<OpTy>(loc, input, "input");
  if (failed(x))
    return failure();
  size_t n = starts.size();
  if (ends.size() != n || axesAttr.size() != n || steps.size() != n)
    return fail<OpTy>(loc, "'starts', 'ends', 'axes' and 'steps' must "
                           "have the same length");
  FailureOr<SmallVector<int64_t>> axes =
      checkAxes<OpTy>(loc, axesAttr, x->getRank());
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape(x->getShape());
  for (size_t i = 0; i < n; ++i) {
    int64_t dim = x->getDimSize((*axes)[i]), step = steps[i];
    if (step == 0)
      return fail<OpTy>(loc, "'steps' must not contain 0");
    int64_t start = starts[i], end = ends[i];
    if (start < 0)
      start += dim;
    if (end < 0)
      end += dim;
    // Clamped as ONNX specifies; the count is computed from the span (at
    // most dim + 1) and |step| as unsigned, so steps near INT64_MIN/MAX
    // cannot overflow.
    int64_t span;
    if (step > 0) {
      start = std::clamp<int64_t>(start, 0, dim);
      end = std::clamp<int64_t>(end, 0, dim);
      span = end - start;
    } else {
      // min/max rather than std::clamp: for dim 0 the bounds cross (and the
      // slice is empty either way).
      start = std::min<int64_t>(std::max<int64_t>(start, 0), dim - 1);
      end = std::min<int64_t>(std::max<int64_t>(end, -1), dim - 1);
      span = start - end;
    }
    uint64_t magnitude = step > 0 ? static_cast<uint64_t>(step)
                                  : 0 - static_cast<uint64_t>(step);
    shape[(*axes)[i]] =
        span > 0 ? static_cast<int64_t>((static_cast<uint64_t>(span) - 1) /
                                            magnitude +
                                        1)
                 : 0;
  }
  return RankedTensorType::get(shape, x->getElementType());
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                        Adaptor adaptor, Types &types) {
  FailureOr<RankedTensorType> y = inferSliceType<SliceOp>(
      loc, adaptor.getInput(), adaptor.getStarts(), adaptor.getEnds(),
      adaptor.getAxes(), adaptor.getSteps());
  if (failed(y))
    return failure();
  types.push_back(*y);
  return success();
}

/// The Gather shape rule, shared with gather_grad. Messages name `OpTy`.
template <typename OpTy>
static FailureOr<RankedTensorType> inferGatherType(OptLoc loc, Value dataValue,
                                                   Value indicesValue,
                                                   int64_t axisAttr) {
  auto data = rankedType<OpTy>(loc, dataValue, "data");
  auto indices = rankedType<OpTy>(loc, indicesValue, "indices");
  if (failed(data) || failed(indices))
    return failure();
  if (data->getRank() == 0)
    return fail<OpTy>(loc, "data must have rank >= 1");
  FailureOr<int64_t> axis =
      checkAxis<OpTy>(loc, "axis", axisAttr, data->getRank());
  if (failed(axis))
    return failure();
  SmallVector<int64_t> shape(data->getShape().take_front(*axis));
  shape.append(indices->getShape().begin(), indices->getShape().end());
  shape.append(data->getShape().begin() + *axis + 1, data->getShape().end());
  return RankedTensorType::get(shape, data->getElementType());
}

LogicalResult GatherOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                         Adaptor adaptor, Types &types) {
  adaptor = withDefaults<GatherOp>(ctx, adaptor);
  FailureOr<RankedTensorType> y = inferGatherType<GatherOp>(
      loc, adaptor.getData(), adaptor.getIndices(), adaptor.getAxis());
  if (failed(y))
    return failure();
  types.push_back(*y);
  return success();
}

LogicalResult ScatterOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                          Adaptor adaptor, Types &types) {
  adaptor = withDefaults<ScatterOp>(ctx, adaptor);
  FailureOr<RankedTensorType> gathered = inferGatherType<ScatterOp>(
      loc, adaptor.getData(), adaptor.getIndices(), adaptor.getAxis());
  if (failed(gathered))
    return failure();
  auto updates = rankedType<ScatterOp>(loc, adaptor.getUpdates(), "updates");
  if (failed(updates))
    return failure();
  if (*updates != *gathered)
    return fail<ScatterOp>(loc, "updates must have type " +
                                    formatType(*gathered) +
                                    " (a Gather of data at the indices), got " +
                                    formatType(*updates));
  StringRef reduction = adaptor.getReduction();
  if (!isScatterReduction(reduction))
    return fail<ScatterOp>(loc, "'reduction' must be none, add, mul, max or "
                                "min, got '" +
                                    reduction + "'");
  types.push_back(adaptor.getData().getType());
  return success();
}

LogicalResult TopKOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                       Adaptor adaptor, Types &types) {
  adaptor = withDefaults<TopKOp>(ctx, adaptor);
  auto x = rankedType<TopKOp>(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  if (x->getRank() == 0)
    return fail<TopKOp>(loc, "input must have rank >= 1");
  FailureOr<int64_t> axis =
      checkAxis<TopKOp>(loc, "axis", adaptor.getAxis(), x->getRank());
  if (failed(axis) ||
      failed(checkBinaryFlag<TopKOp>(loc, "largest", adaptor.getLargest())))
    return failure();
  int64_t k = adaptor.getK(), n = x->getDimSize(*axis);
  if (k < 0 || k > n)
    return fail<TopKOp>(loc, "'k' must be between 0 and the axis size " +
                                 Twine(n) + ", got " + Twine(k));
  SmallVector<int64_t> shape(x->getShape());
  shape[*axis] = k;
  types.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}

//===----------------------------------------------------------------------===//
// The indexing ops imported 1:1 (ampc-decompose-indexing lowers them): the
// operands read by Indexing.h, as the import rules read the nodes.
//===----------------------------------------------------------------------===//

/// The ranked types of `values` (named `names` in messages), or failure.
template <typename OpTy>
static FailureOr<SmallVector<RankedTensorType>>
rankedTypes(OptLoc loc, ValueRange values, ArrayRef<StringRef> names) {
  SmallVector<RankedTensorType> types;
  for (auto [v, name] : llvm::zip(values, names)) {
    FailureOr<RankedTensorType> t = rankedType<OpTy>(loc, v, name);
    if (failed(t))
      return failure();
    types.push_back(*t);
  }
  return types;
}

/// The reduction of a scatter_elements or scatter_nd.
template <typename OpTy>
static LogicalResult checkReduction(OptLoc loc, StringRef reduction) {
  if (!isScatterReduction(reduction))
    return fail<OpTy>(loc, "'reduction' must be none, add, mul, max or min, "
                           "got '" +
                               reduction + "'");
  return success();
}

LogicalResult GatherElementsOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                                 Adaptor adaptor,
                                                 Types &types) {
  adaptor = withDefaults<GatherElementsOp>(ctx, adaptor);
  auto t = rankedTypes<GatherElementsOp>(
      loc, {adaptor.getData(), adaptor.getIndices()}, {"data", "indices"});
  if (failed(t))
    return failure();
  std::string error;
  if (failed(readElementIndices((*t)[0], (*t)[1], adaptor.getAxis(), error)))
    return fail<GatherElementsOp>(loc, error);
  types.push_back((*t)[1].clone((*t)[0].getElementType()));
  return success();
}

LogicalResult ScatterElementsOp::inferReturnTypes(MLIRContext *ctx,
                                                  OptLoc loc, Adaptor adaptor,
                                                  Types &types) {
  adaptor = withDefaults<ScatterElementsOp>(ctx, adaptor);
  auto t = rankedTypes<ScatterElementsOp>(
      loc, {adaptor.getData(), adaptor.getIndices(), adaptor.getUpdates()},
      {"data", "indices", "updates"});
  if (failed(t))
    return failure();
  std::string error;
  if (failed(readElementIndices((*t)[0], (*t)[1], adaptor.getAxis(), error)) ||
      failed(checkElementUpdates((*t)[1], (*t)[2], error)))
    return fail<ScatterElementsOp>(loc, error);
  if ((*t)[2].getElementType() != (*t)[0].getElementType())
    return fail<ScatterElementsOp>(
        loc, "updates must have data's element type " +
                 formatType((*t)[0].getElementType()) + ", got " +
                 formatType((*t)[2].getElementType()));
  if (failed(checkReduction<ScatterElementsOp>(loc, adaptor.getReduction())))
    return failure();
  types.push_back((*t)[0]);
  return success();
}

LogicalResult GatherNDOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                           Adaptor adaptor, Types &types) {
  adaptor = withDefaults<GatherNDOp>(ctx, adaptor);
  auto t = rankedTypes<GatherNDOp>(
      loc, {adaptor.getData(), adaptor.getIndices()}, {"data", "indices"});
  if (failed(t))
    return failure();
  std::string error;
  int64_t batch = adaptor.getBatchDims();
  FailureOr<int64_t> k = readTupleIndices((*t)[0], (*t)[1], batch, error);
  if (failed(k))
    return fail<GatherNDOp>(loc, error);
  types.push_back(RankedTensorType::get(
      gatherNDShape((*t)[0], (*t)[1], batch, *k), (*t)[0].getElementType()));
  return success();
}

LogicalResult ScatterNDOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                            Adaptor adaptor, Types &types) {
  adaptor = withDefaults<ScatterNDOp>(ctx, adaptor);
  auto t = rankedTypes<ScatterNDOp>(
      loc, {adaptor.getData(), adaptor.getIndices(), adaptor.getUpdates()},
      {"data", "indices", "updates"});
  if (failed(t))
    return failure();
  std::string error;
  FailureOr<int64_t> k = readTupleIndices((*t)[0], (*t)[1], 0, error);
  if (failed(k) || failed(checkTupleUpdates((*t)[0], (*t)[1], (*t)[2], *k,
                                            error)))
    return fail<ScatterNDOp>(loc, error);
  if ((*t)[2].getElementType() != (*t)[0].getElementType())
    return fail<ScatterNDOp>(loc, "updates must have data's element type " +
                                      formatType((*t)[0].getElementType()) +
                                      ", got " +
                                      formatType((*t)[2].getElementType()));
  if (failed(checkReduction<ScatterNDOp>(loc, adaptor.getReduction())))
    return failure();
  types.push_back((*t)[0]);
  return success();
}

LogicalResult ReverseSequenceOp::inferReturnTypes(MLIRContext *ctx,
                                                  OptLoc loc, Adaptor adaptor,
                                                  Types &types) {
  adaptor = withDefaults<ReverseSequenceOp>(ctx, adaptor);
  auto t = rankedTypes<ReverseSequenceOp>(
      loc, {adaptor.getInput(), adaptor.getSequenceLens()},
      {"input", "sequence_lens"});
  if (failed(t))
    return failure();
  std::string error;
  if (failed(checkReverseSequence((*t)[0], (*t)[1], adaptor.getTimeAxis(),
                                  adaptor.getBatchAxis(), error)))
    return fail<ReverseSequenceOp>(loc, error);
  types.push_back((*t)[0]);
  return success();
}

LogicalResult OneHotOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                         Adaptor adaptor, Types &types) {
  adaptor = withDefaults<OneHotOp>(ctx, adaptor);
  auto t = rankedTypes<OneHotOp>(
      loc, {adaptor.getIndices(), adaptor.getValues()}, {"indices", "values"});
  if (failed(t))
    return failure();
  std::string error;
  FailureOr<int64_t> axis =
      readOneHot((*t)[0], (*t)[1], adaptor.getAxis(), error);
  if (failed(axis))
    return fail<OneHotOp>(loc, error);
  int64_t depth = adaptor.getDepth();
  if (depth < 1)
    return fail<OneHotOp>(loc, "depth " + Twine(depth) + " must be at least 1");
  SmallVector<int64_t> shape((*t)[0].getShape());
  shape.insert(shape.begin() + *axis, depth);
  types.push_back(RankedTensorType::get(shape, (*t)[1].getElementType()));
  return success();
}

LogicalResult TopKValuesOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                             Adaptor adaptor, Types &types) {
  adaptor = withDefaults<TopKValuesOp>(ctx, adaptor);
  auto x = rankedType<TopKValuesOp>(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  std::string error;
  FailureOr<int64_t> axis = readTopK(*x, adaptor.getAxis(), adaptor.getK(),
                                     adaptor.getLargest(), error);
  if (failed(axis))
    return fail<TopKValuesOp>(loc, error);
  SmallVector<int64_t> shape(x->getShape());
  shape[*axis] = adaptor.getK();
  types.push_back(x->clone(shape));
  types.push_back(RankedTensorType::get(shape, IntegerType::get(ctx, 64)));
  return success();
}

/// The [start, end) dimension range an ampc.shape op selects.
static std::pair<int64_t, int64_t> shapeRange(int64_t rank, int64_t start,
                                              std::optional<int64_t> end) {
  auto clampDim = [&](int64_t d) {
    return std::clamp<int64_t>(d < 0 ? d + rank : d, 0, rank);
  };
  int64_t s = clampDim(start), e = end ? clampDim(*end) : rank;
  return {s, std::max(s, e)};
}

LogicalResult ShapeOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                        Adaptor adaptor, Types &types) {
  adaptor = withDefaults<ShapeOp>(ctx, adaptor);
  auto x = rankedType<ShapeOp>(loc, adaptor.getInput(), "input");
  if (failed(x))
    return failure();
  std::optional<int64_t> end;
  if (adaptor.getEnd())
    end = static_cast<int64_t>(*adaptor.getEnd());
  auto [s, e] = shapeRange(x->getRank(), adaptor.getStart(), end);
  types.push_back(RankedTensorType::get({e - s}, IntegerType::get(ctx, 64)));
  return success();
}

OpFoldResult ShapeOp::fold(FoldAdaptor) {
  auto type = cast<RankedTensorType>(getInput().getType());
  if (!type.hasStaticShape())
    return {};
  std::optional<int64_t> end;
  if (getEnd())
    end = static_cast<int64_t>(*getEnd());
  auto [s, e] = shapeRange(type.getRank(), getStart(), end);
  return DenseElementsAttr::get(
      cast<ShapedType>(getType()),
      ArrayRef<int64_t>(type.getShape()).slice(s, e - s));
}

//===----------------------------------------------------------------------===//
// Reductions and pooling
//===----------------------------------------------------------------------===//

template <typename OpTy>
static LogicalResult inferReduce(OptLoc loc, typename OpTy::Adaptor adaptor,
                                 Types &types) {
  auto x = rankedType<OpTy>(loc, adaptor.getInput(), "input");
  if (failed(x) ||
      failed(checkBinaryFlag<OpTy>(loc, "keepdims", adaptor.getKeepdims())))
    return failure();
  FailureOr<SmallVector<int64_t>> axes =
      checkAxes<OpTy>(loc, adaptor.getAxes(), x->getRank());
  if (failed(axes))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t i = 0; i < x->getRank(); ++i) {
    bool reduced = axes->empty() || llvm::is_contained(*axes, i);
    if (!reduced)
      shape.push_back(x->getDimSize(i));
    else if (adaptor.getKeepdims())
      shape.push_back(1);
  }
  types.push_back(RankedTensorType::get(shape, x->getElementType()));
  return success();
}

#define AMPC_REDUCE_INFERENCE(OP)                                              \
  LogicalResult OP::inferReturnTypes(MLIRContext *ctx, OptLoc loc,             \
                                     Adaptor adaptor, Types &types) {          \
    return inferReduce<OP>(loc, withDefaults<OP>(ctx, adaptor), types);        \
  }
AMPC_REDUCE_INFERENCE(ReduceMeanOp)
AMPC_REDUCE_INFERENCE(ReduceSumOp)
AMPC_REDUCE_INFERENCE(ReduceMaxOp)
AMPC_REDUCE_INFERENCE(ReduceProdOp)
#undef AMPC_REDUCE_INFERENCE

bool ReduceSumOp::isCompatibleReturnTypes(TypeRange inferred,
                                          TypeRange actual) {
  return sameOrWidenedToF32(inferred, actual);
}

/// The pooling shape rule for an input `input` and the window attributes of
/// `adaptor` (a pooling op's, or average_pool_grad's, which checks its
/// written result type with it). Messages name `OpTy`.
template <typename OpTy>
static FailureOr<RankedTensorType>
inferPool(OptLoc loc, Value input, typename OpTy::Adaptor adaptor) {
  bool channelsLast = adaptor.getChannelsLast();
  auto x = channelsFirst<OpTy>(loc, rankedType<OpTy>(loc, input, "X"),
                               channelsLast, "X");
  if (failed(x) ||
      failed(checkBinaryFlag<OpTy>(loc, "ceil_mode", adaptor.getCeilMode())))
    return failure();
  if (x->getRank() < 3)
    return fail<OpTy>(loc, "X must be (N, C, spatial...), got shape " +
                               formatList(x->getShape()));
  FailureOr<SmallVector<int64_t>> spatial = inferWindow<OpTy>(
      loc, x->getShape().drop_front(2), adaptor.getKernelShape(),
      adaptor.getStrides(), adaptor.getPads(), adaptor.getDilations(),
      adaptor.getCeilMode() != 0);
  if (failed(spatial))
    return failure();
  SmallVector<int64_t> shape(x->getShape().take_front(2));
  shape.append(*spatial);
  auto y = RankedTensorType::get(shape, x->getElementType());
  return channelsLast ? channelsLastView(y) : y;
}

LogicalResult MaxPoolOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                          Adaptor adaptor, Types &types) {
  adaptor = withDefaults<MaxPoolOp>(ctx, adaptor);
  if (failed(checkBinaryFlag<MaxPoolOp>(loc, "storage_order",
                                        adaptor.getStorageOrder())))
    return failure();
  // A channels-last MaxPool's Indices are flat indices into its NHWC input.
  if (adaptor.getChannelsLast() && adaptor.getStorageOrder())
    return fail<MaxPoolOp>(loc, "channels_last takes no storage_order");
  FailureOr<RankedTensorType> y =
      inferPool<MaxPoolOp>(loc, adaptor.getInput(), adaptor);
  if (failed(y))
    return failure();
  types.push_back(*y);
  types.push_back(RankedTensorType::get(y->getShape(), IntegerType::get(ctx, 64)));
  return success();
}

LogicalResult AveragePoolOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                              Adaptor adaptor, Types &types) {
  adaptor = withDefaults<AveragePoolOp>(ctx, adaptor);
  if (failed(checkBinaryFlag<AveragePoolOp>(loc, "count_include_pad",
                                            adaptor.getCountIncludePad())))
    return failure();
  FailureOr<RankedTensorType> y =
      inferPool<AveragePoolOp>(loc, adaptor.getInput(), adaptor);
  if (failed(y))
    return failure();
  types.push_back(*y);
  return success();
}

LogicalResult GlobalAveragePoolOp::inferReturnTypes(MLIRContext *, OptLoc loc,
                                                    Adaptor adaptor,
                                                    Types &types) {
  auto x = rankedType<GlobalAveragePoolOp>(loc, adaptor.getInput(), "X");
  if (failed(x))
    return failure();
  if (x->getRank() < 3)
    return fail<GlobalAveragePoolOp>(
        loc, "X must be (N, C, spatial...), got shape " +
                 formatList(x->getShape()));
  SmallVector<int64_t> shape(x->getShape().take_front(2));
  shape.append(x->getRank() - 2, 1);
  types.push_back(RankedTensorType::get(shape, x->getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// Shared by the two ONNX losses: scores/input (N, C, D...), labels (N, D...),
/// optional class weights (C). Returns the loss type.
template <typename OpTy>
static FailureOr<RankedTensorType>
inferLoss(OptLoc loc, Value scores, Value labels, Value weights,
          Reduction reduction) {
  auto s = rankedType<OpTy>(loc, scores, "scores");
  auto l = rankedType<OpTy>(loc, labels, "labels");
  if (failed(s) || failed(l))
    return failure();
  if (s->getRank() < 2)
    return fail<OpTy>(loc, "scores must be (N, C, ...), got shape " +
                               formatList(s->getShape()));
  SmallVector<int64_t> expected = {s->getDimSize(0)};
  expected.append(s->getShape().begin() + 2, s->getShape().end());
  if (l->getShape() != ArrayRef<int64_t>(expected))
    return fail<OpTy>(loc, "labels of shape " + formatList(l->getShape()) +
                               " do not match scores of shape " +
                               formatList(s->getShape()) + " (expected " +
                               formatList(expected) + ")");
  if (weights) {
    auto w = rankedType<OpTy>(loc, weights, "weights");
    if (failed(w))
      return failure();
    if (w->getShape() != ArrayRef<int64_t>{s->getDimSize(1)})
      return fail<OpTy>(loc, "weights must have shape [" +
                                 Twine(s->getDimSize(1)) + "], got " +
                                 formatList(w->getShape()));
  }
  if (reduction == Reduction::None)
    return RankedTensorType::get(expected, s->getElementType());
  return RankedTensorType::get({}, s->getElementType());
}

LogicalResult SoftmaxCrossEntropyLossOp::inferReturnTypes(MLIRContext *ctx,
                                                          OptLoc loc,
                                                          Adaptor adaptor,
                                                          Types &types) {
  adaptor = withDefaults<SoftmaxCrossEntropyLossOp>(ctx, adaptor);
  FailureOr<RankedTensorType> loss = inferLoss<SoftmaxCrossEntropyLossOp>(
      loc, adaptor.getScores(), adaptor.getLabels(), adaptor.getWeights(),
      adaptor.getReduction());
  if (failed(loss))
    return failure();
  types.push_back(*loss);
  types.push_back(adaptor.getScores().getType());
  return success();
}

/// The results in the scores' type, or both in FP32 for 16-bit scores (a
/// widening cast folded in).
bool SoftmaxCrossEntropyLossOp::isCompatibleReturnTypes(TypeRange inferred,
                                                        TypeRange actual) {
  if (inferred == actual)
    return true;
  return inferred.size() == actual.size() &&
         llvm::all_of(llvm::zip(inferred, actual), [](auto pair) {
           return ampc::isSixteenBitOfF32(std::get<1>(pair),
                                          std::get<0>(pair));
         });
}

LogicalResult NegativeLogLikelihoodLossOp::inferReturnTypes(MLIRContext *ctx,
                                                            OptLoc loc,
                                                            Adaptor adaptor,
                                                            Types &types) {
  adaptor = withDefaults<NegativeLogLikelihoodLossOp>(ctx, adaptor);
  FailureOr<RankedTensorType> loss = inferLoss<NegativeLogLikelihoodLossOp>(
      loc, adaptor.getInput(), adaptor.getTarget(), adaptor.getWeight(),
      adaptor.getReduction());
  if (failed(loss))
    return failure();
  types.push_back(*loss);
  return success();
}

//===----------------------------------------------------------------------===//
// Backward ops (AMPCGradOps.td)
//===----------------------------------------------------------------------===//
//
// Most backward ops write their result type out (the forward op's input
// type, which strides, clamping or a gather's table size make impossible to
// infer from the gradient). Their verifiers apply the forward op's shape
// rule to the result and check that it gives the gradient's type.

/// `forward` is the forward shape rule applied to `op`'s result; `grad` must
/// have that type.
template <typename OpTy>
static LogicalResult checkForwardType(OpTy op,
                                      FailureOr<RankedTensorType> forward,
                                      Value grad, StringRef forwardOp) {
  if (failed(forward))
    return failure();
  if (*forward != grad.getType())
    return op.emitOpError("grad has type ")
           << grad.getType() << ", but " << forwardOp << " on "
           << op.getOutput().getType() << " gives " << *forward;
  return success();
}

LogicalResult ConvBackwardDataOp::verify() {
  return checkForwardType(
      *this,
      inferConvType<ConvBackwardDataOp>(getLoc(), getOutput(), getWeight(),
                                        Value(), getStrides(), getPads(),
                                        getDilations(), getGroup(),
                                        getChannelsLast()),
      getGrad(), "a Conv by the weight");
}

LogicalResult ConvBackwardWeightOp::verify() {
  return checkForwardType(
      *this,
      inferConvType<ConvBackwardWeightOp>(getLoc(), getInput(), getOutput(),
                                          Value(), getStrides(), getPads(),
                                          getDilations(), getGroup(),
                                          getChannelsLast()),
      getGrad(), "a Conv of the input");
}

LogicalResult MaxPoolGradOp::verify() {
  if (failed(checkBinaryFlag<MaxPoolGradOp>(getLoc(), "storage_order",
                                            getStorageOrder())))
    return failure();
  if (getChannelsLast() && getStorageOrder())
    return emitOpError("channels_last takes no storage_order");
  auto grad = cast<RankedTensorType>(getGrad().getType());
  auto indices = cast<RankedTensorType>(getIndices().getType());
  auto out = cast<RankedTensorType>(getOutput().getType());
  if (grad.getShape() != indices.getShape())
    return emitOpError("grad shape ")
           << formatList(grad.getShape()) << " differs from indices shape "
           << formatList(indices.getShape());
  if (grad.getElementType() != out.getElementType())
    return emitOpError("result element type differs from grad's");
  return checkForwardType(
      *this, inferPool<MaxPoolGradOp>(getLoc(), getOutput(), Adaptor(*this)),
      getGrad(), "MaxPool");
}

LogicalResult AveragePoolGradOp::verify() {
  if (failed(checkBinaryFlag<AveragePoolGradOp>(getLoc(), "count_include_pad",
                                                getCountIncludePad())))
    return failure();
  return checkForwardType(
      *this, inferPool<AveragePoolGradOp>(getLoc(), getOutput(), Adaptor(*this)),
      getGrad(), "AveragePool");
}

LogicalResult BatchNormGradOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                                Adaptor adaptor,
                                                Types &types) {
  adaptor = withDefaults<BatchNormGradOp>(ctx, adaptor);
  using Op = BatchNormGradOp;
  auto x = rankedType<Op>(loc, adaptor.getInput(), "input");
  auto scale = rankedType<Op>(loc, adaptor.getScale(), "scale");
  if (failed(x) || failed(scale))
    return failure();
  if (adaptor.getGrad().getType() != *x)
    return fail<Op>(loc, "grad type " + formatType(adaptor.getGrad().getType()) +
                             " differs from input type " + formatType(*x));
  if (x->getRank() < 2)
    return fail<Op>(loc, "input must be (N, C, ...), got shape " +
                             formatList(x->getShape()));
  if (failed(channelsFirst<Op>(loc, x, adaptor.getChannelsLast(), "input")))
    return failure();
  int64_t channels = batchNormChannels(*x, adaptor.getChannelsLast());
  if (scale->getShape() != ArrayRef<int64_t>{channels})
    return fail<Op>(loc, "scale must have shape [" + Twine(channels) +
                             "], got " + formatList(scale->getShape()));
  if (failed(checkBinaryFlag<Op>(loc, "training_mode",
                                 adaptor.getTrainingMode())))
    return failure();
  auto statistics =
      RankedTensorType::get({channels}, batchNormStatisticsType(*x));
  for (Value v : {adaptor.getMean(), adaptor.getInvStdDev()}) {
    if (v.getType() != statistics)
      return fail<Op>(loc, "mean and inv_std_dev must be " +
                               formatType(statistics) +
                               " (the forward's saved statistics), got " +
                               formatType(v.getType()));
  }
  // The prologue's operands are read elementwise beside grad.
  for (auto [name, v] : {std::pair<StringRef, Value>{"addend", adaptor.getAddend()},
                         {"relu_output", adaptor.getReluOutput()}})
    if (v && v.getType() != *x)
      return fail<Op>(loc, name + " type " + formatType(v.getType()) +
                               " differs from input type " + formatType(*x));
  types.push_back(*x);
  types.push_back(*scale);
  types.push_back(*scale);
  if (adaptor.getKeepGrad())
    types.push_back(*x);
  return success();
}

LogicalResult LayerNormGradOp::inferReturnTypes(MLIRContext *ctx, OptLoc loc,
                                                Adaptor adaptor,
                                                Types &types) {
  adaptor = withDefaults<LayerNormGradOp>(ctx, adaptor);
  using Op = LayerNormGradOp;
  auto x = rankedType<Op>(loc, adaptor.getInput(), "input");
  auto scale = rankedType<Op>(loc, adaptor.getScale(), "scale");
  if (failed(x) || failed(scale))
    return failure();
  // dY in 16 bits where X is FP32: a widening cast folded in.
  Type grad = adaptor.getGrad().getType();
  if (grad != *x && !ampc::isSixteenBitOfF32(*x, grad))
    return fail<Op>(loc, "grad type " + formatType(grad) +
                             " differs from input type " + formatType(*x));
  FailureOr<int64_t> axis =
      checkAxis<Op>(loc, "axis", adaptor.getAxis(), x->getRank());
  if (failed(axis))
    return failure();
  ArrayRef<int64_t> normalized = x->getShape().drop_front(*axis);
  std::optional<SmallVector<int64_t>> b =
      broadcastShapes({normalized, scale->getShape()});
  if (!b || ArrayRef<int64_t>(*b) != normalized)
    return fail<Op>(loc, "scale of shape " + formatList(scale->getShape()) +
                             " does not broadcast to the normalised shape " +
                             formatList(normalized));
  SmallVector<int64_t> statShape(x->getShape());
  for (int64_t i = *axis; i < x->getRank(); ++i)
    statShape[i] = 1;
  for (auto [name, v] :
       {std::pair<StringRef, Value>{"mean", adaptor.getMean()},
        {"inv_std_dev", adaptor.getInvStdDev()}}) {
    auto t = rankedType<Op>(loc, v, name);
    if (failed(t))
      return failure();
    if (t->getShape() != ArrayRef<int64_t>(statShape))
      return fail<Op>(loc, name + " must have shape " + formatList(statShape) +
                               ", got " + formatList(t->getShape()));
  }
  types.push_back(*x);
  // The Scale and B adjoints ampc-fuse-layer-norm-grad moved in: the
  // normalised shape in X's element type.
  int64_t params = adaptor.getParamGrads();
  if (params < 0 || params > 2)
    return fail<Op>(loc, "param_grads must be 0, 1 or 2, got " +
                             std::to_string(params));
  for (int64_t i = 0; i < params; ++i)
    types.push_back(RankedTensorType::get(normalized, x->getElementType()));
  return success();
}

LogicalResult NllLossGradOp::verify() {
  auto out = cast<RankedTensorType>(getOutput().getType());
  // The loss's input in the computed type: the result, or log_prob (which
  // may be wider than a result written in 16 bits).
  Value input = getOutput();
  if (Value logProb = getLogProb()) {
    auto type = cast<RankedTensorType>(logProb.getType());
    Type compute = type.getElementType(), stored = out.getElementType();
    if (type.getShape() != out.getShape())
      return emitOpError("log_prob shape ")
             << formatList(type.getShape()) << " differs from the result's "
             << formatList(out.getShape());
    if (stored != compute &&
        !(compute.isF32() && (stored.isF16() || stored.isBF16())))
      return emitOpError("result element type must be log_prob's or a "
                         "16-bit type of an f32 log_prob, got ")
             << stored << " and " << compute;
    input = logProb;
  }
  if (Value w = getWeight();
      w && cast<RankedTensorType>(w.getType()).getElementType() !=
               getElementTypeOrSelf(input.getType()))
    return emitOpError("weight element type differs from the result's");
  return checkForwardType(
      *this,
      inferLoss<NllLossGradOp>(getLoc(), input, getTarget(), getWeight(),
                               getReduction()),
      getGrad(), "NegativeLogLikelihoodLoss");
}

LogicalResult GatherGradOp::verify() {
  return checkForwardType(*this,
                          inferGatherType<GatherGradOp>(getLoc(), getOutput(),
                                                        getIndices(), getAxis()),
                          getGrad(), "Gather");
}

LogicalResult SliceGradOp::verify() {
  return checkForwardType(
      *this,
      inferSliceType<SliceGradOp>(getLoc(), getOutput(), getStarts(), getEnds(),
                                  getAxes(), getSteps()),
      getGrad(), "Slice");
}

#define GET_OP_CLASSES
#include "ampc/Dialect/AMPCOps.cpp.inc"
