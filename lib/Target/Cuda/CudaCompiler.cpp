//===- CudaCompiler.cpp - nvcc for the CUDA target -------------------------===//
//
// Finds nvcc and compiles the generated source into a shared library.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/CudaTarget.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Demangle/Demangle.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <dlfcn.h>
#include <functional>

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

bool ampc::cudaTargetBuilt() { return AMPC_HAVE_CUDA; }

const char ampc::kCudaTargetUnavailable[] =
    "the CUDA target is unavailable in this build (configured without "
    "CUDA's headers); use --target=cpu";

bool ampc::cudaToolchainAvailable() {
  if (!cudaTargetBuilt())
    return false;
  std::string nvcc = findNvcc();
  if (nvcc.empty())
    return false;
  std::string root = cudaRoot(nvcc);
  // cuBLASLt (the GEMMs) and cuDNN (the convolutions), headers and
  // libraries.
  for (StringRef library : {"cublasLt", "cudnn"}) {
    std::string header = library == "cudnn" ? "cudnn.h" : "cublasLt.h";
    std::string shared = ("lib" + library + ".so").str();
    if (!llvm::sys::fs::exists(root + "/include/" + header) ||
        !(llvm::sys::fs::exists(root + "/lib64/" + shared) ||
          llvm::sys::fs::exists(root + "/lib/" + shared)))
      return false;
  }
  return true;
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

/// The cumulative per-thread stack a kernel may use: cudaLimitStackSize's
/// default, which the CUDA target's runtime leaves as it is.
static constexpr int64_t kDefaultStackBytes = 1024;

/// Refuses device recursion (a cycle in the call graph of `ptx`) and a
/// kernel whose cumulative stack in ptxas's -v report `ptxasLog` exceeds
/// the default per-thread stack.
static bool analyzeResources(StringRef ptxText, StringRef ptxasLog,
                             StringRef sourcePath, std::string &error) {
  // The PTX call graph: `.entry NAME(` and `.func ... NAME(` open a
  // function, `call... NAME,` or `call... NAME;` name a callee.
  llvm::StringMap<std::vector<std::string>> calls;
  std::string currentFunction, pendingCall;
  for (StringRef line : llvm::split(ptxText, '\n')) {
    line = line.trim();
    if (line.starts_with(".visible .entry") || line.starts_with(".entry") ||
        line.starts_with(".visible .func") || line.starts_with(".func") ||
        line.starts_with(".weak .func")) {
      StringRef head = line.take_until([](char c) { return c == '('; });
      // `.func (.param .b32 r) name(`: the name is the last word before the
      // parameter list; for a declaration with a return value the first '('
      // opens the return value, so take the word after the ')'.
      if (line.contains(".func") && line.contains(") ")) {
        StringRef rest = line.split(") ").second;
        head = rest.take_until([](char c) { return c == '(' || c == ';'; });
      }
      StringRef name = head.rsplit(' ').second.empty() ? head : head.rsplit(' ').second;
      if (line.ends_with(";")) // a declaration, not a definition
        continue;
      currentFunction = name.trim().str();
      calls[currentFunction];
      continue;
    }
    // A call statement may span lines (`call.uni (retval0),` then the
    // callee on the next line): gather it up to its ';'.
    if (!currentFunction.empty() && (line.starts_with("call") || !pendingCall.empty())) {
      pendingCall += " " + line.str();
      if (!line.contains(';'))
        continue;
      StringRef rest = StringRef(pendingCall).trim();
      rest = rest.drop_until([](char c) { return c == ' ' || c == '\t'; }).trim();
      if (rest.starts_with("("))
        rest = rest.split("),").second.trim();
      StringRef callee = rest.take_until(
          [](char c) { return c == ',' || c == ';' || c == ' ' || c == '('; });
      if (!callee.empty())
        calls[currentFunction].push_back(callee.str());
      pendingCall.clear();
    }
  }
  // A cycle through any function is device recursion.
  llvm::StringMap<int> state; // 1: on the path, 2: done
  std::vector<std::string> path;
  std::function<bool(const std::string &)> visit = [&](const std::string &f) {
    int &s = state[f];
    if (s == 2)
      return false;
    if (s == 1) {
      error = "device recursion in " + sourcePath.str() + ": " +
              llvm::demangle(f) +
              " calls itself (a GPU thread's stack cannot be sized for it; "
              "the default is 1 KiB)";
      return true;
    }
    s = 1;
    auto found = calls.find(f);
    if (found != calls.end())
      for (const std::string &callee : found->second)
        if (visit(callee))
          return true;
    state[f] = 2;
    return false;
  };
  for (auto &entry : calls)
    if (visit(entry.first().str()))
      return false;
  std::string entry;
  for (StringRef line : llvm::split(ptxasLog, '\n')) {
    if (line.contains("Compiling entry function '")) {
      entry = line.split("'").second.split("'").first.str();
      continue;
    }
    size_t at = line.find(" bytes cumulative stack size");
    if (at == StringRef::npos || entry.empty())
      continue;
    StringRef number = line.take_front(at).rsplit(' ').second;
    int64_t bytes = 0;
    if (!number.getAsInteger(10, bytes) && bytes > kDefaultStackBytes) {
      error = "kernel " + llvm::demangle(entry) + " in " + sourcePath.str() +
              " needs " + std::to_string(bytes) +
              " bytes of stack per thread, more than the " +
              std::to_string(kDefaultStackBytes) + "-byte default";
      return false;
    }
  }
  return true;
}

bool ampc::checkCudaResources(StringRef sourcePath, std::string &error) {
  std::string nvcc = findNvcc();
  if (nvcc.empty()) {
    error = "no nvcc found to check the kernels' stack use (set NVCC)";
    return false;
  }
  llvm::SmallString<128> ptx;
  if (llvm::sys::fs::createTemporaryFile("ampc-kernels", "ptx", ptx)) {
    error = "cannot create a temporary file";
    return false;
  }
  llvm::FileRemover removePtx(ptx);
  if (!emit::runCompiler({nvcc, "-std=c++17", "-ptx", "-arch=compute_90a",
                          "-diag-suppress=177,550,20050",
                          emit::runtimeIncludeFlag(AMPC_RUNTIME_INCLUDE_DIR),
                          sourcePath.str(), "-o", ptx.str().str()},
                         "nvcc", sourcePath, error))
    return false;
  // Each kernel's stack, callees included, against the default limit.
  std::string ptxas = (llvm::sys::path::parent_path(nvcc) + "/ptxas").str();
  std::string usage;
  if (!emit::runCompiler(
          {ptxas, "-v", "-arch=sm_90a", ptx.str().str(), "-o", "/dev/null"},
          "ptxas", sourcePath, error, &usage))
    return false;
  auto ptxText = llvm::MemoryBuffer::getFile(ptx);
  if (!ptxText) {
    error = "cannot read nvcc's PTX of " + sourcePath.str();
    return false;
  }
  return analyzeResources((*ptxText)->getBuffer(), usage, sourcePath, error);
}

bool ampc::compileCudaLibrary(const Artifact &source, StringRef sourcePath,
                              StringRef output,
                              const std::vector<std::string> &gpuArchs,
                              std::string &error) {
  if (!cudaTargetBuilt()) {
    error = kCudaTargetUnavailable;
    return false;
  }
  std::string nvcc = findNvcc();
  if (nvcc.empty()) {
    error = "no nvcc found (set NVCC, put nvcc on PATH, or install CUDA in "
            "/usr/local/cuda); use --target=cpu";
    return false;
  }
  std::vector<std::string> flags = {
      "-O3",
      "-std=c++17",
      "-Xcompiler",
      "-fPIC,-fvisibility=hidden",
      "-diag-suppress=177,550,20050",
      emit::runtimeIncludeFlag(AMPC_RUNTIME_INCLUDE_DIR)};
  int newest = 0;
  for (const std::string &arch : gpuArchs) {
    // sm_90a → arch=compute_90a,code=sm_90a
    std::string number = arch.substr(arch.find('_') + 1);
    flags.push_back("-gencode");
    flags.push_back("arch=compute_" + number + ",code=sm_" + number);
    newest = std::max(newest, std::atoi(number.c_str()));
  }
  // PTX of the newest architecture (without the arch-specific 'a'
  // features, which the kernels do not use), so that a GPU newer than the
  // list can still JIT the library.
  flags.push_back("-gencode");
  flags.push_back("arch=compute_" + std::to_string(newest) + ",code=compute_" +
                  std::to_string(newest));

  // The intermediate PTX stays for the resource check (analyzeResources
  // on this very build's PTX and ptxas report: no second compilation).
  llvm::SmallString<128> keep;
  if (llvm::sys::fs::createUniqueDirectory("ampc-nvcc", keep)) {
    error = "cannot create a temporary folder";
    return false;
  }
  llvm::scope_exit removeKeep([&] { llvm::sys::fs::remove_directories(keep); });
  // Each architecture's device code compiled in a thread of its own
  // (--threads 0: as many as this machine has cores), which changes
  // nothing in the library.
  std::string uncached[] = {"--threads", "0", "-Xptxas", "-v", "-keep",
                            "-keep-dir", keep.str().str()};
  std::string link[] = {"-lcudnn", "-lcublasLt", "-lcudart"};
  emit::LibraryCompile how;
  how.program = nvcc;
  how.language = "cu";
  how.compileFlags = flags;
  how.linkFlags = link;
  how.what = "nvcc";
  how.uncachedCodeFlags = uncached;
  auto checkPtx = [&](StringRef log, std::string &error) {
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(keep, ec), end;
         it != end && !ec; it.increment(ec)) {
      if (!StringRef(it->path()).ends_with(".ptx"))
        continue;
      auto ptx = llvm::MemoryBuffer::getFile(it->path());
      if (ptx && !analyzeResources((*ptx)->getBuffer(), log, sourcePath, error))
        return false;
    }
    return true;
  };
  how.checkAfter = checkPtx;
  return emit::compileLibrary(how, source, sourcePath, output, error);
}

bool ampc::compileCudaSimLibrary(const Artifact &source, StringRef sourcePath,
                                 StringRef output,
                                 bool checkResources, std::string &error) {
  if (!cudaTargetBuilt()) {
    error = kCudaTargetUnavailable;
    return false;
  }
  std::optional<std::string> program = emit::hostCompiler(error);
  if (!program)
    return false;
  std::string simLibrary = emit::installedPath(
      "lib", "libampc_cudasim.so", AMPC_CUDASIM_LIBRARY_DIR);
  std::vector<std::string> flags = {
      "-O2", "-std=c++17", "-fPIC", "-fvisibility=hidden", "-DAMPC_CUDA_SIM",
      "-w", emit::runtimeIncludeFlag(AMPC_RUNTIME_INCLUDE_DIR),
      "-I" AMPC_CUDA_INCLUDE_DIR};
  // A code object compiled without the resource check is not one that
  // passed it: another key in the compile cache.
  if (!checkResources)
    flags.push_back("-DAMPC_CUDA_SIM_UNCHECKED");
  // The race check (lib/Runtime/CudaSim/RaceCheck.cpp): every load and
  // store of the code calls ThreadSanitizer's hooks, which libampc_cudasim
  // defines (volatile ones apart: they are exempt). Given to the compiler proper only (-Wp,), so that the link
  // does not add ThreadSanitizer's runtime; another key in the cache.
  if (const char *race = std::getenv("AMPC_CUDA_SIM_RACECHECK");
      race && *race && StringRef(race) != "0")
    flags.push_back("-Wp,-fsanitize=thread,--param=tsan-instrument-func-"
                    "entry-exit=0,--param=tsan-distinguish-volatile=1");
  std::string link[] = {"-L" + simLibrary, "-Wl,-rpath," + simLibrary,
                        "-lampc_cudasim"};
  StringRef headers[] = {kCudaKernelsHeader};
  emit::LibraryCompile how;
  how.program = *program;
  how.compileFlags = flags;
  how.linkFlags = link;
  how.headers = headers;
  how.what = "the C++ compiler (cuda-sim)";
  // What the GPU build would refuse, the execution refuses too (once per
  // code: the cache keeps only code that passed).
  auto check = [&](std::string &error) {
    return !checkResources || checkCudaResources(sourcePath, error);
  };
  how.checkBefore = check;
  return emit::compileLibrary(how, source, sourcePath, output, error);
}
