//===- ampc-translate.cpp - kernel-level MLIR to a target's source --------===//
//
// ampc-translate FILE.mlir --ampc-to-cpp|--ampc-to-cuda [-o OUT]
//                [--model-name=NAME] [--precision=fp16|bf16|fp32|fp64]
//                [--params-file=FILE] [--split-input-file]
//
// mlirTranslateMain with the two emitters of ampc registered, so that they
// can be tested from hand-written MLIR (test/Target/{Cpu,Cuda}/*.mlir)
// instead of only from an ONNX model through the `ampc` driver. The input is
// a kernel-level module: the output of `ampc-opt --ampc-fuse
// --ampc-assign-accumulation --ampc-assign-launch-geometry
// --ampc-plan-memory` (both with `target=cuda`, the plan also with
// `stage-inputs=1`, for --ampc-to-cuda), or `ampc MODEL
// --emit=mlir`. A module without a memory plan, or with one for the other
// target's kernels, is refused with one line. The initial state the library embeds
// (parameters, training state, large constants) is written only when
// --params-file asks for it; the generated source names that file.
//
//===----------------------------------------------------------------------===//

#include "ampc/Support/OutputFile.h"
#include "ampc/Target/CpuTarget.h"
#include "ampc/Target/CudaTarget.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Version.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Tools/mlir-translate/MlirTranslateMain.h"
#include "mlir/Tools/mlir-translate/Translation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
llvm::cl::OptionCategory translateCategory("ampc-translate options");

llvm::cl::opt<std::string>
    modelName("model-name",
              llvm::cl::desc("the model's name in the library's "
                             "description (default: model)"),
              llvm::cl::init("model"), llvm::cl::value_desc("NAME"),
              llvm::cl::cat(translateCategory));
enum class Precision { FromModule, Fp16, Bf16, Fp32, Fp64 };
llvm::cl::opt<Precision>
    precision("precision",
              llvm::cl::desc("the precision the library describes itself with "
                             "(default: from the module's tensor types)"),
              llvm::cl::init(Precision::FromModule),
              llvm::cl::values(clEnumValN(Precision::Fp16, "fp16", ""),
                               clEnumValN(Precision::Bf16, "bf16", ""),
                               clEnumValN(Precision::Fp32, "fp32", ""),
                               clEnumValN(Precision::Fp64, "fp64", "")),
              llvm::cl::cat(translateCategory));
llvm::cl::opt<std::string> paramsFile(
    "params-file",
    llvm::cl::desc("write the library's initial state (parameters, training "
                   "state, large constants) to this file, which the source "
                   "embeds; without it nothing but the source is written and "
                   "the source names MODEL-NAME.params.bin"),
    llvm::cl::value_desc("FILE"), llvm::cl::cat(translateCategory));

/// Prints every diagnostic of the translation as one line, "error:
/// FILE:LINE:COL: message" (notes dropped), as every ampc tool does for
/// bad input.
struct OneLineDiagnostics : public ScopedDiagnosticHandler {
  explicit OneLineDiagnostics(MLIRContext *context)
      : ScopedDiagnosticHandler(context) {
    setHandler([](Diagnostic &diag) {
      if (diag.getSeverity() == DiagnosticSeverity::Note ||
          diag.getSeverity() == DiagnosticSeverity::Remark)
        return success();
      std::string message = diag.str();
      std::replace(message.begin(), message.end(), '\n', ' ');
      llvm::errs() << (diag.getSeverity() == DiagnosticSeverity::Error
                           ? "error: "
                           : "warning: ");
      if (auto file = diag.getLocation()->findInstanceOf<FileLineColLoc>())
        llvm::errs() << file.getFilename().getValue() << ":" << file.getLine()
                     << ":" << file.getColumn() << ": ";
      llvm::errs() << message << "\n";
      return success();
    });
  }
};

/// The precision named by --precision, else the narrowest float the module's
/// functions compute in: what `ampc --precision=...` would have said for a
/// module that uses it.
std::string libraryPrecision(ModuleOp module) {
  switch (precision) {
  case Precision::Fp16:
    return "fp16";
  case Precision::Bf16:
    return "bf16";
  case Precision::Fp32:
    return "fp32";
  case Precision::Fp64:
    return "fp64";
  case Precision::FromModule:
    break;
  }
  bool f16 = false, bf16 = false, f64 = false;
  auto note = [&](Type type) {
    Type element = getElementTypeOrSelf(type);
    f16 |= element.isF16();
    bf16 |= element.isBF16();
    f64 |= element.isF64();
  };
  module.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      note(t);
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (BlockArgument arg : block.getArguments())
          note(arg.getType());
  });
  return f16 ? "fp16" : bf16 ? "bf16" : f64 ? "fp64" : "fp32";
}

/// Emits the library source of a kernel-level module with `emitSource`
/// (emitCpuSource or emitCudaSource).
template <typename EmitFn>
LogicalResult translateModule(ModuleOp module, llvm::raw_ostream &output,
                              EmitFn emitSource) {
  OneLineDiagnostics diagnostics(module.getContext());
  // The emitters read the plan; without it there is nothing to emit from.
  for (StringRef name : {"forward", "train_step"}) {
    auto f = module.lookupSymbol<func::FuncOp>(name);
    if (f && !f->hasAttr(ampc::kArenaBytesAttr))
      return f.emitError() << "@" << name
                           << " is not kernel-level: it has no memory plan "
                              "(run ampc-opt --ampc-fuse "
                              "--ampc-assign-accumulation "
                              "--ampc-assign-launch-geometry --ampc-plan-memory "
                              "first)";
  }

  ampc::LibraryOptions options;
  options.modelName = modelName;
  options.precision = libraryPrecision(module);
  llvm::SmallString<128> blobPath(paramsFile.empty() ? modelName + ".params.bin"
                                                     : paramsFile.getValue());
  if (!paramsFile.empty())
    llvm::sys::fs::make_absolute(blobPath);
  options.parameterFile = blobPath.str().str();

  std::string blob;
  if (failed(emitSource(module, options, output, blob)))
    return failure();
  if (paramsFile.empty())
    return success();
  // The output rules of every ampc output (docs/design.md, Output files).
  std::string why;
  if (!ampc::writeOutputFile(blobPath.str().str(), {{blob.data(), blob.size()}},
                             {}, why))
    return module.emitError() << blobPath << ": cannot write: " << why;
  return success();
}

void registerDialects(DialectRegistry &registry) {
  ampc::registerAllDialects(registry);
}
} // namespace

int main(int argc, char **argv) {
  TranslateFromMLIRRegistration toCpp(
      "ampc-to-cpp",
      "the CPU target's C++ source of a kernel-level ampc module",
      [](ModuleOp module, llvm::raw_ostream &output) {
        return translateModule(module, output, ampc::emitCpuSource);
      },
      registerDialects);
  TranslateFromMLIRRegistration toCuda(
      "ampc-to-cuda", "the CUDA target's source of a kernel-level ampc module",
      [](ModuleOp module, llvm::raw_ostream &output) {
        return translateModule(module, output, ampc::emitCudaSource);
      },
      registerDialects);
  llvm::cl::SetVersionPrinter(ampc::printVersion);
  return failed(mlirTranslateMain(
      argc, argv,
      "ampc-translate: kernel-level ampc MLIR (after ampc-fuse and "
      "ampc-plan-memory) to the source of a target's library"));
}
