//===- Einsum.cpp - Einsum as transposes, reductions and matmuls ----------===//
//
// Einsum: each operand's labels summed out where they appear once, then
// pairwise contractions as batched matmuls.
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

/// Einsum labels: a letter is its character code; the k-th of the
/// dimensions that "..." stands for, counted over the widest "..." (numpy
/// aligns them from the right and broadcasts them), is kEllipsisLabel + k.
constexpr int kEllipsisLabel = 256;

std::string einsumLabelName(int label) {
  if (label < kEllipsisLabel)
    return std::string("'") + static_cast<char>(label) + "'";
  return "'...' dimension " + std::to_string(label - kEllipsisLabel);
}

/// One term of an Einsum equation as letters, with '.' for its "..." (at
/// most one).
FailureOr<std::string> einsumTerm(NodeContext &nc, StringRef equation,
                                  StringRef term) {
  std::string letters;
  bool ellipsis = false;
  for (size_t i = 0; i < term.size(); ++i) {
    if (llvm::isAlpha(term[i])) {
      letters += term[i];
      continue;
    }
    if (!ellipsis && term.substr(i).starts_with("...")) {
      ellipsis = true;
      letters += '.';
      i += 2;
      continue;
    }
    return nc.error("equation '" + equation + "': term '" + term +
                    "' must be letters and at most one '...'");
  }
  return letters;
}

/// A tensor with one Einsum label per dimension.
struct Labeled {
  Value value;
  SmallVector<int> labels;
};

/// `t` summed over the labels `keep` rejects, which are dropped.
void einsumSumOut(NodeContext &nc, Labeled &t,
                  llvm::function_ref<bool(int)> keep) {
  SmallVector<int64_t> axes;
  SmallVector<int> kept;
  for (auto [i, l] : llvm::enumerate(t.labels)) {
    if (keep(l))
      kept.push_back(l);
    else
      axes.push_back(i);
  }
  if (axes.empty() || !t.value)
    return;
  t.value = part<ampc::ReduceSumOp>(
      nc, t.value, {nc.ints("axes", axes), nc.i64("keepdims", 0)});
  t.labels = kept;
}

/// The contraction of `a` and `b` keeping the labels in `keep` (the
/// output's and those of the operands still to come): labels of one
/// operand only that are not kept are summed first; the rest are batch
/// (both, kept), contracted (both, not kept) or free (one). Each operand
/// is transposed to (batch, free, contracted) / (batch, contracted, free)
/// and reshaped to 3-D for one batched ampc.matmul, whose result is
/// reshaped to (batch..., free of a..., free of b...). A null value after
/// an error.
Labeled einsumContract(NodeContext &nc, Labeled a, Labeled b,
                       const std::set<int> &keep) {
  auto has = [](const Labeled &t, int l) {
    return llvm::is_contained(t.labels, l);
  };
  einsumSumOut(nc, a, [&](int l) { return has(b, l) || keep.count(l); });
  einsumSumOut(nc, b, [&](int l) { return has(a, l) || keep.count(l); });
  if (!a.value || !b.value)
    return {};
  SmallVector<int> batch, contracted, freeA, freeB;
  for (int l : a.labels) {
    if (!has(b, l))
      freeA.push_back(l);
    else if (keep.count(l))
      batch.push_back(l);
    else
      contracted.push_back(l);
  }
  for (int l : b.labels)
    if (!has(a, l))
      freeB.push_back(l);
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
  // The result's dimensions: batch and free ones, whose product (unlike
  // the operands') may overflow.
  SmallVector<int64_t> dims;
  auto typeA = cast<RankedTensorType>(a.value.getType());
  auto typeB = cast<RankedTensorType>(b.value.getType());
  for (int64_t p : ArrayRef<int64_t>(permA).take_front(batch.size() +
                                                       freeA.size()))
    dims.push_back(typeA.getDimSize(p));
  for (int64_t p : ArrayRef<int64_t>(permB).take_back(freeB.size()))
    dims.push_back(typeB.getDimSize(p));
  if (!ampc::checkedProduct(dims)) {
    (void)nc.error("the contraction's result " + formatDims(dims) +
                   " has more than 2^63 elements");
    return {};
  }
  Value lhs = transposed(nc, a.value, permA);
  Value rhs = transposed(nc, b.value, permB);
  lhs = lhs ? reshaped(nc, lhs, shapeA) : Value();
  rhs = rhs ? reshaped(nc, rhs, shapeB) : Value();
  Value product = part<ampc::MatMulOp>(nc, {lhs, rhs});
  Labeled result;
  result.value = product ? reshaped(nc, product, dims) : Value();
  llvm::append_range(result.labels, batch);
  llvm::append_range(result.labels, freeA);
  llvm::append_range(result.labels, freeB);
  return result;
}

} // namespace

/// Einsum: the equation's labels (an implicit output: the letters used
/// once, in ASCII order, after the "..." dimensions). Each operand first
/// takes the diagonal of a repeated label (the two dimensions made
/// adjacent, merged, and sliced with a step of n + 1) and drops the
/// size-1 dimensions of labels another operand broadcasts. Operands are
/// then contracted pairwise from the left with batched matmuls
/// (einsumContract); what is left is summed over the labels not in the
/// output and transposed to the output's order.
FailureOr<Outputs> importEinsum(NodeContext &nc) {
  if (!nc.attr("equation"))
    return nc.error("attribute 'equation' is required");
  std::string text;
  for (char c : nc.getString("equation", ""))
    if (!llvm::isSpace(c))
      text += c;
  StringRef equation(text);
  bool explicitOutput = equation.contains("->");
  auto [lhs, rhs] = equation.split("->");
  if (rhs.contains("->"))
    return nc.error("equation '" + equation + "' has more than one '->'");
  SmallVector<StringRef> termTexts;
  lhs.split(termTexts, ',');
  if (termTexts.size() != nc.inputs.size())
    return nc.error("equation '" + equation + "' has " +
                    Twine(termTexts.size()) + " operand term(s) for " +
                    Twine(nc.inputs.size()) + " inputs");

  // Each term's letters, checked against its operand's rank; the widest
  // "..." decides how many ellipsis labels there are.
  SmallVector<std::string> terms;
  SmallVector<int64_t> ellipsisRanks;
  int64_t widest = 0;
  for (auto [k, termText] : llvm::enumerate(termTexts)) {
    FailureOr<std::string> term = einsumTerm(nc, equation, termText);
    if (failed(term))
      return failure();
    int64_t rank = cast<RankedTensorType>(nc.input(k).getType()).getRank();
    bool ellipsis = StringRef(*term).contains('.');
    int64_t letters = static_cast<int64_t>(term->size()) - ellipsis;
    if (ellipsis ? letters > rank : letters != rank)
      return nc.error("equation '" + equation + "': term '" + termText +
                      "' has " + Twine(letters) + " labels for input " +
                      Twine(k) + " of rank " + Twine(rank));
    ellipsisRanks.push_back(ellipsis ? rank - letters : 0);
    widest = std::max(widest, ellipsisRanks.back());
    terms.push_back(std::move(*term));
  }
  SmallVector<Labeled> operands;
  for (auto [k, term] : llvm::enumerate(terms)) {
    Labeled t{nc.input(k), {}};
    for (char c : term) {
      if (c != '.') {
        t.labels.push_back(c);
        continue;
      }
      for (int64_t j = widest - ellipsisRanks[k]; j < widest; ++j)
        t.labels.push_back(kEllipsisLabel + static_cast<int>(j));
    }
    operands.push_back(std::move(t));
  }
  auto inInputs = [&](int l) {
    return llvm::any_of(operands, [&](const Labeled &t) {
      return llvm::is_contained(t.labels, l);
    });
  };
  SmallVector<int> output;
  if (explicitOutput) {
    FailureOr<std::string> term = einsumTerm(nc, equation, rhs);
    if (failed(term))
      return failure();
    for (char c : *term) {
      if (c == '.') {
        for (int64_t j = 0; j < widest; ++j)
          output.push_back(kEllipsisLabel + static_cast<int>(j));
        continue;
      }
      if (llvm::is_contained(output, c))
        return nc.error("equation '" + equation + "': output label '" +
                        Twine(c) + "' appears twice");
      if (!inInputs(c))
        return nc.error("equation '" + equation + "': output label '" +
                        Twine(c) + "' is in no input");
      output.push_back(c);
    }
  } else {
    for (int64_t j = 0; j < widest; ++j)
      output.push_back(kEllipsisLabel + static_cast<int>(j));
    std::map<char, int> uses; // ordered: ASCII order
    for (const std::string &term : terms)
      for (char c : term)
        if (c != '.')
          ++uses[c];
    for (auto [c, n] : uses)
      if (n == 1)
        output.push_back(c);
  }

  // Each label's size: equal wherever it appears, or 1 (broadcast).
  llvm::DenseMap<int, int64_t> sizes;
  for (const Labeled &t : operands) {
    auto shape = cast<RankedTensorType>(t.value.getType()).getShape();
    for (auto [l, d] : llvm::zip(t.labels, shape)) {
      auto [it, inserted] = sizes.try_emplace(l, d);
      if (inserted || it->second == d || d == 1)
        continue;
      if (it->second != 1)
        return nc.error("equation '" + equation + "': label " +
                        einsumLabelName(l) + " has sizes " +
                        Twine(it->second) + " and " + Twine(d));
      it->second = d;
    }
  }

  for (auto [k, t] : llvm::enumerate(operands)) {
    // A repeated label takes the diagonal: its second dimension moved next
    // to the first, the two merged into n * n and every (n + 1)-th kept.
    for (size_t p = 0; p < t.labels.size(); ++p) {
      for (size_t q = p + 1; q < t.labels.size();) {
        if (t.labels[q] != t.labels[p]) {
          ++q;
          continue;
        }
        auto type = cast<RankedTensorType>(t.value.getType());
        int64_t n = type.getDimSize(p);
        if (type.getDimSize(q) != n)
          return nc.error("equation '" + equation + "': label " +
                          einsumLabelName(t.labels[p]) + " repeats in term '" +
                          termTexts[k] + "' with sizes " + Twine(n) + " and " +
                          Twine(type.getDimSize(q)));
        std::optional<int64_t> square = ampc::checkedProduct({n, n});
        if (!square)
          return nc.error("equation '" + equation + "': the diagonal of " +
                          einsumLabelName(t.labels[p]) + " (size " + Twine(n) +
                          ") has more than 2^63 elements");
        SmallVector<int64_t> perm, merged;
        for (int64_t i = 0; i < type.getRank(); ++i)
          if (i != static_cast<int64_t>(q))
            perm.push_back(i);
        perm.insert(perm.begin() + p + 1, q);
        for (int64_t i : perm)
          if (i != static_cast<int64_t>(q))
            merged.push_back(i == static_cast<int64_t>(p)
                                 ? *square
                                 : type.getDimSize(i));
        Value v = transposed(nc, t.value, perm);
        v = v ? reshaped(nc, v, merged) : Value();
        v = part<ampc::SliceOp>(nc, v,
                                {nc.ints("starts", {0}),
                                 nc.ints("ends", {*square}),
                                 nc.ints("axes", {static_cast<int64_t>(p)}),
                                 nc.ints("steps", {n + 1})});
        if (!v)
          return failure();
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
      if (d == 1 && sizes.lookup(l) != 1)
        continue;
      squeezed.push_back(d);
      labels.push_back(l);
    }
    if (labels.size() != t.labels.size()) {
      t.value = reshaped(nc, t.value, squeezed);
      t.labels = labels;
      if (!t.value)
        return failure();
    }
  }

  Labeled result = operands.front();
  for (size_t k = 1; k < operands.size(); ++k) {
    std::set<int> keep(output.begin(), output.end());
    for (size_t j = k + 1; j < operands.size(); ++j)
      keep.insert(operands[j].labels.begin(), operands[j].labels.end());
    result = einsumContract(nc, result, operands[k], keep);
    if (!result.value)
      return failure();
  }
  einsumSumOut(nc, result,
               [&](int l) { return llvm::is_contained(output, l); });
  SmallVector<int64_t> perm;
  for (int l : output)
    perm.push_back(llvm::find(result.labels, l) - result.labels.begin());
  Value r = result.value ? transposed(nc, result.value, perm) : Value();
  // An equation that changes nothing ("ij->ij") is still a node of its own.
  if (r && r == nc.input(0))
    r = part<ampc::IdentityOp>(nc, r);
  if (!r)
    return failure();
  return Outputs{r};
}

} // namespace ampc::detail
