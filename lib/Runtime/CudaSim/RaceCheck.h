//===- RaceCheck.h - the race detector's hooks in the execution -*- C++ -*-===//
//
// What Execution.cpp tells the race detector (RaceCheck.cpp) about the
// order it runs a kernel's threads in. The detector sees memory accesses
// only in code compiled with ThreadSanitizer's instrumentation (a cuda-sim
// library built with AMPC_CUDA_SIM_RACECHECK=1); until such code is loaded
// (its constructor calls __tsan_init, which activates the detector) these
// calls return at once.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CUDASIM_RACECHECK_H
#define AMPC_RUNTIME_CUDASIM_RACECHECK_H

#include <cuda_runtime_api.h>

#include <string>

namespace ampc::sim::race {

/// A kernel starts: everything before it is ordered before it (one stream,
/// kernels one after another), so no earlier access can race.
void beginKernel();
/// Block `index` of `grid` starts with `threads` threads: they are
/// unordered with every other block's, and its shared memory is new.
/// (CudaSim.h's built-in variables are macros: hence not blockIdx...)
/// The block's slot (below) is 0.
void beginBlock(uint3 index, dim3 grid, dim3 threads);
/// Every block of `grid` starts at once, of `threads` threads each (a
/// cooperative launch): block b's slot is its linear index.
void beginGrid(dim3 grid, dim3 threads);
/// __syncthreads released the whole block in `slot`.
void barrier(unsigned slot);
/// A warp operation released the lanes of `mask` of the warp whose first
/// thread (linear index in the block) is `firstThread`, in block `slot`.
void warpRelease(unsigned slot, unsigned firstThread, unsigned mask);
/// ampc::cuda::gridSync released the whole grid: every access of every
/// block before it is ordered before every access after it.
void gridBarrier();
/// Instrumented code is loaded: the detector starts keeping its shadow.
void activate();
/// The first race found in the running block, once: sets `error` to it
/// when `error` is empty and a race was found since the block began.
void takeRace(std::string &error);

} // namespace ampc::sim::race

#endif // AMPC_RUNTIME_CUDASIM_RACECHECK_H
