//===- FuseAttention.cpp - softmax attention as one ampc.attention --------===//
//
// Issue 38 (Passes.td, FuseAttentionPass; docs/design.md, "Fused attention
// (issue 38)"). Exporters write attention as MatMul(Q, Kᵀ), a scale, a
// mask, Softmax and MatMul(P, V), with Transposes that split and merge the
// heads; the kernels that read Q, K, V through strides make those
// Transposes and the [B, H, Sq, Sk] scores unnecessary. Matching starts
// at each Softmax and walks up to the first MatMul and down (through a
// Dropout, which the op then applies) to the second; where it stops, the
// Softmax records why.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

namespace ampc {
#define GEN_PASS_DEF_FUSEATTENTIONPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// Why `target` has no kernel for the attention `m` (empty: it has one).
/// The CPU kernels take any head dimension and dtype; the CUDA ones
/// (CudaAttention.cuh) FP16/BF16 and the head dimensions
/// cudaAttentionSupported names.
std::string missingKernel(ampc::KernelTarget target, bool lowPrecision,
                          int64_t d, int64_t dv) {
  if (target != ampc::KernelTarget::Cuda)
    return "";
  if (!lowPrecision)
    return "the CUDA target's attention kernels take FP16/BF16, and this "
           "library computes in FP32";
  if (!ampc::cudaAttentionSupported(d, dv))
    return "the CUDA target's attention kernels take head dimensions 16 to "
           "128, a multiple of 16, the same for Q/K and V; got " +
           std::to_string(d) + " and " + std::to_string(dv);
  return "";
}

/// What the Softmax records when the pattern breaks: the node and why.
using Refusal = std::string;

std::string describe(Operation *op) {
  std::string node;
  Location loc = op->getLoc();
  if (auto name = dyn_cast<NameLoc>(loc))
    node = name.getName().str();
  std::string kind = op->getName().stripDialect().str();
  return node.empty() ? "an " + kind : node + " (" + kind + ")";
}

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// `v` seen through Transposes: the value `base` and perm `p` with
/// v.dim[i] == base.dim[p[i]]. The Transposes passed are collected.
Value throughTransposes(Value v, SmallVector<int64_t, 4> &p,
                        llvm::SetVector<Operation *> &passed) {
  p.clear();
  for (int64_t i = 0; i < typeOf(v).getRank(); ++i)
    p.push_back(i);
  while (auto t = v.getDefiningOp<ampc::TransposeOp>()) {
    ArrayRef<int64_t> sigma = t.getPerm();
    for (int64_t &pi : p)
      pi = sigma[pi];
    passed.insert(t);
    v = t.getInput();
  }
  return v;
}

/// Ops that only change a value's shape (its elements in the same order).
bool isShapeView(Operation *op) {
  return isa<ampc::ReshapeOp, ampc::UnsqueezeOp, ampc::SqueezeOp,
             ampc::FlattenOp>(op);
}

/// The dense value of `v` when it is fixed: a constant, or a parameter
/// that does not train (frozen, or a library without training), seen
/// through shape views (nn.MultiheadAttention unsqueezes its mask).
DenseElementsAttr fixedValue(Value v, bool training) {
  Operation *def = v.getDefiningOp();
  if (!def)
    return {};
  if (isShapeView(def)) {
    DenseElementsAttr inner = fixedValue(def->getOperand(0), training);
    if (!inner)
      return {};
    return inner.reshape(cast<ShapedType>(typeOf(v)));
  }
  if (auto c = dyn_cast<ampc::ConstantOp>(def))
    return dyn_cast<DenseElementsAttr>(c.getValue());
  if (auto load = dyn_cast<ampc::LoadParameterOp>(def)) {
    auto param = SymbolTable::lookupNearestSymbolFrom<ampc::ParameterOp>(
        def, load.getParameterAttr());
    if (param && (!training || param->hasAttr(ampc::kFrozenAttr)))
      return dyn_cast<DenseElementsAttr>(param.getInitialValue());
  }
  return {};
}

/// The value of a one-element float constant, also one computed from
/// constants by Sqrt, Mul, Div, Cast and shape views (torch's
/// scaled_dot_product_attention export computes its scale so:
/// Sqrt(1 / Sqrt(E)), E folded from the shape by the importer).
std::optional<double> scalarConstant(Value v, int depth = 0) {
  Operation *def = v.getDefiningOp();
  if (!def || depth > 8 || typeOf(v).getNumElements() != 1 ||
      !isa<FloatType>(typeOf(v).getElementType()))
    return std::nullopt;
  auto operand = [&](int i) {
    return scalarConstant(def->getOperand(i), depth + 1);
  };
  if (auto c = dyn_cast<ampc::ConstantOp>(def)) {
    auto dense = dyn_cast<DenseElementsAttr>(c.getValue());
    if (!dense)
      return std::nullopt;
    return (*dense.value_begin<APFloat>()).convertToDouble();
  }
  if (isShapeView(def) || isa<ampc::CastOp>(def))
    return operand(0);
  if (isa<ampc::SqrtOp>(def)) {
    std::optional<double> x = operand(0);
    if (!x || *x < 0)
      return std::nullopt;
    return std::sqrt(*x);
  }
  if (isa<ampc::MulOp, ampc::DivOp>(def)) {
    std::optional<double> a = operand(0), b = operand(1);
    if (!a || !b)
      return std::nullopt;
    return isa<ampc::MulOp>(def) ? *a * *b : *a / *b;
  }
  return std::nullopt;
}

/// Whether `mask` (broadcasting to [..., sq, sk]) is 0 on and below the
/// diagonal and -inf above it everywhere: the causal flag.
bool isCausalTriangle(DenseElementsAttr mask, int64_t sq, int64_t sk) {
  ArrayRef<int64_t> shape = mask.getType().getShape();
  if (shape.size() < 2 || shape[shape.size() - 2] != sq ||
      shape.back() != sk || !isa<FloatType>(mask.getElementType()))
    return false;
  int64_t i = 0;
  for (APFloat value : mask.getValues<APFloat>()) {
    int64_t row = (i / sk) % sq, col = i % sk;
    ++i;
    bool hidden = col > row;
    if (hidden ? !(value.isInfinity() && value.isNegative()) : !value.isZero())
      return false;
  }
  return true;
}

/// A mask computed from constants by elementwise ops, evaluated one
/// element at a time: torch's exports compute the causal mask (Trilu,
/// Equal, Where), and the importer folds that only for small sequences, so
/// at 4096 the [S, S] mask is a graph of ops on [1, S] and [S, 1] index
/// constants. Each leaf is a fixed value broadcast to [Sq, Sk] (leading
/// dimensions 1); the program is the ops in order, evaluated in double.
class ComputedMask {
public:
  /// Builds the program for `v`, or fails (a leaf that is not fixed, an op
  /// not in the set, a shape that is not [.., Sq, Sk] with leading 1s).
  static std::optional<ComputedMask> build(Value v, int64_t sq, int64_t sk,
                                           bool training) {
    ComputedMask m;
    m.sq = sq, m.sk = sk;
    m.training = training;
    if (m.add(v) < 0)
      return std::nullopt;
    return m;
  }

  /// The value at (row, col).
  double at(int64_t row, int64_t col) {
    for (size_t i = 0; i < steps.size(); ++i) {
      const Step &s = steps[i];
      auto in = [&](int k) { return values[s.in[k]]; };
      double r = 0;
      switch (s.kind) {
      case Leaf:
        r = s.leaf[row * s.rowStride + col * s.colStride];
        break;
      case Add: r = in(0) + in(1); break;
      case Sub: r = in(0) - in(1); break;
      case Mul: r = in(0) * in(1); break;
      case Div: r = in(0) / in(1); break;
      case Neg: r = -in(0); break;
      case Less: r = in(0) < in(1); break;
      case LessEq: r = in(0) <= in(1); break;
      case Greater: r = in(0) > in(1); break;
      case GreaterEq: r = in(0) >= in(1); break;
      case Equal: r = in(0) == in(1); break;
      case Not: r = in(0) == 0; break;
      case Same: r = in(0); break;
      case Select: r = in(0) != 0 ? in(1) : in(2); break;
      }
      values[i] = r;
    }
    return values.back();
  }

private:
  enum Kind { Leaf, Add, Sub, Mul, Div, Neg, Less, LessEq, Greater,
              GreaterEq, Equal, Not, Same, Select };
  struct Step {
    Kind kind;
    int in[3] = {0, 0, 0};
    std::vector<double> leaf;
    int64_t rowStride = 0, colStride = 0;
  };

  /// The step computing `v`; -1 when it cannot be.
  int add(Value v) {
    if (auto it = index.find(v); it != index.end())
      return it->second;
    if (steps.size() > 32)
      return -1;
    ArrayRef<int64_t> shape = typeOf(v).getShape();
    int64_t rank = shape.size();
    for (int64_t i = 0; i + 2 < rank; ++i)
      if (shape[i] != 1)
        return -1;
    int64_t rows = rank >= 2 ? shape[rank - 2] : 1;
    int64_t cols = rank >= 1 ? shape[rank - 1] : 1;
    if ((rows != 1 && rows != sq) || (cols != 1 && cols != sk))
      return -1;
    Step s;
    Operation *def = v.getDefiningOp();
    if (!def)
      return -1;
    auto kindOf = [&]() -> std::optional<Kind> {
      return llvm::TypeSwitch<Operation *, std::optional<Kind>>(def)
          .Case([](ampc::AddOp) { return Add; })
          .Case([](ampc::SubOp) { return Sub; })
          .Case([](ampc::MulOp) { return Mul; })
          .Case([](ampc::DivOp) { return Div; })
          .Case([](ampc::NegOp) { return Neg; })
          .Case([](ampc::LessOp) { return Less; })
          .Case([](ampc::LessOrEqualOp) { return LessEq; })
          .Case([](ampc::GreaterOp) { return Greater; })
          .Case([](ampc::GreaterOrEqualOp) { return GreaterEq; })
          .Case([](ampc::EqualOp) { return Equal; })
          .Case([](ampc::NotOp) { return Not; })
          .Case([](ampc::CastOp) { return Same; })
          .Case([](ampc::WhereOp) { return Select; })
          .Default([](Operation *op) -> std::optional<Kind> {
            return isShapeView(op) ? std::optional<Kind>(Same) : std::nullopt;
          });
    };
    if (DenseElementsAttr fixed = fixedValue(v, training)) {
      s.kind = Leaf;
      if (fixed.isSplat()) {
        s.leaf.push_back(element(fixed, 0));
      } else {
        s.leaf.reserve(fixed.getNumElements());
        for (int64_t i = 0, e = fixed.getNumElements(); i < e; ++i)
          s.leaf.push_back(element(fixed, i));
        s.rowStride = rows == 1 ? 0 : cols;
        s.colStride = cols == 1 ? 0 : 1;
      }
    } else if (std::optional<Kind> kind = kindOf()) {
      s.kind = *kind;
      // A view may add or drop leading 1s only (one that moves the
      // [rows, cols] dimensions is not followed).
      auto core = [](ArrayRef<int64_t> s) {
        while (!s.empty() && s.front() == 1)
          s = s.drop_front();
        return s;
      };
      if (isShapeView(def) &&
          core(typeOf(def->getOperand(0)).getShape()) != core(shape))
        return -1;
      // A Cast keeps the value only from bool, or into 32 bits or more (one
      // into FP16 may round, or turn -1e9 into -inf).
      if (isa<ampc::CastOp>(def) &&
          !typeOf(def->getOperand(0)).getElementType().isInteger(1) &&
          typeOf(v).getElementTypeBitWidth() < 32)
        return -1;
      for (auto [i, operand] : llvm::enumerate(def->getOperands())) {
        int at = add(operand);
        if (at < 0)
          return -1;
        s.in[i] = at;
      }
    } else {
      return -1;
    }
    steps.push_back(std::move(s));
    values.push_back(0);
    index[v] = steps.size() - 1;
    return steps.size() - 1;
  }

  static double element(DenseElementsAttr a, int64_t i) {
    Type t = a.getElementType();
    if (isa<FloatType>(t))
      return (*(a.value_begin<APFloat>() + i)).convertToDouble();
    if (t.isInteger(1))
      return *(a.value_begin<bool>() + i) ? 1 : 0;
    return static_cast<double>((*(a.value_begin<APInt>() + i)).getSExtValue());
  }

  int64_t sq = 0, sk = 0;
  bool training = false;
  std::vector<Step> steps;
  std::vector<double> values;
  llvm::DenseMap<Value, int> index;
};

/// Whether the mask `v`, computed from constants, is the causal triangle
/// (0 on and below the diagonal, -inf above), checked at every element.
bool isComputedCausal(Value v, int64_t sq, int64_t sk, bool training) {
  std::optional<ComputedMask> mask =
      ComputedMask::build(v, sq, sk, training);
  if (!mask)
    return false;
  for (int64_t row = 0; row < sq; ++row)
    for (int64_t col = 0; col < sk; ++col) {
      double x = mask->at(row, col);
      if (col > row ? !(std::isinf(x) && x < 0) : x != 0)
        return false;
    }
  return true;
}

/// Whether a gradient could flow into `v` (it reads a parameter that
/// trains).
bool needsGradient(Value v, bool training) {
  if (!training)
    return false;
  SmallVector<Value> work{v};
  llvm::DenseSet<Value> seen;
  while (!work.empty()) {
    Value x = work.pop_back_val();
    if (!seen.insert(x).second)
      continue;
    Operation *def = x.getDefiningOp();
    if (!def)
      continue;
    if (auto load = dyn_cast<ampc::LoadParameterOp>(def)) {
      auto param = SymbolTable::lookupNearestSymbolFrom<ampc::ParameterOp>(
          def, load.getParameterAttr());
      if (!param || !param->hasAttr(ampc::kFrozenAttr))
        return true;
      continue;
    }
    for (Value operand : def->getOperands())
      work.push_back(operand);
  }
  return false;
}

/// One recognised attention.
struct Match {
  Value q, k, v;
  SmallVector<int64_t, 4> qPerm, kPerm, vPerm;
  double scale = 1.0;
  bool causal = false;
  Value bias;
  /// The value the op's O replaces, and the perm O is stored in.
  Value result;
  SmallVector<int64_t, 4> oPerm;
  /// The Add or Where that applies the mask.
  Operation *maskOp = nullptr;
  /// A training-mode Dropout on the probabilities: its ratio (0: none, or
  /// one that is the identity) and its masks' seed.
  double dropoutRatio = 0.0;
  uint64_t dropoutSeed = 0;
  /// The mask of the Dropout fused (also an identity one), which the
  /// report's bytes count.
  Value dropoutMask;
  /// The ops the fused op makes dead.
  llvm::SetVector<Operation *> chain;
  /// The chain's ops whose result is score-sized ([B, H, Sq, Sk]): the
  /// first MatMul, the scale, the mask, the Softmax, the Dropout.
  SmallVector<Operation *, 4> scoreOps;
};

/// The only user of `v`, or null.
Operation *soleUser(Value v) {
  if (!v.hasOneUse())
    return nullptr;
  return *v.getUsers().begin();
}

class Matcher {
public:
  Matcher(bool training) : training(training) {}

  /// Matches the attention around `softmax`; a refusal says where it broke.
  FailureOr<Match> match(ampc::SoftmaxOp softmax, Refusal &why);

private:
  bool training;
};

FailureOr<Match> Matcher::match(ampc::SoftmaxOp softmax, Refusal &why) {
  auto refuse = [&](Operation *at, const Twine &reason) {
    why = describe(at) + " " + reason.str();
    return failure();
  };
  Match m;
  RankedTensorType scoresType = typeOf(softmax.getInput());
  int64_t rank = scoresType.getRank();
  if (rank != 3 && rank != 4)
    return refuse(softmax, "has rank " + Twine(rank) + ", not 3 or 4");
  if (ampc::normalizeAxis(softmax.getAxis(), rank) != rank - 1)
    return refuse(softmax, "is not over the last axis");
  m.chain.insert(softmax);
  m.scoreOps.push_back(softmax);

  // Down: P's only reader is MatMul(P, V), or a Dropout whose is.
  auto readers = [](Value v) {
    return std::distance(v.getUsers().begin(), v.getUsers().end());
  };
  Value probabilities = softmax.getOutput();
  Operation *user = soleUser(probabilities);
  if (!user)
    return refuse(softmax, "has " + Twine(readers(probabilities)) +
                               " readers, not one MatMul");
  if (auto dropout = dyn_cast<ampc::DropoutOp>(user)) {
    // The fused op draws the Dropout's mask for its own use only (and
    // regenerates it in the backward); it writes no mask.
    if (!dropout.getMask().use_empty())
      return refuse(dropout, "is dropout whose mask is read (the fused "
                             "attention does not write the mask)");
    probabilities = dropout.getOutput();
    user = soleUser(probabilities);
    if (!user)
      return refuse(dropout, "has " + Twine(readers(probabilities)) +
                                 " readers, not one MatMul");
    double ratio = dropout.getRatio().convertToDouble();
    if (dropout.getTrainingMode() && ratio > 0.0) {
      m.dropoutRatio = ratio;
      m.dropoutSeed = dropout.maskSeed();
    }
    m.dropoutMask = dropout.getMask();
    m.chain.insert(dropout);
    m.scoreOps.push_back(dropout);
  }
  auto pv = dyn_cast<ampc::MatMulOp>(user);
  if (!pv || pv.getLhs() != probabilities)
    return refuse(user, "reads the probabilities, not MatMul(P, V)");
  m.chain.insert(pv);

  // Up: the mask, the scale, MatMul(Q, Kᵀ).
  Value x = softmax.getInput();
  auto onlyHere = [&](Value v) { return v.hasOneUse(); };
  if (auto add = x.getDefiningOp<ampc::AddOp>()) {
    if (!onlyHere(x))
      return refuse(add, "has another reader");
    // The scores side leads to a MatMul; the other is the mask.
    auto leadsToMatMul = [](Value v) {
      for (int i = 0; i < 3 && v.getDefiningOp(); ++i) {
        if (v.getDefiningOp<ampc::MatMulOp>())
          return true;
        if (!isa<ampc::MulOp, ampc::DivOp>(v.getDefiningOp()))
          return false;
        v = v.getDefiningOp()->getOperand(0);
      }
      return false;
    };
    bool lhsScores = leadsToMatMul(add.getLhs());
    Value mask = lhsScores ? add.getRhs() : add.getLhs();
    x = lhsScores ? add.getLhs() : add.getRhs();
    if (typeOf(add.getOutput()) != typeOf(x))
      return refuse(add, "broadcasts the scores");
    m.bias = mask;
    m.maskOp = add;
    m.chain.insert(add);
    m.scoreOps.push_back(add);
  } else if (auto where = x.getDefiningOp<ampc::WhereOp>()) {
    if (!onlyHere(x))
      return refuse(where, "has another reader");
    // Where(c, -inf, s) or Where(c, s, -inf): a constant condition.
    std::optional<double> a = scalarConstant(where.getX());
    std::optional<double> b = scalarConstant(where.getY());
    bool minusInfX = a && std::isinf(*a) && *a < 0;
    bool minusInfY = b && std::isinf(*b) && *b < 0;
    if (minusInfX == minusInfY)
      return refuse(where, "does not select between the scores and -inf");
    // masked_fill(~mask, -inf) exports Not of the mask.
    Value condition = where.getCondition();
    bool negated = false;
    if (auto n = condition.getDefiningOp<ampc::NotOp>()) {
      condition = n.getInput();
      negated = true;
    }
    DenseElementsAttr cond = fixedValue(condition, training);
    if (!cond)
      return refuse(where, "has a condition that is not a constant");
    x = minusInfX ? where.getY() : where.getX();
    if (typeOf(where.getOutput()) != typeOf(x))
      return refuse(where, "broadcasts the scores");
    // The additive mask it is: -inf where the -inf branch is taken.
    auto condType = cond.getType();
    Type element = scoresType.getElementType();
    SmallVector<APFloat> values;
    const llvm::fltSemantics &sem = cast<FloatType>(element).getFloatSemantics();
    for (bool c : cond.getValues<bool>())
      values.push_back((c != negated) == minusInfX ? APFloat::getInf(sem, /*Negative=*/true)
                                      : APFloat::getZero(sem));
    auto maskType = RankedTensorType::get(condType.getShape(), element);
    OpBuilder builder(where);
    m.bias = ampc::ConstantOp::create(builder, where.getLoc(),
                                      DenseElementsAttr::get(maskType, values));
    m.maskOp = where;
    m.chain.insert(where);
    m.scoreOps.push_back(where);
  }
  // The scale: Mul or Div by a one-element constant.
  if (Operation *def = x.getDefiningOp();
      def && isa<ampc::MulOp, ampc::DivOp>(def)) {
    if (!onlyHere(x))
      return refuse(def, "has another reader");
    bool isDiv = isa<ampc::DivOp>(def);
    std::optional<double> c = scalarConstant(def->getOperand(1));
    Value scores = def->getOperand(0);
    if (!c && !isDiv) {
      c = scalarConstant(def->getOperand(0));
      scores = def->getOperand(1);
    }
    if (!c)
      return refuse(def, "scales by a value that is not a constant scalar");
    m.scale = isDiv ? 1.0 / *c : *c;
    m.chain.insert(def);
    m.scoreOps.push_back(def);
    x = scores;
  }
  auto qk = x.getDefiningOp<ampc::MatMulOp>();
  if (!qk)
    return refuse(x.getDefiningOp() ? x.getDefiningOp() : softmax.getOperation(),
                  "is not MatMul(Q, Kᵀ) (after the mask and the scale)");
  if (!onlyHere(x))
    return refuse(qk, "has another reader");
  m.chain.insert(qk);
  m.scoreOps.push_back(qk);

  // Q and Kᵀ, each maybe scaled by a constant (torch's SDPA export).
  // (nn.MultiheadAttention divides Q.)
  auto unscale = [&](Value v) -> Value {
    if (!v.hasOneUse())
      return v;
    if (auto mul = v.getDefiningOp<ampc::MulOp>())
      for (int i = 0; i < 2; ++i)
        if (std::optional<double> c = scalarConstant(mul->getOperand(1 - i))) {
          m.scale *= *c;
          m.chain.insert(mul);
          return mul->getOperand(i);
        }
    if (auto div = v.getDefiningOp<ampc::DivOp>())
      if (std::optional<double> c = scalarConstant(div.getRhs())) {
        m.scale /= *c;
        m.chain.insert(div);
        return div.getLhs();
      }
    return v;
  };
  Value q = unscale(qk.getLhs()), kt = unscale(qk.getRhs());
  Value v = pv.getRhs();
  for (Value t : {q, kt, v})
    if (typeOf(t).getRank() != rank)
      return refuse(qk, "multiplies tensors of different ranks");
  for (int64_t i = 0; i + 2 < rank; ++i)
    if (typeOf(q).getDimSize(i) != typeOf(kt).getDimSize(i) ||
        typeOf(q).getDimSize(i) != typeOf(v).getDimSize(i))
      return refuse(qk, "broadcasts batch dimensions");
  if (typeOf(q).getElementType() != typeOf(kt).getElementType() ||
      typeOf(q).getElementType() != typeOf(v).getElementType())
    return refuse(qk, "mixes element types");
  SmallVector<int64_t, 4> pq, pk, pvp;
  m.q = throughTransposes(q, pq, m.chain);
  m.k = throughTransposes(kt, pk, m.chain);
  m.v = throughTransposes(v, pvp, m.chain);
  // Kᵀ's logical order is (.., d, s): K's swaps the last two.
  std::swap(pk[rank - 1], pk[rank - 2]);

  // O: the MatMul's result, or the Transpose that merges the heads.
  m.result = pv.getOutput();
  m.oPerm.clear();
  for (int64_t i = 0; i < rank; ++i)
    m.oPerm.push_back(i);
  if (Operation *u = soleUser(pv.getOutput()))
    if (auto t = dyn_cast<ampc::TransposeOp>(u)) {
      // result.dim[i] = O.dim[sigma[i]]: logical l is at sigma⁻¹[l].
      for (auto [i, s] : llvm::enumerate(t.getPerm()))
        m.oPerm[s] = i;
      m.result = t.getOutput();
      m.chain.insert(t);
    }

  // Rank 3 ([B·H, S, D], nn.MultiheadAttention): b is a unit dimension.
  auto widen = [&](SmallVector<int64_t, 4> &p) {
    if (rank == 4)
      return;
    for (int64_t &i : p)
      ++i;
    p.insert(p.begin(), 0);
  };
  m.qPerm = pq, m.kPerm = pk, m.vPerm = pvp;
  widen(m.qPerm), widen(m.kPerm), widen(m.vPerm), widen(m.oPerm);

  // The mask.
  if (m.bias) {
    auto biasType = typeOf(m.bias);
    int64_t sq = scoresType.getDimSize(rank - 2);
    int64_t sk = scoresType.getDimSize(rank - 1);
    DenseElementsAttr fixed = fixedValue(m.bias, training);
    if (fixed ? isCausalTriangle(fixed, sq, sk)
              : isComputedCausal(m.bias, sq, sk, training)) {
      m.causal = true;
      m.bias = Value();
    } else if (needsGradient(m.bias, training)) {
      return refuse(m.maskOp, "adds a mask that trains (the fused "
                                "attention gives its bias no gradient)");
    } else if (!isa<FloatType>(biasType.getElementType())) {
      return refuse(m.maskOp, "adds a mask that is not a float tensor");
    }
    std::optional<SmallVector<int64_t>> shape =
        ampc::broadcastShapes({scoresType.getShape(), biasType.getShape()});
    if (!shape || ArrayRef<int64_t>(*shape) != scoresType.getShape())
      return refuse(m.maskOp, "adds a mask that broadcasts the scores");
  }
  return m;
}

/// `v` (rank 3) as [1, ...]: a view.
Value withUnitBatch(OpBuilder &b, Location loc, Value v) {
  auto t = typeOf(v);
  SmallVector<int64_t> shape{1};
  llvm::append_range(shape, t.getShape());
  return ampc::ReshapeOp::create(b, loc, t.clone(shape), v);
}

/// Whether a Softmax that did not match is worth a line in the report: a
/// MatMul reads it, or one is a few elementwise steps above it.
bool looksLikeAttention(ampc::SoftmaxOp softmax) {
  for (Operation *user : softmax->getUsers())
    if (isa<ampc::MatMulOp, ampc::DropoutOp>(user))
      return true;
  Value v = softmax.getInput();
  for (int i = 0; i < 4; ++i) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return false;
    if (isa<ampc::MatMulOp>(def))
      return true;
    if (!isa<ampc::AddOp, ampc::WhereOp, ampc::MulOp, ampc::DivOp>(def))
      return false;
    v = def->getOperand(isa<ampc::WhereOp>(def) ? 1 : 0);
  }
  return false;
}

struct FuseAttention : ampc::impl::FuseAttentionPassBase<FuseAttention> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    SmallVector<ampc::SoftmaxOp> softmaxes;
    module.walk([&](ampc::SoftmaxOp s) { softmaxes.push_back(s); });
    Matcher matcher(training);
    for (ampc::SoftmaxOp softmax : softmaxes) {
      Refusal why;
      FailureOr<Match> m = matcher.match(softmax, why);
      if (succeeded(m)) {
        // A rank-3 operand ([B·H, S, D]) is viewed as [1, B·H, S, D], as
        // fuse() does, for its perm.
        auto headDim = [](Value x, ArrayRef<int64_t> perm) {
          SmallVector<int64_t, 4> shape(
              cast<ShapedType>(x.getType()).getShape());
          if (shape.size() == 3)
            shape.insert(shape.begin(), 1);
          return ampc::attentionLogicalShape(shape, perm)[3];
        };
        why = missingKernel(target, lowPrecision, headDim(m->q, m->qPerm),
                            headDim(m->v, m->vPerm));
        if (!why.empty())
          m = failure();
      }
      if (failed(m)) {
        if (looksLikeAttention(softmax))
          softmax->setAttr(ampc::kAttentionUnfusedAttr, StringAttr::get(ctx, why));
        continue;
      }
      fuse(*m, softmax);
    }
  }

  /// The bytes of score-sized buffers the unfused graph would have
  /// materialised per step (docs/design.md, "the report's bytes"): each
  /// score-sized result of the chain at its element type as imported, and
  /// in a training step one gradient of each; a Dropout's mask (a byte
  /// per element) once.
  int64_t savedBytes(const Match &m) const {
    int64_t bytes = 0;
    for (Operation *op : m.scoreOps) {
      auto t = typeOf(op->getResult(0));
      bytes += t.getNumElements() *
               ((t.getElementTypeBitWidth() + 7) / 8);
    }
    if (training)
      bytes *= 2;
    if (m.dropoutMask)
      bytes += typeOf(m.dropoutMask).getNumElements();
    return bytes;
  }

  void fuse(Match &m, ampc::SoftmaxOp softmax) {
    // Before the result's definer, the chain's last op: after every operand.
    OpBuilder b(m.result.getDefiningOp());
    // The importer's location, with "Attention" as the op type the
    // report prints.
    Location inner = softmax.getLoc();
    if (auto name = dyn_cast<NameLoc>(inner))
      inner = name.getChildLoc();
    Location loc = FusedLoc::get(b.getContext(), {inner},
                                 b.getStringAttr("Attention"));
    if (auto name = dyn_cast<NameLoc>(softmax.getLoc()))
      loc = NameLoc::get(name.getName(), loc);
    Value q = m.q, k = m.k, v = m.v;
    bool rank3 = typeOf(m.result).getRank() == 3;
    if (rank3) {
      q = withUnitBatch(b, loc, q);
      k = withUnitBatch(b, loc, k);
      v = withUnitBatch(b, loc, v);
    }
    auto op = ampc::AttentionOp::create(
        b, loc, q, k, v, m.bias, b.getF32FloatAttr(m.scale),
        b.getBoolAttr(m.causal), b.getDenseI64ArrayAttr(m.qPerm),
        b.getDenseI64ArrayAttr(m.kPerm), b.getDenseI64ArrayAttr(m.vPerm),
        b.getDenseI64ArrayAttr(m.oPerm),
        b.getF32FloatAttr(static_cast<float>(m.dropoutRatio)),
        b.getI64IntegerAttr(static_cast<int64_t>(m.dropoutSeed)));
    op->setAttr(ampc::kAttentionSavesAttr,
                b.getI64IntegerAttr(savedBytes(m)));
    if (rank3)
      op->setAttr(ampc::kAttentionMergedHeadsAttr, b.getUnitAttr());
    Value o = op.getO();
    if (rank3)
      o = ampc::ReshapeOp::create(b, loc, typeOf(m.result), o);
    assert(typeOf(o) == typeOf(m.result) && "the fused O has the result's type");
    m.result.replaceAllUsesWith(o);
    // The chain's ops that nothing reads any more; Transposes that other
    // ops read stay.
    bool erased = true;
    while (erased) {
      erased = false;
      for (Operation *dead : m.chain)
        if (dead && dead->getBlock() && dead->use_empty()) {
          m.chain.remove(dead);
          dead->erase();
          erased = true;
          break;
        }
    }
  }
};

} // namespace
