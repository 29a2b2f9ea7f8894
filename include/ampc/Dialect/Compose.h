//===- Compose.h - building compositions of ampc ops ------------*- C++ -*-===//
//
// What a composition of ampc ops is built with: the importer's rules
// (lib/Import, whose NodeContext is one) and the ampc-decompose-* passes
// (lib/Transforms/Decompose*.cpp), which lower an op imported 1:1 (ampc.einsum)
// to the ops the rest of the pipeline knows. Each op is created with its
// result types inferred, verified, checked against --max-tensor-bytes and
// folded at once when its operands are constants, so a decomposition pass
// builds exactly what the importer built when it expanded the node itself.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_DIALECT_COMPOSE_H
#define AMPC_DIALECT_COMPOSE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/Twine.h"

#include <string>

namespace ampc {

/// Builds ampc ops at `b`'s insertion point, at `loc`.
struct Composer {
  mlir::OpBuilder &b;
  mlir::Location loc;
  /// --max-tensor-bytes: the largest tensor an op built here may make.
  int64_t maxTensorBytes;
  /// The rewriter `b` is, in a pattern (ops it erases are erased through
  /// it); null for a plain builder.
  mlir::RewriterBase *rewriter = nullptr;

  /// Reports an error at `loc` and returns failure.
  mlir::LogicalResult error(const llvm::Twine &message) const {
    mlir::emitError(loc) << message;
    return mlir::failure();
  }

  /// Builds an OpTy, inferring result types unless `resultTypes` is given,
  /// verifies it and folds it when its operands are constant.
  template <typename OpTy>
  mlir::FailureOr<llvm::SmallVector<mlir::Value>>
  build(mlir::ValueRange operands,
        llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
        unsigned numResults = 1, mlir::TypeRange resultTypes = {}) {
    // Created with placeholder result types and asked for the real ones
    // (finish): ODS's inferring builders abort when inference fails, and a
    // model's bad node must be an error at the node.
    bool infer = resultTypes.empty();
    llvm::SmallVector<mlir::Type> types =
        infer ? llvm::SmallVector<mlir::Type>(
                    numResults, mlir::NoneType::get(b.getContext()))
              : llvm::SmallVector<mlir::Type>(resultTypes);
    mlir::TypeRange typeRange(types);
    OpTy op = OpTy::create(b, loc, typeRange, operands, attrs);
    return finish(op.getOperation(), infer);
  }

  /// Infers the result types of the just-created `op` (when `infer`),
  /// verifies it, checks its size and folds it; erases it on failure.
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> finish(mlir::Operation *op,
                                                         bool infer);

  mlir::NamedAttribute i64(llvm::StringRef name, int64_t v) const {
    return b.getNamedAttr(name, b.getI64IntegerAttr(v));
  }
  mlir::NamedAttribute f32(llvm::StringRef name, float v) const {
    return b.getNamedAttr(name, b.getF32FloatAttr(v));
  }
  mlir::NamedAttribute ints(llvm::StringRef name,
                            llvm::ArrayRef<int64_t> v) const {
    return b.getNamedAttr(name, b.getDenseI64ArrayAttr(v));
  }

private:
  void erase(mlir::Operation *op);
};

//===----------------------------------------------------------------------===//
// Parts of compositions: each returns null after an error at the
// composer's location (already reported), and takes a null operand for such
// an error.
//===----------------------------------------------------------------------===//

/// The single result of an OpTy on `operands`, its type inferred unless
/// `resultType` is given.
template <typename OpTy>
mlir::Value part(Composer &c, mlir::ValueRange operands,
                 llvm::ArrayRef<mlir::NamedAttribute> attrs = {},
                 mlir::Type resultType = {}) {
  if (llvm::any_of(operands, [](mlir::Value v) { return !v; }))
    return mlir::Value();
  mlir::FailureOr<llvm::SmallVector<mlir::Value>> r =
      resultType ? c.build<OpTy>(operands, attrs, 1, resultType)
                 : c.build<OpTy>(operands, attrs);
  return mlir::failed(r) ? mlir::Value() : (*r)[0];
}

/// `v` reshaped to `shape` (itself when it has that shape).
mlir::Value reshaped(Composer &c, mlir::Value v, llvm::ArrayRef<int64_t> shape);

/// `v` transposed by `perm` (itself when `perm` is the identity).
mlir::Value transposed(Composer &c, mlir::Value v,
                       llvm::ArrayRef<int64_t> perm);

/// A zero-dimensional constant `value` of `element`.
mlir::Value scalarOf(Composer &c, mlir::Type element, double value);

/// "[2, 3, 4]", for messages.
std::string formatDims(llvm::ArrayRef<int64_t> dims);

} // namespace ampc

#endif // AMPC_DIALECT_COMPOSE_H
