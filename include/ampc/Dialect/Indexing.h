//===- Indexing.h - the shape facts of the indexing ops ---------*- C++ -*-===//
//
// What GatherElements, ScatterElements, GatherND, ScatterND,
// ReverseSequence, OneHot and TopK require of their operands, checked once
// for the shape rules of the ops they are imported 1:1 as
// (ampc.gather_elements, ..., AMPCOps.td) and for the importer's rules (the
// node's error messages): each returns failure with `error` saying what is
// wrong, in the words the node's error has always used.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_INDEXING_H
#define AMPC_DIALECT_INDEXING_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace ampc {

/// GatherElements' and ScatterElements' indices: int32 or int64, of data's
/// rank (>= 1), no longer than data off `axis`. Returns the axis,
/// normalized.
mlir::FailureOr<int64_t> readElementIndices(mlir::RankedTensorType data,
                                            mlir::RankedTensorType indices,
                                            int64_t axis, std::string &error);

/// ScatterElements' updates: indices' shape.
mlir::LogicalResult checkElementUpdates(mlir::RankedTensorType indices,
                                        mlir::RankedTensorType updates,
                                        std::string &error);

/// GatherND's and ScatterND's indices: int32 or int64 tuples (the last
/// dimension, of 1 to rank - batch elements) after `batch` dimensions that
/// are data's. Returns k, the length of a tuple.
mlir::FailureOr<int64_t> readTupleIndices(mlir::RankedTensorType data,
                                          mlir::RankedTensorType indices,
                                          int64_t batch, std::string &error);

/// GatherND's result shape: indices' but the last, then data's after the
/// first batch + k.
llvm::SmallVector<int64_t> gatherNDShape(mlir::RankedTensorType data,
                                         mlir::RankedTensorType indices,
                                         int64_t batch, int64_t k);

/// ScatterND's updates: indices' shape but the last, then data's after the
/// first k.
mlir::LogicalResult checkTupleUpdates(mlir::RankedTensorType data,
                                      mlir::RankedTensorType indices,
                                      mlir::RankedTensorType updates, int64_t k,
                                      std::string &error);

/// ReverseSequence: input of rank >= 2, time and batch axes 0 and 1 in some
/// order, int64 sequence_lens of one length per batch entry.
mlir::LogicalResult checkReverseSequence(mlir::RankedTensorType input,
                                         mlir::RankedTensorType lens,
                                         int64_t timeAxis, int64_t batchAxis,
                                         std::string &error);

/// OneHot's values ([off_value, on_value]) and axis (into the result, of
/// indices' rank + 1). Returns the axis, normalized.
mlir::FailureOr<int64_t> readOneHot(mlir::RankedTensorType indices,
                                    mlir::RankedTensorType values, int64_t axis,
                                    std::string &error);

/// TopK's input (rank >= 1), axis, k (0 to the axis' size) and largest (0
/// or 1). Returns the axis, normalized.
mlir::FailureOr<int64_t> readTopK(mlir::RankedTensorType input, int64_t axis,
                                  int64_t k, int64_t largest,
                                  std::string &error);

/// The reductions of ScatterElements and ScatterND (and ampc.scatter).
bool isScatterReduction(llvm::StringRef reduction);

} // namespace ampc

#endif // AMPC_DIALECT_INDEXING_H
