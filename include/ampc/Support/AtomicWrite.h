//===- AtomicWrite.h - a whole file written at once, never a half one -*- C++ -*-===//
//
// The atomic write every ampc component that replaces a user's file calls:
// the runtime's checkpoints and ONNX exports (lib/Runtime) and ampc's
// --emit=onnx (lib/Target/Onnx). OutputFile.h's rules, and never over the
// program or a library this process has loaded. In lib/Support (library
// ampc_support): plain C++ over libc and libdl, no LLVM, so the runtime
// links it in (hidden: libampc_runtime.so exports only ampc_*).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_SUPPORT_ATOMICWRITE_H
#define AMPC_SUPPORT_ATOMICWRITE_H

#include "ampc/Support/OutputFile.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace ampc {

/// Writes `pieces` one after the other to `path` by the output rules of
/// ampc/Support/OutputFile.h (a temporary file in the same folder, fsync,
/// rename over `path`; no link, read-only file or non-regular file
/// replaced), never over the program or a library this process has loaded
/// (dl_iterate_phdr: a model's own library); `error` says what failed
/// ("PATH: cannot write WHAT: ...").
bool writeFileAtomically(
    const std::string &path,
    const std::vector<std::pair<const void *, size_t>> &pieces,
    const std::string &what, std::string &error);

/// The model library files whose code the process runs that
/// dl_iterate_phdr cannot name: the runtime loads each model from a private
/// copy (ampc_model_load), so it sets this to list the files its live
/// models were loaded from; writeFileAtomically never replaces them.
/// Null: none.
extern std::vector<ProtectedFile> (*loadedModelFiles)();

} // namespace ampc

#endif // AMPC_SUPPORT_ATOMICWRITE_H
