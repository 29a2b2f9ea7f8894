//===- CpuTraining.cpp - the optimizer step ---------------------------------===//
//
// The training ops: unscaling with found_inf, gradient clipping by the
// global norm, the optimizer updates (a skipped step copies every input to
// its result) and the loss scale's update.
//
//===----------------------------------------------------------------------===//

#include "CpuEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/ShardOptimizer.h"

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
  // ZeRO-1 (--shard-optimizer): the rank's shards.
  auto shards = [&] {
    canFail = true;
    return formatv("(*ampc::cpu::shardsAt(state + {0}))", shardSlot).str();
  };
  auto orFail = [&](const std::string &call) {
    canFail = true;
    return formatv("    if (int32_t code = {0}) return code;\n", call).str();
  };
  auto errorAt = [&] { return formatv("state + {0}", errorSlot()).str(); };
  auto failWith = [&](StringRef comm) { return commFailure(comm); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::AllReduceStartOp o) {
        // Each gradient divided by the world size into its slice of the
        // packed buffer, then the sum over the ranks starts. ZeRO-1: the
        // buffer is the rank's Shards' (a multiple of the ranks long, the
        // padding zeroed) and is reduce-scattered: rank r's block of the
        // sum lands in block r.
        bool sharded = o->hasAttr(ampc::kShardOptimizerAttr);
        Type packed = elementOf(o.getPacked());
        StringRef t = computeType(packed);
        std::string storage = codec(packed) + "::Storage";
        std::string into = sharded ? "packed" : name(o.getPacked());
        body << "  if (const ampc_abi_comm *comm = " << ranks() << ") {\n";
        if (sharded)
          body << formatv("    {0} *packed = reinterpret_cast<{0} *>({1}.flat."
                          "data());\n",
                          storage, shards());
        body << formatv("    const {0} inv = {0}(1) / {0}(comm->size);\n", t);
        int64_t offset = 0;
        for (Value g : o.getGrads()) {
          int64_t count = tensorOf(g).getNumElements();
          body << formatv("    ampc::cpu::packGradient<{0}, {1}>({2}, {3} + "
                          "{4}, {5}LL, inv);\n",
                          codec(elementOf(g)), codec(packed), name(g), into,
                          offset, count);
          offset += count;
        }
        if (sharded)
          body << formatv("    const uint64_t all = uint64_t({2}.shard) * "
                          "uint64_t(comm->size);\n"
                          "    std::memset(packed + {0}, 0, (all - {0}ULL) * "
                          "sizeof({1}));\n"
                          "    if (comm->reduce_scatter(comm->handle, {3}, "
                          "packed, all, {4}) != 0)\n      {5}\n  }\n",
                          offset, storage, shards(), o.getBucket(),
                          onnxDtype(packed), failWith("comm"));
        else
          body << formatv("    if (comm->start(comm->handle, {0}, {1}, {2}ULL, "
                          "{3}) != 0)\n      {4}\n  }\n",
                          o.getBucket(), into, offset, onnxDtype(packed),
                          failWith("comm"));
        return success();
      })
      .Case([&](ampc::AllReduceWaitOp o) {
        // The sum unpacked into each gradient's type; alone, the gradients
        // themselves.
        auto start = o.getPacked().getDefiningOp<ampc::AllReduceStartOp>();
        bool sharded = start->hasAttr(ampc::kShardOptimizerAttr);
        Type packed = elementOf(o.getPacked());
        body << "  if (const ampc_abi_comm *comm = " << ranks() << ") {\n"
             << formatv("    if (comm->wait(comm->handle, {0}) != 0)\n"
                        "      {1}\n",
                        start.getBucket(), failWith("comm"));
        int64_t offset = 0;
        for (auto [g, m] : llvm::zip(o.getGrads(), o.getMeans())) {
          int64_t count = tensorOf(g).getNumElements();
          // ZeRO-1: the rank's elements of the reduce-scattered buffer.
          if (sharded)
            body << formatv(
                "    ampc::cpu::unpackShard<{0}, {1}>({2}, reinterpret_cast<"
                "const {0}::Storage *>({2}.flat.data()), {3}LL, {4}, {5}LL);\n",
                codec(packed), codec(elementOf(m)), shards(), offset, name(m),
                count);
          else
            body << formatv("    ampc::cpu::unpackGradient<{0}, {1}>({2} + "
                            "{3}, {4}, {5}LL);\n",
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
        // ZeRO-1: each rank checked its shard; a step any rank finds
        // not finite is skipped on all (the flags summed).
        if (shardSlot >= 0)
          body << "    { float any = found;\n"
               << orFail(formatv("ampc::cpu::sumOverRanks({0}, "
                                 "ampc::cpu::kFoundInfRequest, any, {1})",
                                 shards(), errorAt())
                             .str())
               << "      found = any != 0; }\n";
        body << "    " << name(o.getFoundInf()) << "[0] = found; }\n";
        return success();
      })
      .Case([&](ampc::ClipGradNormOp o) {
        StringRef t = accumulation(op);
        body << "  { " << t << " sum = 0;\n";
        for (Value g : o.getGrads())
          body << formatv("    sum += ampc::cpu::sumOfSquares({0}, {1}LL);\n",
                          name(g), tensorOf(g).getNumElements());
        // ZeRO-1: the squares of every rank's shard (the rest are 0).
        if (shardSlot >= 0)
          body << orFail(formatv("ampc::cpu::sumOverRanks({0}, "
                                 "ampc::cpu::kNormRequest, sum, {1})",
                                 shards(), errorAt())
                             .str());
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
        if (shardOffsets.count(o.getOperation()))
          return emitShardedUpdate(o, body);
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

LogicalResult CpuEmitter::emitShardedUpdate(ampc::OptimizerUpdateOp o,
                                            llvm::raw_ostream &body) {
  // The update of the rank's elements of the parameter only, its moments
  // updated in place in the rank's shard; after the last update the new
  // parameters are all-gathered.
  canFail = true;
  StringRef t = accumulatorType(elementOf(o.getParam()));
  int64_t count = tensorOf(o.getParam()).getNumElements();
  int64_t offset = shardOffsets.lookup(o.getOperation());
  auto literal = [&](APFloat v) {
    return formatv("{0}({1:e9})", t, v.convertToFloat()).str();
  };
  std::string lr = formatv("{0}({1}[0])", t, name(o.getLr())).str();
  std::string step = name(o.getStep()) + "[0]";
  std::string skip = o.getFoundInf() ? name(o.getFoundInf()) + "[0]" : "false";
  int64_t bytes = count * storageSize(elementOf(o.getParam()));
  std::string shards =
      formatv("(*ampc::cpu::shardsAt(state + {0}))", shardSlot).str();
  body << formatv("  {{ int64_t b, e; ampc::cpu::ownedRange({0}, {1}LL, {2}LL, "
                  "b, e);\n",
                  shards, offset, count);
  // A skipped step (every rank skips it) leaves everything as it was.
  body << "  if (" << skip << ") {\n"
       << formatv("    std::memcpy({0}, {1}, {2}ULL);\n",
                  name(o.getNewParam()), name(o.getParam()), bytes)
       << "  } else if (e > b) {\n"
       << formatv("    const int64_t at = {0}LL + b - {1}.lo;\n", offset,
                  shards);
  auto moment = [&](unsigned k) {
    return name(o.getMoments()[k]) + " + at";
  };
  if (o.getKind() == ampc::OptimizerKind::Sgd) {
    bool hasBuffer = !o.getMoments().empty();
    body << formatv(
        "    ampc::cpu::sgdStep<{0}>({1} + b, {2} + b, {3}, {4} + b, {5}, "
        "e - b, {6}, {7}, {8}, {9}, {10}, {11});\n",
        t, name(o.getParam()), name(o.getGrad()),
        hasBuffer ? moment(0) : "nullptr", name(o.getNewParam()),
        hasBuffer ? moment(0) : "nullptr", lr, step, literal(o.getMomentum()),
        literal(o.getDampening()), o.getNesterov(),
        literal(o.getWeightDecay()));
  } else {
    body << formatv(
        "    ampc::cpu::adamStep<{0}>({1} + b, {2} + b, {3}, {4}, {5} + b, {3}, "
        "{4}, e - b, {6}, {7}, {8}, {9}, {10}, {11}, {12});\n",
        t, name(o.getParam()), name(o.getGrad()), moment(0), moment(1),
        name(o.getNewParam()), lr, step, literal(o.getBeta1()),
        literal(o.getBeta2()), literal(o.getEps()),
        literal(o.getWeightDecay()), o.getKind() == ampc::OptimizerKind::Adamw);
  }
  body << "  } }\n";
  if (o.getOperation() != lastUpdate)
    return success();
  // Every update has run: the ranks' elements of every new parameter to
  // every rank (a skipped step changed nothing on any rank).
  std::string params, offsets, counts;
  int n = 0;
  for (auto update : o->getBlock()->getOps<ampc::OptimizerUpdateOp>()) {
    params += name(update.getNewParam()) + ", ";
    offsets +=
        formatv("{0}LL, ", shardOffsets.lookup(update.getOperation())).str();
    counts += formatv("{0}LL, ",
                      tensorOf(update.getParam()).getNumElements())
                  .str();
    ++n;
  }
  body << "  if (!(" << skip << ")) {\n"
       << formatv("    {0} *const params[] = {{{1}};\n", t, params)
       << formatv("    static const int64_t offsets[] = {{{0}};\n", offsets)
       << formatv("    static const int64_t counts[] = {{{0}};\n", counts)
       << formatv("    if (int32_t code = ampc::cpu::gatherParameters<{0}>({1}, "
                  "params, offsets, counts, {2}, state + {3})) return code;\n",
                  t, shards, n, errorSlot())
       << "  }\n";
  return success();
}
