//===- CpuTarget.h - C++ model libraries for the CPU ------------*- C++ -*-===//
//
// The CPU target writes a model as C++ that implements the model ABI
// (include/ampc/Runtime/ModelAbi.h) on top of the kernels in
// include/ampc/Kernels/Cpu/CpuKernels.h, then compiles it with the host C++
// compiler into a shared library that libampc_runtime loads.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TARGET_CPUTARGET_H
#define AMPC_TARGET_CPUTARGET_H

#include "ampc/Target/LibraryEmitter.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace ampc {

/// The CPU target needs nothing beyond what every target does.
using CpuLibraryOptions = LibraryOptions;

/// Writes the C++ library of the module (after the pipeline) into
/// `artifact`: its code, its data and the parameters' initial values in
/// their storage format. Fails with a diagnostic at the op the target
/// cannot compile.
mlir::LogicalResult emitCpuArtifact(mlir::ModuleOp module,
                                    const CpuLibraryOptions &options,
                                    Artifact &artifact);
/// emitCpuArtifact's library as its text form (Artifact::text) on
/// `source`, the parameters in `parameters`.
mlir::LogicalResult emitCpuSource(mlir::ModuleOp module,
                                  const CpuLibraryOptions &options,
                                  llvm::raw_ostream &source,
                                  std::string &parameters);

/// Compiles the library `source` (emitCpuArtifact's, or a source's text
/// read back), whose text form is at `sourcePath`, into the shared library
/// `output` with the host C++ compiler ($CXX or c++) and OpenBLAS
/// (emit::compileLibrary). On failure sets `error` to one line (the
/// compiler's first error).
bool compileCpuLibrary(const Artifact &source, llvm::StringRef sourcePath,
                       llvm::StringRef output, std::string &error);

} // namespace ampc

#endif // AMPC_TARGET_CPUTARGET_H
