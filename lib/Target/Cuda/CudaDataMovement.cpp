//===- CudaDataMovement.cpp - copies, gathers, scatters ---------------------===//
//
// The ops that move data: strided copies (Transpose, Slice, a broadcast C),
// SliceGrad, Concat, Gather and its adjoint (a counting sort by row), Scatter,
// Shape and TopK, on the templated kernels of CudaKernels.cuh.
//
//===----------------------------------------------------------------------===//

#include "CudaEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Analysis/KernelGeometry.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cudagen;
using llvm::formatv;
using llvm::StringRef;

void CudaEmitter::emitStrided(Operation *op, Value input, Value output,
                              ArrayRef<int64_t> strides, int64_t base,
                              llvm::raw_ostream &body) {
  RankedTensorType out = tensorOf(output);
  if (out.getNumElements() == 0)
    return;
  launch(op,
         formatv("ampc::cuda::stridedCopy<{0}>",
                 storageType(out.getElementType()))
             .str(),
         out.getNumElements(),
         formatv("{0}, {1}, {2}LL, {3}LL, {4}", name(input), name(output),
                 out.getNumElements(), base,
                 strided(out.getShape(), strides))
             .str(),
         body);
}
LogicalResult CudaEmitter::emitDataMovement(Operation *op,
                                            llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case<ampc::TransposeOp, ampc::SliceOp>([&](Operation *) {
        // A channels-last weight copy the fused optimizer writes
        // transposed (CudaOptimizer.cpp).
        if (folded.contains(op))
          return success();
        StridedView view = stridedView(op);
        emitStrided(op, op->getOperand(0), op->getResult(0), view.strides,
                    view.offset, body);
        return success();
      })
      .Case([&](ampc::SliceGradOp o) {
        RankedTensorType out = tensorOf(o.getOutput()),
                         grad = tensorOf(o.getGrad());
        StridedView view = stridedView(op);
        body << formatv("  AMPC_CUDA(ctx, cudaMemsetAsync({0}, 0, {1}ULL, "
                        "ctx.stream), {2});\n",
                        name(o.getOutput()),
                        out.getNumElements() * storageSize(out.getElementType()),
                        where(op));
        if (grad.getNumElements())
          launch(op,
                 formatv("ampc::cuda::stridedScatter<{0}>",
                         storageType(grad.getElementType()))
                     .str(),
                 grad.getNumElements(),
                 formatv("{0}, {1}, {2}LL, {3}LL, {4}", name(o.getGrad()),
                         name(o.getOutput()), grad.getNumElements(),
                         view.offset, strided(view.dims, view.strides))
                     .str(),
                 body);
        return success();
      })
      .Case([&](ampc::ConcatOp o) {
        ConcatGeometry g = concatGeometry(op);
        // A tensor padded with zeros: one kernel writes both parts.
        if (concatPadsWithZeros(op)) {
          const ConcatPart &part = g.parts.front();
          if (g.outer * g.row != 0)
            launch(op,
                   formatv("ampc::cuda::padPart<{0}>",
                           storageType(elementOf(part.input)))
                       .str(),
                   g.outer * g.row,
                   formatv("{0}, {1}, {2}LL, {3}LL, {4}LL", name(part.input),
                           name(o.getOutput()), g.outer, part.block, g.row)
                       .str(),
                   body);
          return success();
        }
        for (const ConcatPart &part : g.parts)
          if (part.block * g.outer != 0)
            launch(op,
                   formatv("ampc::cuda::concatPart<{0}>",
                           storageType(elementOf(part.input)))
                       .str(),
                   g.outer * part.block,
                   formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}LL",
                           name(part.input), name(o.getOutput()), g.outer,
                           part.block, g.row, part.offset)
                       .str(),
                   body);
        return success();
      })
      .Case([&](ampc::GatherOp o) {
        GatherGeometry g = gatherGeometry(op);
        int64_t count = tensorOf(o.getOutput()).getNumElements();
        if (count)
          launch(op,
                 formatv("ampc::cuda::gather<{0}, {1}>",
                         storageType(elementOf(o.getData())),
                         storageType(elementOf(o.getIndices())))
                     .str(),
                 count,
                 formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}LL, {7}",
                         name(o.getData()), name(o.getIndices()),
                         name(o.getOutput()), g.data.outer, g.data.size,
                         g.indexCount, g.data.inner,
                         deviceError(op, "an index is out of range"))
                     .str(),
                 body);
        return success();
      })
      .Case([&](ampc::GatherGradOp o) {
        // A counting sort of the indices by row, then a sum per output
        // element over its row's indices (CudaKernels.cuh, gatherGrad*).
        GatherGeometry g = gatherGeometry(op);
        Type t = elementOf(o.getOutput());
        int64_t outCount = tensorOf(o.getOutput()).getNumElements();
        if (!outCount)
          return success();
        int64_t rows = g.data.size;
        std::string buckets = scratch(op, "buckets", "unsigned long long"),
                    order = scratch(op, "order", "int64_t"),
                    indices = name(o.getIndices());
        StringRef indexType = storageType(elementOf(o.getIndices()));
        body << formatv("  AMPC_CUDA(ctx, cudaMemsetAsync({0}, 0, {1}ULL, "
                        "ctx.stream), {2});\n",
                        buckets, 8 * (2 * rows + 1), where(op));
        if (g.indexCount) {
          launch(op,
                 formatv("ampc::cuda::gatherGradCount<{0}>", indexType).str(),
                 g.indexCount,
                 formatv("{0}, {1}LL, {2}LL, {3}, {4}", indices, g.indexCount,
                         rows, buckets,
                         deviceError(op, "an index is out of range"))
                     .str(),
                 body);
          launch(op, "ampc::cuda::gatherGradStarts", 1,
                 formatv("{0}, {1}LL", buckets, rows + 1).str(), body, "1u");
          launch(op,
                 formatv("ampc::cuda::gatherGradFill<{0}>", indexType).str(),
                 g.indexCount,
                 formatv("{0}, {1}LL, {2}LL, {3}, {4}", indices, g.indexCount,
                         rows, buckets, order)
                     .str(),
                 body);
          launch(op, "ampc::cuda::gatherGradSort", rows,
                 formatv("{0}, {1}LL, {2}", buckets, rows, order).str(), body);
        }
        launch(op,
               formatv("ampc::cuda::gatherGrad<{0}, {1}, {2}, {3}>",
                       accumulation(op), storageType(t), codec(t), codec(t))
                   .str(),
               outCount,
               formatv("{0}, {1}, {2}, {3}, {4}LL, {5}LL, {6}LL, {7}LL",
                       name(o.getGrad()), buckets, order, name(o.getOutput()),
                       g.data.outer, rows, g.indexCount, g.data.inner)
                   .str(),
               body);
        return success();
      })
      .Case([&](ampc::ShapeOp o) {
        // Normally folded away; the values are known here anyway, copied
        // from the host (a constant in the state would need a layout).
        SmallVector<int64_t> dims = shapeOpDims(op);
        if (!dims.empty())
          body << "  { static const int64_t dims[] = " << list(dims)
               << "; AMPC_CUDA(ctx, cudaMemcpyAsync(" << name(o.getOutput())
               << ", dims, " << 8 * dims.size()
               << "ULL, cudaMemcpyHostToDevice, ctx.stream), " << where(op)
               << "); }\n";
        return success();
      })
      .Case([&](ampc::ScatterOp o) {
        // The data first, then the updates on it (a copy unless the memory
        // plan gave both one buffer).
        GatherGeometry g = gatherGeometry(op);
        RankedTensorType t = tensorOf(o.getOutput());
        int64_t bytes = t.getNumElements() * storageSize(t.getElementType());
        if (bytes)
          body << formatv("  if ({0} != {1}) AMPC_CUDA(ctx, cudaMemcpyAsync("
                          "{0}, {1}, {2}ULL, cudaMemcpyDeviceToDevice, "
                          "ctx.stream), {3});\n",
                          name(o.getOutput()), name(o.getData()), bytes,
                          where(op));
        if (g.data.outer * g.data.inner != 0 && g.indexCount)
          launch(op,
                 formatv("ampc::cuda::scatter<{0}, {1}, {2}>",
                         computeType(t.getElementType()),
                         codec(t.getElementType()),
                         storageType(elementOf(o.getIndices())))
                     .str(),
                 g.data.outer * g.data.inner,
                 formatv("{0}, {1}, {2}, {3}LL, {4}LL, {5}LL, {6}LL, "
                         "ampc::math::{7}, {8}",
                         name(o.getUpdates()), name(o.getIndices()),
                         name(o.getOutput()), g.data.outer, g.data.size,
                         g.indexCount, g.data.inner, scatterReductionName(op),
                         deviceError(op, "an index is out of range"))
                     .str(),
                 body);
        return success();
      })
      .Case([&](ampc::TopKOp o) {
        TopKGeometry g = topKGeometry(op);
        Type t = elementOf(o.getInput());
        if (tensorOf(o.getOutput()).getNumElements())
          launch(op,
                 formatv("ampc::cuda::topK<{0}, {1}>", computeType(t), codec(t))
                     .str(),
                 g.input.outer * g.input.size * g.input.inner,
                 formatv("{0}, {1}, {2}LL, {3}LL, {4}LL, {5}LL, {6}",
                         name(o.getInput()), name(o.getOutput()), g.input.outer,
                         g.input.size, g.input.inner, g.k, g.largest)
                     .str(),
                 body);
        return success();
      })
      .Default([&](Operation *) -> LogicalResult {
        llvm_unreachable("not an op of this family (emitKernelOp dispatches)");
      });
}
