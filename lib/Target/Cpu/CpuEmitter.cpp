//===- CpuEmitter.cpp - C++ model libraries for the CPU -------------------===//
//
// Walks @forward in its kernel-level form (after ampc-fuse and
// ampc-plan-memory) and writes, for each op, a call to the kernels of
// include/ampc/Kernels/Cpu/CpuKernels.h or one loop nest (an ampc.fusion or a
// lone elementwise op). The instance state holds the parameters, which
// `init` copies from a blob the library embeds, then the arena of the
// memory plan, where every intermediate lives at its planned offset; views
// share their operand's buffer. This file holds what every op shares
// (arguments, results, constants), the dispatch of each op to its family's
// file (LibraryEmitter::emitKernelOp; CpuEmitter.h lists the files) and the library around
// the functions.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/CpuTarget.h"

#include "CpuEmitter.h"

#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Target/LibraryEmitter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Target/ScalarExpression.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

using namespace mlir;
using llvm::formatv;
using llvm::StringRef;
using namespace ampc::emit;
using namespace ampc::cpugen;

/// The runtime headers every generated source includes, in order (the
/// precompiled header holds them too).
static const StringRef kIncludes[] = {"ampc/Kernels/Cpu/CpuBackwardKernels.h",
                                      "ampc/Kernels/Cpu/CpuTrainKernels.h",
                                      "ampc/Runtime/ModelAbi.h"};

std::string CpuEmitter::widenFloat(Operation *op, Value v) {
  Type t = elementOf(v);
  std::string n = name(v);
  if (t.isF32() || t.isF64())
    return formatv("const {0} *w_{1} = {1};\n", storageType(t), n).str();
  // The slot of the operand's first occurrence (scratchLayout: "wI").
  unsigned index = 0;
  while (op->getOperand(index) != v)
    ++index;
  return formatv("float *w_{0} = {1}; ampc::cpu::widen<{3}>({0}, {2}LL, "
                 "w_{0});\n",
                 n, scratch(op, "w" + std::to_string(index), "float"),
                 tensorOf(v).getNumElements(), codec(t))
      .str();
}

std::string CpuEmitter::commFailure(StringRef comm) {
  canFail = true;
  return formatv("return ampc::cpu::fail(state + {0}, {1}->last_error({1}->"
                 "handle));",
                 errorSlot(), comm)
      .str();
}

std::string CpuEmitter::ranks() const {
  return formatv("ampc::cpu::ranks(state + {0})", commSlot).str();
}

std::string CpuEmitter::failUnless(Operation *op, const std::string &condition,
                                StringRef what) {
  canFail = true;
  return formatv("  if (!({0})) return ampc::cpu::fail(state + {1}, \"{2}: "
                 "{3}\");\n",
                 condition, errorSlot(), cString(nodeDescription(op)), what)
      .str();
}

void CpuEmitter::emitConstant(Operation *op, llvm::raw_ostream &body) {
  Value v = op->getResult(0);
  std::string n = "c" + std::to_string(counter++);
  names[v] = n;
  llvm::raw_string_ostream cs(constants);
  cs << "alignas(64) static const " << storageType(elementOf(v)) << " " << n
     << "[] = {" << constantElements(op) << "};\n";
  (void)body;
}

void CpuEmitter::emitStore(Operation *op, llvm::raw_ostream &body) {
  auto store = cast<ampc::StoreOp>(op);
  // ZeRO-1: a sharded moment was updated in place in the rank's shard.
  if (shardedStates.count(store.getTarget()))
    return;
  RankedTensorType t = tensorOf(store.getValue());
  body << "  std::memmove(state + " << parameterOffsets.lookup(store.getTarget())
       << ", " << name(store.getValue()) << ", "
       << t.getNumElements() * storageSize(t.getElementType()) << "ULL);\n";
}

void CpuEmitter::emitArgument(unsigned index, BlockArgument arg,
                           llvm::raw_ostream &body) {
  Type t = elementOf(arg);
  std::string n = "in" + std::to_string(index);
  names[arg] = n;
  declarePointer(n,
                 "  const " + storageType(t) + " *" + n +
                     " = static_cast<const " + storageType(t) + " *>(inputs[" +
                     std::to_string(index) + "]);",
                 body);
}

void CpuEmitter::emitReturn(unsigned index, Value v, llvm::raw_ostream &body) {
  RankedTensorType t = tensorOf(v);
  body << "  std::memcpy(outputs[" << index << "], " << name(v) << ", "
       << t.getNumElements() * storageSize(t.getElementType()) << "ULL);\n";
}

LogicalResult CpuEmitter::emitLibrary(func::FuncOp forward, func::FuncOp trainStep,
                                   StringRef inferBody, StringRef stepBody) {
  os << "// Generated by ampc (CPU target). Model: " << options.modelName
     << "\n";
  for (StringRef header : kIncludes)
    os << "#include \"" << header << "\"\n";
  os << "\n" << constants;
  // A large body is cut into pieces (functions of their own, which the
  // compile builds apart and at once; startPiece), the function
  // calling them in order and returning the first error.
  bool training = isTraining(trainStep);
  // The instance's threads (ThreadPool.h): started by init from the
  // config's num_threads, current while infer and the step run, joined by
  // release.
  const int64_t threadsSlot = reserve(8);
  struct Body {
    std::string name;
    std::vector<std::string> pieces;
  };
  SmallVector<Body> bodies;
  bodies.push_back(
      {"infer", cutPieces(inferBody, inferLayout, options.pieceBytes)});
  if (trainStep)
    bodies.push_back({training ? "trainStepBody" : "gradients",
                      cutPieces(stepBody, stepLayout, options.pieceBytes)});
  auto pieceName = [&](const Body &body, size_t i) {
    return symbol("ampc_" + body.name + "_piece" + std::to_string(i));
  };
  auto signature = [](StringRef name) {
    return ("int32_t " + name +
            "(unsigned char *state, const void *const *inputs, "
            "void *const *outputs)")
        .str();
  };
  bool pieced = llvm::any_of(bodies, [](const Body &b) {
    return b.pieces.size() > 1;
  });
  if (pieced) {
    for (const Body &body : bodies)
      for (size_t i = 0; i < body.pieces.size(); ++i)
        os << signature(pieceName(body, i)) << ";\n";
    for (const Body &body : bodies)
      for (size_t i = 0; i < body.pieces.size(); ++i) {
        os << "\n";
        startPiece();
        os << signature(pieceName(body, i))
           << " {\n  (void)state; (void)inputs; (void)outputs;\n"
           << body.pieces[i] << "  return 0;\n}\n";
      }
    os << "\n";
    startPiece();
  }
  emitParameterBlob(
      "The parameters' initial values, laid out as in the state.");
  emitCopyTable();
  os << "static int32_t refreshCopies(void *raw, int32_t parameter) {\n"
        "  ampc::cpu::refreshCopies(static_cast<unsigned char *>(raw), kCopies, "
        "kNumCopies, parameter);\n  return 0;\n}\n"
        "static int32_t copyOut(void *raw, uint64_t offset, void *out, "
        "uint64_t bytes) {\n"
        "  std::memcpy(out, static_cast<unsigned char *>(raw) + offset, bytes);\n"
        "  return 0;\n}\n"
        "static int32_t copyIn(void *raw, uint64_t offset, const void *in, "
        "uint64_t bytes) {\n"
        "  std::memcpy(static_cast<unsigned char *>(raw) + offset, in, bytes);\n"
        "  return 0;\n}\n\n";
  // ZeRO-1: a checkpoint's sharded moments (emitStateAccess).
  if (shardSlot >= 0) {
    StringRef t = shardWidth() == 8 ? "double" : "float";
    os << formatv(
        "static int32_t readSharded(void *raw, int32_t kind, int64_t offset, "
        "void *out, uint64_t bytes) {{\n"
        "  unsigned char *state = static_cast<unsigned char *>(raw);\n"
        "  return ampc::cpu::readShardedState<{0}>(*ampc::cpu::shardsAt(state "
        "+ {1}), kind, offset, int64_t(bytes / sizeof({0})), out, state + "
        "{2});\n}\n"
        "static int32_t writeSharded(void *raw, int32_t kind, int64_t offset, "
        "const void *in, uint64_t bytes) {{\n"
        "  unsigned char *state = static_cast<unsigned char *>(raw);\n"
        "  return ampc::cpu::writeShardedState<{0}>(*ampc::cpu::shardsAt(state "
        "+ {1}), kind, offset, int64_t(bytes / sizeof({0})), in);\n}\n\n",
        t, shardSlot, errorSlot());
    canFail = true;
  }
  os << "static int32_t init(void *raw, const ampc_abi_config *config) {\n";
  // ZeRO-1: the rank's shard first (a refused communicator leaves nothing
  // to clean up).
  if (shardSlot >= 0)
    os << formatv("  if (int32_t code = ampc::cpu::createShards(static_cast<"
                  "unsigned char *>(raw) + {0}, static_cast<unsigned char *>"
                  "(raw) + {1}, config, {2}LL, {3}LL, {4}LL)) return code;\n",
                  shardSlot, errorSlot(), shardTotal, shardKinds,
                  shardWidth());
  os << "  ampc::cpu::startThreads(static_cast<unsigned char *>(raw) + "
     << threadsSlot << ", config->num_threads);\n";
  if (commSlot >= 0)
    os << "  ampc::cpu::setCommunicator(static_cast<unsigned char *>(raw) + "
       << commSlot << ", config);\n";
  if (blobBytes)
    os << "  std::memcpy(raw, " << symbol("ampc_parameter_blob") << ", "
       << blobBytes << "ULL);\n";
  for (const SplatFill &f : splatFills)
    os << formatv("  ampc::cpu::fillWords(static_cast<unsigned char *>(raw) + "
                  "{0}, {1}ULL, {2}, {3}LL);\n",
                  f.offset, f.word, f.width, f.count);
  os << "  return refreshCopies(raw, -1);\n}\n\n";
  os << "static void release(void *raw) {\n"
     << "  ampc::cpu::stopThreads(static_cast<unsigned char *>(raw) + "
     << threadsSlot << ");\n";
  if (shardSlot >= 0)
    os << "  ampc::cpu::destroyShards(static_cast<unsigned char *>(raw) + "
       << shardSlot << ");\n";
  os << "}\n\n";
  auto function = [&](const Body &body) {
    os << "static int32_t " << body.name
       << "(void *raw, const void *const *inputs, void *const *outputs) {\n"
          "  unsigned char *state = static_cast<unsigned char *>(raw);\n"
          "  (void)state; (void)inputs; (void)outputs;\n"
       << "  ampc::cpu::PoolScope threads(ampc::cpu::threadsAt(state + "
       << threadsSlot << "));\n";
    if (!pieced)
      os << body.pieces.front();
    else
      for (size_t i = 0; i < body.pieces.size(); ++i)
        os << "  if (int32_t status = " << pieceName(body, i)
           << "(state, inputs, outputs))\n    return status;\n";
    os << "  return 0;\n}\n\n";
  };
  function(bodies[0]);
  if (trainStep) {
    function(bodies[1]);
    if (failed(emitParameterAccess(trainStep)))
      return failure();
  }
  if (training)
    emitTrainStepEntry();
  if (canFail)
    os << "\nstatic const char *lastError(void *raw) {\n"
          "  return ampc::cpu::lastError(static_cast<unsigned char *>(raw) + "
       << errorSlot() << ");\n}\n";
  emitDescriptor(forward, trainStep, canFail, /*hasRelease=*/true);
  return success();
}

LogicalResult ampc::emitCpuArtifact(ModuleOp module,
                                    const CpuLibraryOptions &options,
                                    Artifact &artifact) {
  return CpuEmitter(module, options, artifact).run();
}

LogicalResult ampc::emitCpuSource(ModuleOp module,
                                  const CpuLibraryOptions &options,
                                  llvm::raw_ostream &source,
                                  std::string &parameters) {
  Artifact artifact;
  if (failed(emitCpuArtifact(module, options, artifact)))
    return failure();
  source << artifact.text();
  parameters = std::move(artifact.parameters);
  return success();
}

bool ampc::compileCpuLibrary(const Artifact &source, StringRef sourcePath,
                             StringRef output, std::string &error) {
  std::optional<std::string> program = emit::hostCompiler(error);
  if (!program)
    return false;
  std::vector<std::string> flags = {
      "-O3", "-std=c++17", "-fPIC", "-fvisibility=hidden",
      emit::runtimeIncludeFlag(AMPC_RUNTIME_INCLUDE_DIR)};
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  // Hardware f16 conversions (CpuKernels.h) where this machine has them; a
  // library built here then needs F16C (every x86-64 CPU since 2012).
  if (__builtin_cpu_supports("f16c"))
    flags.push_back("-mf16c");
#endif
  std::string link[] = {"-lopenblas"};
  emit::LibraryCompile how;
  how.program = *program;
  how.compileFlags = flags;
  how.linkFlags = link;
  how.headers = kIncludes;
  how.what = "the C++ compiler";
  return emit::compileLibrary(how, source, sourcePath, output, error);
}
