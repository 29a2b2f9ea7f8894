//===- PipelineFuzzer.cpp - libFuzzer target: import, every pass, emitters ===//
//
// One input is one model file, binary protobuf or ONNX text (the text
// syntax when it starts with '<' or '#', as for the driver). A module that
// imports goes through the whole pipeline of `ampc --mode=train`
// (lib/Transforms/Pipeline.cpp): the loss, precision assignment, autodiff,
// loss scaling, the optimizer, the kernel passes and the memory plan, then
// both emitters write their source to a string (no compiler runs). The
// graph part runs once; the kernel part runs on a copy per target (the
// memory plan differs: the CUDA target stages its inputs).
//
// The pipeline's settings come from a hash of the input, so that every
// mutation may change them: the precision (fp16, bf16 or fp32), the loss
// (mse most often: it fits any float output), the optimizer (sgd with or
// without momentum, adam, adamw), gradient accumulation, clipping, and
// --batch 2 (one input in four), and which float inputs become trainable
// parameters (the ONNX node tests have
// no initializers: without this, autodiff would have nothing to
// differentiate). A promoted input is what the importer makes of an
// initializer: an `ampc.parameter` of its type, loaded at the top of
// @forward.
//
// The oracles, besides the sanitizers: the module verifies after every
// pass (the PassManager's own verifier is replaced by an instrumentation
// that stops the run naming the pass), and a pass or an emitter that fails
// reports an error (a failure without one stops the run). An error
// diagnostic for a model the pipeline refuses is not a finding.
//
// AMPC_FUZZ_VERBOSE=1 prints how far each input went: refused by the
// importer or by a pass (named), or each emitter's source written.
//
// Tensors are limited to 16 MiB (--max-tensor-bytes) for the import and
// the memory plan. The MLIRContext is made again every 200 inputs.
//
//===----------------------------------------------------------------------===//

#define FUZZ_WITH_MLIR
#include "FuzzSupport.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Import/OnnxImporter.h"
#include "ampc/Target/CpuTarget.h"
#include "ampc/Target/CudaTarget.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/PipelineSettings.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

namespace {

std::string emptyFolder;

/// FNV-1a: the pipeline's settings for this input.
uint64_t hashOf(const uint8_t *data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < size; ++i)
    h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

/// Takes `n` choices off `bits`.
unsigned take(uint64_t &bits, unsigned n) {
  unsigned choice = static_cast<unsigned>(bits % n);
  bits /= n;
  return choice;
}

/// AMPC_FUZZ_VERBOSE=1: say how far each input went (reproductions, and
/// how many seeds reach the emitters).
bool verbose = false;

/// Stops the run when the IR a pass left does not verify; notes the pass
/// that refused the module.
struct VerifyAfterEachPass : public mlir::PassInstrumentation {
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override {
    if (mlir::succeeded(mlir::verify(op)))
      return;
    std::fprintf(stderr, "the IR does not verify after %s\n",
                 pass->getArgument().str().c_str());
    std::abort();
  }
  void runAfterPassFailed(mlir::Pass *pass, mlir::Operation *) override {
    if (verbose)
      std::fprintf(stderr, "fuzz: refused by %s\n",
                   pass->getArgument().str().c_str());
  }
};

/// Makes float inputs of @forward trainable parameters, as the importer
/// makes an initializer: all of them, none, or all but the first.
void promoteInputs(mlir::ModuleOp module, unsigned how) {
  auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward");
  if (how == 0 || !forward || forward.isExternal())
    return;
  mlir::SymbolTable symbols(module);
  mlir::OpBuilder b(forward);
  mlir::Block &entry = forward.getBody().front();
  llvm::BitVector erase(forward.getNumArguments());
  for (unsigned i = how == 2 ? 1 : 0; i < forward.getNumArguments(); ++i) {
    mlir::BlockArgument arg = forward.getArgument(i);
    auto type = llvm::dyn_cast<mlir::RankedTensorType>(arg.getType());
    auto name = forward.getArgAttrOfType<mlir::StringAttr>(i, ampc::kNameAttr);
    if (!type || !type.hasStaticShape() || !name ||
        !llvm::isa<mlir::FloatType>(type.getElementType()) ||
        symbols.lookup(name.getValue()))
      continue;
    mlir::Location loc = mlir::NameLoc::get(name, module.getLoc());
    b.setInsertionPoint(forward);
    auto value = mlir::DenseElementsAttr::get(
        type, mlir::FloatAttr::get(type.getElementType(), 0.25 + 0.125 * i));
    auto param = ampc::ParameterOp::create(b, loc, name.getValue(), type,
                                           llvm::cast<mlir::ElementsAttr>(value));
    symbols.insert(param);
    b.setInsertionPointToStart(&entry);
    mlir::Value load =
        ampc::LoadParameterOp::create(b, loc, type, name.getValue());
    arg.replaceAllUsesWith(load);
    erase.set(i);
  }
  if (mlir::failed(forward.eraseArguments(erase))) {
    std::fprintf(stderr, "cannot erase the promoted inputs\n");
    std::abort();
  }
}

/// Runs one part of the pipeline; false when a pass refused the module.
bool runPart(mlir::ModuleOp module, const ampc::PipelineOptions &options,
             ampc::PipelinePart part, const unsigned &errors) {
  mlir::PassManager pm(module.getContext());
  pm.enableVerifier(false);
  pm.addInstrumentation(std::make_unique<VerifyAfterEachPass>());
  std::string error;
  if (!ampc::buildPipeline(pm, options, part, error)) {
    std::fprintf(stderr, "cannot build the pipeline: %s\n", error.c_str());
    std::abort();
  }
  unsigned before = errors;
  if (mlir::succeeded(pm.run(module)))
    return true;
  if (errors == before) {
    std::fprintf(stderr, "a pass failed without an error message\n");
    std::abort();
  }
  return false;
}

/// Runs the kernel part for one target on a copy of `module`, then its
/// emitter.
void emitFor(mlir::ModuleOp module, ampc::PipelineOptions options, bool cuda,
             const std::string &precision, const unsigned &errors) {
  mlir::OwningOpRef<mlir::ModuleOp> copy(module.clone());
  options.kernelTarget = cuda ? ampc::KernelTarget::Cuda : ampc::KernelTarget::Cpu;
  if (!runPart(*copy, options, ampc::PipelinePart::Kernel, errors))
    return;
  ampc::LibraryOptions library;
  library.modelName = "fuzz";
  library.precision = precision;
  std::string source, parameters;
  llvm::raw_string_ostream os(source);
  unsigned before = errors;
  mlir::LogicalResult emitted =
      cuda ? ampc::emitCudaSource(*copy, library, os, parameters)
           : ampc::emitCpuSource(*copy, library, os, parameters);
  if (verbose)
    std::fprintf(stderr, "fuzz: %s emitter: %s\n", cuda ? "CUDA" : "CPU",
                 mlir::succeeded(emitted) ? "written" : "refused");
  if (mlir::failed(emitted) && errors == before) {
    std::fprintf(stderr, "the %s emitter failed without an error message\n",
                 cuda ? "CUDA" : "CPU");
    std::abort();
  }
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  llvm::SmallString<128> folder;
  if (llvm::sys::fs::createUniqueDirectory("ampc-fuzz-external", folder)) {
    std::fprintf(stderr, "cannot make a temporary folder\n");
    std::exit(1);
  }
  emptyFolder = folder.str().str();
  verbose = std::getenv("AMPC_FUZZ_VERBOSE") != nullptr;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext &ctx = ampc::fuzz::freshEnoughContext(200);
  unsigned errors = 0;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error) {
      ++errors;
      if (verbose)
        std::fprintf(stderr, "fuzz: error: %s\n", d.str().c_str());
    }
    return mlir::success();
  });

  uint64_t bits = hashOf(data, size);
  static const char *const kPrecisions[] = {"fp16", "bf16", "fp32"};
  static const char *const kLosses[] = {"mse", "mse", "mse", "cross_entropy",
                                        "bce_with_logits", "l1", "smooth_l1",
                                        "huber"};
  static const char *const kOptimizers[] = {"sgd", "adam", "adamw"};
  ampc::PipelineSettings flags;
  flags.mode = "train";
  flags.precision = kPrecisions[take(bits, 3)];
  flags.loss = kLosses[take(bits, 8)];
  flags.optimizer = kOptimizers[take(bits, 3)];
  if (flags.optimizer == "sgd" && take(bits, 2))
    flags.momentum = 0.9;
  flags.accumulate = take(bits, 4) == 0 ? 2 : 1;
  if (take(bits, 4) == 0)
    flags.clipGradNorm = 1.0;
  flags.inferTrainingMode = take(bits, 4) == 0;
  unsigned promote = take(bits, 3);
  bool batch = take(bits, 4) == 0;
  flags.maxTensorBytes = int64_t(1) << 24;
  ampc::PipelineOptions options;
  std::string error;
  if (!flags.toPipelineOptions(options, "--", error)) {
    std::fprintf(stderr, "bad settings: %s\n", error.c_str());
    std::abort();
  }

  if (verbose)
    std::fprintf(stderr,
                 "fuzz: --precision=%s --loss=%s --optimizer=%s%s "
                 "--accumulate=%lld%s%s%s; inputs promoted: %s\n",
                 flags.precision.c_str(), flags.loss.c_str(),
                 flags.optimizer.c_str(),
                 flags.momentum != 0 ? " --momentum=0.9" : "",
                 static_cast<long long>(flags.accumulate),
                 flags.clipGradNorm != 0 ? " --clip-grad-norm=1" : "",
                 flags.inferTrainingMode ? " --infer-training-mode" : "",
                 batch ? " --batch=2" : "",
                 promote == 0 ? "none" : promote == 1 ? "all" : "all but the first");

  ampc::ImportOptions import;
  import.maxTensorBytes = flags.maxTensorBytes;
  // A symbolic batch needs --batch; a static one refuses it.
  if (batch)
    import.batch = 2;
  import.mergedInitializers = ampc::ImportOptions::MergedInitializers::Untie;
  llvm::StringRef contents(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module =
      ampc::importOnnxBuffer(ctx, contents, "fuzz.onnx", emptyFolder, import);
  if (!module) {
    if (verbose)
      std::fprintf(stderr, "fuzz: refused by the importer\n");
    return 0;
  }
  promoteInputs(*module, promote);
  if (mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "the module does not verify after the inputs "
                         "became parameters\n");
    std::abort();
  }
  if (!runPart(*module, options, ampc::PipelinePart::Graph, errors))
    return 0;
  emitFor(*module, options, /*cuda=*/false, flags.precision, errors);
  emitFor(*module, options, /*cuda=*/true, flags.precision, errors);
  return 0;
}
