//===- TensorSize.h - checked tensor sizes and the size limit -*- C++ -*-===//
//
// Every size ampc computes from a shape (element counts, byte sizes, the
// arena) goes through these checked functions, so a hostile shape
// (Expand to [2^62 + 1, 4], --batch 2^63 - 1) is an error, never a wrapped
// integer in the compiler or in the generated code. The importer refuses a
// tensor above the limit (`--max-tensor-bytes`, kDefaultMaxTensorBytes) at
// the node that makes it, and every ampc op verifies that its tensors stay
// under kMaxTensorBytes, which keeps every offset the targets compute from
// them representable.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_TENSORSIZE_H
#define AMPC_DIALECT_TENSORSIZE_H

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace ampc {

/// The default of `--max-tensor-bytes` (64 GiB): one tensor, and the arena
/// of a function's buffers, may not be larger.
constexpr int64_t kDefaultMaxTensorBytes = int64_t(1) << 36;
/// The most any tensor may take whatever the option says (2^48 bytes), so
/// sums of a few thousand sizes and offsets cannot overflow int64.
constexpr int64_t kMaxTensorBytes = int64_t(1) << 48;

/// The product of `dims`, or nothing when a dim is negative (dynamic) or
/// the product does not fit in int64.
std::optional<int64_t> checkedProduct(llvm::ArrayRef<int64_t> dims);

/// Bytes of a statically shaped tensor of `type` (elements times the
/// element's storage bytes, booleans one byte), or nothing on overflow or a
/// dynamic shape.
std::optional<int64_t> checkedByteSize(mlir::ShapedType type);

/// Empty when `type` (a tensor; other types pass) has at most `limit`
/// bytes; otherwise a message: "tensor<...> has N bytes, more than the
/// limit of L bytes" (or "... more than 2^63 bytes").
std::string checkTensorSize(mlir::Type type, int64_t limit);

} // namespace ampc

#endif // AMPC_DIALECT_TENSORSIZE_H
