//===- CudaTraining.cpp - the optimizer step --------------------------------===//
//
// The training ops: one multi-tensor unscale writing found_inf on the
// device, gradient clipping by the global norm, optimizer kernels that read
// found_inf, lr and the step from the device and skip themselves, and a
// one-thread scale update. Nothing here waits for the device.
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

LogicalResult CudaEmitter::emitTrainingOp(Operation *op,
                                          llvm::raw_ostream &body) {
  auto computeIn = [](Value v) { return accumulatorType(elementOf(v)); };
  // A TensorList of `ins` and `outs` (offsets in the arena), by value.
  // Multi-tensor kernels take lists of one element type and at most
  // kMaxTensors (256) tensors: the tensors are grouped by type (of the
  // output: an unscale's 16-bit input widens), in order, and each group
  // split into lists of 256. Each list is written as a TensorList literal;
  // returns (type, list name, the list's grid, its (in, out) pairs).
  struct Chunk {
    std::string type, list;
    int64_t blocks;
    SmallVector<std::pair<Value, Value>> pairs;
  };
  // One TensorList literal of `type` over (input pointer, output pointer,
  // elements) triples, at most 256; returns its name and its grid.
  struct ListEntry {
    std::string in, out;
    int64_t size;
  };
  auto writeList = [&](StringRef type, ArrayRef<ListEntry> entries) {
    auto offset = [](const std::string &pointer) {
      return formatv("static_cast<uint64_t>(reinterpret_cast<unsigned "
                     "char *>({0}) - state), ",
                     pointer)
          .str();
    };
    std::string in, out, size;
    SmallVector<int64_t> sizes;
    for (const ListEntry &e : entries) {
      in += offset(e.in);
      out += offset(e.out);
      size += formatv("{0}LL, ", e.size).str();
      sizes.push_back(e.size);
    }
    int64_t blocks;
    std::string first = firstBlocks(sizes, blocks);
    body << formatv("  static const ampc::cuda::TensorList<{0}> list{1} = "
                    "{{{2}, {{{3}}, {{{4}}, {{{5}}, {6}};\n",
                    type, counter, sizes.size(), in, out, size, first);
    return std::make_pair("list" + std::to_string(counter++), blocks);
  };
  // A TensorList of `ins` and `outs` (offsets in the arena), by value.
  // Multi-tensor kernels take lists of one element type and at most
  // kMaxTensors (256) tensors: the tensors are grouped by type (of the
  // output: an unscale's 16-bit input widens), in order, and each group
  // split into lists of 256. Each list is written as a TensorList literal;
  // returns (type, list name, the list's grid, its (in, out) pairs).
  auto tensorLists = [&](ValueRange ins, ValueRange outs,
                         llvm::function_ref<std::string(Value)> typeOf) {
    std::vector<std::pair<std::string, SmallVector<std::pair<Value, Value>>>>
        groups;
    for (auto [i, o] : llvm::zip(ins, outs)) {
      std::string type = typeOf(o);
      auto group = llvm::find_if(groups, [&](auto &g) { return g.first == type; });
      if (group == groups.end()) {
        groups.push_back({type, {}});
        group = std::prev(groups.end());
      }
      group->second.push_back({i, o});
    }
    SmallVector<Chunk> chunks;
    for (auto &[type, pairs] : groups)
      for (size_t begin = 0; begin < pairs.size(); begin += 256) {
        SmallVector<std::pair<Value, Value>> part(
            pairs.begin() + begin,
            pairs.begin() + std::min(pairs.size(), begin + 256));
        SmallVector<ListEntry> entries;
        for (auto [i, o] : part)
          entries.push_back({name(i), name(o), tensorOf(i).getNumElements()});
        auto [list, blocks] = writeList(type, entries);
        chunks.push_back({type, list, blocks, part});
      }
    return chunks;
  };
  // Data parallel: the lists of a bucket's pack (gradients into their
  // slices of `packed`) or unpack (the slices into the mean gradients),
  // one per element type of `grads` (its storage type names the list), 256
  // tensors each, in operand order. Returns ((element type, list name,
  // grid) each, the packed elements).
  auto packLists = [&](Value packed, ValueRange grads, bool unpack) {
    std::vector<std::pair<Type, SmallVector<ListEntry>>> groups;
    int64_t offset = 0;
    for (Value g : grads) {
      int64_t count = tensorOf(g).getNumElements();
      auto group = llvm::find_if(
          groups, [&](auto &e) { return e.first == elementOf(g); });
      if (group == groups.end()) {
        groups.push_back({elementOf(g), {}});
        group = std::prev(groups.end());
      }
      std::string slice = formatv("{0} + {1}", name(packed), offset).str();
      group->second.push_back(unpack ? ListEntry{slice, name(g), count}
                                     : ListEntry{name(g), slice, count});
      offset += count;
    }
    SmallVector<std::tuple<Type, std::string, int64_t>> lists;
    for (auto &[type, entries] : groups)
      for (size_t begin = 0; begin < entries.size(); begin += 256) {
        auto [list, blocks] = writeList(
            storageType(type),
            ArrayRef(entries).slice(
                begin, std::min<size_t>(256, entries.size() - begin)));
        lists.push_back({type, list, blocks});
      }
    return std::make_pair(lists, offset);
  };
  auto grid = [](const Chunk &c) { return std::to_string(c.blocks); };
  return llvm::TypeSwitch<Operation *, LogicalResult>(op)
      .Case([&](ampc::AllReduceStartOp o) -> LogicalResult {
        // Alone nothing is packed or sent. With ranks: the pack on the
        // model's stream, then the sum on the communication stream after
        // it (ampc::cuda::allReduceStart), overlapping the rest of the
        // backward.
        Type packed = elementOf(o.getPacked());
        StringRef t = computeType(packed);
        body << "  if (ctx.comm) {\n";
        auto [lists, count] = packLists(o.getPacked(), o.getGrads(), false);
        for (auto &[type, list, blocks] : lists)
          launch(op,
                 formatv("ampc::cuda::packGradients<{0}, {1}, {2}>",
                         codec(type), codec(packed), t)
                     .str(),
                 0,
                 formatv("state, {0}, {1}(1) / {1}(ctx.comm->size)", list, t)
                     .str(),
                 body, std::to_string(blocks));
        body << formatv("  if (int32_t code = ampc::cuda::allReduceStart(ctx, "
                        "{0}, {1}, {2}ULL, {3}, {4})) return code;\n  }\n",
                        o.getBucket(), name(o.getPacked()), count,
                        onnxDtype(packed), where(op));
        return success();
      })
      .Case([&](ampc::AllReduceWaitOp o) -> LogicalResult {
        // With ranks: the model's stream waits for the sum, then the
        // unpack. Alone: each mean is its gradient, bit for bit.
        auto start = o.getPacked().getDefiningOp<ampc::AllReduceStartOp>();
        Type packed = elementOf(o.getPacked());
        body << formatv("  if (ctx.comm) {{\n  if (int32_t code = "
                        "ampc::cuda::allReduceWait(ctx, {0}, {1})) return "
                        "code;\n",
                        start.getBucket(), where(op));
        for (auto &[type, list, blocks] :
             packLists(o.getPacked(), o.getMeans(), true).first)
          launch(op,
                 formatv("ampc::cuda::unpackGradients<{0}, {1}>", codec(packed),
                         codec(type))
                     .str(),
                 0, formatv("state, {0}", list).str(), body,
                 std::to_string(blocks));
        body << "  } else {\n";
        for (auto [g, m] : llvm::zip(o.getGrads(), o.getMeans()))
          body << formatv("  if ({0} != {1}) AMPC_CUDA(ctx, cudaMemcpyAsync("
                          "{0}, {1}, {2}ULL, cudaMemcpyDeviceToDevice, "
                          "ctx.stream), {3});\n",
                          name(m), name(g),
                          tensorOf(g).getNumElements() *
                              storageSize(elementOf(g)),
                          where(op));
        body << "  }\n";
        return success();
      })
      .Case([&](ampc::UnscaleOp o) -> LogicalResult {
        body << formatv("  AMPC_CUDA(ctx, cudaMemsetAsync({0}, 0, 1, "
                        "ctx.stream), {1});\n",
                        name(o.getFoundInf()), where(op));
        for (const Chunk &c :
             tensorLists(o.getGrads(), o.getUnscaled(), [&](Value v) {
               return storageType(elementOf(v)).str();
             })) {
          // A 16-bit gradient under an FP32 result (a folded cast) is
          // widened on load.
          // A channels-last gradient's channels and spatial size.
          std::string storages, channels, spatial;
          for (auto [g, u] : c.pairs) {
            storages += elementOf(g) == elementOf(u) ? "0, "
                        : elementOf(g).isF16()       ? "ampc::cuda::kF16, "
                                                     : "ampc::cuda::kBf16, ";
            unsigned i = llvm::find(o.getGrads(), g) - o.getGrads().begin();
            auto [ch, sp] = unscaleLayout(o, i);
            channels += std::to_string(ch) + ", ";
            spatial += std::to_string(sp) + ", ";
          }
          body << formatv("  static const ampc::cuda::GradientStorages "
                          "storages{0} = {{{{{1}}, {{{2}}, {{{3}}};\n",
                          counter++, storages, channels, spatial);
          launch(op, formatv("ampc::cuda::unscale<{0}>", c.type).str(), 0,
                 formatv("state, {0}, storages{1}, {2}, {3}", c.list,
                         counter - 1, name(o.getScale()),
                         name(o.getFoundInf()))
                     .str(),
                 body, grid(c));
        }
        return success();
      })
      .Case([&](ampc::ClipGradNormOp o) -> LogicalResult {
        // One norm over every gradient, summed in the first one's compute
        // type: the gradients are the FP32 (FP64) master gradients.
        StringRef t = accumulation(op);
        for (Value g : o.getGrads())
          if (computeIn(g) != t)
            return op->emitError()
                   << "the CUDA target clips gradients of one compute type, "
                      "got "
                   << t << " and " << computeIn(g);
        SmallVector<Chunk> chunks = tensorLists(
            o.getGrads(), o.getClipped(), [&](Value) { return t.str(); });
        // Deterministic: a partial per block, added in order by one block
        // (the recorded `partials` give the scratch its size).
        std::string sumPtr = scratch(op, "sum", t);
        std::string partials = scratch(op, "partials", t);
        int64_t first = 0;
        for (const Chunk &c : chunks) {
          launch(op, formatv("ampc::cuda::sumOfSquares<{0}>", t).str(), 0,
                 formatv("state, {0}, {1} + {2}", c.list, partials, first)
                     .str(),
                 body, grid(c));
          first += c.blocks;
        }
        if (first != launchInt(op, "partials"))
          return op->emitError() << "clipping's partial sums do not match "
                                    "its scratch";
        launch(op, formatv("ampc::cuda::sumPartials<{0}>", t).str(), 0,
               formatv("{0}, {1}LL, {2}", partials, first, sumPtr).str(),
               body, "1");
        for (const Chunk &c : chunks)
          launch(op, formatv("ampc::cuda::clipByNorm<{0}>", t).str(), 0,
                 formatv("state, {0}, {1}, {2}({3:e9})", c.list, sumPtr, t,
                         o.getMaxNorm().convertToFloat())
                     .str(),
                 body, grid(c));
        return success();
      })
      .Case([&](ampc::OptimizerUpdateOp o) -> LogicalResult {
        // One multi-tensor launch for every update (CudaOptimizer.cpp)
        // where planInPlace could fuse them; otherwise a kernel each.
        if (op == fusedAt)
          return emitFusedOptimizer(op, body);
        if (folded.contains(op))
          return success();
        StringRef t = computeIn(o.getParam());
        int64_t count = tensorOf(o.getParam()).getNumElements();
        auto literal = [&](APFloat v) {
          return formatv("{0}({1:e9})", t, v.convertToFloat()).str();
        };
        std::string found = o.getFoundInf()
                                ? "reinterpret_cast<const uint8_t *>(" +
                                      name(o.getFoundInf()) + ")"
                                : "nullptr";
        if (o.getKind() == ampc::OptimizerKind::Sgd) {
          bool hasBuffer = !o.getMoments().empty();
          launch(op, formatv("ampc::cuda::sgdStep<{0}>", t).str(), count,
                 formatv("{0}, {1}, {2}, {3}, {4}, {5}LL, {6}, {7}, {8}, {9}, "
                         "{10}, {11}, {12}",
                         name(o.getParam()), name(o.getGrad()),
                         hasBuffer ? name(o.getMoments()[0]) : "nullptr",
                         name(o.getNewParam()),
                         hasBuffer ? name(o.getNewMoments()[0]) : "nullptr",
                         count, name(o.getLr()), name(o.getStep()), found,
                         literal(o.getMomentum()), literal(o.getDampening()),
                         o.getNesterov(), literal(o.getWeightDecay()))
                     .str(),
                 body);
        } else {
          launch(op, formatv("ampc::cuda::adamStep<{0}>", t).str(), count,
                 formatv("{0}, {1}, {2}, {3}, {4}, {5}, {6}, {7}LL, {8}, {9}, "
                         "{10}, {11}, {12}, {13}, {14}, {15}",
                         name(o.getParam()), name(o.getGrad()),
                         name(o.getMoments()[0]), name(o.getMoments()[1]),
                         name(o.getNewParam()), name(o.getNewMoments()[0]),
                         name(o.getNewMoments()[1]), count, name(o.getLr()),
                         name(o.getStep()), found, literal(o.getBeta1()),
                         literal(o.getBeta2()), literal(o.getEps()),
                         literal(o.getWeightDecay()),
                         o.getKind() == ampc::OptimizerKind::Adamw)
                     .str(),
                 body);
        }
        return success();
      })
      .Case([&](ampc::UpdateScaleOp o) {
        body << formatv(
            "  ampc::cuda::launch(\"updateScale\", ampc::cuda::updateScale, 1, "
            "1, 0, ctx.stream, {0}, {1}, "
            "reinterpret_cast<const uint8_t *>({2}), {3:e9}f, {4:e9}f, {5}LL, "
            "{6:e9}f, {7:e9}f, {8}, {9});\n  AMPC_LAUNCHED(ctx, {10});\n",
            name(o.getScale()), name(o.getGrowthTracker()),
            name(o.getFoundInf()), o.getGrowthFactor().convertToFloat(),
            o.getBackoffFactor().convertToFloat(), o.getGrowthInterval(),
            o.getMinScale().convertToFloat(), o.getMaxScale().convertToFloat(),
            name(o.getNewScale()), name(o.getNewGrowthTracker()), where(op));
        return success();
      })
      .Default([&](Operation *) { return failure(); });
}
