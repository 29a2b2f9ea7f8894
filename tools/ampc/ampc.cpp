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

#include "ampc/Dialect/ShardOptimizer.h"
#include "ampc/Driver/Driver.h"
#include "ampc/Import/Diagnostics.h"
#include "ampc/Import/OnnxImporter.h"
#include "ampc/Target/CudaTarget.h"
#include "ampc/Target/OnnxExport.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/PipelineSettings.h"
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
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <functional>
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
cl::OptionCategory lossCategory("Loss options (PyTorch's, for --loss)");
cl::OptionCategory trainingCategory("Training step (--mode=train)");
cl::opt<bool> embedModel(
    "embed-model",
    cl::desc("carry the ONNX model in a training library, for "
             "ampc_model_export_onnx (default true; =false halves the size of "
             "a library with large weights)"),
    cl::init(true), cl::cat(trainingCategory));
cl::opt<std::string>
    reportPath("report", cl::desc("write the per-node precision decisions"),
               cl::value_desc("FILE.json|FILE.html"), cl::cat(ampcCategory));
cl::opt<bool> tieInitializers(
    "tie-initializers",
    cl::desc("train initializers that an EVAL-mode torch export merged "
             "(equal values read through Identity nodes) as one parameter, "
             "as exported, instead of one parameter each as written"),
    cl::cat(trainingCategory));

/// The pipeline's options (--precision, --loss, --lr, ...), declared once
/// in PipelineSettings::bindOptions; registered in main before parsing.
ampc::PipelineSettings settings;
ampc::OptionsBinder pipelineFlags = ampc::OptionsBinder::commandLine(
    {&ampcCategory, &lossCategory, &trainingCategory});

cl::opt<std::string> listOptions(
    "list-options", cl::ValueOptional,
    cl::desc("print ampc's options as JSON and exit: name, pipeline (an "
             "option of ampc-opt's --ampc-pipeline too), and for those "
             "type, list, default and the words it takes (the Python "
             "module checks its keywords against it)"),
    cl::value_desc("json"), cl::cat(ampcCategory));

cl::opt<std::string>
    listOps("list-ops", cl::ValueOptional,
            cl::desc("print the supported ONNX op types and exit; "
                     "--list-ops=table: a Markdown table of each with its "
                     "ampc op, opset, precision category, derivative and "
                     "targets (docs/ops.md)"),
            cl::value_desc("table"), cl::cat(ampcCategory));

/// --list-options: every option of ampc as JSON, the pipeline's as
/// PipelineSettings::bindOptions declares them, sorted by name.
void printOptionsJson(llvm::raw_ostream &os) {
  std::map<std::string, std::function<void(json::OStream &)>> entries;
  for (const ampc::OptionInfo &info : pipelineFlags.options()) {
    if (!info.spec.onCommandLine)
      continue;
    entries[info.name] = [&info](json::OStream &out) {
      out.attribute("pipeline", true);
      out.attribute("type", info.type);
      out.attribute("list", info.list);
      out.attributeBegin("default");
      out.rawValue(info.defaultJson);
      out.attributeEnd();
      if (!info.spec.choices.empty())
        out.attributeArray("choices", [&] {
          for (const std::string &word : info.spec.choices)
            out.value(word);
        });
      out.attribute("help", info.spec.help);
    };
  }
  // The driver's own options, as registered in its categories.
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *option = entry.second;
    if (entries.count(entry.first.str()) ||
        llvm::none_of(option->Categories, [](cl::OptionCategory *c) {
          return c == &ampcCategory || c == &lossCategory ||
                 c == &trainingCategory;
        }))
      continue;
    entries[entry.first.str()] = [option](json::OStream &out) {
      out.attribute("pipeline", false);
      out.attribute("help", option->HelpStr);
    };
  }
  json::OStream out(os, 2);
  out.array([&] {
    for (auto &[name, write] : entries)
      out.object([&, &name = name, &write = write] {
        out.attribute("name", name);
        write(out);
      });
  });
  os << "\n";
}

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
  options.precision = settings.precision;
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
  if (settings.mode == "train" && embedModel) {
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
  settings.bindOptions(pipelineFlags);
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
  pipelineFlags.apply();

  if (listOptions.getNumOccurrences()) {
    if (!listOptions.empty() && listOptions != "json")
      return userError("--list-options takes no value or 'json', got '" +
                       listOptions + "'");
    printOptionsJson(outs());
    return 0;
  }
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
  if (!settings.stopAfter.empty() && (explain || emit != Emit::Mlir))
    return userError("--emit-after needs --emit=mlir");
  if (!explain && emit == Emit::Onnx) {
    if (settings.mode != "infer")
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
  if (!settings.ampRules.empty())
    ampc::protectFile(runInputs, settings.ampRules,
                      "the --amp-rules file ('" + settings.ampRules + "')");
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
        if (settings.mode == "train" && embedModel)
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
  settings.target = cuda ? "cuda" : "cpu";
  if (emit == Emit::Onnx) {
    // The exported ONNX is the user's model: ONNX's own ops (no
    // ampc.attention), unpadded, NCHW, with the inputs it declares.
    settings.fuseAttention = "off";
    settings.padGemms = "off";
    settings.channelsLast = "off";
    settings.inputPrecision = "fp32";
  }
  ampc::PipelineOptions pipeline;
  if (std::string error; !settings.toPipelineOptions(pipeline, "--", error))
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
  if (settings.mode == "train")
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
  // ZeRO-1: the IR records --shard-optimizer (ampc-insert-all-reduce and
  // the target read it).
  if (settings.shardOptimizer)
    module->setAttr(ampc::kShardOptimizerAttr, mlir::UnitAttr::get(&context));
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
  if (settings.stopAfter != "import" &&
      !runPart(ampc::PipelinePart::Graph, [&](mlir::PassManager &pm) {
        pm.addInstrumentation(std::make_unique<CastCounter>(castsBefore));
      }))
    return 1;

  if (explain || !reportPath.empty()) {
    StringRef lowp = ampc::stringifyEnum(pipeline.precision.dtype);
    ampc::PrecisionReport report =
        ampc::buildPrecisionReport(module, inputPath, lowp, castsBefore);
    if (pipeline.dataParallel && pipeline.syncBatchNorm)
      report.syncBatchNorm = ampc::synchronisedBatchNorms(module);
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

  // --precision=fp8 without FP8 kernels (issue 42): a library says what it
  // computes in, whether or not a report was asked for.
  if (pipeline.fp8 && settings.stopAfter != "import" &&
      (emit == Emit::So || emit == Emit::Cpp || emit == Emit::Cuda) &&
      !explain && !reportOnly)
    errs() << "warning: " << inputPath << ": "
           << ampc::buildPrecisionReport(module, inputPath, "bf16", 0)
                  .fp8Summary()
           << "\n";
  if (explain || reportOnly)
    return 0;
  if (emit == Emit::Onnx)
    return exportOnnx(model, module) ? 0 : 1;

  // The kernel-level form, for code generation and for --emit=mlir unless
  // --emit-after stopped earlier.
  if (settings.stopAfter != "import" &&
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
