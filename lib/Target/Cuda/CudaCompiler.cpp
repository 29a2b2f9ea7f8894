//===- CudaCompiler.cpp - nvcc for the CUDA target -------------------------===//
//
// Finds nvcc and compiles the generated source into a shared library.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/CudaTarget.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <dlfcn.h>

using llvm::StringRef;

std::string ampc::findNvcc() {
  if (const char *nvcc = std::getenv("NVCC"); nvcc && *nvcc)
    return llvm::sys::fs::can_execute(nvcc) ? nvcc : "";
  if (auto found = llvm::sys::findProgramByName("nvcc"))
    return *found;
  if (llvm::sys::fs::can_execute("/usr/local/cuda/bin/nvcc"))
    return "/usr/local/cuda/bin/nvcc";
  return "";
}

/// The CUDA root of an nvcc (its bin/ folder's parent).
static std::string cudaRoot(StringRef nvcc) {
  return llvm::sys::path::parent_path(llvm::sys::path::parent_path(nvcc)).str();
}

bool ampc::cudaToolchainAvailable() {
  std::string nvcc = findNvcc();
  if (nvcc.empty())
    return false;
  std::string root = cudaRoot(nvcc);
  return llvm::sys::fs::exists(root + "/include/cublasLt.h") &&
         (llvm::sys::fs::exists(root + "/lib64/libcublasLt.so") ||
          llvm::sys::fs::exists(root + "/lib/libcublasLt.so"));
}

bool ampc::cudaDriverAvailable() {
  // The driver library is what a CUDA program loads first; finding it is
  // enough (whether a device answers is the library's init's business).
  void *driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (!driver)
    return false;
  dlclose(driver);
  return true;
}

bool ampc::compileCudaLibrary(StringRef sourcePath, StringRef output,
                              const std::vector<std::string> &gpuArchs,
                              std::string &error) {
  std::string nvcc = findNvcc();
  if (nvcc.empty()) {
    error = "no nvcc found (set NVCC, put nvcc on PATH, or install CUDA in "
            "/usr/local/cuda); use --target=cpu";
    return false;
  }
  std::vector<std::string> args = {nvcc,
                                   "-O3",
                                   "-std=c++17",
                                   "-shared",
                                   "-Xcompiler",
                                   "-fPIC,-fvisibility=hidden",
                                   "-diag-suppress=177,550",
                                   "-I" AMPC_RUNTIME_INCLUDE_DIR};
  for (const std::string &arch : gpuArchs) {
    // sm_90a → arch=compute_90a,code=sm_90a
    std::string number = arch.substr(arch.find('_') + 1);
    args.push_back("-gencode");
    args.push_back("arch=compute_" + number + ",code=sm_" + number);
  }
  args.insert(args.end(),
              {sourcePath.str(), "-o", output.str(), "-lcublasLt", "-lcudart"});
  return emit::runCompiler(args, "nvcc", sourcePath, error);
}
