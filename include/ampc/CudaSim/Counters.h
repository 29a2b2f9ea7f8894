/*===- Counters.h - what the CUDA execution on the CPU ran --------*- C -*-===*
 *
 * libampc_cudasim counts the work the device runs, so that the test suite
 * can pin what one training step costs in launches: on a GPU a small
 * model's step is bound by them, and fusion exists to cut them
 * (test/Target/Cuda/launch-count.test).
 *
 * Work is counted when its stream runs it, not when it is queued: a count
 * is what the device did, so work still queued is not in it yet, work
 * dropped after a sticky failure never is, and a captured graph's work
 * counts once per replay. Launches and calls that fail their checks queue
 * nothing and are not counted.
 *
 * Plain C (unittests/RuntimeHeaderC99.c), so that test scripts can call it
 * through ctypes.
 *
 *===----------------------------------------------------------------------===*/

#ifndef AMPC_RUNTIME_CUDASIM_COUNTERS_H
#define AMPC_RUNTIME_CUDASIM_COUNTERS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Sets every count to zero. Work queued before the call that runs after it
 * is counted: synchronise first to count from a clean point. */
void ampc_cudasim_counters_reset(void);

/* Writes the counts since the last reset into `buffer` as text, one line
 * per kind of work and name, sorted by kind, then name:
 *
 *   kernel COUNT NAME            a kernel, by the name ampc::cuda::launch
 *                                gave it (template arguments included)
 *   gemm COUNT EPILOGUE          a cublasLtMatmul, by its epilogue
 *                                (CUBLASLT_EPILOGUE_BIAS)
 *   copy COUNT KIND              a cudaMemcpy or cudaMemcpyAsync, by its
 *                                direction (cudaMemcpyHostToDevice); a
 *                                host-to-host copy involves no device
 *   memset COUNT CALL            cudaMemset or cudaMemsetAsync
 *   host_function COUNT cudaLaunchHostFunc
 *   graph COUNT cudaGraphLaunch  a graph's launch (its work counts too,
 *                                under its own kinds)
 *   cudnn COUNT CALL             a cuDNN convolution, by its function
 *                                (cudnnConvolutionForward)
 *
 * NAME is the rest of the line (a template argument list may hold spaces).
 * At most `size` bytes are written, the terminating NUL included (none when
 * `size` is 0); returns the length of the whole text, as snprintf does, so
 * a caller can size its buffer with a first call. */
size_t ampc_cudasim_counters(char *buffer, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* AMPC_RUNTIME_CUDASIM_COUNTERS_H */
