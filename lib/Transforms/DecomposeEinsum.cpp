//===- DecomposeEinsum.cpp - ampc.einsum as transposes and matmuls --------===//
//
// ampc-decompose-einsum: each ampc.einsum becomes what the importer once
// built for the node: each operand's repeated labels taken as diagonals and
// its broadcast size-1 dimensions dropped, labels summed out where they
// appear once, pairwise contractions as batched ampc.matmuls, the rest
// summed and transposed to the output's order. The ops are built by a
// Composer (Compose.h) and so folded as they are made, as at import.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Compose.h"
#include "ampc/Dialect/Einsum.h"
#include "ampc/Transforms/Decompose.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

#include <set>

namespace ampc {
#define GEN_PASS_DEF_DECOMPOSEEINSUMPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using ampc::Composer;

namespace {

/// A tensor with one Einsum label per dimension.
struct Labeled {
  Value value;
  SmallVector<int> labels;
};

/// `t` summed over the labels not in `kept` (its labels in order, less
/// some), which are dropped.
void sumOut(Composer &c, Labeled &t, ArrayRef<int> kept) {
  SmallVector<int64_t> axes;
  for (auto [i, l] : llvm::enumerate(t.labels))
    if (!llvm::is_contained(kept, l))
      axes.push_back(i);
  if (axes.empty() || !t.value)
    return;
  t.value = ampc::part<ampc::ReduceSumOp>(
      c, t.value, {c.ints("axes", axes), c.i64("keepdims", 0)});
  t.labels.assign(kept.begin(), kept.end());
}

/// The contraction of `a` and `b` keeping the labels in `keep` (the
/// output's and those of the operands still to come; einsumContraction):
/// labels of one operand only that are not kept are summed first. Each
/// operand is transposed to (batch, free, contracted) / (batch, contracted,
/// free) and reshaped to 3-D for one batched ampc.matmul, whose result is
/// reshaped to (batch..., free of a..., free of b...). A null value after
/// an error.
Labeled contract(Composer &c, Labeled a, Labeled b, const std::set<int> &keep) {
  SmallVector<int> keptA = ampc::einsumKept(a.labels, b.labels, keep);
  SmallVector<int> keptB = ampc::einsumKept(b.labels, a.labels, keep);
  sumOut(c, a, keptA);
  sumOut(c, b, keptB);
  if (!a.value || !b.value)
    return {};
  ampc::EinsumContraction labels = ampc::einsumContraction(keptA, keptB, keep);
  const SmallVector<int> &batch = labels.batch, &contracted = labels.contracted,
                         &freeA = labels.freeA, &freeB = labels.freeB;
  // Positions and the size product of `groups` of labels of `t`.
  auto layout = [](const Labeled &t, ArrayRef<ArrayRef<int>> groups,
                   SmallVectorImpl<int64_t> &perm,
                   SmallVectorImpl<int64_t> &sizes) {
    auto shape = cast<RankedTensorType>(t.value.getType()).getShape();
    for (ArrayRef<int> group : groups) {
      int64_t size = 1;
      for (int l : group) {
        int64_t at = llvm::find(t.labels, l) - t.labels.begin();
        perm.push_back(at);
        size *= shape[at]; // a factor of t's element count: no overflow
      }
      sizes.push_back(size);
    }
  };
  SmallVector<int64_t> permA, shapeA, permB, shapeB;
  layout(a, {batch, freeA, contracted}, permA, shapeA);
  layout(b, {batch, contracted, freeB}, permB, shapeB);
  // The result's dimensions: batch and free ones (readEinsum checked that
  // their product fits).
  SmallVector<int64_t> dims;
  auto typeA = cast<RankedTensorType>(a.value.getType());
  auto typeB = cast<RankedTensorType>(b.value.getType());
  for (int64_t p :
       ArrayRef<int64_t>(permA).take_front(batch.size() + freeA.size()))
    dims.push_back(typeA.getDimSize(p));
  for (int64_t p : ArrayRef<int64_t>(permB).take_back(freeB.size()))
    dims.push_back(typeB.getDimSize(p));
  Value lhs = ampc::transposed(c, a.value, permA);
  Value rhs = ampc::transposed(c, b.value, permB);
  lhs = lhs ? ampc::reshaped(c, lhs, shapeA) : Value();
  rhs = rhs ? ampc::reshaped(c, rhs, shapeB) : Value();
  Value product = ampc::part<ampc::MatMulOp>(c, {lhs, rhs});
  Labeled result;
  result.value = product ? ampc::reshaped(c, product, dims) : Value();
  result.labels = labels.resultLabels();
  return result;
}

/// The equation's operands (readEinsum, which the verifier has run) each
/// first take the diagonal of a repeated label (the two dimensions made
/// adjacent, merged, and sliced with a step of n + 1) and drop the size-1
/// dimensions of labels another operand broadcasts. Operands are then
/// contracted pairwise from the left (contract); what is left is summed
/// over the labels not in the output and transposed to the output's order.
/// Null after an error at the op.
Value decompose(Composer &c, ampc::EinsumOp op) {
  SmallVector<ArrayRef<int64_t>> shapes;
  for (Value v : op.getInputs())
    shapes.push_back(cast<RankedTensorType>(v.getType()).getShape());
  std::string error;
  FailureOr<ampc::EinsumEquation> eq =
      ampc::readEinsum(op.getEquation(), shapes, error);
  if (failed(eq)) {
    (void)c.error(error);
    return Value();
  }
  const SmallVector<int> &output = eq->output;
  SmallVector<Labeled> operands;
  for (auto [v, labels] : llvm::zip(op.getInputs(), eq->operands))
    operands.push_back({v, labels});

  for (Labeled &t : operands) {
    // A repeated label takes the diagonal: its second dimension moved next
    // to the first, the two merged into n * n and every (n + 1)-th kept
    // (readEinsum checked the sizes and that n * n fits).
    for (size_t p = 0; p < t.labels.size(); ++p) {
      for (size_t q = p + 1; q < t.labels.size();) {
        if (t.labels[q] != t.labels[p]) {
          ++q;
          continue;
        }
        auto type = cast<RankedTensorType>(t.value.getType());
        int64_t n = type.getDimSize(p);
        int64_t square = n * n;
        SmallVector<int64_t> perm, merged;
        for (int64_t i = 0; i < type.getRank(); ++i)
          if (i != static_cast<int64_t>(q))
            perm.push_back(i);
        perm.insert(perm.begin() + p + 1, q);
        for (int64_t i : perm)
          if (i != static_cast<int64_t>(q))
            merged.push_back(i == static_cast<int64_t>(p) ? square
                                                          : type.getDimSize(i));
        Value v = ampc::transposed(c, t.value, perm);
        v = v ? ampc::reshaped(c, v, merged) : Value();
        v = ampc::part<ampc::SliceOp>(
            c, v,
            {c.ints("starts", {0}), c.ints("ends", {square}),
             c.ints("axes", {static_cast<int64_t>(p)}),
             c.ints("steps", {n + 1})});
        if (!v)
          return Value();
        t.value = v;
        t.labels.erase(t.labels.begin() + q);
      }
    }
    // A size-1 dimension of a label another operand has larger is not
    // summed over or kept: the operand does not vary along it.
    auto shape = cast<RankedTensorType>(t.value.getType()).getShape();
    SmallVector<int64_t> squeezed;
    SmallVector<int> labels;
    for (auto [l, d] : llvm::zip(t.labels, shape)) {
      if (d == 1 && eq->sizes.lookup(l) != 1)
        continue;
      squeezed.push_back(d);
      labels.push_back(l);
    }
    if (labels.size() != t.labels.size()) {
      t.value = ampc::reshaped(c, t.value, squeezed);
      t.labels = labels;
      if (!t.value)
        return Value();
    }
  }

  Labeled result = operands.front();
  for (size_t k = 1; k < operands.size(); ++k) {
    std::set<int> keep(output.begin(), output.end());
    for (size_t j = k + 1; j < operands.size(); ++j)
      keep.insert(operands[j].labels.begin(), operands[j].labels.end());
    result = contract(c, result, operands[k], keep);
    if (!result.value)
      return Value();
  }
  SmallVector<int> inOutput;
  for (int l : result.labels)
    if (llvm::is_contained(output, l))
      inOutput.push_back(l);
  sumOut(c, result, inOutput);
  SmallVector<int64_t> perm;
  for (int l : output)
    perm.push_back(llvm::find(result.labels, l) - result.labels.begin());
  Value r = result.value ? ampc::transposed(c, result.value, perm) : Value();
  // An equation that changes nothing ("ij->ij") is still an op of its own.
  if (r && r == op.getInputs().front())
    r = ampc::part<ampc::IdentityOp>(c, r);
  return r;
}

/// The einsum's one result, as a replacement.
ampc::Replacement lower(Composer &c, ampc::EinsumOp op) {
  Value r = decompose(c, op);
  return r ? ampc::Replacement{r} : ampc::Replacement{};
}

struct DecomposeEinsumPass
    : ampc::impl::DecomposeEinsumPassBase<DecomposeEinsumPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(ampc::decomposeEach<
               ampc::DecomposePattern<ampc::EinsumOp, lower>>(
            getOperation(), maxTensorBytes)))
      signalPassFailure();
  }
};

} // namespace
