//===- CpuDataMovement.cpp - copies, gathers, scatters ----------------------===//
//
// The ops that move data: strided copies (Transpose, Slice), SliceGrad,
// Concat, Gather and its adjoint, Scatter, Shape and TopK, on the kernels
// of CpuKernels.h and CpuBackwardKernels.h.
//
//===----------------------------------------------------------------------===//

#include "CpuEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"

#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cpugen;
using llvm::formatv;
using llvm::StringRef;

void CpuEmitter::emitStrided(Operation *op, llvm::raw_ostream &body) {
  Value input = op->getOperand(0), output = op->getResult(0);
  StridedView view = stridedView(op);
  body << formatv("  {{ static const int64_t dims[] = {0}; static const int64_t "
                  "s0[] = {1}; const int64_t *strides[] = {{s0};\n",
                  list(view.dims), list(view.strides));
  body << formatv("    ampc::cpu::parallelForEach<1>({0}, dims, strides, [&](int64_t o, "
                  "int64_t a) {{ {1}[o] = {2}[{3}LL + a]; }); }\n",
                  view.dims.size(), name(output), name(input), view.offset);
}

LogicalResult CpuEmitter::emitDataMovement(Operation *op,
                                           llvm::raw_ostream &body) {
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::TransposeOp) {
        emitStrided(op, body);
        return success();
      })
      .Case([&](ampc::SliceOp o) {
        if (tensorOf(o.getOutput()).getNumElements())
          emitStrided(op, body);
        return success();
      })
      .Case([&](ampc::ConcatOp o) {
        ConcatGeometry g = concatGeometry(op);
        for (const ConcatPart &part : g.parts)
          body << formatv("  ampc::cpu::concatPart({0}, {1}, {2}LL, {3}LL, "
                          "{4}LL, {5}LL);\n",
                          name(part.input), name(o.getOutput()), g.outer,
                          part.block, g.row, part.offset);
        return success();
      })
      .Case([&](ampc::GatherOp o) {
        GatherGeometry g = gatherGeometry(op);
        body << failUnless(
            op,
            formatv("ampc::cpu::gather({0}, {1}, {2}, {3}LL, {4}LL, {5}LL, "
                    "{6}LL)",
                    name(o.getData()), name(o.getIndices()), name(o.getOutput()),
                    g.data.outer, g.data.size, g.indexCount, g.data.inner),
            "an index is out of range");
        return success();
      })
      .Case([&](ampc::ShapeOp o) {
        // Normally folded away; the values are known here anyway.
        SmallVector<int64_t> dims = shapeOpDims(op);
        if (!dims.empty())
          body << "  { static const int64_t dims[] = " << list(dims)
               << "; std::memcpy(" << name(o.getOutput()) << ", dims, "
               << 8 * dims.size() << "ULL); }\n";
        return success();
      })
      .Case([&](ampc::ScatterOp o) {
        GatherGeometry g = gatherGeometry(op);
        Type t = elementOf(o.getData());
        body << failUnless(
            op,
            formatv("ampc::cpu::scatter<{0}, {1}>({2}, {3}, {4}, {5}, {6}LL, "
                    "{7}LL, {8}LL, {9}LL, ampc::math::{10})",
                    computeType(t), codec(t), name(o.getData()),
                    name(o.getIndices()), name(o.getUpdates()),
                    name(o.getOutput()), g.data.outer, g.data.size,
                    g.indexCount, g.data.inner, scatterReductionName(op)),
            "an index is out of range");
        return success();
      })
      .Case([&](ampc::TopKOp o) {
        TopKGeometry g = topKGeometry(op);
        Type t = elementOf(o.getInput());
        if (tensorOf(o.getOutput()).getNumElements())
          body << formatv("  ampc::cpu::topK<{0}, {1}>({2}, {3}, {4}LL, {5}LL, "
                          "{6}LL, {7}LL, {8}, {9});\n",
                          computeType(t), codec(t), name(o.getInput()),
                          name(o.getOutput()), g.input.outer, g.input.size,
                          g.input.inner, g.k, g.largest,
                          scratch(op, "order", "int64_t"));
        return success();
      })
      .Case([&](ampc::GatherGradOp o) {
        GatherGeometry g = gatherGeometry(op);
        StringRef c = accumulation(op);
        body << "  {\n";
        body << convertedArray(op, "grad", c, o.getGrad());
        body << scratchArray(op, "out", c);
        std::string call =
            formatv("ampc::cpu::gatherGrad<{0}>(grad, {1}, out, "
                    "{2}LL, {3}LL, {4}LL, {5}LL)",
                    c, name(o.getIndices()), g.data.outer, g.data.size,
                    g.indexCount, g.data.inner)
                .str();
        body << "  " << failUnless(op, call, "an index is out of range");
        body << storeAll("out", o.getOutput());
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::SliceGradOp o) {
        StridedView view = stridedView(op);
        body << formatv("  {{ static const int64_t dims[] = {0}; static const "
                        "int64_t strides[] = {1};\n"
                        "    ampc::cpu::sliceGrad({2}, {3}, {4}LL, {5}, dims, "
                        "strides, {6}LL); }\n",
                        list(view.dims), list(view.strides), name(o.getGrad()),
                        name(o.getOutput()),
                        tensorOf(o.getOutput()).getNumElements(),
                        view.dims.size(), view.offset);
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}
