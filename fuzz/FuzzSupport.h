//===- FuzzSupport.h - what several fuzz targets share ----------*- C++ -*-===//
//
// The MLIR context the import-based targets reuse, and the checkpoint file
// the checkpoint targets write each input to. Header-only: each target
// includes the parts it needs (FUZZ_WITH_MLIR, FUZZ_WITH_CHECKPOINT).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_FUZZ_FUZZSUPPORT_H
#define AMPC_FUZZ_FUZZSUPPORT_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#ifdef FUZZ_WITH_MLIR
#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/IR/MLIRContext.h"

namespace ampc::fuzz {
/// A context without threads, replaced every `inputs` inputs so that its
/// uniqued types and attributes do not grow without bound.
inline mlir::MLIRContext &freshEnoughContext(unsigned inputs) {
  static std::unique_ptr<mlir::MLIRContext> context;
  static unsigned inputsInContext = 0;
  if (!context || ++inputsInContext >= inputs) {
    mlir::DialectRegistry registry;
    ampc::registerAllDialects(registry);
    context = std::make_unique<mlir::MLIRContext>(
        registry, mlir::MLIRContext::Threading::DISABLED);
    context->printOpOnDiagnostic(false);
    context->loadAllAvailableDialects();
    inputsInContext = 0;
  }
  return *context;
}
} // namespace ampc::fuzz
#endif

#ifdef FUZZ_WITH_CHECKPOINT
#include "Checkpoint.h"

#include <sys/mman.h>
#include <unistd.h>

namespace ampc::fuzz {
/// A memfd the checkpoint readers read by its /proc/self/fd path (they
/// take a path, not bytes); exits when there is none.
inline std::string openCheckpointFile(const char *name, int &fd) {
  fd = ::memfd_create(name, 0);
  if (fd < 0) {
    std::perror("memfd_create");
    std::exit(1);
  }
  return "/proc/self/fd/" + std::to_string(fd);
}

/// Writes a fuzz input to `fd` as a checkpoint file. An even-sized input
/// gets a valid checksum over its last 8 bytes, so that mutations reach
/// the checks behind the checksum.
inline void writeCheckpointInput(int fd, const uint8_t *data, size_t size) {
  std::vector<unsigned char> file(data, data + size);
  if (size >= 8 && size % 2 == 0) {
    uint64_t hash = ampc::runtime::checkpointChecksum(file.data(), size - 8);
    for (int i = 0; i < 8; ++i)
      file[size - 8 + i] = static_cast<unsigned char>(hash >> (8 * i));
  }
  if (::ftruncate(fd, 0) != 0 ||
      ::pwrite(fd, file.data(), file.size(), 0) !=
          static_cast<ssize_t>(file.size())) {
    std::perror("memfd");
    std::abort();
  }
}
} // namespace ampc::fuzz
#endif

#endif // AMPC_FUZZ_FUZZSUPPORT_H
