//===- ampc.cpp - the ampc compiler driver --------------------------------===//
//
// ampc MODEL [-o OUT] [--emit=...] [--mode=train|infer] [--shape NAME=DIMS]
//      [--batch N] [--loss=...] [--label=NAME] [--precision=...]
//      [--keep-fp32=...] [--report=FILE.json|html]
// ampc explain MODEL [options]
//
// Imports an ONNX model, runs the pipeline (lib/Transforms/Pipeline.cpp) and
// writes what --emit asks for. Exit status: 0 on success, 1 on any user
// error, with one line per problem on stderr.
//
//===----------------------------------------------------------------------===//

#include "ampc/Driver/Driver.h"
#include "ampc/Import/Diagnostics.h"
#include "ampc/Import/OnnxImporter.h"
#include "ampc/Target/CudaTarget.h"
#include "ampc/Target/OnnxExport.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/PipelineFlags.h"
#include "ampc/Transforms/Precision.h"
#include "ampc/Transforms/PrecisionReport.h"
#include "ampc/Support/OutputFile.h"
#include "ampc/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace llvm;

namespace {
cl::OptionCategory ampcCategory("ampc options");

cl::opt<std::string> inputPath(cl::Positional,
                               cl::desc("<model.onnx|model.onnxtext>"),
                               cl::cat(ampcCategory));
cl::opt<std::string> outputPath("o",
                                cl::desc("output file (default: standard "
                                         "output for text formats)"),
                                cl::value_desc("file"), cl::cat(ampcCategory));

enum class Emit { Mlir, Onnx, Cuda, Cpp, So };
cl::opt<Emit>
    emit("emit", cl::desc("what to write"), cl::init(Emit::So),
         cl::values(
             clEnumValN(Emit::Mlir, "mlir", "the IR after the pipeline"),
             clEnumValN(Emit::Onnx, "onnx", "a precision-assigned ONNX model"),
             clEnumValN(Emit::Cuda, "cuda", "generated CUDA source"),
             clEnumValN(Emit::Cpp, "cpp", "generated C++ source (CPU target)"),
             clEnumValN(Emit::So, "so", "a compiled train.so / infer.so")),
         cl::cat(ampcCategory));
cl::opt<std::string> emitAfter(
    "emit-after",
    cl::desc("with --emit=mlir: stop after this pass ('import' stops before "
             "the first)"),
    cl::value_desc("pass"), cl::cat(ampcCategory));
cl::list<std::string> shapes("shape",
                             cl::desc("bind an input's shape, e.g. x=32x784"),
                             cl::value_desc("NAME=DxD..."),
                             cl::cat(ampcCategory));
cl::list<std::string> boundInputs(
    "bind-input",
    cl::desc("replace a graph input by the constant in a serialized ONNX "
             "TensorProto (for inputs that feed shapes or axes)"),
    cl::value_desc("NAME=FILE.pb"), cl::cat(ampcCategory));
cl::opt<int64_t> batch("batch",
                       cl::desc("bind the symbolic leading dim of every input"),
                       cl::value_desc("N"), cl::init(-1),
                       cl::cat(ampcCategory));
cl::opt<bool> summary("summary",
                      cl::desc("print a one-line summary of the module to "
                               "standard error"),
                      cl::cat(ampcCategory));
enum class Mode { Train, Infer };
cl::opt<Mode> mode(
    "mode", cl::desc("what the output computes"), cl::init(Mode::Train),
    cl::values(clEnumValN(Mode::Train, "train", "the training step (default)"),
               clEnumValN(Mode::Infer, "infer", "the forward pass only")),
    cl::cat(ampcCategory));
enum class Target { Default, Cpu, Cuda, CudaSim };
cl::opt<Target> target(
    "target",
    cl::desc("the machine the library runs on (default: cuda where nvcc, "
             "cuBLASLt and a CUDA driver are found, else cpu)"),
    cl::init(Target::Default),
    cl::values(clEnumValN(Target::Cpu, "cpu",
                          "C++ compiled by the host compiler, OpenBLAS GEMMs"),
               clEnumValN(Target::Cuda, "cuda",
                          "CUDA C++ compiled by nvcc, cuBLASLt GEMMs"),
               clEnumValN(Target::CudaSim, "cuda-sim",
                          "the CUDA target's source compiled by the host "
                          "compiler against an execution of CUDA and "
                          "cuBLASLt on the CPU (strict; for testing)")),
    cl::cat(ampcCategory));
cl::opt<bool> cudaResourceCheck(
    "cuda-resource-check",
    cl::desc("--target=cuda-sim: first check the kernels as nvcc compiles "
             "them for a GPU (no device recursion, at most 1 KiB of stack "
             "per thread; --target=cuda always checks)"),
    cl::init(true), cl::cat(ampcCategory));
cl::opt<std::string> gpuArchs(
    "gpu-arch",
    cl::desc("GPU architectures of a CUDA library, comma-separated (default "
             "sm_80,sm_90a)"),
    cl::init("sm_80,sm_90a"), cl::value_desc("sm_XX,..."),
    cl::cat(ampcCategory));
cl::opt<std::string> symbolSuffix(
    "symbol-suffix",
    cl::desc("append this to the library's global symbols (entry "
             "ampc_model_entry<SUFFIX>), so that several models' sources "
             "compile into one library; the application loads one with "
             "ampc_model_load_entry"),
    cl::value_desc("SUFFIX"), cl::cat(ampcCategory));
cl::opt<unsigned> compilePieceKb(
    "compile-piece-kb",
    cl::desc("CPU target: cut the generated functions into pieces of about "
             "this many KiB of source, compiled at once (AMPC_COMPILE_JOBS "
             "at a time, default one per hardware thread) and kept in the "
             "compile cache one by one; 0: one piece (default 64)"),
    cl::init(64), cl::value_desc("KIB"), cl::cat(ampcCategory));
cl::opt<std::string> loss(
    "loss",
    cl::desc("training loss attached to the first output unless the model "
             "ends in one, as PyTorch's functional (mean reduction): "
             "cross_entropy (default; int64 class-id labels), "
             "bce_with_logits, mse, l1, smooth_l1, huber (float labels of "
             "the output's shape), or none"),
    cl::init("cross_entropy"),
    cl::value_desc("cross_entropy|bce_with_logits|mse|l1|smooth_l1|huber|none"),
    cl::cat(ampcCategory));
cl::OptionCategory lossCategory("Loss options (PyTorch's, for --loss)");
cl::opt<int64_t> ignoreIndex(
    "ignore-index",
    cl::desc("cross_entropy: labels equal to N count for nothing (PyTorch's "
             "ignore_index; its default -100 is not implied)"),
    cl::value_desc("N"), cl::cat(lossCategory));
cl::opt<double> labelSmoothing(
    "label-smoothing",
    cl::desc("cross_entropy: PyTorch's label_smoothing, in [0, 1] "
             "(default 0)"),
    cl::value_desc("EPS"), cl::cat(lossCategory));
cl::list<double> classWeights(
    "class-weights",
    cl::desc("cross_entropy: one weight per class (PyTorch's weight)"),
    cl::value_desc("W0,W1,..."), cl::CommaSeparated, cl::cat(lossCategory));
cl::opt<bool> softTargets(
    "soft-targets",
    cl::desc("cross_entropy: the label is class probabilities of the "
             "scores' shape (float), not class ids"),
    cl::cat(lossCategory));
cl::list<double> posWeight(
    "pos-weight",
    cl::desc("bce_with_logits: the positives' weight, one value or one per "
             "class of the output's last axis (PyTorch's pos_weight)"),
    cl::value_desc("W|W0,W1,..."), cl::CommaSeparated, cl::cat(lossCategory));
cl::opt<double> huberDelta("huber-delta",
                           cl::desc("huber: PyTorch's delta (default 1)"),
                           cl::value_desc("D"), cl::cat(lossCategory));
cl::opt<double> smoothL1Beta("smooth-l1-beta",
                             cl::desc("smooth_l1: PyTorch's beta (default 1; "
                                      "0 is l1)"),
                             cl::value_desc("B"), cl::cat(lossCategory));
cl::OptionCategory trainingCategory("Training step (--mode=train)");
cl::opt<std::string> optimizer(
    "optimizer",
    cl::desc("optimizer on the FP32 master weights: adamw (default), adam, "
             "sgd, or none (the library computes gradients only)"),
    cl::init("adamw"), cl::value_desc("sgd|adam|adamw|none"),
    cl::cat(trainingCategory));
cl::opt<double> learningRate("lr",
                             cl::desc("initial learning rate (default "
                                      "1e-3; runtime state)"),
                             cl::init(1e-3), cl::cat(trainingCategory));
cl::opt<double> momentum("momentum", cl::desc("sgd momentum (default 0)"),
                         cl::init(0.0), cl::cat(trainingCategory));
cl::opt<double> dampening("dampening", cl::desc("sgd dampening (default 0)"),
                          cl::init(0.0), cl::cat(trainingCategory));
cl::opt<bool> embedModel(
    "embed-model",
    cl::desc("carry the ONNX model in a training library, for "
             "ampc_model_export_onnx (default true; =false halves the size of "
             "a library with large weights)"),
    cl::init(true), cl::cat(trainingCategory));
cl::opt<bool> nesterov("nesterov", cl::desc("sgd with Nesterov momentum"),
                       cl::cat(trainingCategory));
cl::opt<double> weightDecay("weight-decay",
                            cl::desc("weight decay (default: 0.01 for adamw, "
                                     "0 otherwise)"),
                            cl::init(-1.0), cl::cat(trainingCategory));
cl::opt<double> beta1("beta1", cl::desc("adam/adamw beta1 (default 0.9)"),
                      cl::init(0.9), cl::cat(trainingCategory));
cl::opt<double> beta2("beta2", cl::desc("adam/adamw beta2 (default 0.999)"),
                      cl::init(0.999), cl::cat(trainingCategory));
cl::opt<double> epsilon("eps", cl::desc("adam/adamw eps (default 1e-8)"),
                        cl::init(1e-8), cl::cat(trainingCategory));
cl::opt<int64_t> accumulateMicroBatches(
    "accumulate",
    cl::desc("gradient accumulation: N calls of the training step (N "
             "micro-batches) per optimizer step, as a PyTorch loop that "
             "divides the loss by N and steps its GradScaler every N "
             "batches (default 1)"),
    cl::init(1), cl::value_desc("N"), cl::cat(trainingCategory));
cl::opt<double> clipGradNorm("clip-grad-norm",
                             cl::desc("clip the unscaled gradients to this "
                                      "global L2 norm (default: no clipping)"),
                             cl::init(0.0), cl::cat(trainingCategory));
cl::opt<std::string> lossScale(
    "loss-scale",
    cl::desc("loss scaling: dynamic (default for fp16), none (default for "
             "bf16, fp32, fp64), or a fixed scale VALUE"),
    cl::init(""), cl::value_desc("dynamic|none|VALUE"),
    cl::cat(trainingCategory));
cl::opt<double>
    initScale("init-scale",
              cl::desc("initial dynamic loss scale (default 65536)"),
              cl::init(65536.0), cl::cat(trainingCategory));
cl::opt<double> growthFactor("growth-factor",
                             cl::desc("scale growth factor (default 2)"),
                             cl::init(2.0), cl::cat(trainingCategory));
cl::opt<double> backoffFactor("backoff-factor",
                              cl::desc("scale backoff factor (default 0.5)"),
                              cl::init(0.5), cl::cat(trainingCategory));
cl::opt<int64_t> growthInterval("growth-interval",
                                cl::desc("finite steps before the scale grows "
                                         "(default 2000)"),
                                cl::init(2000), cl::cat(trainingCategory));
cl::opt<double> minScale("min-scale",
                         cl::desc("lower bound of the dynamic scale (default: "
                                  "none)"),
                         cl::init(0.0), cl::cat(trainingCategory));
cl::opt<double> maxScale("max-scale",
                         cl::desc("upper bound of the dynamic scale (default: "
                                  "none)"),
                         cl::init(0.0), cl::cat(trainingCategory));
cl::opt<std::string> label("label",
                           cl::desc("name of the label input that --loss "
                                    "adds (default: label)"),
                           cl::init("label"), cl::value_desc("NAME"),
                           cl::cat(ampcCategory));
cl::opt<std::string>
    precision("precision",
              cl::desc("low-precision dtype: fp16 (default), bf16, or fp32 "
                       "(no mixed precision); fp64 makes every FP32 "
                       "tensor FP64 (for gradient checks)"),
              cl::init("fp16"), cl::value_desc("fp16|bf16|fp32|fp64"),
              cl::cat(ampcCategory));
cl::opt<std::string> propagation(
    "propagation",
    cl::desc("autocast: PyTorch autocast op by op (default); paint: "
             "TensorFlow-style cast-minimising colouring"),
    cl::init("autocast"), cl::value_desc("autocast|paint"),
    cl::cat(ampcCategory));
cl::list<std::string>
    keepFp32("keep-fp32",
             cl::desc("keep these ops in FP32, e.g. op:Softmax,node:/x/MatMul"),
             cl::value_desc("RULE,..."), cl::CommaSeparated,
             cl::cat(ampcCategory));
cl::list<std::string>
    forceLowp("force-lowp",
              cl::desc("compute these ops in low precision (op:TYPE or "
                       "node:NAME)"),
              cl::value_desc("RULE,..."), cl::CommaSeparated,
              cl::cat(ampcCategory));
cl::list<std::string>
    freeze("freeze",
           cl::desc("initializers that do not train (globs over their "
                    "names, e.g. 'backbone.*'): no gradient, no optimizer "
                    "state, kept bit for bit"),
           cl::value_desc("GLOB,..."), cl::CommaSeparated,
           cl::cat(trainingCategory));
cl::list<std::string> trainable(
    "trainable",
    cl::desc("train only the initializers these globs match (--freeze "
             "still applies to them)"),
    cl::value_desc("GLOB,..."), cl::CommaSeparated, cl::cat(trainingCategory));
cl::list<std::string> paramGroups(
    "param-group",
    cl::desc("a parameter group as torch's param_groups, repeatable, the "
             "first that matches a parameter wins: GLOB:lr=X,weight_decay=Y "
             "(each key optional; also beta1, beta2, eps for adam/adamw, "
             "momentum, dampening for sgd)"),
    cl::value_desc("GLOB:lr=X,weight_decay=Y"), cl::cat(trainingCategory));
cl::opt<std::string>
    ampRules("amp-rules",
             cl::desc("JSON file changing categories and overriding nodes "
                      "(docs/precision.md)"),
             cl::value_desc("rules.json"), cl::cat(ampcCategory));
cl::opt<std::string>
    reportPath("report", cl::desc("write the per-node precision decisions"),
               cl::value_desc("FILE.json|FILE.html"), cl::cat(ampcCategory));
cl::opt<std::string> padGemms(
    "pad-gemms",
    cl::desc("pad a Linear's output features (classes) to multiples of 8 "
             "for Tensor Cores, results unchanged: on, off or auto (default: "
             "on for --target=cuda and cuda-sim; never in --emit=onnx)"),
    cl::value_desc("on|off|auto"), cl::init("auto"), cl::cat(ampcCategory));
cl::opt<std::string> channelsLast(
    "channels-last",
    cl::desc("store a CNN's images channels-last (N, H, W, C), transposed "
             "only at the model's inputs and outputs, results unchanged: on, "
             "off or auto (default: on for --target=cuda and cuda-sim, whose "
             "kernels and cuDNN take it; the CPU target refuses it; never in "
             "--emit=onnx)"),
    cl::value_desc("on|off|auto"), cl::init("auto"), cl::cat(ampcCategory));
cl::opt<std::string> inputPrecision(
    "input-precision",
    cl::desc("the type of the library's float inputs: fp32 (default: as the "
             "model declares them) or auto (FP16/BF16 where every use of the "
             "input casts it there, as a Linear's input under autocast: the "
             "caller passes 16-bit data, rounded to nearest even, and the "
             "step computes the same bits; labels never change; --report "
             "says why an input stays fp32; not in --emit=onnx)"),
    cl::value_desc("fp32|auto"), cl::init("fp32"), cl::cat(ampcCategory));
cl::opt<int64_t> maxTensorBytes(
    "max-tensor-bytes",
    cl::desc("the largest tensor, and the largest memory arena of the "
             "library, in bytes (default 2^36 = 64 GiB; at most 2^48); a "
             "model past it is an error naming the node"),
    cl::init(ampc::kDefaultMaxTensorBytes), cl::cat(ampcCategory));

cl::opt<bool> tieInitializers(
    "tie-initializers",
    cl::desc("train initializers that an EVAL-mode torch export merged "
             "(equal values read through Identity nodes) as one parameter, "
             "as exported, instead of one parameter each as written"),
    cl::cat(trainingCategory));

cl::opt<std::string> fuseAttention(
    "fuse-attention",
    cl::desc("recognise softmax attention (MatMul, scale, mask, Softmax, "
             "MatMul) and compute it as one fused op: on (default: what the "
             "target's kernels take), off (the graph as exported), or cuda "
             "(only what the CUDA target's kernels take, on either target)"),
    cl::value_desc("on|off|cuda"), cl::init("on"), cl::cat(ampcCategory));

cl::list<std::string> skipPasses(
    "skip-pass",
    cl::desc("leave out a kernel-level rewrite, to compare a step with and "
             "without it or to debug; repeatable"),
    cl::value_desc("pass"), cl::cat(ampcCategory));

cl::opt<bool> inferTrainingMode(
    "infer-training-mode",
    cl::desc("infer runs Dropout and BatchNormalization as the model says "
             "(training mode, when exported so) instead of in eval mode as "
             "PyTorch's model.eval(); for checking ops, not for deployment"),
    cl::cat(ampcCategory));

cl::opt<std::string>
    listOps("list-ops", cl::ValueOptional,
            cl::desc("print the supported ONNX op types and exit; "
                     "--list-ops=table: a Markdown table of each with its "
                     "ampc op, opset, precision category, derivative and "
                     "targets (docs/ops.md)"),
            cl::value_desc("table"), cl::cat(ampcCategory));

/// The Markdown table of --list-ops=table: per ONNX op type, the ampc op
/// that computes it and that op's facts, read from the dialect.
void printOpTable(llvm::raw_ostream &os) {
  mlir::MLIRContext ctx;
  ctx.loadDialect<ampc::AMPCDialect>();
  os << "| ONNX op | ampc op | from opset | precision category | derivative "
        "| targets |\n|---|---|---|---|---|---|\n";
  for (const ampc::SupportedOp &op : ampc::supportedOnnxOpTable()) {
    std::optional<mlir::RegisteredOperationName> name =
        mlir::RegisteredOperationName::lookup(op.ampcOp, &ctx);
    std::string category = "-", derivative = "-";
    if (name) {
      if (std::optional<ampc::PrecisionCategory> c =
              ampc::getPrecisionCategory(*name))
        category = ampc::stringifyPrecisionCategory(*c).str();
      if (name->hasInterface<ampc::GradientOpInterface>())
        derivative = "rule";
      else if (name->hasTrait<ampc::NonDifferentiable>())
        derivative = "none (constant)";
    }
    os << "| " << op.onnxOp << " | `" << op.ampcOp << "` | " << op.minOpset
       << " | " << category << " | " << derivative << " | cpu, cuda |\n";
  }
}

/// "model.onnx: 12 ops (gemm 2, relu 1, ...), 4 parameters (1234 values),
/// 1 input, 1 output" for --summary.
std::string summarize(StringRef file, mlir::ModuleOp module) {
  std::map<std::string, unsigned> counts;
  unsigned ops = 0, params = 0;
  int64_t values = 0;
  module.walk([&](mlir::Operation *op) {
    if (auto param = dyn_cast<ampc::ParameterOp>(op)) {
      ++params;
      values += param.getType().getNumElements();
      return;
    }
    if (op->getDialect() && op->getDialect()->getNamespace() == "ampc" &&
        !isa<ampc::LoadParameterOp>(op)) {
      ++ops;
      ++counts[op->getName().stripDialect().str()];
    }
  });
  std::string text;
  raw_string_ostream os(text);
  os << file << ": " << ops << " ops (";
  bool first = true;
  for (auto &[name, n] : counts) {
    os << (first ? "" : ", ") << name << " " << n;
    first = false;
  }
  os << "), " << params << " parameters (" << values << " values)";
  if (auto forward = module.lookupSymbol<mlir::func::FuncOp>("forward"))
    os << ", " << forward.getNumArguments() << " input(s), "
       << forward.getNumResults() << " output(s)";
  // Which initializers train, and why the others do not.
  std::vector<std::string> frozen;
  for (auto param : module.getOps<ampc::ParameterOp>())
    if (mlir::Attribute reason = param->getAttr(ampc::kFrozenAttr)) {
      auto text = dyn_cast<mlir::StringAttr>(reason);
      frozen.push_back((param.getSymName() + " (" +
                        (text ? text.getValue() : StringRef("frozen")) + ")")
                           .str());
    }
  if (!frozen.empty()) {
    os << "; " << params - frozen.size() << " trainable, " << frozen.size()
       << " frozen: ";
    for (auto [i, f] : llvm::enumerate(frozen))
      os << (i ? "; " : "") << f;
  }
  return text;
}

int userError(const Twine &message) {
  errs() << "error: " << message << "\n";
  return 1;
}

/// The files of this run that no output may replace (docs/design.md,
/// Output files): the model, the rules file, a source being compiled.
std::vector<ampc::ProtectedFile> runInputs;

/// Writes `contents` to `path` by the output rules (OutputFile.h).
bool writeOutput(StringRef path, StringRef contents) {
  std::string why;
  if (!ampc::writeOutputFile(path.str(), {{contents.data(), contents.size()}},
                             runInputs, why))
    return userError(path + ": cannot write: " + why), false;
  return true;
}

/// A side file of a source written to `base` (its parameters, its ONNX
/// model): `base` with another extension, as an absolute path.
std::string sideFile(StringRef base, StringRef extension) {
  SmallString<128> path(base);
  sys::path::replace_extension(path, extension);
  sys::fs::make_absolute(path);
  return path.str().str();
}

/// The target of a library for the CUDA choice and --target=cuda-sim.
ampc::Target libraryTarget(bool cuda, bool sim) {
  return sim ? ampc::Target::CudaSim : cuda ? ampc::Target::Cuda
                                            : ampc::Target::Cpu;
}

/// Compiles `artifact` (its text form at `source`) into the library
/// `output` through a temporary beside it, renamed into place when whole
/// (the compiler's own -o would write over a link or a read-only file).
bool compileToOutput(const ampc::Artifact &artifact, StringRef source,
                     StringRef output, bool cuda, bool sim,
                     bool resourceCheck,
                     const std::vector<std::string> &archs,
                     std::string &error) {
  ampc::OutputFile library;
  std::string why;
  if (!library.open(output.str(), runInputs, why)) {
    error = output.str() + ": cannot write: " + why;
    return false;
  }
  ampc::CompileOptions how;
  how.target = libraryTarget(cuda, sim);
  how.gpuArchs = archs;
  how.resourceCheck = resourceCheck;
  if (!ampc::compileArtifact(artifact, source, library.temporaryPath(), how,
                             error))
    return false;
  if (!library.commit(why)) {
    error = output.str() + ": cannot write: " + why;
    return false;
  }
  return true;
}

/// Compiles the source file `source` (generated, edited, or several
/// combined) as compileToOutput does.
bool compileToOutput(StringRef source, StringRef output, bool cuda, bool sim,
                     bool resourceCheck,
                     const std::vector<std::string> &archs,
                     std::string &error) {
  return compileToOutput(ampc::readSource(source), source, output, cuda, sim,
                         resourceCheck, archs, error);
}

/// --emit=onnx: the original model with the decisions of `module` applied.
bool exportOnnx(const ampc::Model &model, mlir::ModuleOp module) {
  onnx::ModelProto exported;
  std::string error;
  std::vector<std::string> warnings;
  if (!ampc::exportModel(model, module, exported, error, warnings)) {
    userError(inputPath + ": " + error);
    return false;
  }
  for (const std::string &w : warnings)
    errs() << "warning: " << inputPath << ": " << w << "\n";
  if (!ampc::writeOnnxModel(exported, outputPath, error)) {
    userError(outputPath + ": " + error);
    return false;
  }
  return true;
}

/// The source (--emit=cpp or --emit=cuda) or the compiled library of the
/// chosen target.
bool emitLibrary(const ampc::Model &model, bool cuda, bool sim,
                 const std::vector<std::string> &archs) {
  ampc::LibraryOptions options;
  options.modelName = sys::path::stem(inputPath).str();
  options.precision = precision;
  options.symbolSuffix = symbolSuffix;
  options.pieceBytes = size_t(compilePieceKb) * 1024;
  std::string error;
  // Sources and parameters go next to the output for --emit=cpp, and to a
  // temporary folder (removed afterwards) for --emit=so.
  SmallString<128> folder;
  std::string base;
  StringRef extension = cuda ? ".cu" : ".cpp";
  if (emit != Emit::So) {
    // Source on standard output ("-" or no -o): the parameters go into it
    // (below).
    base = outputPath.empty() || outputPath == "-"
               ? options.modelName + extension.str()
               : outputPath.getValue();
  } else {
    if (std::error_code ec = sys::fs::createUniqueDirectory(
            cuda ? "ampc-cuda" : "ampc-cpu", folder))
      return userError("cannot create a temporary folder: " + ec.message()),
             false;
    base = (folder + "/model" + extension).str();
  }
  llvm::scope_exit cleanup([&] {
    if (!folder.empty())
      sys::fs::remove_directories(folder);
  });
  // A source written to standard output carries its parameters (and ONNX
  // model) as arrays: there is no folder to put files beside it.
  const bool toStdout =
      emit != Emit::So && (outputPath.empty() || outputPath == "-");
  if (!toStdout)
    options.parameterFile = sideFile(base, "params.bin");
  // A training library carries its ONNX model, so the runtime can export
  // the trained weights into it (ampc_model_export_onnx).
  std::string onnxBytes;
  if (mode == Mode::Train && embedModel) {
    if (!ampc::embeddedModel(model, tieInitializers, onnxBytes, error))
      return userError(error), false;
    if (toStdout)
      options.onnxData = onnxBytes;
    else
      options.onnxFile = sideFile(base, "model.onnx");
    options.onnxSize = onnxBytes.size();
  }

  std::optional<ampc::Artifact> artifact =
      ampc::emitArtifact(*model.module, libraryTarget(cuda, sim), options,
                         std::move(onnxBytes));
  if (!artifact)
    return false;
  if (toStdout) {
    outs() << artifact->text();
    return true;
  }
  // The side files, then the source (-o, or the temporary folder's).
  auto write = [](StringRef path, StringRef bytes, std::string &) {
    return writeOutput(path, bytes);
  };
  if (!ampc::writeArtifactFiles(*artifact, base, error, write))
    return false;
  if (emit != Emit::So)
    return true;
  if (!compileToOutput(*artifact, base, outputPath, cuda, sim,
                       cudaResourceCheck, archs, error))
    return userError(inputPath + ": " + error), false;
  return true;
}

/// Counts the casts ampc-assign-precision inserted, before optimisation.
struct CastCounter : public mlir::PassInstrumentation {
  explicit CastCounter(unsigned &count) : count(count) {}
  void runAfterPass(mlir::Pass *pass, mlir::Operation *op) override {
    if (pass->getArgument() == "ampc-assign-precision")
      count = ampc::countAutocasts(op);
  }
  unsigned &count;
};
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // `ampc explain MODEL ...` prints the precision table instead of emitting.
  bool explain = argc > 1 && StringRef(argv[1]) == "explain";
  SmallVector<char *> args(argv, argv + argc);
  if (explain)
    args.erase(args.begin() + 1);
  argc = static_cast<int>(args.size());
  argv = args.data();
  mlir::registerAsmPrinterCLOptions();
  cl::HideUnrelatedOptions({&ampcCategory, &lossCategory, &trainingCategory});
  llvm::cl::SetVersionPrinter(ampc::printVersion);
  // The passes --skip-pass takes, named where the pipeline defines them.
  static const std::string skipHelp =
      skipPasses.HelpStr.str() + " (" +
      llvm::join(ampc::pipelineSkippable(), ", ") + ")";
  skipPasses.setDescription(skipHelp);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ampc: ahead-of-time mixed-precision training compiler\n\n"
      "  ampc MODEL --emit=mlir [--emit-after=PASS] [--shape NAME=DxD...] "
      "[--batch N]\n"
      "  ampc MODEL --mode=infer --emit=onnx -o model_fp16.onnx\n"
      "  ampc MODEL ... --report=precision.json|precision.html\n"
      "  ampc explain MODEL [options]   (the precision decision of every "
      "node)\n\n"
      "Reads an ONNX model (binary .onnx or textual .onnxtext) and compiles "
      "it.\nThe IR printer's --mlir-* options (e.g. "
      "--mlir-elide-elementsattrs-if-larger=N)\nare accepted as well.\n\n"
      "Output files (-o, side files, --report): never the model or another "
      "input, a\nsymbolic link, a read-only file or anything but a regular "
      "file; written to a\ntemporary beside the name and renamed when whole "
      "(docs/design.md, Output files).\n\n"
      "Environment: CXX and NVCC name the compilers; the host compiler's "
      "precompiled\nheaders and code objects are kept in $AMPC_CACHE_DIR "
      "(default $XDG_CACHE_HOME/ampc\nor ~/.cache/ampc; 'off' turns the "
      "cache off; AMPC_CACHE_MAX_MB bounds it;\ndeleting the folder clears "
      "it). Entries are keyed and checked on contents; a\nfolder that "
      "another user owns or others can write is refused with a warning\n"
      "and the compile goes on without it.\n");

  if (listOps.getNumOccurrences()) {
    if (listOps == "table") {
      printOpTable(outs());
      return 0;
    }
    if (!listOps.empty())
      return userError("--list-ops takes no value or 'table', got '" + listOps +
                       "'");
    for (StringRef op : ampc::supportedOnnxOps())
      outs() << op << "\n";
    return 0;
  }
  if (inputPath.empty())
    return userError("no input model (see --help)");
  // --emit picks the target when it names one; otherwise --target, whose
  // default is cuda on a machine that can build and run CUDA libraries.
  if (emit == Emit::Cpp &&
      (target == Target::Cuda || target == Target::CudaSim))
    return userError("--emit=cpp is the CPU target's source; use --emit=cuda");
  if (emit == Emit::Cuda && target == Target::Cpu)
    return userError("--emit=cuda is the CUDA target's source; use --emit=cpp");
  const bool sim = target == Target::CudaSim;
  bool cuda = emit == Emit::Cuda || target == Target::Cuda || sim ||
              (emit != Emit::Cpp && target == Target::Default &&
               ampc::cudaToolchainAvailable() && ampc::cudaDriverAvailable());
  std::vector<std::string> archs;
  for (StringRef arch : llvm::split(gpuArchs.getValue(), ',')) {
    arch = arch.trim();
    StringRef digits = arch.drop_front(3);
    digits.consume_back("a");
    if (!arch.starts_with("sm_") || digits.empty() ||
        !llvm::all_of(digits, [](char c) { return llvm::isDigit(c); }))
      return userError("--gpu-arch: '" + arch.str() +
                       "' is not an architecture like sm_80 or sm_90a");
    archs.push_back(arch.str());
  }
  if (!llvm::all_of(symbolSuffix.getValue(),
                    [](char c) { return llvm::isAlnum(c) || c == '_'; }))
    return userError("--symbol-suffix: '" + symbolSuffix.getValue() +
                     "' is not made of letters, digits and '_'");
  // `ampc SOURCE.cpp|SOURCE.cu -o LIB.so` compiles generated source (edited,
  // or several models' sources put together with --symbol-suffix) as ampc
  // compiles its own.
  if (StringRef kind = sys::path::extension(inputPath);
      kind == ".cpp" || kind == ".cu") {
    bool cudaSource = kind == ".cu";
    if (outputPath.empty() || outputPath == "-")
      return userError(inputPath + ": compiling a source needs -o FILE.so");
    if (cudaSource ? target == Target::Cpu
                   : target == Target::Cuda || target == Target::CudaSim)
      return userError(inputPath + ": a " + kind.str() + " source is the " +
                       (cudaSource ? "CUDA" : "CPU") + " target's (--target=" +
                       (cudaSource ? "cuda or cuda-sim" : "cpu") + ")");
    if (!sys::fs::exists(inputPath))
      return userError(inputPath + ": cannot open: no such file");
    ampc::protectFile(runInputs, inputPath,
                      "the source being compiled ('" + inputPath + "')");
    std::string error;
    if (!compileToOutput(inputPath, outputPath, cudaSource || sim, sim,
                         cudaResourceCheck, archs, error))
      return userError(inputPath + ": " + error);
    return 0;
  }
  // `ampc MODEL --report=FILE` alone writes the report and builds nothing.
  const bool reportOnly = !explain && !reportPath.empty() &&
                          outputPath.empty() && !emit.getNumOccurrences();
  if (!explain && !reportOnly && emit == Emit::So && outputPath.empty())
    return userError("--emit=so needs -o FILE.so");
  if (!emitAfter.empty() && (explain || emit != Emit::Mlir))
    return userError("--emit-after needs --emit=mlir");
  if (!explain && emit == Emit::Onnx) {
    if (mode != Mode::Infer)
      return userError(
          "--emit=onnx writes the forward graph: add --mode=infer");
    if (outputPath.empty())
      return userError("--emit=onnx needs -o FILE.onnx");
  }
  StringRef reportKind = sys::path::extension(reportPath);
  if (!reportPath.empty() && reportKind != ".json" && reportKind != ".html")
    return userError("--report: '" + reportPath +
                     "' must end in .json or .html");
  // Every output is checked before any work (docs/design.md, Output
  // files): none replaces an input of the run nor another output.
  ampc::protectFile(runInputs, inputPath,
                    "the input model ('" + inputPath + "')");
  if (!ampRules.empty())
    ampc::protectFile(runInputs, ampRules,
                      "the --amp-rules file ('" + ampRules + "')");
  for (const std::string &spec : boundInputs)
    if (size_t eq = spec.find('='); eq != std::string::npos)
      ampc::protectFile(runInputs, spec.substr(eq + 1),
                        "the --bind-input file ('" + spec.substr(eq + 1) +
                            "')");
  {
    std::vector<std::pair<std::string, std::string>> outputs;
    const bool toFile = !outputPath.empty() && outputPath != "-";
    if (!explain && !reportOnly && toFile) {
      outputs.push_back({"the -o file", outputPath});
      if (emit == Emit::Cpp || emit == Emit::Cuda) {
        outputs.push_back({"the parameter file",
                           sideFile(outputPath, "params.bin")});
        if (mode == Mode::Train && embedModel)
          outputs.push_back({"the model file",
                             sideFile(outputPath, "model.onnx")});
      }
    }
    if (!reportPath.empty())
      outputs.push_back({"the --report file", reportPath});
    for (size_t i = 0; i < outputs.size(); ++i) {
      std::string why;
      if (!ampc::checkOutputPath(outputs[i].second, runInputs, why))
        return userError(outputs[i].second + ": cannot write: " + why);
      for (size_t j = 0; j < i; ++j)
        if (ampc::sameOutputPath(outputs[i].second, outputs[j].second))
          return userError(outputs[i].second + ": cannot write: it is " +
                           outputs[j].first + " as well");
    }
  }

  // The pipeline's options are checked and defaulted where ampc-opt's
  // --ampc-pipeline checks them, so the two run the same passes.
  ampc::PipelineFlags flags;
  flags.stopAfter = emitAfter;
  flags.skipPasses.assign(skipPasses.begin(), skipPasses.end());
  flags.precision = precision;
  flags.propagation = propagation;
  flags.keepFp32.assign(keepFp32.begin(), keepFp32.end());
  flags.forceLowp.assign(forceLowp.begin(), forceLowp.end());
  flags.ampRules = ampRules;
  flags.freeze.assign(freeze.begin(), freeze.end());
  flags.trainable.assign(trainable.begin(), trainable.end());
  flags.paramGroups.assign(paramGroups.begin(), paramGroups.end());
  flags.training = mode == Mode::Train;
  flags.inferTrainingMode = inferTrainingMode;
  // An exported ONNX model keeps ONNX's own ops: no ampc.attention in it.
  flags.fuseAttention = emit == Emit::Onnx ? "off" : fuseAttention.getValue();
  flags.loss = loss;
  flags.label = label;
  if (ignoreIndex.getNumOccurrences())
    flags.ignoreIndex = ignoreIndex;
  if (labelSmoothing.getNumOccurrences())
    flags.labelSmoothing = labelSmoothing;
  flags.classWeights.assign(classWeights.begin(), classWeights.end());
  flags.softTargets = softTargets;
  flags.posWeight.assign(posWeight.begin(), posWeight.end());
  if (huberDelta.getNumOccurrences())
    flags.huberDelta = huberDelta;
  if (smoothL1Beta.getNumOccurrences())
    flags.smoothL1Beta = smoothL1Beta;
  flags.optimizer = optimizer;
  flags.lr = learningRate;
  flags.momentum = momentum;
  flags.dampening = dampening;
  flags.nesterov = nesterov;
  if (weightDecay.getNumOccurrences())
    flags.weightDecay = weightDecay;
  flags.beta1 = beta1;
  flags.beta2 = beta2;
  flags.eps = epsilon;
  flags.clipGradNorm = clipGradNorm;
  flags.accumulate = accumulateMicroBatches;
  flags.lossScale = lossScale;
  flags.initScale = initScale;
  flags.growthFactor = growthFactor;
  flags.backoffFactor = backoffFactor;
  flags.growthInterval = growthInterval;
  flags.minScale = minScale;
  flags.maxScale = maxScale;
  flags.maxTensorBytes = maxTensorBytes;
  flags.target = cuda ? "cuda" : "cpu";
  // The exported ONNX is the user's model, unpadded.
  flags.padGemms = emit == Emit::Onnx ? "off" : padGemms.getValue();
  // The exported model is the user's, NCHW.
  flags.channelsLast = emit == Emit::Onnx ? "off" : channelsLast.getValue();
  // The exported model keeps the inputs the original declares.
  flags.inputPrecision =
      emit == Emit::Onnx ? "fp32" : inputPrecision.getValue();
  ampc::PipelineOptions pipeline;
  if (std::string error;
      !ampc::pipelineOptionsFromFlags(flags, pipeline, "--", error))
    return userError(error);

  ampc::ImportOptions options;
  for (const std::string &spec : shapes) {
    std::string error;
    if (!ampc::parseShapeBinding(spec, options, error))
      return userError(error);
  }
  for (const std::string &spec : boundInputs) {
    std::string error;
    if (!ampc::parseInputBinding(spec, options, error))
      return userError(error);
  }
  options.maxTensorBytes = pipeline.maxTensorBytes;
  if (mode == Mode::Train)
    options.mergedInitializers =
        tieInitializers ? ampc::ImportOptions::MergedInitializers::KeepTied
                        : ampc::ImportOptions::MergedInitializers::Untie;
  if (batch.getNumOccurrences()) {
    if (batch < 1)
      return userError("--batch must be >= 1, got " + Twine(batch.getValue()));
    options.batch = batch;
  }

  mlir::DialectRegistry registry;
  ampc::registerAllDialects(registry);
  mlir::MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  ampc::OnnxDiagnosticHandler diagnostics(&context);

  ampc::Model model;
  if (!ampc::loadModel(context, inputPath, options, model))
    return 1;
  mlir::ModuleOp module = *model.module;
  // Runs `part` of the pipeline; false when it cannot (reported).
  auto runPart = [&](ampc::PipelinePart part,
                     function_ref<void(mlir::PassManager &)> instrument) {
    std::string error;
    if (succeeded(
            ampc::runPipeline(module, pipeline, part, error, instrument)))
      return true;
    if (!error.empty())
      userError(error);
    return false;
  };

  // The report compares the casts right after assignment with the end.
  unsigned castsBefore = 0;
  if (emitAfter != "import" &&
      !runPart(ampc::PipelinePart::Graph, [&](mlir::PassManager &pm) {
        pm.addInstrumentation(std::make_unique<CastCounter>(castsBefore));
      }))
    return 1;

  if (explain || !reportPath.empty()) {
    StringRef lowp = ampc::stringifyEnum(pipeline.precision.dtype);
    ampc::PrecisionReport report =
        ampc::buildPrecisionReport(module, inputPath, lowp, castsBefore);
    if (explain)
      ampc::printPrecisionTable(report, outs());
    if (reportPath.empty()) {
      // explain without --report: the table is all.
    } else if (reportKind == ".json") {
      std::string json;
      raw_string_ostream os(json);
      ampc::writePrecisionJson(report, os);
      if (!writeOutput(reportPath, json))
        return 1;
    } else {
      std::string warning, error;
      if (!ampc::writePrecisionHtml(report, reportPath, runInputs, warning,
                                    error))
        return userError(error);
      if (!warning.empty())
        errs() << "warning: " << reportPath << ": " << warning << "\n";
    }
  }

  if (explain || reportOnly)
    return 0;
  if (emit == Emit::Onnx)
    return exportOnnx(model, module) ? 0 : 1;

  // The kernel-level form, for code generation and for --emit=mlir unless
  // --emit-after stopped earlier.
  if (emitAfter != "import" &&
      !ampc::pipelineStopsBefore(ampc::PipelinePart::Kernel, pipeline) &&
      !runPart(ampc::PipelinePart::Kernel, nullptr))
    return 1;
  if (emit == Emit::So || emit == Emit::Cpp || emit == Emit::Cuda)
    return emitLibrary(model, cuda, sim, archs) ? 0 : 1;

  if (outputPath.empty() || outputPath == "-") {
    module->print(outs(), mlir::OpPrintingFlags());
    outs() << "\n";
    outs().flush();
  } else {
    std::string text;
    raw_string_ostream os(text);
    module->print(os, mlir::OpPrintingFlags());
    os << "\n";
    if (!writeOutput(outputPath, text))
      return 1;
  }
  if (summary)
    errs() << summarize(inputPath, module) << "\n";
  return 0;
}
