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

/// "[2, 3, 4]", for messages.
std::string formatDims(llvm::ArrayRef<int64_t> dims);

//===----------------------------------------------------------------------===//
// Constants a composition computes (the importer's rules and the
// ampc-decompose-* passes alike).
//===----------------------------------------------------------------------===//

/// The most elements of a constant the importer computes from a model's
/// numbers rather than reads from it: index vectors along an axis (OneHot's
/// depth, ArgMax's axis), gather positions and weights (Pad, Resize,
/// ConvTranspose), Range's values, a window. They are made element by
/// element at import and stored in the library, so a model of a few
/// hundred bytes asking for 2^32 of them is refused before any is made:
/// 2^24 elements (128 MiB of int64), besides --max-tensor-bytes.
constexpr int64_t kMaxComputedElements = int64_t(1) << 24;

/// Success when a constant of `shape` and `element` about to be computed
/// has at most kMaxComputedElements elements and the composer's
/// --max-tensor-bytes bytes; otherwise an error at the composer's location
/// that starts with `what` (which names the model's number) and failure.
mlir::LogicalResult checkComputedConstant(Composer &c,
                                          llvm::ArrayRef<int64_t> shape,
                                          mlir::Type element,
                                          const llvm::Twine &what);

/// A zero-dimensional constant `value` of `element`.
mlir::Value scalarOf(Composer &c, mlir::Type element, double value);

/// A constant of `element` and `shape` holding 0, step, 2 * step, ... (n
/// values).
mlir::Value indexVector(Composer &c, int64_t n, llvm::ArrayRef<int64_t> shape,
                        mlir::Type element, int64_t step = 1);

/// `shape` with ones everywhere but `n` at `axis` (and at `axis2` when
/// given): a vector along `axis` that broadcasts against a tensor of rank
/// `rank`.
llvm::SmallVector<int64_t> alongAxes(int64_t rank, int64_t n, int64_t axis,
                                     int64_t axis2 = -1);

} // namespace ampc

#endif // AMPC_DIALECT_COMPOSE_H
