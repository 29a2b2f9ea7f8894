//===- Einsum.h - an Einsum equation read against its operands -*- C++ -*-===//
//
// ampc.einsum's equation, read once for its verifier (the result type), the
// importer's Einsum rule (the node's error messages) and
// ampc-decompose-einsum (the labels it contracts).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_EINSUM_H
#define AMPC_DIALECT_EINSUM_H

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <set>
#include <string>

namespace ampc {

/// Einsum labels: a letter is its character code; the k-th of the
/// dimensions that "..." stands for, counted over the widest "..." (numpy
/// aligns them from the right and broadcasts them), is
/// kEinsumEllipsisLabel + k.
constexpr int kEinsumEllipsisLabel = 256;

/// "'i'" or "'...' dimension 2", for messages.
std::string einsumLabelName(int label);

/// An Einsum equation whose labels agree with its operands' shapes.
struct EinsumEquation {
  /// Each operand's labels, one per dimension ("..." expanded).
  llvm::SmallVector<llvm::SmallVector<int>> operands;
  /// The output's labels: the explicit ones after "->", or the "..."
  /// dimensions and then the letters used once, in ASCII order.
  llvm::SmallVector<int> output;
  /// Each label's size: equal wherever it appears, or 1 (broadcast).
  llvm::DenseMap<int, int64_t> sizes;
  /// The output's shape.
  llvm::SmallVector<int64_t> outputShape() const;
};

/// The labels of one pairwise contraction of operands labeled `a` and `b`
/// (each already summed over its labels that neither the other nor `keep`
/// has), keeping the labels in `keep` (the output's and those of the
/// operands still to come): batch (both, kept), contracted (both, not
/// kept) and free (one only). The result is labeled batch, free of a, free
/// of b.
struct EinsumContraction {
  llvm::SmallVector<int> batch, contracted, freeA, freeB;
  llvm::SmallVector<int> resultLabels() const;
};
EinsumContraction einsumContraction(llvm::ArrayRef<int> a,
                                    llvm::ArrayRef<int> b,
                                    const std::set<int> &keep);

/// The labels of `t` that a contraction with `other` keeps: those `other`
/// or `keep` has (the others are summed first).
llvm::SmallVector<int> einsumKept(llvm::ArrayRef<int> t,
                                  llvm::ArrayRef<int> other,
                                  const std::set<int> &keep);

/// The labels the operands are contracted with, left to right: operand k's
/// labels without repeats (a diagonal) and without size-1 dimensions of a
/// label another operand has larger (a broadcast).
llvm::SmallVector<int> einsumOperandLabels(const EinsumEquation &eq, size_t k,
                                           llvm::ArrayRef<int64_t> shape);

/// `equation` (white space ignored) read against operands of `shapes`:
/// malformed terms, labels that disagree with the ranks or with each
/// other's sizes, an output label twice or in no input, a repeated label
/// (a diagonal) of two sizes or whose square passes 2^63, and a pairwise
/// contraction whose result passes 2^63 elements are failures, with
/// `error` saying which.
mlir::FailureOr<EinsumEquation>
readEinsum(llvm::StringRef equation,
           llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes, std::string &error);

} // namespace ampc

#endif // AMPC_DIALECT_EINSUM_H
