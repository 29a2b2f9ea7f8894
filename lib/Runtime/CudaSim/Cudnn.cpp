//===- Cudnn.cpp - cuDNN's legacy convolutions on the CPU -----------------===//
//
// The part of cuDNN the CUDA target calls (include/ampc/Kernels/Cuda/
// CudaKernels.cuh: initConvolutions, convolution): the handle and its
// stream, tensor, filter and convolution descriptors, the algorithm
// heuristics (cudnnGet*Algorithm_v7) and workspace sizes, and
// cudnnConvolutionForward / BackwardData / BackwardFilter, defined against
// cuDNN 9's own declarations (cudnn.h), with the API's rules checked at the
// call instead of left to a fault or a wrong result:
//
// - Descriptors: set before use, 4 or 5 dimensions, positive sizes, pads
//   >= 0, strides and dilations >= 1 (CUDNN_STATUS_BAD_PARAM at the Set
//   call, as cuDNN's "Returns" sections say); a convolution call checks
//   that X, W and Y have one data type and rank, the convolution's rank is
//   theirs less 2, the group count divides X's channels and W's filters,
//   W's channels are X's over the groups, and Y's sizes are those
//   cudnnGetConvolutionNdForwardOutputDim gives (CUDNN_STATUS_BAD_PARAM).
// - Types (cuDNN's "Supported Configurations" of the legacy calls): HALF,
//   BFLOAT16 and FLOAT data with FLOAT compute, DOUBLE with DOUBLE;
//   anything else is CUDNN_STATUS_NOT_SUPPORTED.
// - Layouts: packed tensors only, NCHW (NCDHW) or channels-last NHWC
//   (NDHWC: the strides of dims [N, C, H, W] are [HWC, 1, WC, C]); the
//   filter's dims are K, C/group, R, S whatever its format, CUDNN_TENSOR_NCHW
//   (KCRS in memory) or CUDNN_TENSOR_NHWC (KRSC). X and Y are in one layout
//   and the filter is NHWC exactly when they are (cuDNN wants the filter in
//   NHWC with NHWC tensors); anything else is NOT_SUPPORTED, saying so. A
//   channels-last call reads and writes its operands at their NHWC places
//   and computes each result from the same terms in the same order as the
//   NCHW call on the permuted operands (the same bits).
// - Memory: X, W, Y and the workspace live device memory, aligned to the
//   element, Y not overlapping X or W; an algorithm whose workspace size is
//   not zero needs a workspace pointer and at least that many bytes
//   (CUDNN_STATUS_BAD_PARAM); the stream that of the current device.
// - The heuristics rank, per direction, the algorithms the simulation
//   executes: forward IMPLICIT_PRECOMP_GEMM (a workspace: one image and
//   group's columns in the compute type) then IMPLICIT_GEMM (none);
//   backward data ALGO_0 (non-deterministic, as cuDNN reports it) then
//   ALGO_1 (a workspace); backward filter ALGO_0 (non-deterministic) then
//   ALGO_1 (a workspace). A caller that keeps only deterministic algorithms
//   gets ALGO_1.
//
// Numerics: the operands are widened to the compute type (FP32, FP64 for
// DOUBLE), each image and group's columns formed (im2col) and multiplied by
// OpenBLAS, the backward data's columns summed back per input element in
// kernel order, the backward filter's products summed over the images in
// order; alpha and beta are applied in the compute type and each output is
// rounded once, to nearest even. FLOAT data under a math type other than
// CUDNN_FMA_MATH has its operands rounded to TF32 first, as an Ampere or
// later GPU may (so a caller that lets TF32 in differs from the CPU
// target). Work is queued on the handle's stream and
// counted as "cudnn" with the call's name (Counters.h).
//
//===----------------------------------------------------------------------===//

#include "Sim.h"

#include "ampc/Kernels/Common/Float16.h"

#include <cblas.h>
#include <cudnn.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace ampc::sim {
namespace {

std::mutex mutex;
std::map<int, std::string> statusText; // status -> "NAME: latest detail"
std::unordered_set<const void *> liveHandles, liveTensors, liveFilters,
    liveConvolutions;

const char *statusName(cudnnStatus_t status) {
  switch (status) {
  case CUDNN_STATUS_SUCCESS: return "CUDNN_STATUS_SUCCESS";
  case CUDNN_STATUS_BAD_PARAM: return "CUDNN_STATUS_BAD_PARAM";
  case CUDNN_STATUS_BAD_PARAM_NULL_POINTER:
    return "CUDNN_STATUS_BAD_PARAM_NULL_POINTER";
  case CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER:
    return "CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER";
  case CUDNN_STATUS_NOT_SUPPORTED: return "CUDNN_STATUS_NOT_SUPPORTED";
  case CUDNN_STATUS_EXECUTION_FAILED: return "CUDNN_STATUS_EXECUTION_FAILED";
  default: break;
  }
  return "CUDNN_STATUS_<other>";
}

cudnnStatus_t failDnn(cudnnStatus_t status, const std::string &message) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    statusText[status] = std::string(statusName(status)) + ": " + message;
  }
  std::fprintf(stderr, "ampc cuda-sim: %s\n", message.c_str());
  return status;
}

struct Handle {
  cudaStream_t stream = nullptr;
};
struct Tensor {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  int rank = 0;
  int dims[8] = {}, strides[8] = {};
};
struct Filter {
  bool set = false;
  cudnnDataType_t type = CUDNN_DATA_FLOAT;
  cudnnTensorFormat_t format = CUDNN_TENSOR_NCHW;
  int rank = 0;
  int dims[8] = {};
};
struct Convolution {
  bool set = false;
  int rank = 0;
  int pad[6] = {}, stride[6] = {}, dilation[6] = {};
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  cudnnDataType_t compute = CUDNN_DATA_FLOAT;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
  int groups = 1;
};

/// Whether `t` is packed in the layout whose dims go, outermost first, in
/// `order` (of its rank).
bool packedIn(const Tensor &t, const int *order) {
  int64_t stride = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    if (t.strides[order[i]] != stride)
      return false;
    stride *= t.dims[order[i]];
  }
  return true;
}

/// The packed layouts `t` is in: bit 0 NCHW, bit 1 channels-last (both
/// where they coincide, e.g. one channel and a 1x1 image).
enum : int { kNchw = 1, kNhwc = 2 };
int layoutsOf(const Tensor &t) {
  int nchw[8], nhwc[8];
  for (int d = 0; d < t.rank; ++d)
    nchw[d] = d;
  nhwc[0] = 0;
  for (int d = 2; d < t.rank; ++d)
    nhwc[d - 1] = d;
  nhwc[t.rank - 1] = 1;
  return (packedIn(t, nchw) ? kNchw : 0) | (packedIn(t, nhwc) ? kNhwc : 0);
}

std::string stridesText(const Tensor &t) {
  std::string text = "[";
  for (int d = 0; d < t.rank; ++d)
    text += (d ? ", " : "") + std::to_string(t.strides[d]);
  return text + "]";
}

/// The element offset of outer index `b` (image or filter), channel `ch`
/// of `channels` and spatial position `s` of `size` in a packed tensor:
/// NCHW's (b·C + ch)·size + s or channels-last's (b·size + s)·C + ch. The
/// filter is such a tensor: its filters outer, C/group channels.
int64_t element(bool nhwc, int64_t b, int64_t ch, int64_t channels, int64_t s,
                int64_t size) {
  return nhwc ? (b * size + s) * channels + ch : (b * channels + ch) * size + s;
}

template <typename T>
T *lookup(std::unordered_set<const void *> &set, const void *object) {
  std::lock_guard<std::mutex> lock(mutex);
  return set.count(object) ? static_cast<T *>(const_cast<void *>(object))
                           : nullptr;
}

template <typename T, typename Opaque>
cudnnStatus_t create(std::unordered_set<const void *> &set, Opaque **out,
                     const char *call) {
  if (!out)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   std::string(call) + ": the output pointer is null");
  T *object = new T();
  {
    std::lock_guard<std::mutex> lock(mutex);
    set.insert(object);
  }
  *out = reinterpret_cast<Opaque *>(object);
  return CUDNN_STATUS_SUCCESS;
}

template <typename T>
cudnnStatus_t destroy(std::unordered_set<const void *> &set,
                      const void *object, const char *call) {
  if (!object)
    return CUDNN_STATUS_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!set.erase(object))
      return failDnn(CUDNN_STATUS_BAD_PARAM,
                     std::string(call) + ": " + std::to_string(
                         reinterpret_cast<uintptr_t>(object)) +
                         " is not a live descriptor (destroyed twice, or "
                         "never created)");
  }
  delete static_cast<const T *>(object);
  return CUDNN_STATUS_SUCCESS;
}

int elementBytes(cudnnDataType_t t) {
  switch (t) {
  case CUDNN_DATA_HALF:
  case CUDNN_DATA_BFLOAT16: return 2;
  case CUDNN_DATA_FLOAT: return 4;
  case CUDNN_DATA_DOUBLE: return 8;
  default: return 0;
  }
}

std::string typeName(cudnnDataType_t t) {
  switch (t) {
  case CUDNN_DATA_HALF: return "CUDNN_DATA_HALF";
  case CUDNN_DATA_BFLOAT16: return "CUDNN_DATA_BFLOAT16";
  case CUDNN_DATA_FLOAT: return "CUDNN_DATA_FLOAT";
  case CUDNN_DATA_DOUBLE: return "CUDNN_DATA_DOUBLE";
  default: break;
  }
  return "cudnnDataType " + std::to_string(static_cast<int>(t));
}

int64_t count(const int *dims, int rank) {
  int64_t n = 1;
  for (int d = 0; d < rank; ++d)
    n *= dims[d];
  return n;
}

/// A convolution call's problem, checked.
struct Problem {
  cudnnDataType_t type;
  bool f64;
  /// FLOAT data under a math type other than CUDNN_FMA_MATH: cuDNN may
  /// run it on Tensor Cores in TF32 (CUDNN_DEFAULT_MATH permits it from
  /// Ampere on), so the operands are rounded to TF32 as such a GPU would.
  bool tf32;
  /// X, Y NHWC (NDHWC) and W KRSC; else NCHW and KCRS.
  bool nhwc;
  int spatial;
  int64_t n, c, m, groups;
  int in[6], out[6], kernel[6], pad[6], stride[6], dilation[6];
  int64_t inSize, outSize, kernelSize;
  int64_t cg() const { return c / groups; }
  int64_t mg() const { return m / groups; }
  int64_t depth() const { return cg() * kernelSize; }
  /// Bytes of one image and group's columns in the compute type: the
  /// workspace of the algorithms that take one.
  size_t columnsBytes() const {
    return static_cast<size_t>(depth() * outSize) * (f64 ? 8 : 4);
  }
};

/// Checks the descriptors of a call against each other (`x`, `w`, `y` in
/// the forward convolution's terms).
cudnnStatus_t describe(const char *call, const void *handle, const void *xd,
                       const void *wd, const void *cd, const void *yd,
                       Problem &p) {
  const std::string prefix = std::string(call) + ": ";
  if (!lookup<Handle>(liveHandles, handle))
    return failDnn(CUDNN_STATUS_BAD_PARAM, prefix + "the handle is not live");
  Tensor *x = lookup<Tensor>(liveTensors, xd), *y = lookup<Tensor>(liveTensors, yd);
  Filter *w = lookup<Filter>(liveFilters, wd);
  Convolution *conv = lookup<Convolution>(liveConvolutions, cd);
  if (!x || !y || !w || !conv)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "a descriptor (" +
                       (!x ? "x" : !y ? "y" : !w ? "w" : "convolution") +
                       ") is not live");
  if (!x->set || !y->set || !w->set || !conv->set)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "a descriptor (" +
                       (!x->set ? "x" : !y->set ? "y" : !w->set ? "w"
                                                               : "convolution") +
                       ") was never set");
  if (x->type != y->type || x->type != w->type)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "x, w and y have different data types (" +
                       typeName(x->type) + ", " + typeName(w->type) + ", " +
                       typeName(y->type) + ")");
  if (x->rank != y->rank || x->rank != w->rank || conv->rank != x->rank - 2)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "ranks do not agree: x " + std::to_string(x->rank) +
                       ", w " + std::to_string(w->rank) + ", y " +
                       std::to_string(y->rank) + ", convolution " +
                       std::to_string(conv->rank) + " spatial");
  const bool f64 = x->type == CUDNN_DATA_DOUBLE;
  if (conv->compute != (f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT))
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   prefix + typeName(x->type) + " data with " +
                       typeName(conv->compute) +
                       " compute is not a supported configuration");
  if (conv->mode != CUDNN_CROSS_CORRELATION)
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   prefix + "CUDNN_CONVOLUTION mode is not simulated");
  if (w->format != CUDNN_TENSOR_NCHW && w->format != CUDNN_TENSOR_NHWC)
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   prefix + "only NCHW and NHWC filters are simulated (format " +
                       std::to_string(static_cast<int>(w->format)) + ")");
  const int xLayouts = layoutsOf(*x), yLayouts = layoutsOf(*y);
  for (Tensor *t : {x, y})
    if (!(t == x ? xLayouts : yLayouts))
      return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                     prefix + "only packed NCHW and NHWC tensors are "
                              "simulated (" + (t == x ? "x" : "y") +
                         "'s strides are " + stridesText(*t) + ")");
  if (!(xLayouts & yLayouts))
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   prefix + "x is packed " +
                       (xLayouts & kNchw ? "NCHW" : "NHWC") + " and y " +
                       (yLayouts & kNchw ? "NCHW" : "NHWC") +
                       ": the simulation takes both in one layout");
  const int wLayout = w->format == CUDNN_TENSOR_NHWC ? kNhwc : kNchw;
  if (!(xLayouts & yLayouts & wLayout))
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   prefix + "the filter is " +
                       (wLayout == kNhwc ? "NHWC" : "NCHW") + " but x and y "
                       "are packed " + (wLayout == kNhwc ? "NCHW" : "NHWC") +
                       ": the filter's format must be the tensors' layout");
  p.nhwc = wLayout == kNhwc;
  p.type = x->type;
  p.f64 = f64;
  p.tf32 = x->type == CUDNN_DATA_FLOAT && conv->math != CUDNN_FMA_MATH;
  p.spatial = conv->rank;
  p.n = x->dims[0], p.c = x->dims[1], p.m = w->dims[0];
  p.groups = conv->groups;
  if (p.c % p.groups || p.m % p.groups)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "the group count " + std::to_string(p.groups) +
                       " does not divide x's channels (" + std::to_string(p.c) +
                       ") and w's filters (" + std::to_string(p.m) + ")");
  if (w->dims[1] * p.groups != p.c)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "w has " + std::to_string(w->dims[1]) +
                       " channels per filter; x's " + std::to_string(p.c) +
                       " over " + std::to_string(p.groups) + " groups needs " +
                       std::to_string(p.c / p.groups));
  if (y->dims[0] != p.n || y->dims[1] != p.m)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "y's batch and channels (" +
                       std::to_string(y->dims[0]) + ", " +
                       std::to_string(y->dims[1]) + ") are not x's batch and "
                       "w's filters (" + std::to_string(p.n) + ", " +
                       std::to_string(p.m) + ")");
  p.inSize = p.outSize = p.kernelSize = 1;
  for (int d = 0; d < p.spatial; ++d) {
    p.in[d] = x->dims[2 + d], p.kernel[d] = w->dims[2 + d];
    p.pad[d] = conv->pad[d], p.stride[d] = conv->stride[d];
    p.dilation[d] = conv->dilation[d];
    const int span = (p.kernel[d] - 1) * p.dilation[d] + 1;
    const int expected = (p.in[d] + 2 * p.pad[d] - span) / p.stride[d] + 1;
    if (p.in[d] + 2 * p.pad[d] < span || y->dims[2 + d] != expected)
      return failDnn(CUDNN_STATUS_BAD_PARAM,
                     prefix + "y's spatial size " + std::to_string(d) + " is " +
                         std::to_string(y->dims[2 + d]) +
                         "; the convolution of x gives " +
                         std::to_string(expected));
    p.out[d] = expected;
    p.inSize *= p.in[d], p.outSize *= p.out[d], p.kernelSize *= p.kernel[d];
  }
  return CUDNN_STATUS_SUCCESS;
}

enum Direction { Forward, BackwardData, BackwardFilter };

/// The workspace `algo` of `direction` needs, or -1 for an algorithm the
/// simulation does not execute.
int64_t workspaceOf(Direction direction, int algo, const Problem &p) {
  switch (direction) {
  case Forward:
    if (algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM)
      return 0;
    if (algo == CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
      return static_cast<int64_t>(p.columnsBytes());
    return -1;
  case BackwardData:
    if (algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_0)
      return 0;
    if (algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_1)
      return static_cast<int64_t>(p.columnsBytes());
    return -1;
  case BackwardFilter:
    if (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0)
      return 0;
    if (algo == CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1)
      return static_cast<int64_t>(p.columnsBytes());
    return -1;
  }
  return -1;
}

/// The heuristic's ranking (see the banner): {algo, deterministic}.
struct Ranked {
  int algo;
  bool deterministic;
};
std::vector<Ranked> ranking(Direction direction) {
  switch (direction) {
  case Forward:
    return {{CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, true},
            {CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, true}};
  case BackwardData:
    return {{CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, false},
            {CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, true}};
  case BackwardFilter:
    return {{CUDNN_CONVOLUTION_BWD_FILTER_ALGO_0, false},
            {CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, true}};
  }
  return {};
}

template <typename Perf>
cudnnStatus_t heuristic(const char *call, Direction direction,
                        const void *handle, const void *xd, const void *wd,
                        const void *cd, const void *yd, int requested,
                        int *returned, Perf *perf) {
  Problem p;
  if (cudnnStatus_t s = describe(call, handle, xd, wd, cd, yd, p))
    return s;
  if (!returned || !perf || requested < 1)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   std::string(call) + ": requestedAlgoCount must be positive "
                                       "and the result pointers non-null");
  Convolution *conv = lookup<Convolution>(liveConvolutions, cd);
  int n = 0;
  for (const Ranked &r : ranking(direction)) {
    if (n == requested)
      break;
    Perf &out = perf[n++];
    std::memset(&out, 0, sizeof out);
    out.algo = static_cast<decltype(out.algo)>(r.algo);
    out.status = CUDNN_STATUS_SUCCESS;
    out.time = -1;
    out.memory = static_cast<size_t>(workspaceOf(direction, r.algo, p));
    out.determinism =
        r.deterministic ? CUDNN_DETERMINISTIC : CUDNN_NON_DETERMINISTIC;
    out.mathType = conv->math;
  }
  *returned = n;
  return CUDNN_STATUS_SUCCESS;
}

template <typename Algo>
cudnnStatus_t workspaceSize(const char *call, Direction direction,
                            const void *handle, const void *xd, const void *wd,
                            const void *cd, const void *yd, Algo algo,
                            size_t *size) {
  Problem p;
  if (cudnnStatus_t s = describe(call, handle, xd, wd, cd, yd, p))
    return s;
  if (!size)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   std::string(call) + ": sizeInBytes is null");
  const int64_t bytes = workspaceOf(direction, static_cast<int>(algo), p);
  if (bytes < 0)
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   std::string(call) + ": algorithm " +
                       std::to_string(static_cast<int>(algo)) +
                       " is not one the simulation executes");
  *size = static_cast<size_t>(bytes);
  return CUDNN_STATUS_SUCCESS;
}

/// Fails unless [pointer, pointer + bytes) is live device memory aligned
/// to `align`.
cudnnStatus_t checkMemory(const char *call, const char *what,
                          const void *pointer, uint64_t bytes, int align) {
  const std::string prefix = std::string(call) + ": " + what + " ";
  if (!pointer)
    return failDnn(CUDNN_STATUS_BAD_PARAM_NULL_POINTER, prefix + "is null");
  if (reinterpret_cast<uintptr_t>(pointer) % align)
    return failDnn(CUDNN_STATUS_BAD_PARAM_MISALIGNED_POINTER,
                   prefix + "is not aligned to " + std::to_string(align) +
                       " bytes");
  switch (classify(pointer, bytes)) {
  case Memory::Device: return CUDNN_STATUS_SUCCESS;
  case Memory::FreedDevice:
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "is in device memory that cudaFree released");
  case Memory::PinnedHost:
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "is pinned host memory, not device memory");
  case Memory::Host: break;
  }
  if (classify(pointer, 1) == Memory::Device)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "runs past the end of its device allocation (" +
                       std::to_string(bytes) + " bytes)");
  return failDnn(CUDNN_STATUS_BAD_PARAM,
                 prefix + "is a host pointer, not device memory");
}

/// `v` rounded to TF32 (10 mantissa bits), to nearest even.
float toTf32(float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  if ((bits & 0x7f800000u) == 0x7f800000u)
    return v;
  bits += 0xfffu + ((bits >> 13) & 1u);
  bits &= ~0x1fffu;
  std::memcpy(&v, &bits, 4);
  return v;
}

template <typename C> C load(const void *base, int64_t i, cudnnDataType_t t) {
  switch (t) {
  case CUDNN_DATA_HALF:
    return numeric::f16BitsToF32(static_cast<const uint16_t *>(base)[i]);
  case CUDNN_DATA_BFLOAT16:
    return numeric::bf16BitsToF32(static_cast<const uint16_t *>(base)[i]);
  case CUDNN_DATA_FLOAT: return static_cast<const float *>(base)[i];
  default: return static_cast<C>(static_cast<const double *>(base)[i]);
  }
}

template <typename C> void store(void *base, int64_t i, cudnnDataType_t t, C v) {
  switch (t) {
  case CUDNN_DATA_HALF:
    static_cast<uint16_t *>(base)[i] = numeric::f32ToF16Bits(static_cast<float>(v));
    return;
  case CUDNN_DATA_BFLOAT16:
    static_cast<uint16_t *>(base)[i] = numeric::f32ToBf16Bits(static_cast<float>(v));
    return;
  case CUDNN_DATA_FLOAT: static_cast<float *>(base)[i] = static_cast<float>(v); return;
  default: static_cast<double *>(base)[i] = static_cast<double>(v); return;
  }
}

/// Row-major C = A(m x k, transposed when ta) · B(k x n, transposed when
/// tb) + beta C.
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float *a,
          const float *b, float beta, float *c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, ta ? m : k, b,
              tb ? k : n, beta, c, n);
}
void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const double *a,
          const double *b, double beta, double *c) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, ta ? m : k, b,
              tb ? k : n, beta, c, n);
}

/// Where kernel position `k` of output position `q` reads in a plane, or
/// -1 in the padding.
int64_t offset(const Problem &p, int64_t k, int64_t q) {
  int64_t kd[6], qd[6];
  for (int d = p.spatial - 1; d >= 0; --d) {
    kd[d] = k % p.kernel[d], k /= p.kernel[d];
    qd[d] = q % p.out[d], q /= p.out[d];
  }
  int64_t at = 0;
  for (int d = 0; d < p.spatial; ++d) {
    const int64_t pos = qd[d] * p.stride[d] - p.pad[d] + kd[d] * p.dilation[d];
    if (pos < 0 || pos >= p.in[d])
      return -1;
    at = at * p.in[d] + pos;
  }
  return at;
}

/// One queued call: the problem and its operands.
struct Call {
  Direction direction;
  Problem p;
  double alpha, beta;
  const void *a, *b; // forward: x, w; data: dy, w; filter: x, dy
  void *out;
  void *workspace;
};

template <typename C> void execute(const Call &call) {
  const Problem &p = call.p;
  const int64_t cg = p.cg(), mg = p.mg(), depth = p.depth(),
                kernelSize = p.kernelSize, outSize = p.outSize,
                inSize = p.inSize;
  std::vector<int64_t> offsets(kernelSize * outSize);
  for (int64_t k = 0; k < kernelSize; ++k)
    for (int64_t q = 0; q < outSize; ++q)
      offsets[k * outSize + q] = offset(p, k, q);
  // The columns: in the workspace when the algorithm took one.
  std::vector<C> own;
  C *cols = static_cast<C *>(call.workspace);
  if (!cols) {
    own.resize(depth * outSize);
    cols = own.data();
  }
  // An operand as the multiplier reads it (TF32 where p.tf32).
  auto operand = [&](const void *base, int64_t i) {
    C v = load<C>(base, i, p.type);
    return p.tf32 ? static_cast<C>(toTf32(static_cast<float>(v))) : v;
  };
  // Where the operands' elements are (NCHW or NHWC; see element): X's of
  // image b, channel ch, spatial s; Y's of image b, filter f, spatial s;
  // W's of filter f, channel ci of its group, kernel position k.
  auto xAt = [&](int64_t b, int64_t ch, int64_t s) {
    return element(p.nhwc, b, ch, p.c, s, inSize);
  };
  auto yAt = [&](int64_t b, int64_t f, int64_t s) {
    return element(p.nhwc, b, f, p.m, s, outSize);
  };
  auto wAt = [&](int64_t f, int64_t ci, int64_t k) {
    return element(p.nhwc, f, ci, cg, k, kernelSize);
  };
  // Group g's filters as the (mg x depth) matrix of the multiplier.
  auto filters = [&](const void *w, int64_t g) {
    std::vector<C> v(mg * depth);
    for (int64_t f = 0; f < mg; ++f)
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t k = 0; k < kernelSize; ++k)
          v[(f * cg + ci) * kernelSize + k] = operand(w, wAt(g * mg + f, ci, k));
    return v;
  };
  // Image b and group g of dY as the (mg x outSize) matrix.
  auto gradients = [&](const void *dy, int64_t b, int64_t g) {
    std::vector<C> v(mg * outSize);
    for (int64_t f = 0; f < mg; ++f)
      for (int64_t q = 0; q < outSize; ++q)
        v[f * outSize + q] = operand(dy, yAt(b, g * mg + f, q));
    return v;
  };
  // im2col of image b, group g of x into cols.
  auto im2col = [&](const void *x, int64_t b, int64_t g) {
    for (int64_t ci = 0; ci < cg; ++ci)
      for (int64_t k = 0; k < kernelSize; ++k)
        for (int64_t q = 0; q < outSize; ++q) {
          const int64_t at = offsets[k * outSize + q];
          cols[(ci * kernelSize + k) * outSize + q] =
              at < 0 ? C(0) : operand(x, xAt(b, g * cg + ci, at));
        }
  };
  const C alpha = static_cast<C>(call.alpha), beta = static_cast<C>(call.beta);
  auto finish = [&](int64_t at, C value) {
    C v = alpha * value;
    if (beta != C(0))
      v += beta * load<C>(call.out, at, p.type);
    store<C>(call.out, at, p.type, v);
  };
  if (call.direction == Forward) {
    std::vector<C> acc(mg * outSize);
    for (int64_t g = 0; g < p.groups; ++g) {
      std::vector<C> w = filters(call.b, g);
      for (int64_t b = 0; b < p.n; ++b) {
        im2col(call.a, b, g);
        gemm(false, false, mg, outSize, depth, w.data(), cols, C(0), acc.data());
        for (int64_t f = 0; f < mg; ++f)
          for (int64_t q = 0; q < outSize; ++q)
            finish(yAt(b, g * mg + f, q), acc[f * outSize + q]);
      }
    }
    return;
  }
  if (call.direction == BackwardData) {
    std::vector<C> acc(cg * inSize);
    for (int64_t g = 0; g < p.groups; ++g) {
      std::vector<C> w = filters(call.b, g);
      for (int64_t b = 0; b < p.n; ++b) {
        std::vector<C> dy = gradients(call.a, b, g);
        gemm(true, false, depth, outSize, mg, w.data(), dy.data(), C(0), cols);
        // Each input element sums the column entries that read it, in
        // kernel order.
        std::fill(acc.begin(), acc.end(), C(0));
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t k = 0; k < kernelSize; ++k)
            for (int64_t q = 0; q < outSize; ++q) {
              const int64_t at = offsets[k * outSize + q];
              if (at >= 0)
                acc[ci * inSize + at] += cols[(ci * kernelSize + k) * outSize + q];
            }
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t i = 0; i < inSize; ++i)
            finish(xAt(b, g * cg + ci, i), acc[ci * inSize + i]);
      }
    }
    return;
  }
  // Backward filter: the sum over the images of dy · colsᵀ.
  std::vector<C> sum(mg * depth);
  for (int64_t g = 0; g < p.groups; ++g) {
    for (int64_t b = 0; b < p.n; ++b) {
      im2col(call.a, b, g);
      std::vector<C> dy = gradients(call.b, b, g);
      gemm(false, true, mg, depth, outSize, dy.data(), cols, b ? C(1) : C(0),
           sum.data());
    }
    if (p.n == 0)
      std::fill(sum.begin(), sum.end(), C(0));
    for (int64_t f = 0; f < mg; ++f)
      for (int64_t ci = 0; ci < cg; ++ci)
        for (int64_t k = 0; k < kernelSize; ++k)
          finish(wAt(g * mg + f, ci, k), sum[(f * cg + ci) * kernelSize + k]);
  }
}

/// A convolution call: checked, then queued on the handle's stream.
cudnnStatus_t convolve(const char *call, Direction direction, cudnnHandle_t handle,
                       const void *alpha, const void *xd, const void *wd,
                       const void *cd, const void *yd, int algo,
                       void *workspace, size_t workspaceBytes, const void *beta,
                       const void *a, const void *b, void *out) {
  Problem p;
  if (cudnnStatus_t s = describe(call, handle, xd, wd, cd, yd, p))
    return s;
  const std::string prefix = std::string(call) + ": ";
  if (!alpha || !beta)
    return failDnn(CUDNN_STATUS_BAD_PARAM_NULL_POINTER,
                   prefix + "alpha or beta is null");
  const int64_t needed = workspaceOf(direction, algo, p);
  if (needed < 0)
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   prefix + "algorithm " + std::to_string(algo) +
                       " is not one the simulation executes");
  if (needed > 0 && (!workspace || workspaceBytes < static_cast<size_t>(needed)))
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "algorithm " + std::to_string(algo) + " needs " +
                       std::to_string(needed) + " bytes of workspace, got " +
                       std::to_string(workspace ? workspaceBytes : 0) +
                       (workspace ? "" : " (a null pointer)"));
  const int size = elementBytes(p.type);
  const uint64_t xBytes = p.n * p.c * p.inSize * size,
                 wBytes = p.m * p.cg() * p.kernelSize * size,
                 yBytes = p.n * p.m * p.outSize * size;
  // The operands in the call's roles.
  const char *names[3];
  uint64_t bytes[3];
  if (direction == Forward)
    names[0] = "x", names[1] = "w", names[2] = "y", bytes[0] = xBytes,
    bytes[1] = wBytes, bytes[2] = yBytes;
  else if (direction == BackwardData)
    names[0] = "dy", names[1] = "w", names[2] = "dx", bytes[0] = yBytes,
    bytes[1] = wBytes, bytes[2] = xBytes;
  else
    names[0] = "x", names[1] = "dy", names[2] = "dw", bytes[0] = xBytes,
    bytes[1] = yBytes, bytes[2] = wBytes;
  const void *pointers[3] = {a, b, out};
  for (int i = 0; i < 3; ++i)
    if (bytes[i])
      if (cudnnStatus_t s = checkMemory(call, names[i], pointers[i], bytes[i], size))
        return s;
  if (needed > 0)
    if (cudnnStatus_t s = checkMemory(call, "the workspace", workspace,
                                      static_cast<uint64_t>(needed), 1))
      return s;
  for (int i = 0; i < 2; ++i)
    if (overlaps(out, bytes[2], pointers[i], bytes[i]))
      return failDnn(CUDNN_STATUS_BAD_PARAM,
                     prefix + names[2] + " overlaps " + names[i]);
  if (needed > 0 && (overlaps(workspace, needed, out, bytes[2]) ||
                     overlaps(workspace, needed, a, bytes[0]) ||
                     overlaps(workspace, needed, b, bytes[1])))
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   prefix + "the workspace overlaps an operand");
  cudaStream_t stream = lookup<Handle>(liveHandles, handle)->stream;
  if (!checkStreamDevice(stream, call))
    return failDnn(CUDNN_STATUS_EXECUTION_FAILED,
                   prefix + "the handle's stream is not a stream of the "
                            "current device");
  Call work{direction, p,
            p.f64 ? *static_cast<const double *>(alpha)
                  : *static_cast<const float *>(alpha),
            p.f64 ? *static_cast<const double *>(beta)
                  : *static_cast<const float *>(beta),
            a, b, out, needed > 0 ? workspace : nullptr};
  const cudaError_t queued =
      enqueue(stream, call, Work::Cudnn, call, [work]() -> cudaError_t {
        if (work.p.f64)
          execute<double>(work);
        else
          execute<float>(work);
        return cudaSuccess;
      });
  if (queued != cudaSuccess)
    return failDnn(CUDNN_STATUS_EXECUTION_FAILED,
                   prefix + "could not queue the convolution: " +
                       cudaGetErrorName(queued));
  return CUDNN_STATUS_SUCCESS;
}

} // namespace
} // namespace ampc::sim

using namespace ampc::sim;

extern "C" {

const char *CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = statusText.find(status);
  return it != statusText.end() ? it->second.c_str() : statusName(status);
}

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t *handle) {
  return create<Handle>(liveHandles, handle, "cudnnCreate");
}
cudnnStatus_t CUDNNWINAPI cudnnDestroy(cudnnHandle_t handle) {
  return destroy<Handle>(liveHandles, handle, "cudnnDestroy");
}
cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle,
                                         cudaStream_t stream) {
  Handle *h = lookup<Handle>(liveHandles, handle);
  if (!h)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   "cudnnSetStream: the handle is not live");
  h->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI
cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t *desc) {
  return create<Tensor>(liveTensors, desc, "cudnnCreateTensorDescriptor");
}
cudnnStatus_t CUDNNWINAPI
cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t desc) {
  return destroy<Tensor>(liveTensors, desc, "cudnnDestroyTensorDescriptor");
}
cudnnStatus_t CUDNNWINAPI
cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t *desc) {
  return create<Filter>(liveFilters, desc, "cudnnCreateFilterDescriptor");
}
cudnnStatus_t CUDNNWINAPI
cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t desc) {
  return destroy<Filter>(liveFilters, desc, "cudnnDestroyFilterDescriptor");
}
cudnnStatus_t CUDNNWINAPI
cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t *desc) {
  return create<Convolution>(liveConvolutions, desc,
                             "cudnnCreateConvolutionDescriptor");
}
cudnnStatus_t CUDNNWINAPI
cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t desc) {
  return destroy<Convolution>(liveConvolutions, desc,
                              "cudnnDestroyConvolutionDescriptor");
}

cudnnStatus_t CUDNNWINAPI cudnnSetTensorNdDescriptor(
    cudnnTensorDescriptor_t desc, cudnnDataType_t type, int nbDims,
    const int dims[], const int strides[]) {
  const char *call = "cudnnSetTensorNdDescriptor";
  Tensor *t = lookup<Tensor>(liveTensors, desc);
  if (!t)
    return failDnn(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": not live");
  if (elementBytes(type) == 0)
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   std::string(call) + ": " + typeName(type) +
                       " is not simulated");
  if (nbDims < 4 || nbDims > 5 || !dims || !strides)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   std::string(call) + ": convolutions take 4 or 5 dimensions, "
                                       "got " + std::to_string(nbDims));
  for (int d = 0; d < nbDims; ++d)
    if (dims[d] <= 0 || strides[d] <= 0)
      return failDnn(CUDNN_STATUS_BAD_PARAM,
                     std::string(call) + ": dimension " + std::to_string(d) +
                         " has size " + std::to_string(dims[d]) +
                         " and stride " + std::to_string(strides[d]) +
                         "; both must be positive");
  t->type = type;
  t->rank = nbDims;
  std::memcpy(t->dims, dims, nbDims * sizeof(int));
  std::memcpy(t->strides, strides, nbDims * sizeof(int));
  t->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetFilterNdDescriptor(
    cudnnFilterDescriptor_t desc, cudnnDataType_t type,
    cudnnTensorFormat_t format, int nbDims, const int dims[]) {
  const char *call = "cudnnSetFilterNdDescriptor";
  Filter *f = lookup<Filter>(liveFilters, desc);
  if (!f)
    return failDnn(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": not live");
  if (elementBytes(type) == 0)
    return failDnn(CUDNN_STATUS_NOT_SUPPORTED,
                   std::string(call) + ": " + typeName(type) +
                       " is not simulated");
  if (nbDims < 4 || nbDims > 5 || !dims)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   std::string(call) + ": convolutions take 4 or 5 dimensions, "
                                       "got " + std::to_string(nbDims));
  for (int d = 0; d < nbDims; ++d)
    if (dims[d] <= 0)
      return failDnn(CUDNN_STATUS_BAD_PARAM,
                     std::string(call) + ": dimension " + std::to_string(d) +
                         " has size " + std::to_string(dims[d]));
  f->type = type;
  f->format = format;
  f->rank = nbDims;
  std::memcpy(f->dims, dims, nbDims * sizeof(int));
  f->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionNdDescriptor(
    cudnnConvolutionDescriptor_t desc, int arrayLength, const int pad[],
    const int stride[], const int dilation[], cudnnConvolutionMode_t mode,
    cudnnDataType_t computeType) {
  const char *call = "cudnnSetConvolutionNdDescriptor";
  Convolution *c = lookup<Convolution>(liveConvolutions, desc);
  if (!c)
    return failDnn(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": not live");
  if (arrayLength < 2 || arrayLength > 3 || !pad || !stride || !dilation)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   std::string(call) + ": arrayLength must be 2 or 3, got " +
                       std::to_string(arrayLength));
  for (int d = 0; d < arrayLength; ++d)
    if (pad[d] < 0 || stride[d] < 1 || dilation[d] < 1)
      return failDnn(CUDNN_STATUS_BAD_PARAM,
                     std::string(call) + ": dimension " + std::to_string(d) +
                         ": pad " + std::to_string(pad[d]) + ", stride " +
                         std::to_string(stride[d]) + ", dilation " +
                         std::to_string(dilation[d]) +
                         " (pads >= 0, strides and dilations >= 1)");
  if (mode != CUDNN_CONVOLUTION && mode != CUDNN_CROSS_CORRELATION)
    return failDnn(CUDNN_STATUS_BAD_PARAM, std::string(call) + ": bad mode");
  c->rank = arrayLength;
  std::memcpy(c->pad, pad, arrayLength * sizeof(int));
  std::memcpy(c->stride, stride, arrayLength * sizeof(int));
  std::memcpy(c->dilation, dilation, arrayLength * sizeof(int));
  c->mode = mode;
  c->compute = computeType;
  c->set = true;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI
cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t desc, int groups) {
  Convolution *c = lookup<Convolution>(liveConvolutions, desc);
  if (!c || groups < 1)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   "cudnnSetConvolutionGroupCount: a live descriptor and a "
                   "positive count, got " + std::to_string(groups));
  c->groups = groups;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI
cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t desc,
                            cudnnMathType_t math) {
  Convolution *c = lookup<Convolution>(liveConvolutions, desc);
  if (!c || (math != CUDNN_DEFAULT_MATH && math != CUDNN_TENSOR_OP_MATH &&
             math != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION &&
             math != CUDNN_FMA_MATH))
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   "cudnnSetConvolutionMathType: a live descriptor and a "
                   "cudnnMathType_t");
  c->math = math;
  return CUDNN_STATUS_SUCCESS;
}

static cudnnStatus_t maxCount(const char *call, cudnnHandle_t handle,
                              int *count) {
  if (!lookup<Handle>(liveHandles, handle) || !count)
    return failDnn(CUDNN_STATUS_BAD_PARAM,
                   std::string(call) + ": a live handle and a count pointer");
  *count = 2;
  return CUDNN_STATUS_SUCCESS;
}
cudnnStatus_t CUDNNWINAPI
cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t handle, int *count) {
  return maxCount("cudnnGetConvolutionForwardAlgorithmMaxCount", handle, count);
}
cudnnStatus_t CUDNNWINAPI
cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t handle,
                                                 int *count) {
  return maxCount("cudnnGetConvolutionBackwardDataAlgorithmMaxCount", handle,
                  count);
}
cudnnStatus_t CUDNNWINAPI
cudnnGetConvolutionBackwardFilterAlgorithmMaxCount(cudnnHandle_t handle,
                                                   int *count) {
  return maxCount("cudnnGetConvolutionBackwardFilterAlgorithmMaxCount", handle,
                  count);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
    const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t conv,
    const cudnnTensorDescriptor_t y, const int requested, int *returned,
    cudnnConvolutionFwdAlgoPerf_t *perf) {
  return heuristic("cudnnGetConvolutionForwardAlgorithm_v7", Forward, handle,
                   x, w, conv, y, requested, returned, perf);
}
cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataAlgorithm_v7(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
    const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
    const cudnnTensorDescriptor_t dx, const int requested, int *returned,
    cudnnConvolutionBwdDataAlgoPerf_t *perf) {
  return heuristic("cudnnGetConvolutionBackwardDataAlgorithm_v7", BackwardData,
                   handle, dx, w, conv, dy, requested, returned, perf);
}
cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterAlgorithm_v7(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
    const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
    const cudnnFilterDescriptor_t dw, const int requested, int *returned,
    cudnnConvolutionBwdFilterAlgoPerf_t *perf) {
  return heuristic("cudnnGetConvolutionBackwardFilterAlgorithm_v7",
                   BackwardFilter, handle, x, dw, conv, dy, requested, returned,
                   perf);
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
    const cudnnFilterDescriptor_t w, const cudnnConvolutionDescriptor_t conv,
    const cudnnTensorDescriptor_t y, cudnnConvolutionFwdAlgo_t algo,
    size_t *size) {
  return workspaceSize("cudnnGetConvolutionForwardWorkspaceSize", Forward,
                       handle, x, w, conv, y, algo, size);
}
cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataWorkspaceSize(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t w,
    const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
    const cudnnTensorDescriptor_t dx, cudnnConvolutionBwdDataAlgo_t algo,
    size_t *size) {
  return workspaceSize("cudnnGetConvolutionBackwardDataWorkspaceSize",
                       BackwardData, handle, dx, w, conv, dy, algo, size);
}
cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardFilterWorkspaceSize(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t x,
    const cudnnTensorDescriptor_t dy, const cudnnConvolutionDescriptor_t conv,
    const cudnnFilterDescriptor_t dw, cudnnConvolutionBwdFilterAlgo_t algo,
    size_t *size) {
  return workspaceSize("cudnnGetConvolutionBackwardFilterWorkspaceSize",
                       BackwardFilter, handle, x, dw, conv, dy, algo, size);
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionForward(
    cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc,
    const void *x, const cudnnFilterDescriptor_t wDesc, const void *w,
    const cudnnConvolutionDescriptor_t convDesc, cudnnConvolutionFwdAlgo_t algo,
    void *workSpace, size_t workSpaceSizeInBytes, const void *beta,
    const cudnnTensorDescriptor_t yDesc, void *y) {
  return convolve("cudnnConvolutionForward", Forward, handle, alpha, xDesc,
                  wDesc, convDesc, yDesc, algo, workSpace, workSpaceSizeInBytes,
                  beta, x, w, y);
}
cudnnStatus_t CUDNNWINAPI cudnnConvolutionBackwardData(
    cudnnHandle_t handle, const void *alpha, const cudnnFilterDescriptor_t wDesc,
    const void *w, const cudnnTensorDescriptor_t dyDesc, const void *dy,
    const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionBwdDataAlgo_t algo, void *workSpace,
    size_t workSpaceSizeInBytes, const void *beta,
    const cudnnTensorDescriptor_t dxDesc, void *dx) {
  return convolve("cudnnConvolutionBackwardData", BackwardData, handle, alpha,
                  dxDesc, wDesc, convDesc, dyDesc, algo, workSpace,
                  workSpaceSizeInBytes, beta, dy, w, dx);
}
cudnnStatus_t CUDNNWINAPI cudnnConvolutionBackwardFilter(
    cudnnHandle_t handle, const void *alpha, const cudnnTensorDescriptor_t xDesc,
    const void *x, const cudnnTensorDescriptor_t dyDesc, const void *dy,
    const cudnnConvolutionDescriptor_t convDesc,
    cudnnConvolutionBwdFilterAlgo_t algo, void *workSpace,
    size_t workSpaceSizeInBytes, const void *beta,
    const cudnnFilterDescriptor_t dwDesc, void *dw) {
  return convolve("cudnnConvolutionBackwardFilter", BackwardFilter, handle,
                  alpha, xDesc, dwDesc, convDesc, dyDesc, algo, workSpace,
                  workSpaceSizeInBytes, beta, x, dy, dw);
}

} // extern "C"
