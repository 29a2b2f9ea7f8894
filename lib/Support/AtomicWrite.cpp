//===- AtomicWrite.cpp - a whole file written at once, never a half one ---===//
//
// See include/ampc/Support/AtomicWrite.h. Files are written into
// "PATH.tmp-XXXXXX" (mkstemp, same folder, so rename stays within one file
// system), fsync, rename over PATH, fsync of the folder; the temporary is
// unlinked on any failure (ampc/Support/OutputFile.h).
//
//===----------------------------------------------------------------------===//

#include "ampc/Support/AtomicWrite.h"

#include <cstring>
#include <link.h>

namespace ampc {

std::vector<ProtectedFile> (*loadedModelFiles)() = nullptr;

namespace {
/// The program and every library this process has loaded.
std::vector<ProtectedFile> loadedObjects() {
  std::vector<ProtectedFile> objects;
  protectFile(objects, "/proc/self/exe", "the program running");
  ::dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        // A private copy's /proc/self/fd name no longer names it (the
        // descriptor was closed after the load; loadedModelFiles has it).
        if (info->dlpi_name && *info->dlpi_name &&
            std::strncmp(info->dlpi_name, "/proc/self/fd/", 14) != 0)
          protectFile(*static_cast<std::vector<ProtectedFile> *>(data),
                      info->dlpi_name,
                      std::string("a library in use ('") + info->dlpi_name +
                          "')");
        return 0;
      },
      &objects);
  if (loadedModelFiles)
    for (ProtectedFile &file : loadedModelFiles())
      objects.push_back(std::move(file));
  return objects;
}
} // namespace

bool writeFileAtomically(
    const std::string &path,
    const std::vector<std::pair<const void *, size_t>> &pieces,
    const std::string &what, std::string &error) {
  // docs/design.md, Output files: ampc/Support/OutputFile.h's rules, and
  // never over a library this process runs (a model's own train.so).
  std::string why;
  if (!writeOutputFile(path, pieces, loadedObjects(), why)) {
    error = path + ": cannot write " + what + ": " + why;
    return false;
  }
  return true;
}

} // namespace ampc
