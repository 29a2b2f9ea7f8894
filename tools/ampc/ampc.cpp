//===- ampc.cpp - the ampc compiler driver --------------------------------===//
//
// ampc MODEL [-o OUT] [--emit=...] [--shape NAME=DIMS] [--batch N]
//
// Imports an ONNX model, runs the pipeline (lib/Transforms/Pipeline.cpp) and
// writes what --emit asks for. Exit status: 0 on success, 1 on any user
// error, with one line per problem on stderr.
//
//===----------------------------------------------------------------------===//

#include "ampc/Import/Diagnostics.h"
#include "ampc/Import/OnnxImporter.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace llvm;

namespace {
cl::OptionCategory ampcCategory("ampc options");

cl::opt<std::string> inputPath(cl::Positional, cl::desc("<model.onnx|model.onnxtext>"),
                               cl::cat(ampcCategory));
cl::opt<std::string> outputPath("o", cl::desc("output file (default: standard "
                                              "output for text formats)"),
                                cl::value_desc("file"), cl::cat(ampcCategory));

enum class Emit { Mlir, Onnx, Cuda, Cpp, So };
cl::opt<Emit> emit(
    "emit", cl::desc("what to write"), cl::init(Emit::So),
    cl::values(clEnumValN(Emit::Mlir, "mlir", "the IR after the pipeline"),
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
cl::opt<bool> listOps("list-ops",
                      cl::desc("print the supported ONNX op types and exit"),
                      cl::cat(ampcCategory));

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
  return text;
}

int userError(const Twine &message) {
  errs() << "error: " << message << "\n";
  return 1;
}
} // namespace

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(ampcCategory);
  cl::ParseCommandLineOptions(
      argc, argv,
      "ampc: ahead-of-time mixed-precision training compiler\n\n"
      "  ampc MODEL --emit=mlir [--emit-after=PASS] [--shape NAME=DxD...] "
      "[--batch N]\n\n"
      "Reads an ONNX model (binary .onnx or textual .onnxtext) and compiles "
      "it.\nThe IR printer's --mlir-* options (e.g. "
      "--mlir-elide-elementsattrs-if-larger=N)\nare accepted as well.\n");

  if (listOps) {
    for (StringRef op : ampc::supportedOnnxOps())
      outs() << op << "\n";
    return 0;
  }
  if (inputPath.empty())
    return userError("no input model (see --help)");
  if (emit != Emit::Mlir)
    return userError("--emit=" + std::string(emit == Emit::So     ? "so"
                                             : emit == Emit::Onnx ? "onnx"
                                             : emit == Emit::Cuda ? "cuda"
                                                                  : "cpp") +
                     " needs a part of ampc this build does not have yet; "
                     "use --emit=mlir (see README, Status)");
  if (!emitAfter.empty() && emit != Emit::Mlir)
    return userError("--emit-after needs --emit=mlir");

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

  mlir::OwningOpRef<mlir::ModuleOp> module =
      ampc::importOnnxFile(context, inputPath, options);
  if (!module)
    return 1;

  if (emitAfter != "import") {
    mlir::PassManager pm(&context);
    ampc::PipelineOptions pipeline;
    pipeline.stopAfter = emitAfter;
    std::string error;
    if (failed(ampc::buildPipeline(pm, pipeline, error)))
      return userError(error);
    if (failed(pm.run(*module)))
      return 1;
  }

  std::string error;
  auto output = mlir::openOutputFile(outputPath.empty() ? std::string("-") : outputPath.getValue(), &error);
  if (!output)
    return userError(error);
  module->print(output->os(), mlir::OpPrintingFlags());
  output->os() << "\n";
  output->os().flush();
  output->keep();
  if (summary)
    errs() << summarize(inputPath, *module) << "\n";
  return 0;
}
