//===- Einsum.cpp - an Einsum equation read against its operands ----------===//

#include "ampc/Dialect/Einsum.h"

#include "ampc/Dialect/TensorSize.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>
#include <map>

using namespace mlir;

namespace ampc {

std::string einsumLabelName(int label) {
  if (label < kEinsumEllipsisLabel)
    return std::string("'") + static_cast<char>(label) + "'";
  return "'...' dimension " + std::to_string(label - kEinsumEllipsisLabel);
}

SmallVector<int64_t> EinsumEquation::outputShape() const {
  SmallVector<int64_t> shape;
  for (int l : output)
    shape.push_back(sizes.lookup(l));
  return shape;
}

SmallVector<int> EinsumContraction::resultLabels() const {
  SmallVector<int> labels(batch);
  llvm::append_range(labels, freeA);
  llvm::append_range(labels, freeB);
  return labels;
}

EinsumContraction einsumContraction(ArrayRef<int> a, ArrayRef<int> b,
                                    const std::set<int> &keep) {
  EinsumContraction c;
  for (int l : a) {
    if (!llvm::is_contained(b, l))
      c.freeA.push_back(l);
    else if (keep.count(l))
      c.batch.push_back(l);
    else
      c.contracted.push_back(l);
  }
  for (int l : b)
    if (!llvm::is_contained(a, l))
      c.freeB.push_back(l);
  return c;
}

SmallVector<int> einsumKept(ArrayRef<int> t, ArrayRef<int> other,
                            const std::set<int> &keep) {
  SmallVector<int> kept;
  for (int l : t)
    if (llvm::is_contained(other, l) || keep.count(l))
      kept.push_back(l);
  return kept;
}

SmallVector<int> einsumOperandLabels(const EinsumEquation &eq, size_t k,
                                     ArrayRef<int64_t> shape) {
  SmallVector<int> labels;
  for (auto [i, l] : llvm::enumerate(eq.operands[k])) {
    if (llvm::is_contained(labels, l))
      continue;
    if (shape[i] == 1 && eq.sizes.lookup(l) != 1)
      continue;
    labels.push_back(l);
  }
  return labels;
}

namespace {
/// One term of an Einsum equation as letters, with '.' for its "..." (at
/// most one).
FailureOr<std::string> readTerm(StringRef equation, StringRef term,
                                std::string &error) {
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
    error = ("equation '" + equation + "': term '" + term +
             "' must be letters and at most one '...'")
                .str();
    return failure();
  }
  return letters;
}
} // namespace

FailureOr<EinsumEquation> readEinsum(StringRef equationText,
                                     ArrayRef<ArrayRef<int64_t>> shapes,
                                     std::string &error) {
  auto fail = [&](const Twine &message) -> FailureOr<EinsumEquation> {
    error = message.str();
    return failure();
  };
  std::string text;
  for (char c : equationText)
    if (!llvm::isSpace(c))
      text += c;
  StringRef equation(text);
  bool explicitOutput = equation.contains("->");
  auto [lhs, rhs] = equation.split("->");
  if (rhs.contains("->"))
    return fail("equation '" + equation + "' has more than one '->'");
  SmallVector<StringRef> termTexts;
  lhs.split(termTexts, ',');
  if (termTexts.size() != shapes.size())
    return fail("equation '" + equation + "' has " + Twine(termTexts.size()) +
                " operand term(s) for " + Twine(shapes.size()) + " inputs");

  // Each term's letters, checked against its operand's rank; the widest
  // "..." decides how many ellipsis labels there are.
  SmallVector<std::string> terms;
  SmallVector<int64_t> ellipsisRanks;
  int64_t widest = 0;
  for (auto [k, termText] : llvm::enumerate(termTexts)) {
    FailureOr<std::string> term = readTerm(equation, termText, error);
    if (failed(term))
      return failure();
    int64_t rank = static_cast<int64_t>(shapes[k].size());
    bool ellipsis = StringRef(*term).contains('.');
    int64_t letters = static_cast<int64_t>(term->size()) - ellipsis;
    if (ellipsis ? letters > rank : letters != rank)
      return fail("equation '" + equation + "': term '" + termText + "' has " +
                  Twine(letters) + " labels for input " + Twine(k) +
                  " of rank " + Twine(rank));
    ellipsisRanks.push_back(ellipsis ? rank - letters : 0);
    widest = std::max(widest, ellipsisRanks.back());
    terms.push_back(std::move(*term));
  }
  EinsumEquation eq;
  for (auto [k, term] : llvm::enumerate(terms)) {
    SmallVector<int> labels;
    for (char c : term) {
      if (c != '.') {
        labels.push_back(c);
        continue;
      }
      for (int64_t j = widest - ellipsisRanks[k]; j < widest; ++j)
        labels.push_back(kEinsumEllipsisLabel + static_cast<int>(j));
    }
    eq.operands.push_back(std::move(labels));
  }
  auto inInputs = [&](int l) {
    return llvm::any_of(eq.operands, [&](ArrayRef<int> labels) {
      return llvm::is_contained(labels, l);
    });
  };
  if (explicitOutput) {
    FailureOr<std::string> term = readTerm(equation, rhs, error);
    if (failed(term))
      return failure();
    for (char c : *term) {
      if (c == '.') {
        for (int64_t j = 0; j < widest; ++j)
          eq.output.push_back(kEinsumEllipsisLabel + static_cast<int>(j));
        continue;
      }
      if (llvm::is_contained(eq.output, c))
        return fail("equation '" + equation + "': output label '" + Twine(c) +
                    "' appears twice");
      if (!inInputs(c))
        return fail("equation '" + equation + "': output label '" + Twine(c) +
                    "' is in no input");
      eq.output.push_back(c);
    }
  } else {
    for (int64_t j = 0; j < widest; ++j)
      eq.output.push_back(kEinsumEllipsisLabel + static_cast<int>(j));
    std::map<char, int> uses; // ordered: ASCII order
    for (const std::string &term : terms)
      for (char c : term)
        if (c != '.')
          ++uses[c];
    for (auto [c, n] : uses)
      if (n == 1)
        eq.output.push_back(c);
  }

  for (auto [labels, shape] : llvm::zip(eq.operands, shapes)) {
    for (auto [l, d] : llvm::zip(labels, shape)) {
      auto [it, inserted] = eq.sizes.try_emplace(l, d);
      if (inserted || it->second == d || d == 1)
        continue;
      if (it->second != 1)
        return fail("equation '" + equation + "': label " + einsumLabelName(l) +
                    " has sizes " + Twine(it->second) + " and " + Twine(d));
      it->second = d;
    }
  }

  // A repeated label is a diagonal: its dimensions must agree, and the two
  // merged (n * n elements) must stay below 2^63.
  for (auto [k, labels] : llvm::enumerate(eq.operands)) {
    for (size_t p = 0; p < labels.size(); ++p) {
      for (size_t q = p + 1; q < labels.size(); ++q) {
        if (labels[q] != labels[p])
          continue;
        int64_t n = shapes[k][p];
        if (shapes[k][q] != n)
          return fail("equation '" + equation + "': label " +
                      einsumLabelName(labels[p]) + " repeats in term '" +
                      termTexts[k] + "' with sizes " + Twine(n) + " and " +
                      Twine(shapes[k][q]));
        if (!ampc::checkedProduct({n, n}))
          return fail("equation '" + equation + "': the diagonal of " +
                      einsumLabelName(labels[p]) + " (size " + Twine(n) +
                      ") has more than 2^63 elements");
      }
    }
  }

  // The pairwise contractions from the left: each result's elements must
  // stay below 2^63 (the operands', being tensors, do).
  SmallVector<SmallVector<int>> labels;
  for (size_t k = 0; k < shapes.size(); ++k)
    labels.push_back(einsumOperandLabels(eq, k, shapes[k]));
  SmallVector<int> result = labels[0];
  for (size_t k = 1; k < shapes.size(); ++k) {
    std::set<int> keep(eq.output.begin(), eq.output.end());
    for (size_t j = k + 1; j < shapes.size(); ++j)
      keep.insert(labels[j].begin(), labels[j].end());
    EinsumContraction c =
        einsumContraction(einsumKept(result, labels[k], keep),
                          einsumKept(labels[k], result, keep), keep);
    result = c.resultLabels();
    SmallVector<int64_t> dims;
    for (int l : result)
      dims.push_back(eq.sizes.lookup(l));
    if (!ampc::checkedProduct(dims)) {
      std::string text = "[";
      for (auto [i, d] : llvm::enumerate(dims))
        text += (i ? ", " : "") + std::to_string(d);
      return fail("the contraction's result " + text +
                  "] has more than 2^63 elements");
    }
  }
  return eq;
}

} // namespace ampc
