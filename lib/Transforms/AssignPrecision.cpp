//===- AssignPrecision.cpp - autocast-style precision assignment ----------===//
//
// Decides the compute dtype of every op that computes on floating-point data
// and inserts the casts that make the IR agree with the decisions. The
// category of each op comes from the op itself (AMPCTraits.h); this file
// holds the two ways of turning categories into decisions (autocast and
// paint), the overrides, and the rewriting, which both modes share.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace ampc {
#define GEN_PASS_DEF_ASSIGNPRECISIONPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::OverrideRule;
using ampc::PrecisionCategory;

namespace {

/// Float element types precision assignment may change. Float64 tensors are
/// left alone, as autocast leaves them.
bool isLowerable(Type type) {
  auto shaped = dyn_cast<ShapedType>(type);
  Type element = shaped ? shaped.getElementType() : type;
  return element.isF16() || element.isBF16() || element.isF32();
}

Type elementOf(Value v) { return cast<ShapedType>(v.getType()).getElementType(); }

/// The operands that take the op's compute dtype: every float operand, or
/// only the data operand for ops with DataOperandOnly (BatchNormalization
/// keeps its statistics in FP32, as cuDNN does under autocast).
SmallVector<unsigned> dataOperands(Operation *op) {
  SmallVector<unsigned> indices;
  unsigned dataCount = op->getNumOperands();
  if (op->hasTrait<ampc::DataOperandOnly>())
    dataCount = 1;
  else if (op->hasTrait<ampc::QkvDataOperands>())
    dataCount = 3;
  for (OpOperand &operand : op->getOpOperands()) {
    if (operand.getOperandNumber() >= dataCount)
      break;
    if (isa<FloatType>(elementOf(operand.get())))
      indices.push_back(operand.getOperandNumber());
  }
  return indices;
}

/// f16 or bf16 with f32 gives f32; f16 with bf16 gives f32 (as PyTorch's
/// type promotion does).
Type widest(Type a, Type b) {
  if (!a || a == b)
    return b;
  return Float32Type::get(b.getContext());
}

/// Whether `op` is the bias add of a linear layer as ONNX exporters write
/// it: Add(MatMul(x, W), b) with W (possibly transposed or reshaped) and b
/// parameters. PyTorch runs the whole
/// layer (torch.nn.functional.linear) as one allow op, bias included, so the
/// add belongs to the allow list too; a plain Add of an activation and a
/// parameter promotes.
/// Returns the layer's MatMul, or null.
Operation *linearBiasAddMatMul(Operation *op) {
  if (!isa<ampc::AddOp>(op))
    return nullptr;
  // Exporters may transpose or reshape the weight first (training-mode
  // exports do not fold it), and earlier decisions may have cast it.
  auto isParameter = [](Value v) {
    while (Operation *def = v.getDefiningOp()) {
      if (isa<ampc::LoadParameterOp>(def))
        return true;
      if (!isa<ampc::TransposeOp, ampc::ReshapeOp, ampc::CastOp>(def))
        return false;
      v = def->getOperand(0);
    }
    return false;
  };
  for (unsigned i = 0; i < 2; ++i) {
    auto matmul = op->getOperand(i).getDefiningOp<ampc::MatMulOp>();
    Value bias = op->getOperand(1 - i);
    if (matmul && isParameter(matmul.getRhs()) && isParameter(bias) &&
        cast<ShapedType>(bias.getType()).getRank() == 1)
      return matmul;
  }
  return nullptr;
}

/// An op precision assignment decides, with what the user said about it.
struct Candidate {
  Operation *op;
  PrecisionCategory category;
  /// What set the category: "allow list" or "rules.json categories.X".
  std::string categorySource;
  /// An override: true forces low precision, false keeps FP32.
  std::optional<bool> forceLowp;
  std::string overrideSource;
};

class AssignPrecision
    : public ampc::impl::AssignPrecisionPassBase<AssignPrecision> {
public:
  using Base::Base;
  void runOnOperation() override;

private:
  LogicalResult loadRules(ampc::PrecisionRules &rules);
  LogicalResult collectCandidates(func::FuncOp func,
                                  const ampc::PrecisionRules &rules,
                                  llvm::DenseSet<const OverrideRule *> &used,
                                  std::vector<Candidate> &candidates);
  ampc::PrecisionDecision decideAutocast(const Candidate &c) const;
  void decidePaint(ArrayRef<Candidate> candidates,
                   llvm::DenseMap<Operation *, ampc::PrecisionDecision>
                       &decisions) const;
  LogicalResult apply(Operation *op, const ampc::PrecisionDecision &decision);

  FloatType lowp;
};

LogicalResult AssignPrecision::loadRules(ampc::PrecisionRules &rules) {
  ModuleOp module = getOperation();
  std::string error;
  if ((!rulesFile.empty() &&
       !ampc::loadPrecisionRules(rulesFile, rules, error)) ||
      !ampc::parseOverrideRules(keepFp32, "--keep-fp32", rules.keepFp32,
                                error) ||
      !ampc::parseOverrideRules(forceLowp, "--force-lowp", rules.forceLowp,
                                error))
    return emitError(module.getLoc()) << error;
  return success();
}

LogicalResult AssignPrecision::collectCandidates(
    func::FuncOp func, const ampc::PrecisionRules &rules,
    llvm::DenseSet<const OverrideRule *> &used,
    std::vector<Candidate> &candidates) {
  for (Operation &op : func.getBody().getOps()) {
    const OverrideRule *keep = ampc::findOverrideRule(&op, rules.keepFp32, used);
    const OverrideRule *force = ampc::findOverrideRule(&op, rules.forceLowp, used);
    std::optional<PrecisionCategory> category = ampc::getPrecisionCategory(&op);
    SmallVector<unsigned> data = dataOperands(&op);
    if (!category || data.empty() ||
        !llvm::all_of(data, [&](unsigned i) {
          return isLowerable(op.getOperand(i).getType());
        })) {
      continue;
    }
    Candidate c{&op, *category, "", std::nullopt, ""};
    bool layerRule = false;
    // Category keys match op types as `op:` rules do.
    auto changed = llvm::find_if(rules.categories, [&](const auto &entry) {
      return ampc::ruleMatchesOpType(entry.getKey(), &op);
    });
    if (changed != rules.categories.end()) {
      c.category = changed->second;
      c.categorySource = rules.categoryOrigins.lookup(changed->getKey());
    } else if (Operation *matmul = linearBiasAddMatMul(&op)) {
      c.category = PrecisionCategory::Allow;
      c.categorySource = "allow list (bias add of a linear layer)";
      // An override of the layer's MatMul covers its bias add, unless a node
      // rule names the add itself.
      const OverrideRule *layerKeep =
          ampc::findOverrideRule(matmul, rules.keepFp32, used);
      const OverrideRule *layerForce =
          ampc::findOverrideRule(matmul, rules.forceLowp, used);
      bool ownNodeRule = (keep && keep->kind == OverrideRule::Node) ||
                         (force && force->kind == OverrideRule::Node);
      if (!ownNodeRule && (layerKeep || layerForce)) {
        keep = layerKeep;
        force = layerForce;
        layerRule = true;
      }
    } else {
      c.categorySource =
          (ampc::stringifyPrecisionCategory(c.category) + " list").str();
    }
    if (keep && force) {
      // A node rule beats an op rule; two rules of the same rank conflict.
      bool keepIsNode = keep->kind == OverrideRule::Node;
      bool forceIsNode = force->kind == OverrideRule::Node;
      if (keepIsNode == forceIsNode)
        return op.emitError() << "both " << keep->origin << " '"
                              << keep->spelling() << "' and " << force->origin
                              << " '" << force->spelling() << "' apply";
      (keepIsNode ? force : keep) = nullptr;
    }
    if (keep || force) {
      const OverrideRule *rule = keep ? keep : force;
      c.forceLowp = force != nullptr;
      c.overrideSource = "override " + rule->origin + " " + rule->spelling();
      if (layerRule)
        c.overrideSource += " (the bias add of that linear layer)";
    }
    candidates.push_back(std::move(c));
  }
  return success();
}

ampc::PrecisionDecision
AssignPrecision::decideAutocast(const Candidate &c) const {
  PrecisionCategory category = c.category;
  FloatType f32 = Float32Type::get(c.op->getContext());
  if (c.forceLowp)
    return {*c.forceLowp ? lowp : f32, category, c.overrideSource};
  switch (c.category) {
  case PrecisionCategory::Allow:
    return {lowp, category, c.categorySource};
  case PrecisionCategory::Deny:
  case PrecisionCategory::Fp32Output:
    return {f32, category, c.categorySource};
  case PrecisionCategory::Promote:
  case PrecisionCategory::Follow: {
    // Both run in the dtype their inputs arrive in; mixed inputs go to the
    // widest (a follow op has one data input, so only promote ops mix). As in
    // PyTorch's type promotion, a zero-dimensional operand (a scalar such as
    // the 1/sqrt(d) of attention) does not widen a dimensioned one.
    SmallVector<unsigned> data = dataOperands(c.op);
    bool anyDimensioned = llvm::any_of(data, [&](unsigned i) {
      return cast<ShapedType>(c.op->getOperand(i).getType()).getRank() > 0;
    });
    Type compute;
    for (unsigned i : data) {
      Value v = c.op->getOperand(i);
      if (!anyDimensioned || cast<ShapedType>(v.getType()).getRank() > 0)
        compute = widest(compute, elementOf(v));
    }
    std::string why = c.categorySource + ": " +
                      (c.category == PrecisionCategory::Promote
                           ? "widest input is "
                           : "input is ") +
                      ampc::dtypeName(compute);
    return {cast<FloatType>(compute), category, why};
  }
  }
  llvm_unreachable("unknown precision category");
}

/// TensorFlow's auto_mixed_precision painting (REFERENCE.md 2) over the
/// candidates, with allow/deny/fp32_output/promote/follow as TF's
/// allow/deny/deny/infer/clear. Overrides seed the allow and deny sets.
void AssignPrecision::decidePaint(
    ArrayRef<Candidate> candidates,
    llvm::DenseMap<Operation *, ampc::PrecisionDecision> &decisions) const {
  enum Color { Allow, Deny, Infer, Clear };
  size_t n = candidates.size();
  llvm::DenseMap<Operation *, size_t> index;
  for (auto [i, c] : llvm::enumerate(candidates))
    index[c.op] = i;
  // Edges run along float values from one candidate to another; anything
  // else (parameters, constants, a user's casts) is a boundary.
  std::vector<SmallVector<size_t>> users(n), producers(n);
  for (auto [i, c] : llvm::enumerate(candidates))
    for (unsigned o : dataOperands(c.op))
      if (Operation *def = c.op->getOperand(o).getDefiningOp())
        if (auto it = index.find(def); it != index.end()) {
          users[it->second].push_back(i);
          producers[i].push_back(it->second);
        }

  std::vector<Color> color(n);
  std::vector<std::string> why(n);
  llvm::SetVector<size_t> allow, deny;
  for (auto [i, c] : llvm::enumerate(candidates)) {
    if (c.forceLowp) {
      (*c.forceLowp ? allow : deny).insert(i);
      why[i] = c.overrideSource;
      color[i] = *c.forceLowp ? Allow : Deny;
      continue;
    }
    switch (c.category) {
    case PrecisionCategory::Allow:
      color[i] = Allow;
      allow.insert(i);
      why[i] = "paint: " + c.categorySource;
      break;
    case PrecisionCategory::Deny:
    case PrecisionCategory::Fp32Output:
      color[i] = Deny;
      deny.insert(i);
      why[i] = "paint: " + c.categorySource;
      break;
    case PrecisionCategory::Promote:
      color[i] = Infer;
      break;
    case PrecisionCategory::Follow:
      color[i] = Clear;
      break;
    }
  }

  // Depth-first search from `roots` along `edges`, entering nodes that
  // `enter` accepts; calls `visit` on each node entered.
  auto search = [&](ArrayRef<size_t> roots,
                    ArrayRef<const std::vector<SmallVector<size_t>> *> edges,
                    auto enter, auto visit) {
    std::vector<bool> seen(n);
    SmallVector<size_t> stack(roots.begin(), roots.end());
    while (!stack.empty()) {
      size_t i = stack.pop_back_val();
      for (const auto *e : edges)
        for (size_t j : (*e)[i]) {
          if (seen[j] || !enter(j))
            continue;
          seen[j] = true;
          visit(j);
          stack.push_back(j);
        }
    }
  };
  auto isFree = [&](size_t j) { return !allow.contains(j) && !deny.contains(j); };

  // (2) Deny spreads forward through infer ops, and through clear ops that
  // lead to a deny or infer op.
  SmallVector<size_t> denyOrInfer;
  for (size_t i = 0; i < n; ++i)
    if (deny.contains(i) || color[i] == Infer)
      denyOrInfer.push_back(i);
  std::vector<bool> upstreamOfDenyOrInfer(n);
  search(denyOrInfer, {&producers},
         [&](size_t j) { return color[j] == Clear && isFree(j); },
         [&](size_t j) { upstreamOfDenyOrInfer[j] = true; });
  SmallVector<size_t> denyRoots(deny.begin(), deny.end());
  search(denyRoots, {&users},
         [&](size_t j) {
           return isFree(j) &&
                  (color[j] == Infer || upstreamOfDenyOrInfer[j]);
         },
         [&](size_t j) {
           deny.insert(j);
           why[j] = "paint: deny spreads forward";
         });

  // (3) Infer and clear ops lying between allow ops become allow.
  std::vector<bool> downstreamOfAllow(n);
  SmallVector<size_t> allowRoots(allow.begin(), allow.end());
  search(allowRoots, {&users}, isFree,
         [&](size_t j) { downstreamOfAllow[j] = true; });
  search(allowRoots, {&producers},
         [&](size_t j) { return isFree(j) && downstreamOfAllow[j]; },
         [&](size_t j) {
           allow.insert(j);
           why[j] = "paint: between allow ops";
         });

  // (4) Allow spreads both ways through clear ops.
  allowRoots.assign(allow.begin(), allow.end());
  search(allowRoots, {&users, &producers},
         [&](size_t j) { return color[j] == Clear && isFree(j); },
         [&](size_t j) {
           allow.insert(j);
           why[j] = "paint: follow op next to allow ops";
         });

  FloatType f32 = Float32Type::get(lowp.getContext());
  for (auto [i, c] : llvm::enumerate(candidates)) {
    PrecisionCategory category = c.category;
    if (allow.contains(i))
      decisions[c.op] = {lowp, category, why[i]};
    else if (deny.contains(i))
      decisions[c.op] = {f32, category, why[i]};
    else
      decisions[c.op] = {f32, category, "paint: not painted, stays f32"};
  }
}

/// Re-derives the result types of `op` after its operands changed dtype.
LogicalResult refreshResultTypes(Operation *op) {
  if (auto infer = dyn_cast<InferTypeOpInterface>(op)) {
    SmallVector<Type> types;
    if (failed(infer.inferReturnTypes(
            op->getContext(), op->getLoc(), op->getOperands(),
            op->getRawDictionaryAttrs(), op->getPropertiesStorage(),
            op->getRegions(), types)))
      return failure();
    for (auto [result, type] : llvm::zip(op->getResults(), types))
      result.setType(type);
    return success();
  }
  // Ops whose result type is written out (reshape, expand) keep its shape
  // and take their input's element type.
  Type element = elementOf(op->getOperand(0));
  for (Value result : op->getResults())
    result.setType(cast<ShapedType>(result.getType()).clone(element));
  return success();
}

Value castTo(OpBuilder &b, Location loc, Value value, Type element) {
  auto type = cast<RankedTensorType>(value.getType()).clone(element);
  auto cast = ampc::CastOp::create(b, loc, type, value);
  cast->setAttr(ampc::kAutocastAttr, b.getUnitAttr());
  return cast;
}

LogicalResult AssignPrecision::apply(Operation *op,
                                     const ampc::PrecisionDecision &decision) {
  // Every use gets its own cast here; ampc-optimize-casts shares them, so
  // the report can say how many casts the optimisation saved.
  OpBuilder b(op);
  for (unsigned i : dataOperands(op)) {
    Value operand = op->getOperand(i);
    if (elementOf(operand) != decision.compute)
      op->setOperand(i, castTo(b, op->getLoc(), operand, decision.compute));
  }
  if (failed(refreshResultTypes(op)))
    return failure();
  ampc::setPrecisionDecision(op, decision);
  return success();
}

void AssignPrecision::runOnOperation() {
  ModuleOp module = getOperation();
  MLIRContext *ctx = &getContext();
  if (failed(ampc::checkEnumOption(dtype, module.getLoc(), getArgument())) ||
      failed(ampc::checkEnumOption(propagation, module.getLoc(),
                                   getArgument())))
    return signalPassFailure();
  switch (dtype) {
  case ampc::LowPrecisionType::F16:
    lowp = Float16Type::get(ctx);
    break;
  case ampc::LowPrecisionType::BF16:
    lowp = BFloat16Type::get(ctx);
    break;
  case ampc::LowPrecisionType::F32:
    lowp = Float32Type::get(ctx);
    break;
  }
  ampc::PrecisionRules rules;
  if (failed(loadRules(rules)))
    return signalPassFailure();

  llvm::DenseSet<const OverrideRule *> used;
  for (auto func : module.getOps<func::FuncOp>()) {
    std::vector<Candidate> candidates;
    if (failed(collectCandidates(func, rules, used, candidates)))
      return signalPassFailure();

    llvm::DenseMap<Operation *, ampc::PrecisionDecision> painted;
    bool paint = propagation == ampc::Propagation::Paint;
    if (paint)
      decidePaint(candidates, painted);
    // Program order: an autocast decision depends on the dtypes that the
    // ops before it produce.
    for (const Candidate &c : candidates) {
      ampc::PrecisionDecision decision =
          paint ? painted.lookup(c.op) : decideAutocast(c);
      if (failed(apply(c.op, decision)))
        return signalPassFailure();
    }

    // The function keeps its signature: results return in their own dtype.
    func.walk([&](func::ReturnOp ret) {
      OpBuilder b(ret);
      for (auto [operand, type] :
           llvm::zip(ret->getOpOperands(), func.getResultTypes()))
        if (operand.get().getType() != type)
          operand.set(castTo(b, ret.getLoc(), operand.get(),
                             cast<ShapedType>(type).getElementType()));
    });
  }

  // A rule that names nothing is most likely a typo: say so.
  auto warnUnused = [&](ArrayRef<OverrideRule> list) {
    for (const OverrideRule &rule : list)
      if (!used.contains(&rule))
        emitWarning(module.getLoc())
            << rule.origin << ": '" << rule.spelling()
            << "' names no op or node in the model";
  };
  warnUnused(rules.keepFp32);
  warnUnused(rules.forceLowp);
  for (const auto &entry : rules.categories) {
    bool found = false;
    module.walk([&](Operation *op) {
      if (ampc::getPrecisionCategory(op) &&
          ampc::ruleMatchesOpType(entry.getKey(), op))
        found = true;
    });
    if (!found)
      emitWarning(module.getLoc())
          << rules.categoryOrigins.lookup(entry.getKey())
          << ": no op of type '" << entry.getKey() << "' in the model";
  }
}

} // namespace
