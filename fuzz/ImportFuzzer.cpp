//===- ImportFuzzer.cpp - libFuzzer target: ONNX models to the dialect ----===//
//
// One input is one model file: binary protobuf (ampc-fuzz-onnx) or ONNX text
// (ampc-fuzz-onnxtext, built with AMPC_FUZZ_ONNXTEXT). The importer must
// either produce a module that verifies or report at least one error; a
// crash, a sanitizer finding, a failed import without an error, or an
// imported module that does not verify stops the run.
//
// Tensors are limited to 16 MiB (--max-tensor-bytes) so that a model's
// constant folding stays within libFuzzer's memory limit. External data is
// looked up in an empty folder. The MLIRContext is made again every 1,000
// inputs: it keeps every type and attribute it ever interned.
//
//===----------------------------------------------------------------------===//

#define FUZZ_WITH_MLIR
#include "FuzzSupport.h"

#include "ampc/Import/OnnxImporter.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "llvm/Support/FileSystem.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

namespace {

#ifdef AMPC_FUZZ_ONNXTEXT
constexpr const char *kDisplayName = "fuzz.onnxtext";
#else
constexpr const char *kDisplayName = "fuzz.onnx";
#endif

std::string emptyFolder;

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  llvm::SmallString<128> folder;
  if (llvm::sys::fs::createUniqueDirectory("ampc-fuzz-external", folder)) {
    std::fprintf(stderr, "cannot make a temporary folder\n");
    std::exit(1);
  }
  emptyFolder = folder.str().str();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mlir::MLIRContext &ctx = ampc::fuzz::freshEnoughContext(1000);
  unsigned errors = 0;
  mlir::ScopedDiagnosticHandler handler(&ctx, [&](mlir::Diagnostic &d) {
    if (d.getSeverity() == mlir::DiagnosticSeverity::Error)
      ++errors;
    return mlir::success();
  });
  ampc::ImportOptions options;
  options.maxTensorBytes = int64_t(1) << 24;
  llvm::StringRef contents(reinterpret_cast<const char *>(data), size);
  mlir::OwningOpRef<mlir::ModuleOp> module = ampc::importOnnxBuffer(
      ctx, contents, kDisplayName, emptyFolder, options);
  if (!module) {
    if (errors == 0) {
      std::fprintf(stderr, "import failed without an error message\n");
      std::abort();
    }
    return 0;
  }
  if (mlir::failed(mlir::verify(*module))) {
    std::fprintf(stderr, "an imported module does not verify\n");
    std::abort();
  }
  return 0;
}
