//===- MemoryPlan.h - the static memory plan of ampc-plan-memory -*- C++ -*-===//
//
// What ampc-plan-memory records and the target emitters read: per op, the
// arena offset of each result; per function, the arena's size.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_MEMORYPLAN_H
#define AMPC_TRANSFORMS_MEMORYPLAN_H

#include "ampc/Dialect/AMPCDialect.h"

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace ampc {

// The plan's attributes (kOffsetsAttr on ops, kArenaBytesAttr on
// functions) and its alignment (kBufferAlignment) are in AMPCDialect.h: the
// dialect verifies them.

/// Bytes one element of `type` takes in memory (i1 takes a byte, f16 and
/// bf16 two); 0 for types code generation cannot store.
int64_t storageBytes(mlir::Type type);

/// Whether result `index` of `op` is a view of operand 0 (AMPC_View, or an
/// ampc.subview) and so has no buffer of its own.
bool isViewResult(mlir::Operation *op, unsigned index);

/// Where a view result of `op` (isViewResult) starts in its operand's
/// buffer, in elements: an ampc.subview's offset, else 0.
int64_t viewOffset(mlir::Operation *op);

/// The parameter or state whose storage `value` reads in place (a load, or
/// a view of one), or null (also for a packed load of several: see
/// storageSymbols).
mlir::StringAttr storageSymbol(mlir::Value value);

/// Every parameter or state whose storage `value` reads in place: the one
/// of storageSymbol, or the states of an ampc.load_packed_state (or a view
/// of one).
llvm::SmallVector<mlir::StringAttr, 1> storageSymbols(mlir::Value value);

/// Whether an ampc.store after `op` and before `at` (in the same block)
/// writes a parameter or state `op` reads in place: a copy of `op`, or a
/// kernel that computes it, placed at `at` would read the stored value.
bool storedBetween(mlir::Operation *op, mlir::Operation *at);
/// Whether a store after `from` and before `at` writes what `op` reads in
/// place: `op` moved up to `from` (ampc-fuse-horizontal) would read the
/// stored value when such a store lies between `from` and `op`.
bool storedBetween(mlir::Operation *from, mlir::Operation *op,
                   mlir::Operation *at);

/// The arena offset of `value` (an op result), or std::nullopt when the
/// plan gives it no buffer.
std::optional<int64_t> planOffset(mlir::Value value);

/// The guard the CUDA target's plan leaves after every result (kGuardBytesAttr):
/// one alignment unit, so that a 16-byte vector store or any index up to 64
/// bytes past the end lands in it.
constexpr int64_t kCudaGuardBytes = 64;

/// The arena bytes a result of `bytes` bytes takes in a plan with `guard`
/// guard bytes: aligned, at least one byte (an empty tensor still has an
/// address), and at least `guard` unused bytes after its end.
int64_t reservedBytes(int64_t bytes, int64_t guard);

} // namespace ampc

#endif // AMPC_TRANSFORMS_MEMORYPLAN_H
