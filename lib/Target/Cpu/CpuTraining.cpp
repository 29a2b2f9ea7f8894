//===- CpuTraining.cpp - the optimizer step ---------------------------------===//
//
// The training ops: unscaling with found_inf, gradient clipping by the
// global norm, the optimizer updates (a skipped step copies every input to
// its result) and the loss scale's update.
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

LogicalResult CpuEmitter::emitTrainingOp(Operation *op, llvm::raw_ostream &body) {
  // T: what the step computes in, float or double (f64 models).
  auto computeIn = [](Value v) { return accumulatorType(elementOf(v)); };
  // Data parallel: the communicator (null alone) and the error slot.
  auto failWith = [&](StringRef comm) { return commFailure(comm); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::AllReduceStartOp o) {
        // Each gradient divided by the world size into its slice of the
        // packed buffer, then the sum over the ranks starts.
        Type packed = elementOf(o.getPacked());
        StringRef t = computeType(packed);
        body << "  if (const ampc_abi_comm *comm = " << ranks() << ") {\n"
             << formatv("    const {0} inv = {0}(1) / {0}(comm->size);\n", t);
        int64_t offset = 0;
        for (Value g : o.getGrads()) {
          int64_t count = tensorOf(g).getNumElements();
          body << formatv("    ampc::cpu::packGradient<{0}, {1}>({2}, {3} + "
                          "{4}, {5}LL, inv);\n",
                          codec(elementOf(g)), codec(packed), name(g),
                          name(o.getPacked()), offset, count);
          offset += count;
        }
        body << formatv("    if (comm->start(comm->handle, {0}, {1}, {2}ULL, "
                        "{3}) != 0)\n      {4}\n  }\n",
                        o.getBucket(), name(o.getPacked()), offset,
                        onnxDtype(packed), failWith("comm"));
        return success();
      })
      .Case([&](ampc::AllReduceWaitOp o) {
        // The sum unpacked into each gradient's type; alone, the gradients
        // themselves.
        auto start = o.getPacked().getDefiningOp<ampc::AllReduceStartOp>();
        Type packed = elementOf(o.getPacked());
        body << "  if (const ampc_abi_comm *comm = " << ranks() << ") {\n"
             << formatv("    if (comm->wait(comm->handle, {0}) != 0)\n"
                        "      {1}\n",
                        start.getBucket(), failWith("comm"));
        int64_t offset = 0;
        for (auto [g, m] : llvm::zip(o.getGrads(), o.getMeans())) {
          int64_t count = tensorOf(g).getNumElements();
          body << formatv("    ampc::cpu::unpackGradient<{0}, {1}>({2} + {3}, "
                          "{4}, {5}LL);\n",
                          codec(packed), codec(elementOf(m)),
                          name(o.getPacked()), offset, name(m), count);
          offset += count;
        }
        body << "  } else {\n";
        for (auto [g, m] : llvm::zip(o.getGrads(), o.getMeans()))
          body << formatv("    std::memmove({0}, {1}, {2}ULL);\n", name(m),
                          name(g),
                          tensorOf(g).getNumElements() *
                              storageSize(elementOf(g)));
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::UnscaleOp o) {
        body << "  { const float inv = ampc::cpu::inverseScale("
             << load(elementOf(o.getScale()), name(o.getScale()) + "[0]")
             << "); bool found = false;\n";
        for (auto [i, pair] :
             llvm::enumerate(llvm::zip(o.getGrads(), o.getUnscaled()))) {
          auto [g, u] = pair;
          // A channels-last gradient's channels and spatial size.
          auto [channels, spatial] = unscaleLayout(o, i);
          std::string layout =
              channels ? formatv(", {0}LL, {1}LL", channels, spatial).str()
                       : "";
          body << formatv("    found |= ampc::cpu::unscale<{3}>({0}, {1}, "
                          "{2}LL, inv{4});\n",
                          name(g), name(u), tensorOf(g).getNumElements(),
                          codec(elementOf(g)), layout);
        }
        body << "    " << name(o.getFoundInf()) << "[0] = found; }\n";
        return success();
      })
      .Case([&](ampc::ClipGradNormOp o) {
        StringRef t = accumulation(op);
        body << "  { " << t << " sum = 0;\n";
        for (Value g : o.getGrads())
          body << formatv("    sum += ampc::cpu::sumOfSquares({0}, {1}LL);\n",
                          name(g), tensorOf(g).getNumElements());
        body << formatv("    const {0} coef = std::min<{0}>({0}(1), {0}({1:e9}) "
                        "/ (std::sqrt(sum) + {0}(1e-6)));\n",
                        t, o.getMaxNorm().convertToFloat());
        for (auto [g, c] : llvm::zip(o.getGrads(), o.getClipped()))
          body << formatv("    for (int64_t i = 0; i < {0}LL; ++i) {1}[i] = "
                          "{2}[i] * coef;\n",
                          tensorOf(g).getNumElements(), name(c), name(g));
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::OptimizerUpdateOp o) {
        StringRef t = computeIn(o.getParam());
        int64_t count = tensorOf(o.getParam()).getNumElements();
        auto literal = [&](APFloat v) {
          return formatv("{0}({1:e9})", t, v.convertToFloat()).str();
        };
        std::string lr = formatv("{0}({1}[0])", t, name(o.getLr())).str();
        std::string step = name(o.getStep()) + "[0]";
        std::string skip =
            o.getFoundInf() ? name(o.getFoundInf()) + "[0]" : "false";
        int64_t bytes = count * storageSize(elementOf(o.getParam()));
        // A skipped step copies every input to its result, bit for bit.
        body << "  if (" << skip << ") {\n";
        body << formatv("    std::memcpy({0}, {1}, {2}ULL);\n",
                        name(o.getNewParam()), name(o.getParam()), bytes);
        for (auto [m, nm] : llvm::zip(o.getMoments(), o.getNewMoments()))
          body << formatv("    std::memcpy({0}, {1}, {2}ULL);\n", name(nm),
                          name(m), bytes);
        body << "  } else {\n";
        if (o.getKind() == ampc::OptimizerKind::Sgd) {
          bool hasBuffer = !o.getMoments().empty();
          body << formatv(
              "    ampc::cpu::sgdStep<{0}>({1}, {2}, {3}, {4}, {5}, {6}LL, "
              "{7}, {8}, {9}, {10}, {11}, {12});\n",
              t, name(o.getParam()), name(o.getGrad()),
              hasBuffer ? name(o.getMoments()[0]) : "nullptr",
              name(o.getNewParam()),
              hasBuffer ? name(o.getNewMoments()[0]) : "nullptr", count, lr,
              step, literal(o.getMomentum()), literal(o.getDampening()),
              o.getNesterov(), literal(o.getWeightDecay()));
        } else {
          body << formatv(
              "    ampc::cpu::adamStep<{0}>({1}, {2}, {3}, {4}, {5}, {6}, {7}, "
              "{8}LL, {9}, {10}, {11}, {12}, {13}, {14}, {15});\n",
              t, name(o.getParam()), name(o.getGrad()),
              name(o.getMoments()[0]), name(o.getMoments()[1]),
              name(o.getNewParam()), name(o.getNewMoments()[0]),
              name(o.getNewMoments()[1]), count, lr, step,
              literal(o.getBeta1()), literal(o.getBeta2()),
              literal(o.getEps()), literal(o.getWeightDecay()),
              o.getKind() == ampc::OptimizerKind::Adamw);
        }
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::UpdateScaleOp o) {
        body << formatv(
            "  ampc::cpu::updateScale({0}[0], {1}[0], {2}[0], {3:e9}f, "
            "{4:e9}f, {5}LL, {6:e9}f, {7:e9}f, {8}, {9});\n",
            name(o.getScale()), name(o.getGrowthTracker()),
            name(o.getFoundInf()), o.getGrowthFactor().convertToFloat(),
            o.getBackoffFactor().convertToFloat(), o.getGrowthInterval(),
            o.getMinScale().convertToFloat(), o.getMaxScale().convertToFloat(),
            name(o.getNewScale()), name(o.getNewGrowthTracker()));
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}
