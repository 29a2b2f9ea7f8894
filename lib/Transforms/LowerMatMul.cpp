//===- LowerMatMul.cpp - every MatMul as an ampc.batched_gemm -------------===//
//
// Layout decisions in the IR (Passes.td, LowerMatMulPass). numpy.matmul's
// 1-D promotion and batch broadcasting are decided here, once, as the
// matrix layout of an ampc.batched_gemm (a batch stride per operand, 0 for
// an operand every batch element shares), so the targets print GEMMs and
// never work out a MatMul's batches themselves. Batch broadcasting that no
// single stride describes expands the operand to the whole batch first.
//
//===----------------------------------------------------------------------===//

#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Transforms/Passes.h"

#include "ampc/Dialect/AMPCDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace ampc {
#define GEN_PASS_DEF_LOWERMATMULPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// The element offsets of each batch element's matrix in an operand whose
/// batch dimensions `strides` (elements per batch step, 0 where it
/// broadcasts) index the result's batch `batch`, row-major.
SmallVector<int64_t> batchOffsets(ArrayRef<int64_t> batch,
                                  ArrayRef<int64_t> strides) {
  SmallVector<int64_t> at;
  int64_t count = ampc::emit::product(batch);
  for (int64_t i = 0; i < count; ++i) {
    int64_t r = i, offset = 0;
    for (int64_t d = static_cast<int64_t>(batch.size()) - 1; d >= 0; --d) {
      offset += (r % batch[d]) * strides[d];
      r /= batch[d];
    }
    at.push_back(offset);
  }
  return at;
}

/// The one stride between consecutive batch elements, if there is one.
std::optional<int64_t> uniformStride(ArrayRef<int64_t> at) {
  if (at.size() < 2)
    return 0;
  for (size_t i = 2; i < at.size(); ++i)
    if (at[i] - at[i - 1] != at[1] - at[0])
      return std::nullopt;
  return at[1] - at[0];
}

struct LowerMatMulPass : ampc::impl::LowerMatMulPassBase<LowerMatMulPass> {
  void runOnOperation() override {
    SmallVector<ampc::MatMulOp> matmuls;
    getOperation().walk([&](ampc::MatMulOp op) { matmuls.push_back(op); });
    for (ampc::MatMulOp op : matmuls) {
      // No BLAS or cuBLASLt type multiplies integers.
      Type element = ampc::emit::tensorOf(op.getResult()).getElementType();
      if (!isa<FloatType>(element)) {
        op.emitError() << "the targets multiply float matrices only, got "
                       << element;
        return signalPassFailure();
      }
      lower(op);
    }
  }

  void lower(ampc::MatMulOp op) {
    Value a = op.getLhs(), b = op.getRhs();
    // numpy.matmul: a 1-D A is a row [1, k], a 1-D B a column [k, 1].
    SmallVector<int64_t> as(ampc::emit::tensorOf(a).getShape()),
        bs(ampc::emit::tensorOf(b).getShape());
    if (as.size() == 1)
      as.insert(as.begin(), 1);
    if (bs.size() == 1)
      bs.push_back(1);
    int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
    ArrayRef<int64_t> aBatch = ArrayRef(as).drop_back(2),
                      bBatch = ArrayRef(bs).drop_back(2);
    SmallVector<int64_t> batch = *ampc::broadcastShapes({aBatch, bBatch});
    OpBuilder builder(op);
    // Each operand's batch stride; an operand whose broadcast batch no
    // single stride describes is expanded to the whole batch first.
    auto operand = [&](Value v, ArrayRef<int64_t> vBatch, int64_t rows,
                       int64_t cols) -> std::pair<Value, int64_t> {
      SmallVector<int64_t> strides =
          ampc::emit::broadcastStrides(vBatch, batch);
      for (int64_t &s : strides)
        s *= rows * cols;
      if (std::optional<int64_t> s =
              uniformStride(batchOffsets(batch, strides)))
        return {v, *s};
      SmallVector<int64_t> shape(batch);
      shape.append({rows, cols});
      auto type = RankedTensorType::get(
          shape, ampc::emit::tensorOf(v).getElementType());
      // A 1-D operand as its matrix first.
      SmallVector<int64_t> matrixShape(vBatch);
      matrixShape.append({rows, cols});
      Value matrices = v;
      if (ampc::emit::tensorOf(v).getShape() != ArrayRef(matrixShape))
        matrices = ampc::ReshapeOp::create(
            builder, op.getLoc(),
            RankedTensorType::get(matrixShape, type.getElementType()), v);
      Value expanded =
          ampc::ExpandOp::create(builder, op.getLoc(), type, matrices);
      return {expanded, rows * cols};
    };
    auto [aValue, strideA] = operand(a, aBatch, m, k);
    auto [bValue, strideB] = operand(b, bBatch, k, n);
    int64_t count = ampc::emit::product(batch);
    // An empty batch is one GEMM of no rows (the op needs a batch of 1).
    if (count == 0)
      count = 1, m = 0;
    auto i64 = [&](int64_t v) { return builder.getI64IntegerAttr(v); };
    auto gemm = ampc::BatchedGemmOp::create(
        builder, op.getLoc(), op.getType(), aValue, bValue, Value(), i64(m),
        i64(n), i64(k), i64(count), builder.getBoolAttr(false),
        builder.getBoolAttr(false), i64(std::max<int64_t>(k, 1)),
        i64(std::max<int64_t>(n, 1)), i64(std::max<int64_t>(n, 1)),
        i64(strideA), i64(strideB), i64(m * n), builder.getF32FloatAttr(1.0f),
        ampc::GemmEpilogueAttr::get(builder.getContext(),
                                    ampc::GemmEpilogue::None));
    // Attributes the pipeline put on the MatMul (its precision and
    // accumulation) travel with it.
    for (NamedAttribute attr : op->getDiscardableAttrs())
      gemm->setAttr(attr.getName(), attr.getValue());
    op.getResult().replaceAllUsesWith(gemm.getResult());
    op.erase();
  }
};

} // namespace
