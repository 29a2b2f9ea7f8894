//===- Gradients.cpp - the gradient rule of every differentiable ampc op --===//
//
// One function per op: GradientOpInterface::buildGradient (AMPCInterfaces.td)
// builds the adjoints of the operands it is asked for from the adjoints of
// the results, at the builder's insertion point (the backward half of
// @train_step). Ordinary ampc ops express most adjoints; the backward ops of
// AMPCGradOps.td express the rest. Each rule's comment says which forward
// values it keeps for the backward pass ("keeps"): those are the values that
// must stay alive from the forward to the backward.
//
// An adjoint has exactly the type of its value, so a rule computes in the
// dtype precision assignment chose for its op, and the constants it needs
// are made in that dtype. The adjoint of a cast is the reverse cast.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"

using namespace mlir;
using namespace ampc;

namespace {

RankedTensorType tensorType(Value v) {
  return cast<RankedTensorType>(v.getType());
}

Type elementOf(Value v) { return tensorType(v).getElementType(); }

/// The ops the rules combine, all built at the forward op's location.
class AdjointBuilder {
public:
  AdjointBuilder(OpBuilder &b, Operation *op) : b(b), loc(op->getLoc()) {}

  /// A zero-dimensional constant in `like`'s element type; broadcasting
  /// makes it a scalar operand of any binary op.
  Value scalar(double value, Value like) {
    Type element = elementOf(like);
    auto type = RankedTensorType::get({}, element);
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(type, b.getFloatAttr(element, value)));
  }

  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value neg(Value x) { return NegOp::create(b, loc, x); }
  Value scale(Value x, double factor) {
    return factor == 1.0 ? x : mul(x, scalar(factor, x));
  }

  /// `v` with the shape of `type` (its own element type kept).
  Value reshape(Value v, ArrayRef<int64_t> shape) {
    if (tensorType(v).getShape() == shape)
      return v;
    return ReshapeOp::create(b, loc, tensorType(v).clone(shape), v);
  }

  /// `v` in `element`, through a compiler-inserted cast when it differs.
  Value castTo(Value v, Type element) {
    if (elementOf(v) == element)
      return v;
    auto cast = CastOp::create(b, loc, tensorType(v).clone(element), v);
    cast->setAttr(kAutocastAttr, b.getUnitAttr());
    return cast;
  }

  Value reduceSum(Value v, ArrayRef<int64_t> axes, bool keepDims) {
    return ReduceSumOp::create(b, loc, v, axes, keepDims ? 1 : 0);
  }

  /// The adjoint of `operand` from the adjoint `grad` of a result it was
  /// broadcast into: summed over the dimensions broadcasting added or
  /// stretched, reshaped to the operand's shape, in the operand's dtype.
  Value sumTo(Value grad, Value operand) {
    RankedTensorType g = tensorType(grad), target = tensorType(operand);
    int64_t lead = g.getRank() - target.getRank();
    SmallVector<int64_t> axes;
    for (int64_t i = 0; i < g.getRank(); ++i)
      if (i < lead || (target.getDimSize(i - lead) == 1 && g.getDimSize(i) != 1))
        axes.push_back(i);
    Value sum = axes.empty() ? grad : reduceSum(grad, axes, /*keepDims=*/false);
    return castTo(reshape(sum, target.getShape()), target.getElementType());
  }

  /// The adjoint of a value that a reduction over `axes` (all dimensions
  /// when empty) collapsed: `grad` times `factor`, broadcast back to `input`.
  Value broadcastBack(Value grad, Value input, ArrayRef<int64_t> axes,
                      double factor) {
    RankedTensorType in = tensorType(input);
    SmallVector<int64_t> kept(in.getShape());
    for (int64_t i = 0; i < in.getRank(); ++i)
      if (axes.empty() || llvm::is_contained(axes, i))
        kept[i] = 1;
    Value scaled = scale(reshape(grad, kept), factor);
    if (in.getShape() == ArrayRef<int64_t>(kept))
      return scaled;
    return ExpandOp::create(b, loc, in, scaled);
  }

  /// `grad` where `mask` holds, 0 elsewhere (broadcast to both).
  Value select(Value mask, Value grad) {
    return WhereOp::create(b, loc, mask, grad, scalar(0.0, grad));
  }

  /// The product of the other factors of each element of `x` in its
  /// product, without dividing by zero: `isZero` = (x == 0), `zeros` the
  /// count of zeros among the factors and `nonZero` the product of the
  /// non-zero ones (both broadcast to x). p / x when there is no zero, p
  /// for the zero itself when there is one, 0 otherwise.
  Value productOfOthers(Value x, Value isZero, Value zeros, Value nonZero) {
    Value zero = scalar(0.0, zeros), one = scalar(1.0, zeros);
    return WhereOp::create(
        b, loc, isZero, select(EqualOp::create(b, loc, zeros, one), nonZero),
        select(EqualOp::create(b, loc, zeros, zero), div(nonZero, x)));
  }

  /// Softmax along `axis`, adjoint from the result y:
  /// dx = y * (dy - sum(dy * y, axis)).
  Value softmaxBackward(Value grad, Value y, int64_t axis) {
    Value dot = reduceSum(mul(grad, y), {axis}, /*keepDims=*/true);
    return mul(y, sub(grad, dot));
  }

  /// LogSoftmax along `axis`, adjoint from the result y = log p:
  /// dx = dy - exp(y) * sum(dy, axis).
  Value logSoftmaxBackward(Value grad, Value y, int64_t axis) {
    Value total = reduceSum(grad, {axis}, /*keepDims=*/true);
    return sub(grad, mul(ExpOp::create(b, loc, y), total));
  }

  /// Swaps the last two dimensions.
  Value transposeLastTwo(Value v) {
    int64_t rank = tensorType(v).getRank();
    SmallVector<int64_t> perm = llvm::to_vector(llvm::seq<int64_t>(0, rank));
    std::swap(perm[rank - 1], perm[rank - 2]);
    return TransposeOp::create(b, loc, v, perm);
  }

  Value gemm(Value x, Value y, double alpha, bool transX, bool transY) {
    return GemmOp::create(b, loc, x, y, Value(), Value(), APFloat(float(alpha)),
                          APFloat(1.0f), transX, transY)
        .getOutput();
  }

  OpBuilder &b;
  Location loc;
};

int64_t axisOf(Value v, int64_t axis) {
  return *normalizeAxis(axis, tensorType(v).getRank());
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

// keeps: nothing.
LogicalResult NegOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool>,
                                   MutableArrayRef<Value> dOperands) {
  dOperands[0] = AdjointBuilder(b, *this).neg(dResults[0]);
  return success();
}

// keeps: the result y; dx = dy * 0.5 / y.
LogicalResult SqrtOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                    ArrayRef<bool>,
                                    MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  dOperands[0] = ab.div(ab.scale(dResults[0], 0.5), getOutput());
  return success();
}

// keeps: the result y = 1/x; dx = -dy * y * y.
LogicalResult ReciprocalOp::buildGradient(OpBuilder &b,
                                          ArrayRef<Value> dResults,
                                          ArrayRef<bool>,
                                          MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value y = getOutput();
  dOperands[0] = ab.neg(ab.mul(dResults[0], ab.mul(y, y)));
  return success();
}

// keeps: the result y; dx = dy * y.
LogicalResult ExpOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool>,
                                   MutableArrayRef<Value> dOperands) {
  dOperands[0] = AdjointBuilder(b, *this).mul(dResults[0], getOutput());
  return success();
}

// keeps: the input x; dx = dy / x.
LogicalResult LogOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool>,
                                   MutableArrayRef<Value> dOperands) {
  dOperands[0] = AdjointBuilder(b, *this).div(dResults[0], getInput());
  return success();
}

// keeps: the input x; dx = dy * 2/sqrt(pi) * exp(-x*x).
LogicalResult ErfOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool>,
                                   MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value x = getInput();
  Value gauss = ExpOp::create(b, ab.loc, ab.neg(ab.mul(x, x)));
  constexpr double twoOverSqrtPi = 1.12837916709551257390;
  dOperands[0] = ab.mul(dResults[0], ab.scale(gauss, twoOverSqrtPi));
  return success();
}

// keeps: the result y (positive exactly where x is); relu_grad with alpha 0.
LogicalResult ReluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                    ArrayRef<bool>,
                                    MutableArrayRef<Value> dOperands) {
  dOperands[0] =
      ReluGradOp::create(b, getLoc(), dResults[0], getOutput(), APFloat(0.0f));
  return success();
}

// keeps: the input x; relu_grad with the op's alpha.
LogicalResult LeakyReluOp::buildGradient(OpBuilder &b,
                                         ArrayRef<Value> dResults,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dOperands) {
  dOperands[0] = ReluGradOp::create(b, getLoc(), dResults[0], getInput(),
                                    getAlphaAttr());
  return success();
}

// keeps: the result y; dx = dy * y * (1 - y).
LogicalResult SigmoidOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value y = getOutput();
  dOperands[0] =
      ab.mul(dResults[0], ab.mul(y, ab.sub(ab.scalar(1.0, y), y)));
  return success();
}

// keeps: the result y; dx = dy * (1 - y * y).
LogicalResult TanhOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                    ArrayRef<bool>,
                                    MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value y = getOutput();
  dOperands[0] =
      ab.mul(dResults[0], ab.sub(ab.scalar(1.0, y), ab.mul(y, y)));
  return success();
}

// keeps: nothing; dx = dy.
LogicalResult IdentityOp::buildGradient(OpBuilder &, ArrayRef<Value> dResults,
                                        ArrayRef<bool>,
                                        MutableArrayRef<Value> dOperands) {
  dOperands[0] = dResults[0];
  return success();
}

// keeps: the input x; gelu_grad with the op's approximation.
LogicalResult GeluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                    ArrayRef<bool>,
                                    MutableArrayRef<Value> dOperands) {
  dOperands[0] = GeluGradOp::create(b, getLoc(), dResults[0], getInput(),
                                    getApproximateAttr());
  return success();
}

// keeps: nothing; each operand gets dy summed to its shape.
LogicalResult AddOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool> wanted,
                                   MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  for (unsigned i = 0; i < 2; ++i)
    if (wanted[i])
      dOperands[i] = ab.sumTo(dResults[0], getOperand(i));
  return success();
}

// keeps: nothing; da = dy, db = -dy, summed to their shapes.
LogicalResult SubOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool> wanted,
                                   MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  if (wanted[0])
    dOperands[0] = ab.sumTo(dResults[0], getLhs());
  if (wanted[1])
    dOperands[1] = ab.neg(ab.sumTo(dResults[0], getRhs()));
  return success();
}

// keeps: each operand for the other's adjoint; da = dy * b, db = dy * a.
LogicalResult MulOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool> wanted,
                                   MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  for (unsigned i = 0; i < 2; ++i)
    if (wanted[i])
      dOperands[i] =
          ab.sumTo(ab.mul(dResults[0], getOperand(1 - i)), getOperand(i));
  return success();
}

// keeps: the divisor b, and the result y for b's adjoint;
// da = dy / b, db = -dy * y / b.
LogicalResult DivOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool> wanted,
                                   MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0], divisor = getRhs();
  if (wanted[0])
    dOperands[0] = ab.sumTo(ab.div(dy, divisor), getLhs());
  if (wanted[1])
    dOperands[1] =
        ab.neg(ab.sumTo(ab.div(ab.mul(dy, getOutput()), divisor), divisor));
  return success();
}

// keeps: base a and exponent e, and the result y for e's adjoint;
// da = dy * e * a^(e-1), de = dy * y * log(a), taken as 0 where a == 0 (the
// limit for the positive exponents models use). An integer exponent is
// cast to the base's dtype.
LogicalResult PowOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool> wanted,
                                   MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0], base = getLhs();
  Value exponent = ab.castTo(getRhs(), elementOf(base));
  if (wanted[0]) {
    Value lowered = PowOp::create(b, ab.loc, base,
                                  ab.sub(exponent, ab.scalar(1.0, exponent)));
    dOperands[0] = ab.sumTo(ab.mul(dy, ab.mul(exponent, lowered)), base);
  }
  if (wanted[1]) {
    Value zero = ab.scalar(0.0, base);
    Value atZero = EqualOp::create(b, ab.loc, base, zero);
    Value logTerm = ab.mul(getOutput(), LogOp::create(b, ab.loc, base));
    Value d = WhereOp::create(b, ab.loc, atZero, zero, logTerm);
    dOperands[1] = ab.sumTo(ab.mul(dy, d), getRhs());
  }
  return success();
}

// keeps: the condition; dx = dy where it holds, dy = dy where it does not.
LogicalResult WhereOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                     ArrayRef<bool> wanted,
                                     MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dz = dResults[0], zero = ab.scalar(0.0, dz);
  if (wanted[1])
    dOperands[1] = ab.sumTo(
        WhereOp::create(b, ab.loc, getCondition(), dz, zero), getX());
  if (wanted[2])
    dOperands[2] = ab.sumTo(
        WhereOp::create(b, ab.loc, getCondition(), zero, dz), getY());
  return success();
}

// keeps: nothing; the adjoint is cast back to the input's dtype (the
// reverse cast, marked ampc.autocast).
LogicalResult CastOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                    ArrayRef<bool>,
                                    MutableArrayRef<Value> dOperands) {
  dOperands[0] =
      AdjointBuilder(b, *this).castTo(dResults[0], elementOf(getInput()));
  return success();
}

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

// keeps: lhs (for rhs's adjoint) and rhs (for lhs's adjoint).
// In matrix form (a 1-D lhs as a row, a 1-D rhs as a column, dy with the
// removed dimension back): da = dy @ b^T, db = a^T @ dy, summed over the
// batch dimensions broadcasting added. Matrix operands use Gemm with
// transposition flags; a matrix rhs with a batched lhs (a linear layer on a
// sequence) folds the batch into the rows, so both stay one Gemm.
LogicalResult MatMulOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                      ArrayRef<bool> wanted,
                                      MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value lhs = getLhs(), rhs = getRhs(), dy = dResults[0];
  RankedTensorType lt = tensorType(lhs), rt = tensorType(rhs);
  bool vectorL = lt.getRank() == 1, vectorR = rt.getRank() == 1;
  int64_t k = lt.getShape().back();
  Value a = vectorL ? ab.reshape(lhs, {1, k}) : lhs;
  Value m = vectorR ? ab.reshape(rhs, {k, 1}) : rhs;
  RankedTensorType at = tensorType(a), mt = tensorType(m);
  ArrayRef<int64_t> yShape = tensorType(dy).getShape();
  SmallVector<int64_t> y2(yShape.drop_back(!vectorL + !vectorR));
  y2.push_back(at.getShape().drop_back().back());
  y2.push_back(mt.getShape().back());
  Value g = ab.reshape(dy, y2);

  Value da, dm;
  if (mt.getRank() == 2) {
    // Rows of every batch of `a` at once: [rows, k] x [k, n].
    int64_t rows = 1;
    for (int64_t d : at.getShape().drop_back())
      rows *= d;
    Value aFlat = ab.reshape(a, {rows, k});
    Value gFlat = ab.reshape(g, {rows, y2.back()});
    if (wanted[0])
      da = ab.reshape(ab.gemm(gFlat, m, 1.0, false, true), at.getShape());
    if (wanted[1])
      dm = ab.gemm(aFlat, gFlat, 1.0, true, false);
  } else {
    if (wanted[0])
      da = ab.sumTo(MatMulOp::create(b, ab.loc, g, ab.transposeLastTwo(m)), a);
    if (wanted[1])
      dm = ab.sumTo(MatMulOp::create(b, ab.loc, ab.transposeLastTwo(a), g), m);
  }
  if (da)
    dOperands[0] = ab.reshape(da, lt.getShape());
  if (dm)
    dOperands[1] = ab.reshape(dm, rt.getShape());
  return success();
}

// keeps: A (for B's adjoint) and B (for A's adjoint).
// Y = alpha * op(A) op(B) + beta * C, so
//   dA = alpha * dY op(B)^T   (transA = 0)   or  alpha * op(B) dY^T (transA = 1)
//   dB = alpha * op(A)^T dY   (transB = 0)   or  alpha * dY^T op(A) (transB = 1)
//   dC = beta * dY summed to C's shape,
// each one Gemm whose flags absorb the transpositions.
LogicalResult GemmOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                    ArrayRef<bool> wanted,
                                    MutableArrayRef<Value> dOperands) {
  if (getEpilogue() != GemmEpilogue::None)
    return emitOpError("has a fused epilogue and no gradient rule: "
                       "differentiate before ampc-fuse-epilogues");
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0], a = getA(), m = getB();
  double alpha = getAlpha().convertToDouble();
  bool transA = getTransA(), transB = getTransB();
  if (wanted[0])
    dOperands[0] = transA ? ab.gemm(m, dy, alpha, transB, true)
                          : ab.gemm(dy, m, alpha, false, !transB);
  if (wanted[1])
    dOperands[1] = transB ? ab.gemm(dy, a, alpha, true, transA)
                          : ab.gemm(a, dy, alpha, !transA, false);
  if (getC() && wanted[2])
    dOperands[2] =
        ab.scale(ab.sumTo(dy, getC()), getBeta().convertToDouble());
  return success();
}

// keeps: X (for W's adjoint) and W (for X's adjoint).
// dX = conv_backward_data(dY, W), dW = conv_backward_weight(X, dY) with the
// Conv's attributes; dB = dY summed over N and the spatial dimensions.
LogicalResult ConvOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                    ArrayRef<bool> wanted,
                                    MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0];
  if (wanted[0])
    dOperands[0] = ConvBackwardDataOp::create(
        b, ab.loc, getInput().getType(), dy, getWeight(), getStridesAttr(),
        getPadsAttr(), getDilationsAttr(), getGroupAttr(),
        getChannelsLastAttr());
  if (wanted[1])
    dOperands[1] = ConvBackwardWeightOp::create(
        b, ab.loc, getWeight().getType(), getInput(), dy, getStridesAttr(),
        getPadsAttr(), getDilationsAttr(), getGroupAttr(),
        getChannelsLastAttr());
  if (getBias() && wanted[2]) {
    // Every axis but the channels' (1, or the last with channels_last).
    int64_t rank = tensorType(dy).getRank();
    int64_t channelAxis = getChannelsLast() ? rank - 1 : 1;
    SmallVector<int64_t> axes;
    for (int64_t d = 0; d < rank; ++d)
      if (d != channelAxis)
        axes.push_back(d);
    dOperands[2] = ab.castTo(ab.reduceSum(dy, axes, /*keepDims=*/false),
                             elementOf(getBias()));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation and activations over an axis
//===----------------------------------------------------------------------===//

// keeps: the result y; dx = y * (dy - sum(dy * y, axis)).
LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dOperands) {
  Value y = getOutput();
  dOperands[0] = AdjointBuilder(b, *this).softmaxBackward(
      dResults[0], y, axisOf(y, getAxis()));
  return success();
}

// keeps: the result y; dx = dy - exp(y) * sum(dy, axis).
LogicalResult LogSoftmaxOp::buildGradient(OpBuilder &b,
                                          ArrayRef<Value> dResults,
                                          ArrayRef<bool>,
                                          MutableArrayRef<Value> dOperands) {
  Value y = getOutput();
  dOperands[0] = AdjointBuilder(b, *this).logSoftmaxBackward(
      dResults[0], y, axisOf(y, getAxis()));
  return success();
}

// Q, K and V carry gradients; the bias is a mask or a constant
// (ampc-fuse-attention fuses no bias a gradient must flow through).
bool AttentionOp::isDifferentiableOperand(unsigned index) { return index < 3; }

// LSE is a saved statistic, not differentiated.
bool AttentionOp::isDifferentiableResult(unsigned index) { return index == 0; }

// keeps: Q, K, V, the bias, O and LSE. dQ, dK, dV = attention_grad(dO, ...):
// one op, since P is recomputed from LSE rather than kept (and dropout's
// mask from its seed and the step).
LogicalResult AttentionOp::buildGradient(OpBuilder &b,
                                         ArrayRef<Value> dResults,
                                         ArrayRef<bool> wanted,
                                         MutableArrayRef<Value> dOperands) {
  if (getPackedQkv())
    return emitOpError("with 'packed_qkv' (kernel level, after autodiff) has "
                       "no gradient rule");
  auto grad = AttentionGradOp::create(
      b, getLoc(), dResults[0], getQ(), getK(), getV(), getO(), getLse(),
      getBias(), getScaleAttr(), getCausalAttr(), getQPermAttr(),
      getKPermAttr(), getVPermAttr(), getOPermAttr(), getDropoutRatioAttr(),
      getDropoutSeedAttr(), getPackedQkvAttr());
  for (unsigned i = 0; i < 3; ++i)
    if (wanted[i])
      dOperands[i] = grad->getResult(i);
  return success();
}

// Mean and InvStdDev are saved statistics, not differentiated.
bool LayerNormalizationOp::isDifferentiableResult(unsigned index) {
  return index == 0;
}

// keeps: X, Scale and the Mean and InvStdDev results.
// dX = layer_norm_grad(dY, X, Scale, Mean, InvStdDev);
// dScale = dY * x̂ and dB = dY, summed over the rows, x̂ = (X - Mean) * InvStdDev.
LogicalResult LayerNormalizationOp::buildGradient(
    OpBuilder &b, ArrayRef<Value> dResults, ArrayRef<bool> wanted,
    MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0], x = getInput();
  if (wanted[0])
    dOperands[0] =
        LayerNormGradOp::create(b, ab.loc, dy, x, getScale(), getMean(),
                                getInvStdDev(), getAxisAttr(),
                                b.getI64IntegerAttr(0))
            .getOutput();
  if (wanted[1]) {
    Type element = elementOf(x);
    Value normalized =
        ab.mul(ab.sub(x, ab.castTo(getMean(), element)),
               ab.castTo(getInvStdDev(), element));
    dOperands[1] = ab.sumTo(ab.mul(dy, normalized), getScale());
  }
  if (getBias() && wanted[2])
    dOperands[2] = ab.sumTo(dy, getBias());
  return success();
}

// The running statistics select nothing a gradient can flow through: in
// training mode Y does not depend on them, in inference mode they are
// buffers, not parameters (as in PyTorch).
bool BatchNormalizationOp::isDifferentiableOperand(unsigned index) {
  return index < 3;
}
bool BatchNormalizationOp::isDifferentiableResult(unsigned index) {
  return index == 0;
}

// keeps: X, scale and the statistics the forward normalised with, which
// the forward saves (its `saved` results): a forward without them is
// replaced here by one with `saved_statistics` (the old one, now unused,
// goes with autodiff's dead-op sweep). One batch_norm_grad gives dX,
// dScale and dB.
LogicalResult BatchNormalizationOp::buildGradient(
    OpBuilder &b, ArrayRef<Value> dResults, ArrayRef<bool> wanted,
    MutableArrayRef<Value> dOperands) {
  BatchNormalizationOp forward = *this;
  if (!getSavedStatistics()) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(*this);
    SmallVector<NamedAttribute> attrs((*this)->getAttrs());
    attrs.push_back(
        b.getNamedAttr(getSavedStatisticsAttrName(), b.getUnitAttr()));
    forward = BatchNormalizationOp::create(b, getLoc(), getOperands(), attrs);
    for (unsigned i = 0; i < getNumResults(); ++i)
      getResult(i).replaceAllUsesWith(forward->getResult(i));
  }
  AdjointBuilder ab(b, *this);
  auto grad = BatchNormGradOp::create(
      b, ab.loc, dResults[0], getInput(), getScale(), forward.getSavedMean(),
      forward.getSavedInvStdDev(), /*addend=*/Value(), /*relu_output=*/Value(),
      b.getI64IntegerAttr(getTrainingMode()), /*keep_grad=*/UnitAttr(),
      getChannelsLastAttr());
  if (wanted[0])
    dOperands[0] = grad.getGradInput();
  if (wanted[1])
    dOperands[1] = grad.getGradScale();
  if (wanted[2])
    dOperands[2] = ab.castTo(grad.getGradBias(), elementOf(getBias()));
  return success();
}

// keeps: the mask result; dx = dy * mask / (1 - ratio) in training mode,
// dy otherwise.
LogicalResult DropoutOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  double ratio = getRatio().convertToDouble();
  Value dy = dResults[0];
  if (!getTrainingMode() || ratio == 0.0) {
    dOperands[0] = dy;
    return success();
  }
  dOperands[0] = ab.select(getMask(), ab.scale(dy, 1.0 / (1.0 - ratio)));
  return success();
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

namespace {
/// The adjoint of an op that only changes its input's shape (Reshape,
/// Flatten, Squeeze, Unsqueeze): dy reshaped to x's shape. Keeps nothing.
template <typename Op>
LogicalResult reshapeGradient(Op op, OpBuilder &b, ArrayRef<Value> dResults,
                              MutableArrayRef<Value> dOperands) {
  dOperands[0] = AdjointBuilder(b, op).reshape(
      dResults[0], tensorType(op.getInput()).getShape());
  return success();
}
} // namespace

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dOperands) {
  return reshapeGradient(*this, b, dResults, dOperands);
}

LogicalResult FlattenOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dOperands) {
  return reshapeGradient(*this, b, dResults, dOperands);
}

LogicalResult SqueezeOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dOperands) {
  return reshapeGradient(*this, b, dResults, dOperands);
}

LogicalResult UnsqueezeOp::buildGradient(OpBuilder &b,
                                         ArrayRef<Value> dResults,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dOperands) {
  return reshapeGradient(*this, b, dResults, dOperands);
}

// keeps: nothing; dx = dy summed over the expanded dimensions.
LogicalResult ExpandOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                      ArrayRef<bool>,
                                      MutableArrayRef<Value> dOperands) {
  dOperands[0] = AdjointBuilder(b, *this).sumTo(dResults[0], getInput());
  return success();
}

// keeps: nothing; dx = dy transposed by the inverse permutation.
LogicalResult TransposeOp::buildGradient(OpBuilder &b,
                                         ArrayRef<Value> dResults,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dOperands) {
  ArrayRef<int64_t> perm = getPerm();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = static_cast<int64_t>(i);
  dOperands[0] = TransposeOp::create(b, getLoc(), dResults[0], inverse);
  return success();
}

// keeps: nothing; each input's adjoint is its slice of dy along the axis.
LogicalResult ConcatOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                      ArrayRef<bool> wanted,
                                      MutableArrayRef<Value> dOperands) {
  Value dy = dResults[0];
  int64_t axis = axisOf(dy, getAxis()), offset = 0;
  for (auto [i, input] : llvm::enumerate(getInputs())) {
    int64_t size = tensorType(input).getDimSize(axis);
    if (wanted[i])
      dOperands[i] = SliceOp::create(b, getLoc(), dy, {offset}, {offset + size},
                                     {axis}, {1});
    offset += size;
  }
  return success();
}

// keeps: nothing; slice_grad places dy back into zeros of x's shape.
LogicalResult SliceOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                     ArrayRef<bool>,
                                     MutableArrayRef<Value> dOperands) {
  dOperands[0] = SliceGradOp::create(b, getLoc(), getInput().getType(),
                                     dResults[0], getStartsAttr(),
                                     getEndsAttr(), getAxesAttr(),
                                     getStepsAttr());
  return success();
}

// keeps: the indices; gather_grad scatter-adds dy into zeros of the table's
// shape.
LogicalResult GatherOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                      ArrayRef<bool>,
                                      MutableArrayRef<Value> dOperands) {
  dOperands[0] = GatherGradOp::create(b, getLoc(), getData().getType(),
                                      dResults[0], getIndices(), getAxisAttr());
  return success();
}

// keeps: the indices. The updates' adjoint is dy gathered at the indices;
// the data's is dy, with the written positions zeroed when the updates
// replaced them (dy scattered with zeros), as torch.scatter's backward.
// Under "none" only the update that won its position (the last to name it)
// gets dy there: the winners are found by scattering each index's ordinal
// and gathering it back (torch passes dy to every duplicate, which finite
// differences do not see). max and min: dy goes to the data element or
// updates equal to the output at their position, split evenly between ties
// (torch.scatter_reduce's amax and amin). mul: the data's adjoint is dy
// times the product of the updates at its position; an update's is dy
// times the product of the data and the other updates there, written
// without dividing by zero as ReduceProd's rule is.
LogicalResult ScatterOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                       ArrayRef<bool> wanted,
                                       MutableArrayRef<Value> dOperands) {
  StringRef reduction = getReduction();
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0];
  Value indices = getIndices(), updates = getUpdates(), data = getData();
  IntegerAttr axisAttr = getAxisAttr();
  auto gather = [&](Value table) {
    return GatherOp::create(b, ab.loc, table, indices, axisAttr).getResult();
  };
  auto scatter = [&](Value into, Value values, StringRef how) {
    return ScatterOp::create(b, ab.loc, into, indices, values, axisAttr,
                             b.getStringAttr(how))
        .getResult();
  };
  auto filled = [&](Value like, double value) {
    return ExpandOp::create(b, ab.loc, like.getType(), ab.scalar(value, like))
        .getResult();
  };
  if (reduction == "max" || reduction == "min") {
    Type element = elementOf(dy);
    Value out = getResult();
    Value atData = EqualOp::create(b, ab.loc, data, out);
    Value atUpdate = EqualOp::create(b, ab.loc, updates, gather(out));
    Value ties = ab.add(
        ab.castTo(atData, element),
        scatter(filled(dy, 0.0), ab.castTo(atUpdate, element), "add"));
    Value share = ab.div(dy, ties);
    if (wanted[0])
      dOperands[0] = ab.select(atData, share);
    if (wanted[2])
      dOperands[2] = ab.select(atUpdate, gather(share));
    return success();
  }
  if (reduction == "mul") {
    if (wanted[0])
      dOperands[0] = ab.mul(dy, scatter(filled(data, 1.0), updates, "mul"));
    if (!wanted[2])
      return success();
    Value isZero =
        EqualOp::create(b, ab.loc, updates, ab.scalar(0.0, updates));
    Value zeros = gather(scatter(filled(data, 0.0),
                                 ab.castTo(isZero, elementOf(data)), "add"));
    Value nonZero = gather(scatter(
        data,
        WhereOp::create(b, ab.loc, isZero, ab.scalar(1.0, updates), updates),
        "mul"));
    dOperands[2] = ab.mul(gather(dy),
                          ab.productOfOthers(updates, isZero, zeros, nonZero));
    return success();
  }
  if (wanted[0])
    dOperands[0] =
        reduction == "add" ? dy : scatter(dy, filled(updates, 0.0), "none");
  if (!wanted[2])
    return success();
  Value gathered = gather(dy);
  if (reduction == "add") {
    dOperands[2] = gathered;
    return success();
  }
  RankedTensorType indexType = tensorType(indices);
  RankedTensorType dataType = tensorType(data);
  int64_t axis = axisOf(data, getAxis());
  int64_t count = indexType.getNumElements();
  auto i64 = b.getI64Type();
  SmallVector<int64_t> ordinals(count);
  for (int64_t i = 0; i < count; ++i)
    ordinals[i] = i;
  auto ordinalType = RankedTensorType::get(indexType.getShape(), i64);
  Value ordinal = ConstantOp::create(
      b, ab.loc, DenseElementsAttr::get(ordinalType, ArrayRef(ordinals)));
  auto slotsType = RankedTensorType::get({dataType.getDimSize(axis)}, i64);
  Value none = ConstantOp::create(
      b, ab.loc, DenseElementsAttr::get(slotsType, b.getI64IntegerAttr(-1)));
  Value winners = ScatterOp::create(b, ab.loc, none, indices, ordinal,
                                    b.getI64IntegerAttr(0), getReductionAttr());
  Value won = EqualOp::create(
      b, ab.loc,
      GatherOp::create(b, ab.loc, winners, indices, b.getI64IntegerAttr(0)),
      ordinal);
  SmallVector<int64_t> spread(axis, 1);
  llvm::append_range(spread, indexType.getShape());
  spread.append(dataType.getRank() - axis - 1, 1);
  dOperands[2] = ab.select(ab.reshape(won, spread), gathered);
  return success();
}

//===----------------------------------------------------------------------===//
// Reductions and pooling
//===----------------------------------------------------------------------===//

// keeps: nothing; dx = dy broadcast back over the reduced axes.
LogicalResult ReduceSumOp::buildGradient(OpBuilder &b,
                                         ArrayRef<Value> dResults,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dOperands) {
  SmallVector<int64_t> axes;
  for (int64_t a : getAxes())
    axes.push_back(axisOf(getInput(), a));
  dOperands[0] = AdjointBuilder(b, *this).broadcastBack(dResults[0],
                                                        getInput(), axes, 1.0);
  return success();
}

// keeps: nothing; dx = dy / (number of reduced elements), broadcast back.
LogicalResult ReduceMeanOp::buildGradient(OpBuilder &b,
                                          ArrayRef<Value> dResults,
                                          ArrayRef<bool>,
                                          MutableArrayRef<Value> dOperands) {
  RankedTensorType in = tensorType(getInput());
  SmallVector<int64_t> axes;
  for (int64_t a : getAxes())
    axes.push_back(axisOf(getInput(), a));
  int64_t count = 1;
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (axes.empty() || llvm::is_contained(axes, d))
      count *= in.getDimSize(d);
  dOperands[0] = AdjointBuilder(b, *this).broadcastBack(
      dResults[0], getInput(), axes, 1.0 / static_cast<double>(count));
  return success();
}

/// The axes a reduction of `x` over `axes` reduces, normalized; every axis
/// when `axes` is empty (ONNX's reduce-all).
static SmallVector<int64_t> reducedAxes(Value x, ArrayRef<int64_t> axes) {
  SmallVector<int64_t> result;
  for (int64_t a : axes)
    result.push_back(axisOf(x, a));
  if (result.empty())
    result = llvm::to_vector(llvm::seq<int64_t>(0, tensorType(x).getRank()));
  return result;
}

// keeps: the input x and the result y. As PyTorch's amax, dy is shared
// evenly among the elements equal to the maximum:
// dx = (x == y) ? dy / count(x == y) : 0 within each reduced group.
LogicalResult ReduceMaxOp::buildGradient(OpBuilder &b,
                                         ArrayRef<Value> dResults,
                                         ArrayRef<bool>,
                                         MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value x = getInput();
  RankedTensorType in = tensorType(x);
  SmallVector<int64_t> axes = reducedAxes(x, getAxes());
  SmallVector<int64_t> kept(in.getShape());
  for (int64_t a : axes)
    kept[a] = 1;
  Value isMax = EqualOp::create(b, ab.loc, x, ab.reshape(getOutput(), kept));
  Value count = ab.reduceSum(ab.castTo(isMax, in.getElementType()), axes,
                             /*keepDims=*/true);
  Value share = ab.div(ab.reshape(dResults[0], kept), count);
  dOperands[0] = ab.select(isMax, share);
  return success();
}

// keeps: the input x. dx = dy * (the product of the other elements of x's
// group), written without dividing by zero: with z zeros in a group and p
// the product of its non-zero elements, an element's factor is p / x when
// z = 0; p for the zero itself when z = 1; 0 otherwise (torch.prod).
LogicalResult ReduceProdOp::buildGradient(OpBuilder &b,
                                          ArrayRef<Value> dResults,
                                          ArrayRef<bool>,
                                          MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value x = getInput();
  RankedTensorType in = tensorType(x);
  SmallVector<int64_t> axes = reducedAxes(x, getAxes());
  Value zero = ab.scalar(0.0, x), one = ab.scalar(1.0, x);
  Value isZero = EqualOp::create(b, ab.loc, x, zero);
  Value zeros = ab.reduceSum(ab.castTo(isZero, in.getElementType()), axes,
                             /*keepDims=*/true);
  Value nonZero = ReduceProdOp::create(
      b, ab.loc, WhereOp::create(b, ab.loc, isZero, one, x), axes, 1);
  dOperands[0] = ab.mul(ab.broadcastBack(dResults[0], x, axes, 1.0),
                        ab.productOfOthers(x, isZero, zeros, nonZero));
  return success();
}

// keeps: the Indices result; max_pool_grad routes dy to each argmax.
LogicalResult MaxPoolOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                       ArrayRef<bool>,
                                       MutableArrayRef<Value> dOperands) {
  dOperands[0] = MaxPoolGradOp::create(
      b, getLoc(), getInput().getType(), dResults[0], getIndices(),
      getKernelShapeAttr(), getStridesAttr(), getPadsAttr(), getDilationsAttr(),
      getCeilModeAttr(), getStorageOrderAttr(), getChannelsLastAttr());
  return success();
}

// keeps: nothing; average_pool_grad spreads dy over each window.
LogicalResult AveragePoolOp::buildGradient(OpBuilder &b,
                                           ArrayRef<Value> dResults,
                                           ArrayRef<bool>,
                                           MutableArrayRef<Value> dOperands) {
  dOperands[0] = AveragePoolGradOp::create(
      b, getLoc(), getInput().getType(), dResults[0], getKernelShapeAttr(),
      getStridesAttr(), getPadsAttr(), getDilationsAttr(), getCeilModeAttr(),
      getCountIncludePadAttr(), getChannelsLastAttr());
  return success();
}

// keeps: nothing; dx = dy / (spatial size), broadcast over each plane.
LogicalResult GlobalAveragePoolOp::buildGradient(
    OpBuilder &b, ArrayRef<Value> dResults, ArrayRef<bool>,
    MutableArrayRef<Value> dOperands) {
  RankedTensorType in = tensorType(getInput());
  SmallVector<int64_t> spatial =
      llvm::to_vector(llvm::seq<int64_t>(2, in.getRank()));
  int64_t size = 1;
  for (int64_t d : spatial)
    size *= in.getDimSize(d);
  dOperands[0] = AdjointBuilder(b, *this).broadcastBack(
      dResults[0], getInput(), spatial, 1.0 / static_cast<double>(size));
  return success();
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

// Labels are integers; class weights are constants to autodiff.
bool SoftmaxCrossEntropyLossOp::isDifferentiableOperand(unsigned index) {
  return index == 0;
}

// keeps: the log_prob result, the labels and the class weights.
// The loss is NegativeLogLikelihoodLoss of LogSoftmax(scores) along axis 1:
// d(log_prob) = nll_loss_grad(dLoss) (plus log_prob's own adjoint when it is
// used), then LogSoftmax's adjoint from log_prob.
LogicalResult SoftmaxCrossEntropyLossOp::buildGradient(
    OpBuilder &b, ArrayRef<Value> dResults, ArrayRef<bool>,
    MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value logProb = getLogProb(), dLogProb = dResults[1];
  if (Value dLoss = dResults[0]) {
    Value weights = getWeights() ? ab.castTo(getWeights(), elementOf(dLoss))
                                 : Value();
    // Only the loss is differentiated (the usual case): nll_loss_grad with
    // log_prob is the whole adjoint, one kernel instead of the NLL
    // gradient, its row sums and LogSoftmax's adjoint.
    if (!dLogProb && elementOf(dLoss) == elementOf(logProb)) {
      dOperands[0] = NllLossGradOp::create(
          b, ab.loc, logProb.getType(), dLoss, getLabels(), weights, logProb,
          getReductionAttr(), getIgnoreIndexAttr());
      return success();
    }
    Value fromLoss = NllLossGradOp::create(
        b, ab.loc, logProb.getType(), dLoss, getLabels(), weights, Value(),
        getReductionAttr(), getIgnoreIndexAttr());
    dLogProb = dLogProb ? ab.add(dLogProb, fromLoss) : fromLoss;
  }
  dOperands[0] = ab.logSoftmaxBackward(dLogProb, logProb, 1);
  return success();
}

// Targets are integers; class weights are constants to autodiff.
bool NegativeLogLikelihoodLossOp::isDifferentiableOperand(unsigned index) {
  return index == 0;
}

// keeps: the target and the class weights; nll_loss_grad.
LogicalResult NegativeLogLikelihoodLossOp::buildGradient(
    OpBuilder &b, ArrayRef<Value> dResults, ArrayRef<bool>,
    MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dLoss = dResults[0];
  Value weight =
      getWeight() ? ab.castTo(getWeight(), elementOf(dLoss)) : Value();
  dOperands[0] = NllLossGradOp::create(b, ab.loc, getInput().getType(), dLoss,
                                       getTarget(), weight, Value(),
                                       getReductionAttr(), getIgnoreIndexAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// The elementwise ops of issue 18 (AMPCElementwiseOps.td)
//===----------------------------------------------------------------------===//

namespace {
/// dx = dy * f'(x) for a unary op, f' built by `derivative` from the
/// builder, the input x and the result y.
template <typename Op, typename Derivative>
LogicalResult unaryGradient(Op op, OpBuilder &b, ArrayRef<Value> dResults,
                            MutableArrayRef<Value> dOperands,
                            Derivative derivative) {
  AdjointBuilder ab(b, op);
  dOperands[0] =
      ab.mul(dResults[0], derivative(ab, op.getInput(), op.getOutput()));
  return success();
}

/// 1 / sqrt(v).
Value inverseSqrt(AdjointBuilder &ab, Value v) {
  return ab.div(ab.scalar(1.0, v), SqrtOp::create(ab.b, ab.loc, v));
}
} // namespace

#define AMPC_UNARY_GRADIENT(OP, ...)                                           \
  LogicalResult OP::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,      \
                                  ArrayRef<bool>,                              \
                                  MutableArrayRef<Value> dOperands) {          \
    return unaryGradient(*this, b, dResults, dOperands,                        \
                         [&](AdjointBuilder &ab, Value x, Value y) -> Value {  \
                           (void)x, (void)y;                                   \
                           __VA_ARGS__;                                        \
                         });                                                   \
  }
// keeps: x; dx = dy * sign(x).
AMPC_UNARY_GRADIENT(AbsOp, return SignOp::create(b, ab.loc, x))
// keeps: x; dx = dy * cos(x).
AMPC_UNARY_GRADIENT(SinOp, return CosOp::create(b, ab.loc, x))
// keeps: x; dx = -dy * sin(x).
AMPC_UNARY_GRADIENT(CosOp, return ab.neg(SinOp::create(b, ab.loc, x)))
// keeps: y; dx = dy * (1 + y^2).
AMPC_UNARY_GRADIENT(TanOp, return ab.add(ab.scalar(1.0, y), ab.mul(y, y)))
// keeps: x; dx = dy / sqrt(1 - x^2).
AMPC_UNARY_GRADIENT(AsinOp,
                    return inverseSqrt(ab, ab.sub(ab.scalar(1.0, x),
                                                  ab.mul(x, x))))
// keeps: x; dx = -dy / sqrt(1 - x^2).
AMPC_UNARY_GRADIENT(AcosOp,
                    return ab.neg(inverseSqrt(
                        ab, ab.sub(ab.scalar(1.0, x), ab.mul(x, x)))))
// keeps: x; dx = dy / (1 + x^2).
AMPC_UNARY_GRADIENT(AtanOp,
                    return ab.div(ab.scalar(1.0, x),
                                  ab.add(ab.scalar(1.0, x), ab.mul(x, x))))
// keeps: x; dx = dy * cosh(x).
AMPC_UNARY_GRADIENT(SinhOp, return CoshOp::create(b, ab.loc, x))
// keeps: x; dx = dy * sinh(x).
AMPC_UNARY_GRADIENT(CoshOp, return SinhOp::create(b, ab.loc, x))
// keeps: x; dx = dy / sqrt(x^2 + 1).
AMPC_UNARY_GRADIENT(AsinhOp,
                    return inverseSqrt(ab, ab.add(ab.mul(x, x),
                                                  ab.scalar(1.0, x))))
// keeps: x; dx = dy / sqrt(x^2 - 1).
AMPC_UNARY_GRADIENT(AcoshOp,
                    return inverseSqrt(ab, ab.sub(ab.mul(x, x),
                                                  ab.scalar(1.0, x))))
// keeps: x; dx = dy / (1 - x^2).
AMPC_UNARY_GRADIENT(AtanhOp,
                    return ab.div(ab.scalar(1.0, x),
                                  ab.sub(ab.scalar(1.0, x), ab.mul(x, x))))
// keeps: x; dx = dy * sigmoid(x).
AMPC_UNARY_GRADIENT(SoftplusOp, return SigmoidOp::create(b, ab.loc, x))
// keeps: x; dx = dy / (1 + |x|)^2.
AMPC_UNARY_GRADIENT(SoftsignOp, {
  Value d = ab.add(ab.scalar(1.0, x), AbsOp::create(b, ab.loc, x));
  return ab.div(ab.scalar(1.0, x), ab.mul(d, d));
})
// keeps: x; with t = tanh(softplus(x)): dx = dy * (t + x sigmoid(x) (1 - t^2)).
AMPC_UNARY_GRADIENT(MishOp, {
  Value t = TanhOp::create(b, ab.loc, SoftplusOp::create(b, ab.loc, x));
  Value s = SigmoidOp::create(b, ab.loc, x);
  return ab.add(t, ab.mul(ab.mul(x, s),
                          ab.sub(ab.scalar(1.0, x), ab.mul(t, t))));
})
// keeps: x; dx = dy * (0 below -3, x / 3 + 1/2 up to 3, 1 above), as
// torch's hardswish_backward.
AMPC_UNARY_GRADIENT(HardSwishOp, {
  Value zero = ab.scalar(0.0, x), one = ab.scalar(1.0, x);
  Value low = LessOp::create(b, ab.loc, x, ab.scalar(-3.0, x));
  Value mid = LessOrEqualOp::create(b, ab.loc, x, ab.scalar(3.0, x));
  Value slope = ab.add(ab.scale(x, 1.0 / 3.0), ab.scalar(0.5, x));
  return WhereOp::create(b, ab.loc, low, zero,
                         WhereOp::create(b, ab.loc, mid, slope, one));
})
// keeps: x and y; dx = dy where x > 0, dy * (y + alpha) elsewhere.
AMPC_UNARY_GRADIENT(EluOp, {
  Value positive = GreaterOp::create(b, ab.loc, x, ab.scalar(0.0, x));
  double alpha = getAlpha().convertToDouble();
  return WhereOp::create(b, ab.loc, positive, ab.scalar(1.0, x),
                         ab.add(y, ab.scalar(alpha, y)));
})
// keeps: x and y; dx = dy where x > 0, dy * (y / alpha + 1) elsewhere.
AMPC_UNARY_GRADIENT(CeluOp, {
  Value positive = GreaterOp::create(b, ab.loc, x, ab.scalar(0.0, x));
  double alpha = getAlpha().convertToDouble();
  return WhereOp::create(b, ab.loc, positive, ab.scalar(1.0, x),
                         ab.add(ab.scale(y, 1.0 / alpha), ab.scalar(1.0, y)));
})
// keeps: x and y; dx = dy * gamma where x > 0, dy * (y + gamma alpha)
// elsewhere.
AMPC_UNARY_GRADIENT(SeluOp, {
  Value positive = GreaterOp::create(b, ab.loc, x, ab.scalar(0.0, x));
  double alpha = getAlpha().convertToDouble(),
         gamma = getGamma().convertToDouble();
  return WhereOp::create(b, ab.loc, positive, ab.scalar(gamma, x),
                         ab.add(y, ab.scalar(gamma * alpha, y)));
})
// keeps: x; dx = dy * alpha where 0 < alpha x + beta < 1, else 0.
AMPC_UNARY_GRADIENT(HardSigmoidOp, {
  double alpha = getAlpha().convertToDouble(),
         beta = getBeta().convertToDouble();
  Value v = ab.add(ab.scale(x, alpha), ab.scalar(beta, x));
  Value inside =
      AndOp::create(b, ab.loc, GreaterOp::create(b, ab.loc, v, ab.scalar(0.0, v)),
                    LessOp::create(b, ab.loc, v, ab.scalar(1.0, v)));
  return WhereOp::create(b, ab.loc, inside, ab.scalar(alpha, x),
                         ab.scalar(0.0, x));
})
// keeps: x; dx = dy where x > alpha, else 0.
AMPC_UNARY_GRADIENT(ThresholdedReluOp, {
  Value above = GreaterOp::create(
      b, ab.loc, x, ab.scalar(getAlpha().convertToDouble(), x));
  return WhereOp::create(b, ab.loc, above, ab.scalar(1.0, x),
                         ab.scalar(0.0, x));
})
// keeps: x; dx = dy where x < -lambd or x > lambd, else 0.
AMPC_UNARY_GRADIENT(ShrinkOp, {
  double lambd = getLambd().convertToDouble();
  Value outside =
      OrOp::create(b, ab.loc, LessOp::create(b, ab.loc, x, ab.scalar(-lambd, x)),
                   GreaterOp::create(b, ab.loc, x, ab.scalar(lambd, x)));
  return WhereOp::create(b, ab.loc, outside, ab.scalar(1.0, x),
                         ab.scalar(0.0, x));
})
#undef AMPC_UNARY_GRADIENT

// keeps: x and the slope; dx = dy (x >= 0) or dy * slope, dslope = dy * x
// where x < 0, each summed to its operand's shape.
LogicalResult PReluOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                     ArrayRef<bool> wanted,
                                     MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0], x = getLhs(), slope = getRhs();
  Value negative = LessOp::create(b, ab.loc, x, ab.scalar(0.0, x));
  if (wanted[0])
    dOperands[0] = ab.sumTo(
        WhereOp::create(b, ab.loc, negative, ab.mul(dy, slope), dy), x);
  if (wanted[1])
    dOperands[1] = ab.sumTo(ab.select(negative, ab.mul(dy, x)), slope);
  return success();
}

namespace {
/// Max and Min: the adjoint goes to the operand that won (`wins(a, b)`),
/// half to each on a tie, as torch's maximum/minimum backward.
template <typename Op, typename Wins>
LogicalResult extremumGradient(Op op, OpBuilder &b, ArrayRef<Value> dResults,
                               ArrayRef<bool> wanted,
                               MutableArrayRef<Value> dOperands, Wins wins) {
  AdjointBuilder ab(b, op);
  Value dy = dResults[0], lhs = op.getLhs(), rhs = op.getRhs();
  Value tie = EqualOp::create(b, ab.loc, lhs, rhs);
  Value half = ab.select(tie, ab.scale(dy, 0.5));
  if (wanted[0])
    dOperands[0] = ab.sumTo(
        WhereOp::create(b, ab.loc, wins(lhs, rhs), dy, half), lhs);
  if (wanted[1])
    dOperands[1] = ab.sumTo(
        WhereOp::create(b, ab.loc, wins(rhs, lhs), dy, half), rhs);
  return success();
}
} // namespace

// keeps: both operands.
LogicalResult MaxOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool> wanted,
                                   MutableArrayRef<Value> dOperands) {
  return extremumGradient(*this, b, dResults, wanted, dOperands,
                          [&](Value p, Value q) -> Value {
                            return GreaterOp::create(b, getLoc(), p, q);
                          });
}

// keeps: both operands.
LogicalResult MinOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool> wanted,
                                   MutableArrayRef<Value> dOperands) {
  return extremumGradient(*this, b, dResults, wanted, dOperands,
                          [&](Value p, Value q) -> Value {
                            return LessOp::create(b, getLoc(), p, q);
                          });
}

// keeps: a, b and y (fmod 1; integers have no adjoint): y = a - trunc(a/b)
// b, so da = dy and db = -dy * trunc(a/b) = -dy * (a - y) / b.
LogicalResult ModOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                   ArrayRef<bool> wanted,
                                   MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0], lhs = getLhs(), rhs = getRhs();
  if (wanted[0])
    dOperands[0] = ab.sumTo(dy, lhs);
  if (wanted[1])
    dOperands[1] = ab.sumTo(
        ab.neg(ab.mul(dy, ab.div(ab.sub(lhs, getOutput()), rhs))), rhs);
  return success();
}

// keeps: x and the bounds; dx = dy where min <= x <= max (torch.clamp),
// dmin = dy where x < min, dmax = dy where x > max.
LogicalResult ClipOp::buildGradient(OpBuilder &b, ArrayRef<Value> dResults,
                                    ArrayRef<bool> wanted,
                                    MutableArrayRef<Value> dOperands) {
  AdjointBuilder ab(b, *this);
  Value dy = dResults[0], x = getInput(), lo = getMin(), hi = getMax();
  Value below = LessOp::create(b, ab.loc, x, lo);
  Value above = GreaterOp::create(b, ab.loc, x, hi);
  if (wanted[0]) {
    Value inside =
        AndOp::create(b, ab.loc, GreaterOrEqualOp::create(b, ab.loc, x, lo),
                      LessOrEqualOp::create(b, ab.loc, x, hi));
    dOperands[0] = ab.sumTo(ab.select(inside, dy), x);
  }
  if (wanted[1])
    dOperands[1] = ab.sumTo(ab.select(below, dy), lo);
  if (wanted[2])
    dOperands[2] = ab.sumTo(ab.select(above, dy), hi);
  return success();
}
