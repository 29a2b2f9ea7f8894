//===- Version.h - what `--version` prints, for every ampc tool -*- C++ -*-===//
//
// ampc's version (CMakeLists.txt's project version), the git revision the
// binary was built from (ampc/Version.inc, written at build time by
// cmake/WriteVersion.cmake; "unknown" outside a git checkout) and the LLVM
// it was built against. Tools install it with
// `llvm::cl::SetVersionPrinter(ampc::printVersion)`.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_VERSION_H
#define AMPC_VERSION_H

#include "ampc/Version.inc"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"

namespace ampc {

/// "ampc 0.3.0 (git 1a2b3c4d5e6f)" then "LLVM version 22.1.0", one per line.
inline void printVersion(llvm::raw_ostream &os) {
  os << "ampc " AMPC_VERSION_STRING " (git " AMPC_GIT_REVISION ")\n"
     << "LLVM version " LLVM_VERSION_STRING "\n";
}

} // namespace ampc

#endif // AMPC_VERSION_H
