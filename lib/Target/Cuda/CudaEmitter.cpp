//===- CudaEmitter.cpp - CUDA model libraries ------------------------------===//
//
// Walks the kernel-level module (after ampc-fuse and ampc-plan-memory) and
// writes CUDA C++ for nvcc. This file holds what every op shares (launches,
// device error codes, arguments and results), the dispatch of each op to
// its family's file (LibraryEmitter::emitKernelOp; CudaEmitter.h lists the files) and the
// library around the functions. The state is laid out as on the CPU target (see
// LibraryEmitter), but in one device arena the library allocates at init;
// the host state block holds only the context (CudaKernels.cuh). Per op:
//  - Gemm and batched_gemm (every MatMul: ampc-lower-matmul): cuBLASLt,
//    FP16/BF16 operands with FP32 compute, the epilogue
//    ampc-fuse-epilogues chose, strided batches;
//  - elementwise ops and ampc.fusion: one generated __global__ kernel each,
//    from the same scalar expressions as the CPU target;
//  - the rest: the templated kernels of CudaKernels.cuh;
//  - the training ops: one multi-tensor unscale writing found_inf on the
//    device, optimizer kernels that read found_inf, lr and the step from
//    the device and skip themselves, a one-thread scale update. Nothing in
//    train_step waits for the device; the loss reaches the caller's buffer
//    through a host function on the stream.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/CudaTarget.h"

#include "CudaEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Training.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"

using namespace mlir;
using namespace ampc::emit;
using namespace ampc::cudagen;
using llvm::formatv;
using llvm::StringRef;

void CudaEmitter::launch(Operation *op, StringRef kernel, int64_t count,
                         const std::string &args, llvm::raw_ostream &body,
                         StringRef grid, StringRef threads) {
  std::string g = grid.empty()
                      ? formatv("ampc::cuda::blocks({0}LL)", count).str()
                      : grid.str();
  emitLaunch(op, "launch", kernel, g, threads, args, body);
}

void CudaEmitter::launchCooperative(Operation *op, StringRef kernel,
                                    int64_t maxBlocks, const std::string &args,
                                    llvm::raw_ostream &body,
                                    StringRef threads) {
  emitLaunch(op, "launchCooperative", kernel,
             formatv("{0}u", std::min(maxBlocks, kMaxRowBlocks)).str(), threads,
             args, body);
}

void CudaEmitter::emitLaunch(Operation *op, StringRef launcher,
                             StringRef kernel, StringRef grid,
                             StringRef threads, const std::string &args,
                             llvm::raw_ostream &body) {
  // ampc::cuda::launch: <<<>>> under nvcc, the CUDA execution on the CPU
  // under the host compiler (--target=cuda-sim), from one source.
  StringRef shortName = kernel;
  shortName.consume_front("ampc::cuda::");
  emitGuards(op, body);
  body << "  ampc::cuda::" << launcher << "(\"" << shortName << "\", " << kernel
       << ", " << grid << ", "
       << (threads.empty() ? StringRef("ampc::cuda::kThreads") : threads)
       << ", 0, ctx.stream" << (args.empty() ? "" : ", ") << args << ");\n"
       << "  AMPC_LAUNCHED(ctx, " << where(op) << ");";
  // How the op's kernels spread over threads (KernelGeometry.h), for the
  // check that no kernel leaves a whole row to one thread
  // (test/Target/Cuda/Inputs/parallelism_check.py).
  KernelParallelism p = launchParallelism(op);
  if (p.kind != Parallelism::Element)
    body << formatv(" // ampc.parallelism: {0} {1} rows of {2} ({3})",
                    parallelismName(p.kind), p.rows, p.length,
                    op->getName().getStringRef());
  body << "\n";
}

void CudaEmitter::emitGuards(Operation *op, llvm::raw_ostream &body) {
  auto f = op->getParentOfType<func::FuncOp>();
  auto guard = f ? f->getAttrOfType<mlir::IntegerAttr>(ampc::kGuardBytesAttr)
                 : mlir::IntegerAttr();
  if (!guard)
    return;
  for (mlir::OpResult r : op->getResults()) {
    // A result written in place into the state (the optimizer's) has no
    // planned buffer of its own here: the state is not guarded.
    if (!ampc::planOffset(r) || inPlaceOffset(r))
      continue;
    RankedTensorType t = tensorOf(r);
    int64_t bytes = t.getNumElements() * storageSize(t.getElementType());
    body << formatv("  AMPC_GUARD({0}, {1}ULL, {2}ULL, \"{3}\");\n", name(r),
                    bytes,
                    ampc::reservedBytes(bytes, guard.getInt()) - bytes,
                    cString("result " + std::to_string(r.getResultNumber()) +
                            " of " + nodeDescription(op)));
  }
}

std::string CudaEmitter::launchRows(Operation *op, StringRef kernel,
                                    StringRef templateArgs, int64_t rows,
                                    int64_t length, const std::string &args,
                                    llvm::raw_ostream &body) {
  Parallelism p = launchParallelism(op).kind;
  if (p == Parallelism::Serial || p == Parallelism::Element)
    p = cudaRowParallelism(length); // a loss's softmax rows
  StringRef suffix = p == Parallelism::RowByBlock  ? "ByBlock"
                     : p == Parallelism::RowByWarp ? "ByWarp"
                                                   : "";
  std::string grid;
  if (p != Parallelism::RowByThread) {
    int64_t perBlock = p == Parallelism::RowByWarp ? kWarpsPerBlock : 1;
    grid = formatv("{0}u", std::clamp<int64_t>((rows + perBlock - 1) / perBlock,
                                              1, kMaxRowBlocks))
               .str();
  }
  launch(op,
         formatv("ampc::cuda::{0}{1}<{2}>", kernel, suffix, templateArgs).str(),
         rows, args, body, grid);
  return grid;
}

std::string CudaEmitter::deviceError(Operation *op, StringRef what) {
  deviceErrors.push_back(nodeDescription(op) + ": " + what.str());
  return formatv("reinterpret_cast<int32_t *>(state + {0}), {1}", errorSlot(),
                 deviceErrors.size() - 1)
      .str();
}

void CudaEmitter::emitArgument(unsigned index, BlockArgument arg,
                               llvm::raw_ostream &body) {
  RankedTensorType t = tensorOf(arg);
  int64_t bytes = t.getNumElements() * storageSize(t.getElementType());
  std::string n = "in" + std::to_string(index);
  names[arg] = n;
  StringRef type = storageType(t.getElementType());
  // The training step's inputs are staged before its graph (runStep), in
  // trainStepBody (ampc::cuda::stageInputs); its kernels read them there.
  if (inTrainStep) {
    if (stepInputs.size() <= index)
      stepInputs.resize(index + 1, {0, 0});
    stepInputs[index] = {stagingOffset(index), bytes};
  } else {
    body << formatv("  AMPC_CUDA(ctx, cudaMemcpyAsync(state + {0}, "
                    "inputs[{1}], {2}ULL, ampc::cuda::fromCaller(ctx), "
                    "ctx.stream), \"input {1}\");\n",
                    stagingOffset(index), index, bytes);
  }
  body << formatv("  const {0} *{1} = reinterpret_cast<const {0} *>(state + "
                  "{2});\n",
                  type, n, stagingOffset(index));
}

void CudaEmitter::emitReturn(unsigned index, Value v, llvm::raw_ostream &body) {
  RankedTensorType t = tensorOf(v);
  int64_t bytes = t.getNumElements() * storageSize(t.getElementType());
  if (inTrainStep && index == 0) {
    // Recorded when the graph is captured; returned after each replay.
    body << "  ctx.stepLoss = " << name(v) << ";\n";
    stepLossBytes = bytes;
    return;
  }
  body << formatv("  AMPC_CUDA(ctx, cudaMemcpyAsync(outputs[{0}], {1}, {2}ULL, "
                  "ampc::cuda::toCaller(ctx), ctx.stream), \"output {0}\");\n",
                  index, name(v), bytes);
}
void CudaEmitter::emitStore(Operation *op, llvm::raw_ostream &body) {
  auto store = cast<ampc::StoreOp>(op);
  // A value written in place (planInPlace) is already there.
  if (inPlace.count(store.getValue()))
    return;
  RankedTensorType t = tensorOf(store.getValue());
  body << formatv("  AMPC_CUDA(ctx, cudaMemcpyAsync(state + {0}, {1}, {2}ULL, "
                  "cudaMemcpyDeviceToDevice, ctx.stream), {3});\n",
                  parameterOffsets.lookup(store.getTarget()),
                  name(store.getValue()),
                  t.getNumElements() * storageSize(t.getElementType()),
                  where(op));
}
LogicalResult CudaEmitter::emitLibrary(func::FuncOp forward,
                                       func::FuncOp trainStep,
                                       StringRef inferBody,
                                       StringRef stepBody) {
  bool training = isTraining(trainStep);
  os << "// Generated by ampc (CUDA target). Model: " << options.modelName
     << "\n#include \"" << ampc::kCudaKernelsHeader << "\"\n\n";
  emitParameterBlob(
      "The initial state (parameters, training state, constants).");
  os << "// Messages of the errors kernels report by code.\n"
        "static const char *const kDeviceErrors[] = {\n";
  for (const std::string &m : deviceErrors)
    os << "  \"" << cString(m) << "\",\n";
  os << "};\n\n" << kernels;
  emitCopyTable();
  // Every entry point binds the model's device (DeviceScope) for its call.
  os << "static int32_t refreshCopies(void *raw, int32_t parameter) {\n"
        "  ampc::cuda::DeviceScope bound(raw);\n"
        "  return ampc::cuda::refreshCopies(ampc::cuda::context(raw), kCopies, "
        "kNumCopies, parameter);\n}\n"
        "static int32_t copyOut(void *raw, uint64_t offset, void *out, "
        "uint64_t bytes) {\n"
        "  ampc::cuda::DeviceScope bound(raw);\n"
        "  return ampc::cuda::copyOut(ampc::cuda::context(raw), offset, out, "
        "bytes);\n}\n"
        "static int32_t copyIn(void *raw, uint64_t offset, const void *in, "
        "uint64_t bytes) {\n"
        "  ampc::cuda::DeviceScope bound(raw);\n"
        "  return ampc::cuda::copyIn(ampc::cuda::context(raw), offset, in, "
        "bytes);\n}\n\n";
  std::string fills;
  for (const SplatFill &f : splatFills)
    fills += formatv("  if (int32_t code = ampc::cuda::fillState("
                     "ampc::cuda::context(raw), {0}ULL, {1}ULL, {2}, {3}LL)) "
                     "{{\n    ampc::cuda::freeResources(ampc::cuda::context("
                     "raw)); return code;\n  }\n",
                     f.offset, f.word, f.width, f.count)
                 .str();
  // Data parallel: the communicator, its stream and the buckets' events.
  if (allReduceBuckets)
    fills += formatv("  if (int32_t code = ampc::cuda::initComm("
                     "ampc::cuda::context(raw), config, {0})) {{\n"
                     "    ampc::cuda::freeResources(ampc::cuda::context("
                     "raw)); return code;\n  }\n",
                     allReduceBuckets)
                 .str();
  // The convolutions' cuDNN plans, made at init (the step makes none).
  if (!convolutions.empty()) {
    os << "// The convolutions, each made a cuDNN plan at init.\n"
          "static const ampc::cuda::Convolution kConvolutions[] = {\n";
    for (const auto &c : convolutions)
      os << "  " << c.first << ",\n";
    os << "};\nstatic const char *const kConvolutionNodes[] = {\n";
    for (const auto &c : convolutions)
      os << "  " << c.second << ",\n";
    os << "};\n\n";
    fills += formatv("  if (int32_t code = ampc::cuda::initConvolutions("
                     "ampc::cuda::context(raw), kConvolutions, {0}, "
                     "kConvolutionNodes)) return code;\n",
                     convolutions.size())
                 .str();
  }
  os << formatv("static int32_t init(void *raw, const ampc_abi_config *config) "
                "{{\n"
                "  if (int32_t code = ampc::cuda::init(raw, config, {0}ULL, "
                "{1}, {2}ULL, {6}ULL, {3}ULL, kDeviceErrors, {4})) return "
                "code;\n"
                "{5}"
                "  if (int32_t code = refreshCopies(raw, -1)) {{\n"
                "    ampc::cuda::freeResources(ampc::cuda::context(raw)); "
                "return code;\n  }\n"
                "  return 0;\n}\n\n",
                stateSize, blobBytes ? symbol("ampc_parameter_blob") : "nullptr",
                blobBytes, errorSlot(), deviceErrors.size(), fills, arenaBase);
  os << "static void release(void *raw) { ampc::cuda::release(raw); }\n"
        "static const char *lastError(void *raw) { return "
        "ampc::cuda::lastError(raw); }\n"
        "static int32_t synchronizeState(void *raw) {\n"
        "  ampc::cuda::DeviceScope bound(raw);\n"
        "  return ampc::cuda::synchronize(ampc::cuda::context(raw));\n}\n\n";
  // Inference and gradients wait for their outputs; the training step does
  // not wait.
  auto function = [&](StringRef name, StringRef body, bool wait) {
    os << "static int32_t " << name
       << "(void *raw, const void *const *inputs, void *const *outputs) {\n"
          "  ampc::cuda::DeviceScope bound(raw);\n"
          "  ampc::cuda::Context &ctx = ampc::cuda::context(raw);\n"
          "  unsigned char *state = ctx.device;\n"
          "  (void)state; (void)inputs; (void)outputs;\n"
       << body
       << (wait ? "  return ampc::cuda::synchronize(ctx);\n}\n\n"
                : "  return 0;\n}\n\n");
  };
  function("infer", inferBody, true);
  if (trainStep && training) {
    // The step: its inputs staged, its kernels as one graph (runStep), the
    // loss copied back; it does not wait.
    os << "static int32_t trainStepKernels(ampc::cuda::Context &ctx) {\n"
          "  unsigned char *state = ctx.device;\n"
          "  (void)state;\n"
       << stepBody << "  return 0;\n}\n\n";
    // The staging region: from the first staging buffer to the end of the
    // last (ampc-plan-memory places them first in the arena, in order).
    int64_t base = 0, end = 0;
    bool any = false;
    std::string table;
    for (auto [offset, bytes] : stepInputs) {
      table += formatv("{{{0}ULL, {1}ULL}, ", offset, bytes).str();
      if (bytes == 0)
        continue;
      base = any ? std::min(base, offset) : offset;
      end = any ? std::max(end, offset + bytes) : offset + bytes;
      any = true;
    }
    if (!stepInputs.empty())
      os << "static const ampc::cuda::StagedInput kStepInputs[] = {" << table
         << "};\n\n";
    std::string stage =
        formatv("  if (int32_t code = ampc::cuda::stageInputs(ctx, inputs, "
                "{0}, {1}, {2}ULL, {3}ULL)) return code;\n",
                stepInputs.empty() ? "nullptr" : "kStepInputs",
                stepInputs.size(), base, end - base)
            .str();
    function("trainStepBody",
             (stage +
              "  if (int32_t code = ampc::cuda::runStep(ctx, "
              "trainStepKernels)) return code;\n" +
              formatv("  if (int32_t code = ampc::cuda::returnLoss(ctx, "
                      "outputs[0], ctx.stepLoss, {0}ULL)) return code;\n",
                      stepLossBytes)
                  .str()),
             false);
  } else if (trainStep) {
    function("gradients", stepBody, true);
  }
  if (trainStep && failed(emitParameterAccess(trainStep)))
    return failure();
  if (training)
    emitTrainStepEntry();
  // The device entry points (issue 37, item 2): the same functions, their
  // staging copies device to device.
  os << "static int32_t inferDevice(void *raw, const void *const *inputs, "
        "void *const *outputs) {\n"
        "  ampc::cuda::CallerOnDevice onDevice(raw);\n"
        "  return infer(raw, inputs, outputs);\n}\n"
        "static int32_t memoryOf(void *raw, const void *pointer) {\n"
        "  return ampc::cuda::memoryOf(ampc::cuda::context(raw), pointer);\n"
        "}\n"
        "static int32_t waitStream(void *raw, void *stream) {\n"
        "  ampc::cuda::DeviceScope bound(raw);\n"
        "  return ampc::cuda::waitStream(ampc::cuda::context(raw), "
        "static_cast<cudaStream_t>(stream));\n}\n";
  if (training)
    os << "static int32_t trainStepDevice(void *raw, const void *const "
          "*inputs, void *loss) {\n"
          "  ampc::cuda::CallerOnDevice onDevice(raw);\n"
          "  return trainStep(raw, inputs, loss);\n}\n";
  os << "\n";
  emitDescriptor(forward, trainStep, /*hasLastError=*/true,
                 /*hasRelease=*/true);
  return success();
}

LogicalResult ampc::emitCudaArtifact(ModuleOp module,
                                     const LibraryOptions &options,
                                     Artifact &artifact) {
  return CudaEmitter(module, options, artifact).run();
}

LogicalResult ampc::emitCudaSource(ModuleOp module,
                                   const LibraryOptions &options,
                                   llvm::raw_ostream &source,
                                   std::string &blob) {
  Artifact artifact;
  if (failed(emitCudaArtifact(module, options, artifact)))
    return failure();
  source << artifact.text();
  blob = std::move(artifact.parameters);
  return success();
}
