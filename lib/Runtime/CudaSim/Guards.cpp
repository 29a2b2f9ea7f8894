//===- Guards.cpp - writes past the end of a result -----------------------===//
//
// The CUDA target's memory plan leaves unused bytes after every result
// (ampc.guard_bytes), and the emitter declares them before each kernel
// launch that writes the result (AMPC_GUARD; GEMMs are cuBLASLt's, whose
// output extent the execution checks against D's layout). In the strict memory mode
// (AMPC_CUDA_SIM_STRICT_MEMORY=1) the execution fills them with a pattern
// just before the kernel runs and compares them just after: a kernel whose
// bound is one element too long writes into them and fails as cudaErrorIllegalAddress, naming the
// kernel and the result. Without the guard such a write lands in the next
// tensor of the arena, inside one allocation, where no fault can see it.
//
//===----------------------------------------------------------------------===//

#include "ampc/CudaSim/CudaSim.h"

#include "Sim.h"

#include <cstring>

namespace ampc::sim {

namespace {
constexpr unsigned char kGuardPattern = 0xA5;
/// The guards declared for the next launch of this host thread.
thread_local Guards pending;
} // namespace

void guardNextLaunch(const void *data, size_t bytes, size_t guard,
                     const char *what) {
  if (!strictMemory() || guard == 0)
    return;
  const std::string name = what && *what ? what : "a result";
  // A guard outside live device memory would overwrite what is there.
  if (!checkDeviceAccessible(data, bytes + guard, "AMPC_GUARD", name.c_str()))
    return;
  pending.push_back(
      {static_cast<unsigned char *>(const_cast<void *>(data)) + bytes, guard,
       bytes, name});
}

Guards takeGuards() {
  Guards taken = std::move(pending);
  pending.clear();
  return taken;
}

void fillGuards(const Guards &guards) {
  for (const Guard &g : guards)
    std::memset(g.begin, kGuardPattern, g.bytes);
}

std::string brokenGuard(const Guards &guards) {
  for (const Guard &g : guards)
    for (size_t i = 0; i < g.bytes; ++i) {
      if (g.begin[i] == kGuardPattern)
        continue;
      size_t last = i;
      for (size_t j = i; j < g.bytes; ++j)
        if (g.begin[j] != kGuardPattern)
          last = j;
      return "wrote past the end of " + g.what + " (" +
             std::to_string(g.resultBytes) + " bytes): bytes " +
             std::to_string(i) + " to " + std::to_string(last) +
             " after its end changed, of the " + std::to_string(g.bytes) +
             " the memory plan leaves unused there "
             "(AMPC_CUDA_SIM_STRICT_MEMORY)";
    }
  return "";
}

} // namespace ampc::sim
