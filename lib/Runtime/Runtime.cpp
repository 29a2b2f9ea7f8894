//===- Runtime.cpp - the ampc runtime: loading and running model libraries -===//
//
// Implements include/ampc/Runtime/ampc.h on top of the model ABI
// (include/ampc/Runtime/ModelAbi.h). Depends on libc, libstdc++ and libdl
// only: applications that embed a compiled model must not pull in a compiler
// (docs/design.md, Runtime C API).
//
// Handles are not pointers to memory: each is a number the registry maps to
// a reference-counted Model. Numbers are never reused, so a stale handle can
// neither reach freed memory nor alias a newer model, and a release racing a
// call on another thread only drops the registry's reference.
//
//===----------------------------------------------------------------------===//

#include "ampc/Runtime/ModelAbi.h"
#include "ampc/Runtime/ampc.h"

#include "BlasCore.h"
#include "Checkpoint.h"
#include "ampc/Support/AtomicWrite.h"
#include "ampc/Support/RegularFile.h"
#include "OnnxRewrite.h"

#include <algorithm>
#include <cassert>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <memory>
#include <mutex>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

thread_local std::string lastError;

__attribute__((format(printf, 1, 2))) std::string format(const char *fmt,
                                                         ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int length = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string text;
  if (length > 0) {
    text.resize(static_cast<size_t>(length) + 1);
    std::vsnprintf(&text[0], text.size(), fmt, args);
    text.resize(static_cast<size_t>(length));
  }
  va_end(args);
  return text;
}

/// Records "CALL: MESSAGE" as this thread's last error and returns `status`.
ampc_status fail(ampc_status status, const char *call,
                 const std::string &message) {
  lastError = std::string(call) + ": " + message;
  return status;
}

std::string plural(int64_t count, const char *noun) {
  return format("%lld %s%s", static_cast<long long>(count), noun,
                count == 1 ? "" : "s");
}

std::string dtypeText(int32_t dtype) {
  if (ampc_dtype_size(static_cast<ampc_dtype>(dtype)) == 0)
    return format("unknown dtype code %d", dtype);
  return ampc_dtype_name(static_cast<ampc_dtype>(dtype));
}

std::string shapeText(const int64_t *shape, int32_t rank) {
  std::string text = "[";
  for (int32_t i = 0; i < rank; ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}

//===----------------------------------------------------------------------===//
// Models and the handle registry
//===----------------------------------------------------------------------===//

/// The /proc/self/fd numbers whose names a loaded private copy was opened
/// by (openPrivateCopy). The loader knows an object by the name it was
/// opened by, so a copy must never be opened by the name of one still
/// loaded, though its descriptor was closed and the number reused.
struct CopyNames {
  std::mutex mutex;
  /// Each held number, with the file a live copy was made from (no
  /// identity for a name another part of the process holds).
  std::map<int, ampc::ProtectedFile> held;
};
CopyNames &copyNames() {
  static CopyNames *names = new CopyNames; // never destroyed: see registry()
  return *names;
}
std::string copyName(int number) {
  return "/proc/self/fd/" + std::to_string(number);
}

/// Opens the library at `path` from a private copy of its bytes, so that a
/// load always runs the code the file holds now. dlopen hands back the
/// object it already mapped for a path (or for the same file) while that
/// object is loaded, so a library rebuilt at the same path came back as the
/// old one, with the old shapes and hyperparameters. The copy is an
/// anonymous in-memory file (memfd): a new inode per load, gone with its
/// last mapping, nothing to clean up after a crash. Only a regular file is
/// read (a FIFO would block the open). Returns null with `error` set, else
/// the handle and in `number` the descriptor number of the copy's name
/// (releaseCopyName gives it back after dlclose).
void *openPrivateCopy(const std::string &path, int &number,
                      std::string &error) {
  ampc::RegularFile file;
  if (!file.open(path, error))
    return nullptr;
  struct stat identity;
  if (::fstat(file.fd, &identity) != 0) {
    error = std::strerror(errno);
    return nullptr;
  }
  int copy = memfd_create("ampc-model", MFD_CLOEXEC);
  if (copy < 0) {
    error = format("cannot make a private copy: %s", std::strerror(errno));
    return nullptr;
  }
  auto closeCopy = [&] { ::close(copy); };
  uint64_t done = 0;
  while (done < file.size) {
    off_t offset = static_cast<off_t>(done);
    size_t chunk = static_cast<size_t>(
        std::min<uint64_t>(file.size - done, ampc::kReadChunkBytes));
    ssize_t sent = sendfile(copy, file.fd, &offset, chunk);
    if (sent < 0 && errno == EINTR)
      continue;
    if (sent <= 0) {
      error = sent < 0 ? format("cannot copy it: %s", std::strerror(errno))
                       : std::string("the file ended early (truncated while "
                                     "reading?)");
      closeCopy();
      return nullptr;
    }
    done += static_cast<uint64_t>(sent);
  }
  // Move the copy to a descriptor number whose name no loaded object has:
  // not one a live copy holds, and not one the loader already knows (a
  // library that cannot be unloaded keeps its name after dlclose).
  CopyNames &names = copyNames();
  std::lock_guard<std::mutex> lock(names.mutex);
  std::vector<int> skipped;
  int from = 3;
  for (;;) {
    int moved = fcntl(copy, F_DUPFD_CLOEXEC, from);
    if (moved < 0) {
      error = format("cannot make a private copy: %s", std::strerror(errno));
      break;
    }
    from = moved + 1;
    if (!names.held.count(moved)) {
      void *loaded = dlopen(copyName(moved).c_str(), RTLD_NOW | RTLD_NOLOAD);
      if (!loaded) {
        ::close(copy);
        copy = moved;
        break;
      }
      dlclose(loaded);
      names.held.emplace(moved, ampc::ProtectedFile{});
    }
    skipped.push_back(moved);
  }
  for (int fd : skipped)
    ::close(fd);
  if (!error.empty()) {
    closeCopy();
    return nullptr;
  }
  std::string name = copyName(copy);
  dlerror();
  void *library;
  {
    // A CPU library brings OpenBLAS in: with the kernels of this CPU.
    ampc::ScopedBlasCore blasCore;
    library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  }
  if (!library) {
    const char *why = dlerror();
    error = why ? why : "unknown loader error";
    // The loader names the copy; the user knows the file.
    for (size_t at; (at = error.find(name)) != std::string::npos;)
      error.replace(at, name.size(), path);
  } else {
    names.held[copy] = ampc::ProtectedFile{
        {identity.st_dev, identity.st_ino},
        "a library in use ('" + path + "')"};
    number = copy;
    // Outputs never replace it (ampc/Support/AtomicWrite.h).
    ampc::loadedModelFiles = [] {
      CopyNames &names = copyNames();
      std::lock_guard<std::mutex> lock(names.mutex);
      std::vector<ampc::ProtectedFile> files;
      for (const auto &entry : names.held)
        if (!entry.second.what.empty())
          files.push_back(entry.second);
      return files;
    };
  }
  closeCopy();
  return library;
}

/// After the dlclose of a copy opened by openPrivateCopy: its name is free
/// again unless the loader still holds the object.
void releaseCopyName(int number) {
  CopyNames &names = copyNames();
  std::lock_guard<std::mutex> lock(names.mutex);
  if (void *loaded = dlopen(copyName(number).c_str(), RTLD_NOW | RTLD_NOLOAD))
    dlclose(loaded);
  else
    names.held.erase(number);
}
/// A validated copy of one ampc_abi_tensor.
struct TensorDesc {
  std::string name;
  ampc_dtype dtype;
  std::vector<int64_t> shape;
  size_t byteSize;

  int32_t rank() const { return static_cast<int32_t>(shape.size()); }
  const int64_t *shapeData() const {
    return shape.empty() ? nullptr : shape.data();
  }
  /// "input 0 ('x')"
  std::string label(const char *kind, int32_t index) const {
    return format("%s %d ('%s')", kind, index, name.c_str());
  }
};

/// Data parallel (issue 41): a communicator of libampc_comm_mpi.so, the
/// plugin that keeps MPI out of the runtime (MpiComm.cpp).
struct Communicator {
  const ampc_abi_comm *comm = nullptr;
  uint64_t (*bytes)(const ampc_abi_comm *) = nullptr;
  void (*release)(const ampc_abi_comm *) = nullptr;
  /// `bytes` after the runtime's own exchange (checkSameLibrary): what the
  /// library's all-reduces send is counted from there.
  uint64_t bytesBefore = 0;

  Communicator() = default;
  Communicator(const Communicator &) = delete;
  Communicator &operator=(const Communicator &) = delete;
  ~Communicator() {
    if (comm)
      release(comm);
  }
};

struct Model {
  void *library = nullptr;
  /// The descriptor number of the name `library` was opened by.
  int copyNumber = -1;
  const ampc_model_abi *abi = nullptr;
  std::string path;
  std::string name, target, precision, mode;
  std::vector<TensorDesc> inputs, outputs, parameters;
  void *state = nullptr;
  bool initialized = false;

  /// The descriptor's appended functions, null where the library's
  /// struct_size does not cover them or it has none.
  int32_t (*readParameter)(void *, int32_t, void *) = nullptr;
  int32_t (*writeParameter)(void *, int32_t, const void *) = nullptr;
  int32_t (*gradients)(void *, const void *const *, void *const *) = nullptr;
  /// For each gradient, the index of its parameter (valid, distinct, float).
  std::vector<int32_t> gradientParameters;

  /// Training (ModelAbi.h): the step, its state and description; null/empty
  /// for a library without an optimizer.
  int32_t (*trainStep)(void *, const void *const *, void *) = nullptr;
  int32_t (*readState)(void *, int32_t, void *) = nullptr;
  int32_t (*writeState)(void *, int32_t, const void *) = nullptr;
  std::vector<TensorDesc> stateTensors;
  /// The model's buffers (BatchNorm statistics and counters): their
  /// descriptions and their indices among the state tensors.
  std::vector<TensorDesc> buffers;
  std::vector<int32_t> bufferStates;
  /// Partial batches: the library's state index of "ampc.batch_rows" (kept
  /// out of `stateTensors`, so out of checkpoints), or -1 with the reason
  /// the library gives in `partialRefusal`.
  int32_t batchRowsState = -1;
  std::string partialRefusal;
  std::string optimizer, hyperparameters, lossScaling;
  int32_t numLabels = 0;
  const unsigned char *onnxModel = nullptr;
  size_t onnxModelSize = 0;
  /// Waits for an asynchronous library's queued work; null when its calls
  /// finish before returning.
  int32_t (*synchronize)(void *) = nullptr;
  /// Device-resident tensors (a CUDA library): the step and inference on
  /// device pointers, and where a pointer is; null for a host library.
  int32_t (*trainStepDevice)(void *, const void *const *, void *) = nullptr;
  int32_t (*inferDevice)(void *, const void *const *, void *const *) = nullptr;
  int32_t (*memoryOf)(void *, const void *) = nullptr;
  int32_t (*waitStream)(void *, void *) = nullptr;
  /// Data parallel: the step's all-reduce requests (0: the library runs
  /// alone) and the ranks' communicator (null on one rank). Destroyed
  /// after the library's `release`.
  int32_t allReduceBuckets = 0;
  std::string allReduceLayout;
  std::unique_ptr<Communicator> communicator;

  /// Serializes calls that run the model; the library may assume one call
  /// per state at a time (ModelAbi.h). Guards the pointer arrays below.
  std::mutex runMutex;
  std::vector<const void *> inputData;
  std::vector<void *> outputData;
  /// The loss, then one pointer per gradient, for `gradients`.
  std::vector<void *> gradientData;

  Model() = default;
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  ~Model() {
    if (initialized && abi->release)
      abi->release(state);
    std::free(state);
    if (library) {
      dlclose(library);
      releaseCopyName(copyNumber);
    }
  }

  /// The library's message after a non-zero return code.
  std::string libraryError(int32_t code) const {
    const char *message = abi->last_error ? abi->last_error(state) : nullptr;
    if (message && *message)
      return message;
    return format("error code %d", code);
  }
};

/// Live handles. Allocated once and never destroyed, so nothing here runs
/// during static destruction, when a model library's own code may be gone.
struct Registry {
  std::mutex mutex;
  std::unordered_map<uintptr_t, std::shared_ptr<Model>> live;
  uintptr_t nextHandle = 1;
};

Registry &registry() {
  static Registry *instance = new Registry;
  return *instance;
}

uintptr_t handleValue(const ampc_model *model) {
  return reinterpret_cast<uintptr_t>(model);
}

/// The model behind a live handle, or null with this thread's error set.
std::shared_ptr<Model> lookup(const ampc_model *handle, const char *call) {
  if (!handle) {
    fail(AMPC_ERROR_INVALID_ARGUMENT, call, "model is NULL");
    return nullptr;
  }
  Registry &reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  auto it = reg.live.find(handleValue(handle));
  if (it == reg.live.end()) {
    fail(AMPC_ERROR_INVALID_ARGUMENT, call,
         "model handle is not live (released or never created)");
    return nullptr;
  }
  return it->second;
}

//===----------------------------------------------------------------------===//
// Loading
//===----------------------------------------------------------------------===//

constexpr const char *kLoad = "ampc_model_load";
constexpr size_t kStateAlignment = 64;

/// Bytes of the descriptor up to and including `field`; the runtime reads an
/// appended field only when the library's struct_size reaches this far.
#define AMPC_ABI_FIELD_END(field)                                              \
  (offsetof(ampc_model_abi, field) + sizeof(ampc_model_abi::field))

/// Bytes of the version-1 descriptor; a library's struct_size must cover it.
constexpr size_t kAbiVersion1Size = AMPC_ABI_FIELD_END(release);

/// Copies and checks one tensor list of the descriptor.
ampc_status readTensors(const Model &model, const char *kind, int32_t count,
                        const ampc_abi_tensor *tensors,
                        std::vector<TensorDesc> &out) {
  const char *path = model.path.c_str();
  if (count < 0)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor has %d %ss", path, count, kind));
  // Bounds before anything is allocated or read: a descriptor is not
  // trusted to be small.
  constexpr int32_t kMaxTensors = 1 << 20, kMaxRank = 16;
  if (count > kMaxTensors)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor has %d %ss, at most %d", path,
                       count, kind, kMaxTensors));
  if (count > 0 && !tensors)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor has %s but no %s list", path,
                       plural(count, kind).c_str(), kind));
  out.resize(static_cast<size_t>(count));
  for (int32_t i = 0; i < count; ++i) {
    const ampc_abi_tensor &tensor = tensors[i];
    TensorDesc &desc = out[static_cast<size_t>(i)];
    if (!tensor.name)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': %s %d has a NULL name", path, kind, i));
    desc.name = tensor.name;
    std::string label = desc.label(kind, i);
    if (tensor.rank < 0)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': %s has rank %d", path, label.c_str(),
                         tensor.rank));
    if (tensor.rank > kMaxRank)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': %s has rank %d, at most %d", path,
                         label.c_str(), tensor.rank, kMaxRank));
    if (tensor.rank > 0 && !tensor.shape)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': %s has rank %d but a NULL shape", path,
                         label.c_str(), tensor.rank));
    size_t elementSize = ampc_dtype_size(static_cast<ampc_dtype>(tensor.dtype));
    if (elementSize == 0)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': %s has %s", path, label.c_str(),
                         dtypeText(tensor.dtype).c_str()));
    desc.dtype = static_cast<ampc_dtype>(tensor.dtype);
    desc.shape.assign(tensor.shape, tensor.shape + tensor.rank);
    size_t bytes = elementSize;
    for (int32_t d = 0; d < tensor.rank; ++d) {
      int64_t dim = tensor.shape[d];
      if (dim < 0)
        return fail(AMPC_ERROR_CORRUPT, kLoad,
                    format("'%s': %s has dimension %d of size %lld", path,
                           label.c_str(), d, static_cast<long long>(dim)));
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(dim), &bytes))
        return fail(AMPC_ERROR_CORRUPT, kLoad,
                    format("'%s': %s of shape %s does not fit in memory", path,
                           label.c_str(),
                           shapeText(tensor.shape, tensor.rank).c_str()));
    }
    desc.byteSize = bytes;
  }
  return AMPC_OK;
}

bool isFloat(ampc_dtype dtype) {
  return dtype == AMPC_DTYPE_F32 || dtype == AMPC_DTYPE_F64 ||
         dtype == AMPC_DTYPE_F16 || dtype == AMPC_DTYPE_BF16;
}

/// Copies the parameter access and gradient functions a training library
/// appends to the descriptor, and checks the gradient list before anything
/// indexes parameters or output buffers with it.
ampc_status readGradientFunctions(Model &model) {
  const ampc_model_abi *abi = model.abi;
  const char *path = model.path.c_str();
  if (abi->struct_size >= AMPC_ABI_FIELD_END(read_parameter))
    model.readParameter = abi->read_parameter;
  if (abi->struct_size >= AMPC_ABI_FIELD_END(write_parameter))
    model.writeParameter = abi->write_parameter;
  if (abi->struct_size < AMPC_ABI_FIELD_END(gradients) || !abi->gradients)
    return AMPC_OK;

  const int32_t count = abi->num_gradients;
  const int32_t numParameters = static_cast<int32_t>(model.parameters.size());
  if (count < 0)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor has %d gradients", path, count));
  if (count > 0 && !abi->gradient_parameters)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor has %s but no "
                       "gradient_parameters list",
                       path, plural(count, "gradient").c_str()));
  if (model.outputs.empty())
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor has a gradients function but no "
                       "output 0 to give the loss's dtype and shape",
                       path));
  if (numParameters > 0 && (!model.readParameter || !model.writeParameter))
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor has a gradients function but no "
                       "%s function for its %s",
                       path,
                       model.readParameter ? "write_parameter"
                                           : "read_parameter",
                       plural(numParameters, "parameter").c_str()));
  std::vector<int32_t> gradientOf(static_cast<size_t>(numParameters), -1);
  for (int32_t g = 0; g < count; ++g) {
    int32_t p = abi->gradient_parameters[g];
    if (p < 0 || p >= numParameters)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': gradient %d belongs to parameter %d, the "
                         "descriptor has %s",
                         path, g, p,
                         plural(numParameters, "parameter").c_str()));
    const TensorDesc &parameter = model.parameters[static_cast<size_t>(p)];
    if (!isFloat(parameter.dtype))
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': gradient %d belongs to %s, which is %s, not "
                         "a floating-point type",
                         path, g, parameter.label("parameter", p).c_str(),
                         dtypeText(parameter.dtype).c_str()));
    int32_t &first = gradientOf[static_cast<size_t>(p)];
    if (first >= 0)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': gradients %d and %d both belong to %s", path,
                         first, g, parameter.label("parameter", p).c_str()));
    first = g;
  }
  model.gradientParameters.assign(abi->gradient_parameters,
                                  abi->gradient_parameters + count);
  model.gradients = abi->gradients;
  return AMPC_OK;
}

/// Copies the training fields a library with an optimizer appends, checking
/// that the state the runtime reads by name is there with its type.
ampc_status readTrainingFields(Model &model) {
  const ampc_model_abi *abi = model.abi;
  const char *path = model.path.c_str();
  if (abi->struct_size >= AMPC_ABI_FIELD_END(onnx_model_size) &&
      abi->onnx_model && abi->onnx_model_size) {
    model.onnxModel = abi->onnx_model;
    model.onnxModelSize = abi->onnx_model_size;
  }
  if (abi->struct_size >= AMPC_ABI_FIELD_END(synchronize))
    model.synchronize = abi->synchronize;
  if (abi->struct_size < AMPC_ABI_FIELD_END(num_labels) || !abi->train_step) {
    if (model.mode == "train" && !model.gradients)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': mode 'train' but neither a train_step nor a "
                         "gradients function",
                         path));
    return AMPC_OK;
  }
  if (model.mode != "train")
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': a train_step function in mode '%s'", path,
                       model.mode.c_str()));
  if (!abi->read_state || !abi->write_state || !abi->optimizer ||
      !abi->hyperparameters || !abi->loss_scaling)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': a train_step function without read_state, "
                       "write_state or its description",
                       path));
  if (model.outputs.empty())
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': a train_step function but no output 0 to give "
                       "the loss's dtype and shape",
                       path));
  if (abi->num_labels < 0 ||
      abi->num_labels > static_cast<int32_t>(model.inputs.size()))
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': %d labels among %zu inputs", path,
                       abi->num_labels, model.inputs.size()));
  if (ampc_status status =
          readTensors(model, "state tensor", abi->num_state_tensors,
                      abi->state_tensors, model.stateTensors))
    return status;
  // The partial batch's row count is the last state tensor, not
  // checkpointed.
  model.partialRefusal = "the library was compiled before partial batches";
  if (abi->struct_size >= AMPC_ABI_FIELD_END(partial_batch_refusal)) {
    const char *refusal = abi->partial_batch_refusal;
    if (!refusal) {
      model.partialRefusal = "the library does not say it trains them";
    } else if (*refusal) {
      model.partialRefusal = refusal;
    } else {
      if (model.stateTensors.empty() ||
          model.stateTensors.back().name != "ampc.batch_rows" ||
          model.stateTensors.back().dtype != AMPC_DTYPE_I64 ||
          model.stateTensors.back().rank() != 0)
        return fail(AMPC_ERROR_CORRUPT, kLoad,
                    format("'%s': partial batches train but the last state "
                           "tensor is not the i64 scalar 'ampc.batch_rows'",
                           path));
      model.batchRowsState =
          static_cast<int32_t>(model.stateTensors.size()) - 1;
      model.stateTensors.pop_back();
      model.partialRefusal.clear();
    }
  }
  if (abi->struct_size >= AMPC_ABI_FIELD_END(buffer_states) &&
      abi->num_buffers != 0) {
    const int32_t count = static_cast<int32_t>(model.stateTensors.size());
    if (abi->num_buffers < 0 || abi->num_buffers > count ||
        !abi->buffer_states)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': %d buffers among %d state tensors%s", path,
                         abi->num_buffers, count,
                         abi->buffer_states ? "" : " and no index list"));
    std::vector<bool> seen(model.stateTensors.size());
    for (int32_t b = 0; b < abi->num_buffers; ++b) {
      int32_t i = abi->buffer_states[b];
      if (i < static_cast<int32_t>(model.parameters.size()) || i >= count ||
          seen[static_cast<size_t>(i)])
        return fail(AMPC_ERROR_CORRUPT, kLoad,
                    format("'%s': buffer %d is state tensor %d, which is a "
                           "parameter, out of range or another buffer",
                           path, b, i));
      seen[static_cast<size_t>(i)] = true;
      model.bufferStates.push_back(i);
      model.buffers.push_back(model.stateTensors[static_cast<size_t>(i)]);
    }
  }
  model.trainStep = abi->train_step;
  model.readState = abi->read_state;
  model.writeState = abi->write_state;
  model.optimizer = abi->optimizer;
  model.hyperparameters = abi->hyperparameters;
  model.lossScaling = abi->loss_scaling;
  model.numLabels = abi->num_labels;
  // The scalars the runtime reads by name; the loss scaler's are optional.
  const struct {
    const char *name;
    ampc_dtype dtype;
  } scalars[] = {{"ampc.lr", AMPC_DTYPE_F32},
                 {"ampc.step", AMPC_DTYPE_I64},
                 {"ampc.loss_scale", AMPC_DTYPE_F32},
                 {"ampc.growth_tracker", AMPC_DTYPE_I32},
                 {"ampc.skipped_steps", AMPC_DTYPE_I64}};
  for (const auto &scalar : scalars) {
    int32_t found = -1;
    for (size_t i = 0; i < model.stateTensors.size(); ++i)
      if (model.stateTensors[i].name == scalar.name)
        found = static_cast<int32_t>(i);
    if (found < 0 && ampc::runtime::isOptionalStateTensor(scalar.name))
      continue;
    if (found < 0 || model.stateTensors[found].dtype != scalar.dtype ||
        model.stateTensors[found].rank() != 0)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': the training state needs a scalar %s '%s'",
                         path, dtypeText(scalar.dtype).c_str(), scalar.name));
  }
  return AMPC_OK;
}

/// Checks the descriptor and copies what the runtime keeps of it.
ampc_status readDescriptor(Model &model) {
  const ampc_model_abi *abi = model.abi;
  const char *path = model.path.c_str();
  if (!abi)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': %s returned NULL", path,
                       AMPC_MODEL_ENTRY_SYMBOL));
  if (abi->struct_size <
      offsetof(ampc_model_abi, abi_version) + sizeof(abi->abi_version))
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor's struct_size is %zu", path,
                       abi->struct_size));
  if (abi->abi_version != AMPC_ABI_VERSION)
    return fail(AMPC_ERROR_ABI_MISMATCH, kLoad,
                format("'%s' was compiled for ABI version %u, this runtime "
                       "supports version %u",
                       path, abi->abi_version, AMPC_ABI_VERSION));
  if (abi->struct_size < kAbiVersion1Size)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor's struct_size is %zu, ABI "
                       "version %u needs at least %zu",
                       path, abi->struct_size, AMPC_ABI_VERSION,
                       kAbiVersion1Size));

  const struct {
    const char *field;
    const char *value;
    std::string &copy;
  } strings[] = {{"name", abi->name, model.name},
                 {"target", abi->target, model.target},
                 {"precision", abi->precision, model.precision},
                 {"mode", abi->mode, model.mode}};
  for (const auto &string : strings) {
    if (!string.value)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': the descriptor's %s is NULL", path,
                         string.field));
    string.copy = string.value;
  }

  if (model.mode != "infer" && model.mode != "train")
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor's mode is '%s', expected 'infer' "
                       "or 'train'",
                       path, model.mode.c_str()));
  if (!abi->infer)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor's infer function is NULL",
                       path));

  if (ampc_status status = readTensors(model, "input", abi->num_inputs,
                                       abi->inputs, model.inputs))
    return status;
  if (ampc_status status = readTensors(model, "output", abi->num_outputs,
                                       abi->outputs, model.outputs))
    return status;
  if (ampc_status status =
          readTensors(model, "parameter", abi->num_parameters,
                      abi->parameters, model.parameters))
    return status;
  if (ampc_status status = readGradientFunctions(model))
    return status;
  if (abi->struct_size >= AMPC_ABI_FIELD_END(wait_stream) && abi->memory_of) {
    model.memoryOf = abi->memory_of;
    model.inferDevice = abi->infer_device;
    model.trainStepDevice = abi->train_step_device;
    model.waitStream = abi->wait_stream;
  }
  if ((model.inferDevice || model.trainStepDevice) &&
      (!model.memoryOf || !model.waitStream))
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': device entry points without memory_of or "
                       "wait_stream",
                       path));
  if (abi->struct_size >= AMPC_ABI_FIELD_END(num_all_reduce_buckets)) {
    if (abi->num_all_reduce_buckets < 0)
      return fail(AMPC_ERROR_CORRUPT, kLoad,
                  format("'%s': num_all_reduce_buckets is %d", path,
                         abi->num_all_reduce_buckets));
    model.allReduceBuckets = abi->num_all_reduce_buckets;
  }
  if (abi->struct_size >= AMPC_ABI_FIELD_END(all_reduce_layout) &&
      abi->all_reduce_layout)
    model.allReduceLayout = abi->all_reduce_layout;
  return readTrainingFields(model);
}

/// The application's communicator in `options`; null when it gave none or
/// its options predate the field (the struct's size before it).
const ampc_comm *applicationComm(const ampc_model_options *options) {
  if (!options || options->struct_size < offsetof(ampc_model_options, comm) +
                                             sizeof(options->comm))
    return nullptr;
  return options->comm;
}

/// Misuse of an application's communicator, one line each: checked at load
/// whatever the library, so a mistake shows before the job's first step.
ampc_status checkApplicationComm(const ampc_comm &comm) {
  if (comm.struct_size != sizeof(ampc_comm))
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                format("options->comm->struct_size is %zu, this runtime "
                       "knows %zu (set it to sizeof(ampc_comm))",
                       comm.struct_size, sizeof(ampc_comm)));
  if (comm.size < 1 || comm.rank < 0 || comm.rank >= comm.size)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                format("options->comm has rank %d of size %d, expected "
                       "0 <= rank < size",
                       comm.rank, comm.size));
  const char *missing = !comm.start  ? "start"
                        : !comm.wait ? "wait"
                        : !comm.last_error ? "last_error"
                                           : nullptr;
  if (missing)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                format("options->comm->%s is NULL", missing));
  return AMPC_OK;
}

ampc_status checkOptions(const ampc_model_options *options) {
  if (!options)
    return AMPC_OK;
  // The size of this header's options, or of the header before `comm`.
  if (options->struct_size != sizeof(ampc_model_options) &&
      options->struct_size != offsetof(ampc_model_options, comm))
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                format("options->struct_size is %zu, this runtime knows %zu "
                       "(fill options with ampc_model_options_init)",
                       options->struct_size, sizeof(ampc_model_options)));
  if (options->num_threads < 0)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                format("options->num_threads is %d, expected 0 (the "
                       "library decides) or more",
                       options->num_threads));
  if (const ampc_comm *comm = applicationComm(options))
    return checkApplicationComm(*comm);
  return AMPC_OK;
}

/// This process's rank and the number of ranks the job's launcher
/// announces: mpirun's OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE (MPICH,
/// Slurm), torchrun's RANK/WORLD_SIZE, the first pair whose size is set;
/// rank 0 of 1 outside a job or when unreadable (the rank -1 when only the
/// size is readable).
struct LauncherRanks {
  int rank = 0, size = 1;
};
LauncherRanks launcherRanks() {
  auto read = [](const char *name, long low, long high) -> long {
    const char *value = std::getenv(name);
    if (!value)
      return -1;
    char *end = nullptr;
    long number = std::strtol(value, &end, 10);
    return end != value && *end == '\0' && number >= low && number <= high
               ? number
               : -1;
  };
  for (auto [rank, size] :
       {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
        std::pair{"PMI_RANK", "PMI_SIZE"}, std::pair{"RANK", "WORLD_SIZE"}}) {
    long n = read(size, 1, 1 << 20);
    if (n < 1)
      continue;
    long r = read(rank, 0, n - 1);
    return {static_cast<int>(r), static_cast<int>(n)};
  }
  return {};
}

/// The number of ranks the job's launcher announces; 1 outside a job.
int launcherWorldSize() { return launcherRanks().size; }

/// Data parallel: refuses, on every rank, ranks whose libraries differ in
/// what decides the buffers' layouts (the descriptor's model, target,
/// precision, training fields, tensors and all-reduce layout). Each rank's
/// 64-bit hash of them travels as two 32-bit pieces at its own slots of an
/// F64 sum over the communicator (exact: every other slot is 0), so any
/// ampc_abi_comm can carry it.
ampc_status checkSameLibrary(Model &model) {
  const ampc_abi_comm &comm = *model.communicator->comm;
  uint64_t hash = 0xcbf29ce484222325ull;
  auto mix = [&](const std::string &text) {
    for (unsigned char c : text + '\0')
      hash = (hash ^ c) * 0x100000001b3ull;
  };
  for (const std::string *text :
       {&model.name, &model.target, &model.precision, &model.mode,
        &model.optimizer, &model.hyperparameters, &model.lossScaling,
        &model.allReduceLayout})
    mix(*text);
  mix(std::to_string(model.allReduceBuckets) + " " +
      std::to_string(model.numLabels));
  for (const auto *list : {&model.inputs, &model.outputs, &model.parameters,
                           &model.stateTensors})
    for (const TensorDesc &t : *list) {
      std::string text = t.name + ":" + std::to_string(t.dtype);
      for (int64_t d : t.shape)
        text += "," + std::to_string(d);
      mix(text);
    }
  std::vector<double> hashes(2 * static_cast<size_t>(comm.size), 0.0);
  hashes[2 * comm.rank] = static_cast<double>(hash >> 32);
  hashes[2 * comm.rank + 1] = static_cast<double>(hash & 0xffffffffu);
  if (comm.start(comm.handle, 0, hashes.data(), hashes.size(),
                 AMPC_DTYPE_F64) != 0 ||
      comm.wait(comm.handle, 0) != 0)
    return fail(AMPC_ERROR_EXECUTION, kLoad,
                format("'%s': comparing the ranks' libraries: %s",
                       model.path.c_str(), comm.last_error(comm.handle)));
  std::string differ;
  int count = 0;
  for (int r = 1; r < comm.size; ++r)
    if (hashes[2 * r] != hashes[0] || hashes[2 * r + 1] != hashes[1]) {
      differ += (count ? ", " : "") + std::to_string(r);
      ++count;
    }
  model.communicator->bytesBefore = model.communicator->bytes(&comm);
  if (count)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                format("'%s': rank%s %s loaded a library that differs from "
                       "rank 0's (model, target, precision, optimizer, "
                       "tensors' shapes and dtypes or all-reduce buckets): "
                       "every rank of a data-parallel job must load the same "
                       "library",
                       model.path.c_str(), count > 1 ? "s" : "",
                       differ.c_str()));
  return AMPC_OK;
}

/// The communicator plugin beside the runtime for `model`'s library: NCCL
/// for the CUDA target (issue 41), on the CUDA execution's NCCL for a
/// library that runs on it (--target=cuda-sim: it links libampc_cudasim),
/// MPI for the CPU target.
const char *commPlugin(const Model &model) {
  if (std::strcmp(model.abi->target, "cuda") != 0)
    return "/libampc_comm_mpi.so";
  return dlsym(model.library, "ampc_cudasim_counters_reset")
             ? "/libampc_comm_nccl_sim.so"
             : "/libampc_comm_nccl.so";
}

/// Data parallel: a library with all-reduces, loaded in a job of several
/// ranks, gets a communicator over them from the plugin commPlugin names
/// (beside this runtime), or AMPC_COMM_LIBRARY. Alone it gets none and
/// trains as one process.
ampc_status openCommunicator(Model &model) {
  if (model.allReduceBuckets == 0 || launcherWorldSize() == 1)
    return AMPC_OK;
  std::string plugin;
  if (const char *path = std::getenv("AMPC_COMM_LIBRARY")) {
    plugin = path;
  } else {
    Dl_info self;
    if (!dladdr(reinterpret_cast<void *>(&launcherWorldSize), &self) ||
        !self.dli_fname)
      return fail(AMPC_ERROR_UNSUPPORTED, kLoad,
                  "cannot find the runtime's own directory for "
                  "libampc_comm_mpi.so (set AMPC_COMM_LIBRARY)");
    plugin = self.dli_fname;
    size_t slash = plugin.rfind('/');
    plugin = (slash == std::string::npos ? std::string(".")
                                         : plugin.substr(0, slash)) +
             commPlugin(model);
  }
  // Never unloaded: MPI's finalization at exit is in it.
  void *library = dlopen(plugin.c_str(), RTLD_NOW | RTLD_NODELETE);
  if (!library)
    return fail(AMPC_ERROR_UNSUPPORTED, kLoad,
                format("'%s' is data-parallel and runs in a job of %d ranks, "
                       "but its communicator cannot be loaded: %s (%s)",
                       model.path.c_str(), launcherWorldSize(), dlerror(),
                       std::getenv("AMPC_COMM_LIBRARY")
                           ? "AMPC_COMM_LIBRARY names it"
                           : "build ampc with MPI: libopenmpi-dev (the CUDA "
                             "target's also needs NCCL), or set "
                             "AMPC_COMM_LIBRARY"));
  using Create = const ampc_abi_comm *(*)(char *, size_t);
  // The plugin's functions: NCCL's (ampc_comm_nccl_*) or MPI's.
  std::string prefix = dlsym(library, "ampc_comm_nccl_create")
                           ? "ampc_comm_nccl_"
                           : "ampc_comm_mpi_";
  auto create =
      reinterpret_cast<Create>(dlsym(library, (prefix + "create").c_str()));
  auto communicator = std::make_unique<Communicator>();
  communicator->bytes = reinterpret_cast<uint64_t (*)(const ampc_abi_comm *)>(
      dlsym(library, (prefix + "bytes").c_str()));
  communicator->release = reinterpret_cast<void (*)(const ampc_abi_comm *)>(
      dlsym(library, (prefix + "release").c_str()));
  // The MPI communicator's wait has a deadline (AMPC_COMM_TIMEOUT); the
  // NCCL one has none yet (docs/distributed.md).
  auto setTimeout = reinterpret_cast<void (*)(const ampc_abi_comm *, double)>(
      dlsym(library, (prefix + "set_timeout").c_str()));
  const bool needsTimeout = prefix == "ampc_comm_mpi_";
  if (!create || !communicator->bytes || !communicator->release ||
      (needsTimeout && !setTimeout))
    return fail(AMPC_ERROR_UNSUPPORTED, kLoad,
                format("'%s' is not an ampc communicator (no %s%s)",
                       plugin.c_str(), prefix.c_str(),
                       !create                 ? "create"
                       : !communicator->bytes  ? "bytes"
                       : !communicator->release ? "release"
                                                : "set_timeout"));
  double timeout = 600;
  if (const char *text = std::getenv("AMPC_COMM_TIMEOUT")) {
    char *end = nullptr;
    timeout = std::strtod(text, &end);
    if (end == text || *end != '\0' || !(timeout >= 0 && timeout <= 1e9))
      return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                  format("AMPC_COMM_TIMEOUT is '%s': expected seconds, a "
                         "number from 0 (wait forever) to 1e9",
                         text));
  }
  char error[512] = "";
  communicator->comm = create(error, sizeof(error));
  if (!communicator->comm)
    return fail(AMPC_ERROR_EXECUTION, kLoad,
                format("'%s': the communicator failed: %s",
                       model.path.c_str(), error));
  if (setTimeout)
    setTimeout(communicator->comm, timeout);
  model.communicator = std::move(communicator);
  // torchrun's RANK/WORLD_SIZE without mpirun: MPI starts a job of one.
  const ampc_abi_comm &comm = *model.communicator->comm;
  LauncherRanks launcher = launcherRanks();
  if (comm.size != launcher.size ||
      (launcher.rank >= 0 && comm.rank != launcher.rank))
    return fail(AMPC_ERROR_UNSUPPORTED, kLoad,
                format("'%s': the launcher announces rank %d of %d, but the "
                       "MPI communicator has rank %d of %d (the MPI "
                       "communicator needs mpirun; torchrun's RANK and "
                       "WORLD_SIZE alone do not make an MPI job)",
                       model.path.c_str(), launcher.rank, launcher.size,
                       comm.rank, comm.size));
  return checkSameLibrary(model);
}

/// Data parallel: the application's communicator (ampc_model_options.comm)
/// as the library's, through functions that count the bytes `start`
/// accepts and give a message for a NULL one.
struct ApplicationComm {
  ampc_comm given;
  ampc_abi_comm abi;
  uint64_t bytes = 0;
  std::string error;

  static int32_t start(void *handle, int32_t request, void *buffer,
                       uint64_t count, int32_t dtype) {
    auto &c = *static_cast<ApplicationComm *>(handle);
    int32_t code = c.given.start(c.given.handle, request, buffer, count,
                                 static_cast<ampc_dtype>(dtype));
    if (code == 0)
      c.bytes += count * ampc_dtype_size(static_cast<ampc_dtype>(dtype));
    return code;
  }
  static int32_t wait(void *handle, int32_t request) {
    auto &c = *static_cast<ApplicationComm *>(handle);
    return c.given.wait(c.given.handle, request);
  }
  static const char *lastError(void *handle) {
    auto &c = *static_cast<ApplicationComm *>(handle);
    const char *message = c.given.last_error(c.given.handle);
    c.error = format("rank %d: %s", c.given.rank,
                     message && *message ? message
                                         : "the application's communicator "
                                           "failed (no message)");
    return c.error.c_str();
  }
  static uint64_t countedBytes(const ampc_abi_comm *comm) {
    return static_cast<const ApplicationComm *>(comm->handle)->bytes;
  }
  static void release(const ampc_abi_comm *comm) {
    delete static_cast<ApplicationComm *>(comm->handle);
  }
};

/// A data-parallel library gets the application's communicator (checked
/// by checkOptions) instead of the runtime's own, even in mpirun's job.
void adoptApplicationComm(Model &model, const ampc_comm &given) {
  if (model.allReduceBuckets == 0)
    return;
  auto *c = new ApplicationComm();
  c->given = given;
  c->abi.struct_size = sizeof(ampc_abi_comm);
  c->abi.rank = given.rank;
  c->abi.size = given.size;
  c->abi.handle = c;
  c->abi.start = &ApplicationComm::start;
  c->abi.wait = &ApplicationComm::wait;
  c->abi.last_error = &ApplicationComm::lastError;
  auto communicator = std::make_unique<Communicator>();
  communicator->comm = &c->abi;
  communicator->bytes = &ApplicationComm::countedBytes;
  communicator->release = &ApplicationComm::release;
  model.communicator = std::move(communicator);
}

/// Allocates the zeroed, aligned state block and runs the library's init.
ampc_status createState(Model &model, const ampc_model_options *options) {
  size_t size = model.abi->state_size ? model.abi->state_size : 1;
  if (size > SIZE_MAX - (kStateAlignment - 1))
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor's state_size %zu is too large",
                       model.path.c_str(), model.abi->state_size));
  size = (size + kStateAlignment - 1) / kStateAlignment * kStateAlignment;
  model.state = std::aligned_alloc(kStateAlignment, size);
  if (!model.state)
    return fail(AMPC_ERROR_EXECUTION, kLoad,
                format("'%s': cannot allocate %zu bytes of model state",
                       model.path.c_str(), size));
  std::memset(model.state, 0, size);

  if (!model.abi->init) {
    model.initialized = true;
    return AMPC_OK;
  }
  if (const ampc_comm *given = applicationComm(options))
    adoptApplicationComm(model, *given);
  else if (ampc_status status = openCommunicator(model))
    return status;
  ampc_abi_config config;
  std::memset(&config, 0, sizeof(config));
  config.struct_size = sizeof(config);
  config.num_threads = options ? options->num_threads : 0;
  config.cuda_stream = options ? options->cuda_stream : nullptr;
  config.comm = model.communicator ? model.communicator->comm : nullptr;
  int32_t code = model.abi->init(model.state, &config);
  if (code != 0)
    return fail(AMPC_ERROR_EXECUTION, kLoad,
                format("'%s': model initialization failed: %s",
                       model.path.c_str(), model.libraryError(code).c_str()));
  model.initialized = true;
  return AMPC_OK;
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

constexpr const char *kInfer = "ampc_model_infer";
constexpr const char *kGetParameter = "ampc_model_get_parameter";
constexpr const char *kSetParameter = "ampc_model_set_parameter";
constexpr const char *kNumGradients = "ampc_model_num_gradients";
constexpr const char *kGradientInfo = "ampc_model_gradient_info";
constexpr const char *kGradients = "ampc_model_gradients";
constexpr const char *kGetBuffer = "ampc_model_get_buffer";
constexpr const char *kSetBuffer = "ampc_model_set_buffer";

/// What a caller's tensor stands for in a call; decides the description it
/// must match and how messages name it.
enum class Role { Input, Output, Parameter, Loss, Gradient, Buffer };

/// The model's description of tensor `index` in `role`. The loss has the
/// dtype and shape of output 0; gradient g those of its parameter.
const TensorDesc &descriptionOf(const Model &model, Role role, int32_t index) {
  auto at = [](const std::vector<TensorDesc> &list, int32_t i) -> auto & {
    return list[static_cast<size_t>(i)];
  };
  switch (role) {
  case Role::Input:
    return at(model.inputs, index);
  case Role::Output:
    return at(model.outputs, index);
  case Role::Parameter:
    return at(model.parameters, index);
  case Role::Loss:
    return at(model.outputs, 0);
  case Role::Gradient:
    return at(model.parameters,
              model.gradientParameters[static_cast<size_t>(index)]);
  case Role::Buffer:
    return at(model.buffers, index);
  }
  assert(false && "unknown role");
  return at(model.inputs, index);
}

/// "input 0 ('x')", "loss (output 0 'loss')", "gradient 0 (of parameter 1
/// 'w')".
std::string labelOf(const Model &model, Role role, int32_t index) {
  const TensorDesc &desc = descriptionOf(model, role, index);
  switch (role) {
  case Role::Input:
    return desc.label("input", index);
  case Role::Output:
    return desc.label("output", index);
  case Role::Parameter:
    return desc.label("parameter", index);
  case Role::Loss:
    return format("loss (output 0 '%s')", desc.name.c_str());
  case Role::Gradient:
    return format("gradient %d (of parameter %d '%s')", index,
                  model.gradientParameters[static_cast<size_t>(index)],
                  desc.name.c_str());
  case Role::Buffer:
    return desc.label("buffer", index);
  }
  return desc.name;
}

/// Where a call takes its tensors: host memory (the plain calls) or the
/// model's device (the `_device` calls).
enum class Memory { Host, Device };

/// Checks that a caller tensor is in the memory the call takes, as the
/// library's device API sees it. A host library cannot tell, and takes
/// host memory only.
ampc_status checkMemory(const char *call, const Model &model, Role role,
                        int32_t index, const ampc_tensor &tensor,
                        Memory memory) {
  if (!model.memoryOf || !tensor.data)
    return AMPC_OK;
  int32_t where = model.memoryOf(model.state, tensor.data);
  if (where == AMPC_ABI_MEMORY_MANAGED)
    return AMPC_OK;
  const char *what = nullptr;
  if (memory == Memory::Host && where != AMPC_ABI_MEMORY_HOST)
    what = "is device memory; this call takes host memory (the _device "
           "calls take device memory)";
  else if (memory == Memory::Device && where == AMPC_ABI_MEMORY_HOST)
    what = "is host memory; this call takes memory of the model's device "
           "(the calls without _device take host memory)";
  else if (memory == Memory::Device && where != AMPC_ABI_MEMORY_DEVICE)
    what = "is memory of another device than the model's";
  if (!what)
    return AMPC_OK;
  return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
              format("%s %s", labelOf(model, role, index).c_str(), what));
}

/// Checks one caller tensor against the model's description, then its
/// memory.
ampc_status checkTensor(const char *call, const Model &model, Role role,
                        int32_t index, const ampc_tensor &tensor,
                        Memory memory = Memory::Host) {
  const TensorDesc &desc = descriptionOf(model, role, index);
  std::string label = labelOf(model, role, index);
  if (tensor.dtype != desc.dtype)
    return fail(AMPC_ERROR_DTYPE_MISMATCH, call,
                format("%s has dtype %s, the model expects %s", label.c_str(),
                       dtypeText(tensor.dtype).c_str(),
                       dtypeText(desc.dtype).c_str()));
  if (tensor.rank != desc.rank())
    return fail(AMPC_ERROR_SHAPE_MISMATCH, call,
                format("%s has rank %d, the model expects rank %d (shape %s)",
                       label.c_str(), tensor.rank, desc.rank(),
                       shapeText(desc.shapeData(), desc.rank()).c_str()));
  if (tensor.rank > 0 && !tensor.shape)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                format("%s has rank %d but a NULL shape", label.c_str(),
                       tensor.rank));
  for (int32_t d = 0; d < tensor.rank; ++d)
    if (tensor.shape[d] != desc.shape[static_cast<size_t>(d)])
      return fail(AMPC_ERROR_SHAPE_MISMATCH, call,
                  format("%s has shape %s, the model expects %s",
                         label.c_str(),
                         shapeText(tensor.shape, tensor.rank).c_str(),
                         shapeText(desc.shapeData(), desc.rank()).c_str()));
  if (!tensor.data && desc.byteSize > 0)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                format("%s has NULL data", label.c_str()));
  if (tensor.size_bytes < desc.byteSize)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                format("%s has size_bytes %zu, %s %s needs %zu",
                       label.c_str(), tensor.size_bytes,
                       dtypeText(desc.dtype).c_str(),
                       shapeText(desc.shapeData(), desc.rank()).c_str(),
                       desc.byteSize));
  return checkMemory(call, model, role, index, tensor, memory);
}

/// Checks `count` tensors of one role.
ampc_status checkTensors(const char *call, const Model &model, Role role,
                         const ampc_tensor *tensors, int32_t count,
                         Memory memory = Memory::Host) {
  for (int32_t i = 0; i < count; ++i)
    if (ampc_status status =
            checkTensor(call, model, role, i, tensors[i], memory))
      return status;
  return AMPC_OK;
}

/// A checked caller tensor as the overlap check sees it.
struct Buffer {
  Role role;
  int32_t index;
  const void *data;
  size_t bytes;
};

void addBuffers(const Model &model, Role role, const ampc_tensor *tensors,
                int32_t count, std::vector<Buffer> &out) {
  for (int32_t i = 0; i < count; ++i)
    out.push_back({role, i, tensors[i].data,
                   descriptionOf(model, role, i).byteSize});
}

bool overlaps(const Buffer &a, const Buffer &b) {
  if (a.bytes == 0 || b.bytes == 0)
    return false;
  uintptr_t aBegin = reinterpret_cast<uintptr_t>(a.data);
  uintptr_t bBegin = reinterpret_cast<uintptr_t>(b.data);
  return aBegin < bBegin + b.bytes && bBegin < aBegin + a.bytes;
}

/// Results are written while inputs are still read, so no buffer in
/// `writes` may share bytes with one in `reads` or another in `writes`.
ampc_status checkOverlaps(const char *call, const Model &model,
                          const std::vector<Buffer> &reads,
                          const std::vector<Buffer> &writes) {
  auto overlapError = [&](const Buffer &written, const Buffer &other) {
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                format("%s overlaps %s in memory",
                       labelOf(model, written.role, written.index).c_str(),
                       labelOf(model, other.role, other.index).c_str()));
  };
  for (size_t w = 0; w < writes.size(); ++w) {
    for (const Buffer &read : reads)
      if (overlaps(writes[w], read))
        return overlapError(writes[w], read);
    for (size_t earlier = 0; earlier < w; ++earlier)
      if (overlaps(writes[w], writes[earlier]))
        return overlapError(writes[w], writes[earlier]);
  }
  return AMPC_OK;
}

/// Checks `index` against the model's parameters.
ampc_status checkParameterIndex(const char *call, const Model &model,
                                int32_t index) {
  int32_t count = static_cast<int32_t>(model.parameters.size());
  if (index < 0 || index >= count)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                format("parameter index %d is out of range, the model has %s",
                       index, plural(count, "parameter").c_str()));
  return AMPC_OK;
}

/// The error for a call a library compiled without --mode=train lacks.
ampc_status notATrainingLibrary(const char *call, const Model &model,
                                const char *what) {
  // A training library with an optimizer has train_step instead of the
  // gradients entry: say which library this is.
  if (model.trainStep)
    return fail(AMPC_ERROR_UNSUPPORTED, call,
                format("model '%s' has no %s: its library was compiled with "
                       "an optimizer (%s), which runs whole training steps; "
                       "compile it with --optimizer=none for gradients",
                       model.name.c_str(), what, model.optimizer.c_str()));
  return fail(AMPC_ERROR_UNSUPPORTED, call,
              format("model '%s' has no %s: its library was compiled for "
                     "inference; compile it with --mode=train",
                     model.name.c_str(), what));
}

ampc_status tensorInfo(const ampc_model *handle, int32_t index,
                       ampc_tensor_info *out, const char *call,
                       const char *kind,
                       std::vector<TensorDesc> Model::*tensors) {
  std::shared_ptr<Model> model = lookup(handle, call);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!out)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call, "out is NULL");
  const std::vector<TensorDesc> &list = (*model).*tensors;
  if (index < 0 || static_cast<size_t>(index) >= list.size())
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                format("%s index %d is out of range, the model has %s", kind,
                       index,
                       plural(static_cast<int64_t>(list.size()), kind).c_str()));
  const TensorDesc &desc = list[static_cast<size_t>(index)];
  out->name = desc.name.c_str();
  out->dtype = desc.dtype;
  out->rank = desc.rank();
  out->shape = desc.shapeData();
  return AMPC_OK;
}

} // namespace

//===----------------------------------------------------------------------===//
// The C API
//===----------------------------------------------------------------------===//

extern "C" {

const char *ampc_status_string(ampc_status status) {
  switch (status) {
  case AMPC_OK:
    return "ok";
  case AMPC_ERROR_INVALID_ARGUMENT:
    return "invalid argument";
  case AMPC_ERROR_NOT_FOUND:
    return "not found";
  case AMPC_ERROR_ABI_MISMATCH:
    return "ABI mismatch";
  case AMPC_ERROR_SHAPE_MISMATCH:
    return "shape mismatch";
  case AMPC_ERROR_DTYPE_MISMATCH:
    return "dtype mismatch";
  case AMPC_ERROR_UNSUPPORTED:
    return "unsupported";
  case AMPC_ERROR_EXECUTION:
    return "execution failed";
  case AMPC_ERROR_IO:
    return "I/O error";
  case AMPC_ERROR_CORRUPT:
    return "corrupt";
  }
  return "unknown status";
}

const char *ampc_last_error(void) { return lastError.c_str(); }

uint32_t ampc_runtime_abi_version(void) { return AMPC_ABI_VERSION; }

void ampc_model_options_init(ampc_model_options *options) {
  if (!options)
    return;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->num_threads = 0;
  options->cuda_stream = nullptr;
  options->comm = nullptr;
}

ampc_status ampc_model_load(const char *path,
                            const ampc_model_options *options,
                            ampc_model **out_model) {
  return ampc_model_load_entry(path, nullptr, options, out_model);
}

ampc_status ampc_model_load_entry(const char *path, const char *entrySymbol,
                                  const ampc_model_options *options,
                                  ampc_model **out_model) {
  if (!out_model)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad, "out_model is NULL");
  *out_model = nullptr;
  if (!path)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad, "path is NULL");
  if (!*path)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad, "path is empty");
  if (ampc_status status = checkOptions(options))
    return status;

  auto model = std::make_shared<Model>();
  model->path = path;
  // A model is a file the application names: a bare name means the current
  // folder (not the loader's search path), and each load reads the file as
  // it is now (openPrivateCopy).
  std::string error;
  model->library = openPrivateCopy(model->path, model->copyNumber, error);
  if (!model->library)
    return fail(AMPC_ERROR_NOT_FOUND, kLoad,
                format("cannot open '%s': %s", path, error.c_str()));
  dlerror();
  const char *entryName = entrySymbol ? entrySymbol : AMPC_MODEL_ENTRY_SYMBOL;
  void *entry = dlsym(model->library, entryName);
  if (!entry) {
    const char *why = dlerror();
    std::string missing = format("no %s symbol", entryName);
    return fail(AMPC_ERROR_NOT_FOUND, kLoad,
                format("'%s' is not an ampc model library: %s", path,
                       why ? why : missing.c_str()));
  }
  using EntryFn = const ampc_model_abi *(*)(void);
  model->abi = reinterpret_cast<EntryFn>(entry)();
  if (ampc_status status = readDescriptor(*model))
    return status;
  if (ampc_status status = createState(*model, options))
    return status;
  model->inputData.resize(model->inputs.size());
  model->outputData.resize(model->outputs.size());
  model->gradientData.resize(1 + model->gradientParameters.size());

  Registry &reg = registry();
  std::lock_guard<std::mutex> lock(reg.mutex);
  uintptr_t handle = reg.nextHandle++;
  reg.live.emplace(handle, std::move(model));
  *out_model = reinterpret_cast<ampc_model *>(handle);
  return AMPC_OK;
}

void ampc_model_release(ampc_model *handle) {
  if (!handle)
    return;
  std::shared_ptr<Model> model;
  {
    Registry &reg = registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.live.find(handleValue(handle));
    if (it == reg.live.end()) {
      fail(AMPC_ERROR_INVALID_ARGUMENT, "ampc_model_release",
           "model handle is not live (released or never created)");
      return;
    }
    model = std::move(it->second);
    reg.live.erase(it);
  }
  // The library's release and dlclose run here, outside the registry lock,
  // or later in a thread still inside a call on this model.
}

ampc_status ampc_model_describe(const ampc_model *handle,
                                ampc_model_info *out) {
  const char *call = "ampc_model_describe";
  std::shared_ptr<Model> model = lookup(handle, call);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!out)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call, "out is NULL");
  out->name = model->name.c_str();
  out->target = model->target.c_str();
  out->precision = model->precision.c_str();
  out->mode = model->mode.c_str();
  out->num_inputs = static_cast<int32_t>(model->inputs.size());
  out->num_outputs = static_cast<int32_t>(model->outputs.size());
  out->num_parameters = static_cast<int32_t>(model->parameters.size());
  return AMPC_OK;
}

ampc_status ampc_model_input_info(const ampc_model *model, int32_t index,
                                  ampc_tensor_info *out) {
  return tensorInfo(model, index, out, "ampc_model_input_info", "input",
                    &Model::inputs);
}

ampc_status ampc_model_output_info(const ampc_model *model, int32_t index,
                                   ampc_tensor_info *out) {
  return tensorInfo(model, index, out, "ampc_model_output_info", "output",
                    &Model::outputs);
}

ampc_status ampc_model_parameter_info(const ampc_model *model, int32_t index,
                                      ampc_tensor_info *out) {
  return tensorInfo(model, index, out, "ampc_model_parameter_info",
                    "parameter", &Model::parameters);
}

ampc_status ampc_model_num_buffers(const ampc_model *handle, int32_t *out) {
  std::shared_ptr<Model> model = lookup(handle, "ampc_model_num_buffers");
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!out)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, "ampc_model_num_buffers",
                "out is NULL");
  *out = static_cast<int32_t>(model->buffers.size());
  return AMPC_OK;
}

ampc_status ampc_model_buffer_info(const ampc_model *model, int32_t index,
                                   ampc_tensor_info *out) {
  return tensorInfo(model, index, out, "ampc_model_buffer_info", "buffer",
                    &Model::buffers);
}

} // extern "C"

namespace {
/// ampc_model_infer, on tensors in `memory`.
ampc_status infer(const char *kInfer, ampc_model *handle,
                  const ampc_tensor *inputs, int32_t num_inputs,
                  ampc_tensor *outputs, int32_t num_outputs, Memory memory) {
  std::shared_ptr<Model> model = lookup(handle, kInfer);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (memory == Memory::Device && !model->inferDevice)
    return fail(AMPC_ERROR_UNSUPPORTED, kInfer,
                format("model '%s' runs on the host (target %s): its tensors "
                       "are host memory (ampc_model_infer)",
                       model->name.c_str(), model->target.c_str()));
  const int32_t expectedInputs = static_cast<int32_t>(model->inputs.size());
  const int32_t expectedOutputs = static_cast<int32_t>(model->outputs.size());
  if (num_inputs != expectedInputs)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer,
                format("the model takes %s, got %d",
                       plural(expectedInputs, "input").c_str(), num_inputs));
  if (num_outputs != expectedOutputs)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer,
                format("the model gives %s, got %d",
                       plural(expectedOutputs, "output").c_str(),
                       num_outputs));
  if (num_inputs > 0 && !inputs)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer, "inputs is NULL");
  if (num_outputs > 0 && !outputs)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer, "outputs is NULL");
  if (ampc_status status = checkTensors(kInfer, *model, Role::Input, inputs,
                                       num_inputs, memory))
    return status;
  if (ampc_status status = checkTensors(kInfer, *model, Role::Output,
                                       outputs, num_outputs, memory))
    return status;
  std::vector<Buffer> reads, writes;
  addBuffers(*model, Role::Input, inputs, num_inputs, reads);
  addBuffers(*model, Role::Output, outputs, num_outputs, writes);
  if (ampc_status status = checkOverlaps(kInfer, *model, reads, writes))
    return status;

  std::lock_guard<std::mutex> lock(model->runMutex);
  for (int32_t i = 0; i < num_inputs; ++i)
    model->inputData[static_cast<size_t>(i)] = inputs[i].data;
  for (int32_t i = 0; i < num_outputs; ++i)
    model->outputData[static_cast<size_t>(i)] = outputs[i].data;
  int32_t code = (memory == Memory::Device ? model->inferDevice
                                            : model->abi->infer)(
      model->state, model->inputData.data(), model->outputData.data());
  if (code != 0)
    return fail(AMPC_ERROR_EXECUTION, kInfer,
                format("model '%s' failed: %s", model->name.c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}
} // namespace

extern "C" {

ampc_status ampc_model_infer(ampc_model *handle, const ampc_tensor *inputs,
                             int32_t num_inputs, ampc_tensor *outputs,
                             int32_t num_outputs) {
  return infer(kInfer, handle, inputs, num_inputs, outputs, num_outputs,
               Memory::Host);
}

ampc_status ampc_model_infer_device(ampc_model *handle,
                                    const ampc_tensor *inputs,
                                    int32_t num_inputs, ampc_tensor *outputs,
                                    int32_t num_outputs) {
  return infer("ampc_model_infer_device", handle, inputs, num_inputs, outputs,
               num_outputs, Memory::Device);
}

ampc_status ampc_model_get_parameter(const ampc_model *handle, int32_t index,
                                     ampc_tensor *out) {
  std::shared_ptr<Model> model = lookup(handle, kGetParameter);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!model->readParameter)
    return notATrainingLibrary(kGetParameter, *model,
                               "read_parameter function");
  if (!out)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGetParameter, "out is NULL");
  if (ampc_status status = checkParameterIndex(kGetParameter, *model, index))
    return status;
  if (ampc_status status =
          checkTensor(kGetParameter, *model, Role::Parameter, index, *out))
    return status;

  std::lock_guard<std::mutex> lock(model->runMutex);
  int32_t code = model->readParameter(model->state, index, out->data);
  if (code != 0)
    return fail(AMPC_ERROR_EXECUTION, kGetParameter,
                format("model '%s' failed to read %s: %s", model->name.c_str(),
                       labelOf(*model, Role::Parameter, index).c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}

ampc_status ampc_model_set_parameter(ampc_model *handle, int32_t index,
                                     const ampc_tensor *in) {
  std::shared_ptr<Model> model = lookup(handle, kSetParameter);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!model->writeParameter)
    return notATrainingLibrary(kSetParameter, *model,
                               "write_parameter function");
  if (!in)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kSetParameter, "in is NULL");
  if (ampc_status status = checkParameterIndex(kSetParameter, *model, index))
    return status;
  if (ampc_status status =
          checkTensor(kSetParameter, *model, Role::Parameter, index, *in))
    return status;

  std::lock_guard<std::mutex> lock(model->runMutex);
  int32_t code = model->writeParameter(model->state, index, in->data);
  if (code != 0)
    return fail(AMPC_ERROR_EXECUTION, kSetParameter,
                format("model '%s' failed to write %s: %s",
                       model->name.c_str(),
                       labelOf(*model, Role::Parameter, index).c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}

/// ampc_model_get_buffer and ampc_model_set_buffer: `index` and the
/// caller's tensor checked, then one read or write of the state tensor.
namespace {
std::string stateValueProblem(const Model &model, size_t index,
                              const void *data);
} // namespace

static ampc_status accessBuffer(const char *call, const ampc_model *handle,
                                int32_t index, const ampc_tensor *tensor,
                                bool write) {
  std::shared_ptr<Model> model = lookup(handle, call);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  const int32_t count = static_cast<int32_t>(model->buffers.size());
  if (index < 0 || index >= count)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                format("buffer index %d is out of range, the model has %s",
                       index, plural(count, "buffer").c_str()));
  if (!tensor)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                write ? "in is NULL" : "out is NULL");
  if (ampc_status status =
          checkTensor(call, *model, Role::Buffer, index, *tensor))
    return status;
  int32_t state = model->bufferStates[static_cast<size_t>(index)];
  if (write) {
    std::string problem =
        stateValueProblem(*model, static_cast<size_t>(state), tensor->data);
    if (!problem.empty())
      return fail(AMPC_ERROR_INVALID_ARGUMENT, call,
                  format("%s: %s (the model is unchanged)",
                         labelOf(*model, Role::Buffer, index).c_str(),
                         problem.c_str()));
  }
  std::lock_guard<std::mutex> lock(model->runMutex);
  int32_t code = write ? model->writeState(model->state, state, tensor->data)
                       : model->readState(model->state, state, tensor->data);
  if (code != 0)
    return fail(AMPC_ERROR_EXECUTION, call,
                format("model '%s' failed to %s %s: %s", model->name.c_str(),
                       write ? "write" : "read",
                       labelOf(*model, Role::Buffer, index).c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}

ampc_status ampc_model_get_buffer(const ampc_model *handle, int32_t index,
                                  ampc_tensor *out) {
  return accessBuffer(kGetBuffer, handle, index, out, /*write=*/false);
}

ampc_status ampc_model_set_buffer(ampc_model *handle, int32_t index,
                                  const ampc_tensor *in) {
  return accessBuffer(kSetBuffer, handle, index, in, /*write=*/true);
}

/// ZeRO-1's libraries in a job of several ranks (ampc_model_save_checkpoint
/// gathers the sharded moments: every rank calls it, rank 0 writes).
static bool checkpointIsCollective(const Model &model) {
  return model.allReduceLayout.rfind("shard;", 0) == 0 && model.communicator &&
         model.communicator->comm->size > 1;
}

ampc_status ampc_model_checkpoint_is_collective(const ampc_model *handle,
                                                int32_t *collective) {
  constexpr const char *kCollective = "ampc_model_checkpoint_is_collective";
  std::shared_ptr<Model> model = lookup(handle, kCollective);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!collective)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kCollective,
                "collective is NULL");
  *collective = checkpointIsCollective(*model) ? 1 : 0;
  return AMPC_OK;
}

ampc_status ampc_model_data_parallel(const ampc_model *handle, int32_t *rank,
                                     int32_t *world_size,
                                     uint64_t *bytes_all_reduced) {
  constexpr const char *kDataParallel = "ampc_model_data_parallel";
  std::shared_ptr<Model> model = lookup(handle, kDataParallel);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(model->runMutex);
  const ampc_abi_comm *comm =
      model->communicator ? model->communicator->comm : nullptr;
  if (rank)
    *rank = comm ? comm->rank : 0;
  if (world_size)
    *world_size = comm ? comm->size : 1;
  if (bytes_all_reduced)
    *bytes_all_reduced = comm ? model->communicator->bytes(comm) -
                                    model->communicator->bytesBefore
                              : 0;
  return AMPC_OK;
}

ampc_status ampc_model_num_gradients(const ampc_model *handle, int32_t *out) {
  std::shared_ptr<Model> model = lookup(handle, kNumGradients);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!model->gradients)
    return notATrainingLibrary(kNumGradients, *model, "gradients");
  if (!out)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kNumGradients, "out is NULL");
  *out = static_cast<int32_t>(model->gradientParameters.size());
  return AMPC_OK;
}

ampc_status ampc_model_gradient_info(const ampc_model *handle, int32_t g,
                                     int32_t *out_parameter_index) {
  std::shared_ptr<Model> model = lookup(handle, kGradientInfo);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!model->gradients)
    return notATrainingLibrary(kGradientInfo, *model, "gradients");
  if (!out_parameter_index)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGradientInfo,
                "out_parameter_index is NULL");
  const int32_t count = static_cast<int32_t>(model->gradientParameters.size());
  if (g < 0 || g >= count)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGradientInfo,
                format("gradient index %d is out of range, the model has %s",
                       g, plural(count, "gradient").c_str()));
  *out_parameter_index = model->gradientParameters[static_cast<size_t>(g)];
  return AMPC_OK;
}

ampc_status ampc_model_gradients(ampc_model *handle, const ampc_tensor *inputs,
                                 int32_t num_inputs, ampc_tensor *loss,
                                 ampc_tensor *gradients,
                                 int32_t num_gradients) {
  std::shared_ptr<Model> model = lookup(handle, kGradients);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!model->gradients)
    return notATrainingLibrary(kGradients, *model, "gradients");
  const int32_t expectedInputs = static_cast<int32_t>(model->inputs.size());
  const int32_t expectedGradients =
      static_cast<int32_t>(model->gradientParameters.size());
  if (num_inputs != expectedInputs)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGradients,
                format("the model takes %s, got %d",
                       plural(expectedInputs, "input").c_str(), num_inputs));
  if (num_gradients != expectedGradients)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGradients,
                format("the model has %s, got %d",
                       plural(expectedGradients, "gradient").c_str(),
                       num_gradients));
  if (num_inputs > 0 && !inputs)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGradients, "inputs is NULL");
  if (!loss)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGradients, "loss is NULL");
  if (num_gradients > 0 && !gradients)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGradients, "gradients is NULL");
  if (ampc_status status =
          checkTensors(kGradients, *model, Role::Input, inputs, num_inputs))
    return status;
  if (ampc_status status =
          checkTensor(kGradients, *model, Role::Loss, 0, *loss))
    return status;
  if (ampc_status status = checkTensors(kGradients, *model, Role::Gradient,
                                        gradients, num_gradients))
    return status;
  std::vector<Buffer> reads, writes;
  addBuffers(*model, Role::Input, inputs, num_inputs, reads);
  addBuffers(*model, Role::Loss, loss, 1, writes);
  addBuffers(*model, Role::Gradient, gradients, num_gradients, writes);
  if (ampc_status status = checkOverlaps(kGradients, *model, reads, writes))
    return status;

  std::lock_guard<std::mutex> lock(model->runMutex);
  for (int32_t i = 0; i < num_inputs; ++i)
    model->inputData[static_cast<size_t>(i)] = inputs[i].data;
  model->gradientData[0] = loss->data;
  for (int32_t g = 0; g < num_gradients; ++g)
    model->gradientData[static_cast<size_t>(g) + 1] = gradients[g].data;
  int32_t code = model->gradients(model->state, model->inputData.data(),
                                  model->gradientData.data());
  if (code != 0)
    return fail(AMPC_ERROR_EXECUTION, kGradients,
                format("model '%s' failed: %s", model->name.c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}

} // extern "C"

namespace {
constexpr const char *kTrainStep = "ampc_model_train_step";
constexpr const char *kTrainingInfo = "ampc_model_training_info";
constexpr const char *kGetLearningRate = "ampc_model_get_learning_rate";
constexpr const char *kSetLearningRate = "ampc_model_set_learning_rate";
constexpr const char *kGetScaler = "ampc_model_get_scaler_state";
constexpr const char *kSetScaler = "ampc_model_set_scaler_state";
constexpr const char *kSave = "ampc_model_save_checkpoint";
constexpr const char *kLoadCheckpoint = "ampc_model_load_checkpoint";
constexpr const char *kExport = "ampc_model_export_onnx";

/// The model behind `handle` when it can train, or null with the error set.
std::shared_ptr<Model> lookupTraining(const ampc_model *handle,
                                      const char *call, ampc_status &status) {
  std::shared_ptr<Model> model = lookup(handle, call);
  if (!model) {
    status = AMPC_ERROR_INVALID_ARGUMENT;
    return nullptr;
  }
  if (!model->trainStep) {
    status = fail(AMPC_ERROR_UNSUPPORTED, call,
                  format("model '%s' has no training step: its library was "
                         "compiled %s",
                         model->name.c_str(),
                         model->mode == "train"
                             ? "with --optimizer=none (gradients only)"
                             : "for inference; compile it without "
                               "--mode=infer"));
    return nullptr;
  }
  return model;
}

/// The largest step or batch count the runtime accepts: every count stays
/// exact in a double (Adam's bias corrections are computed from it) and no
/// number of later steps can overflow it.
constexpr int64_t kMaxCount = int64_t(1) << 53;
/// The loss scaler's growth tracker counts up to the growth interval and
/// resets; the step adds one to it.
constexpr int32_t kMaxGrowthTracker = INT32_MAX - 1;

/// Why `data` cannot be the value of state tensor `index` (the checkpoint
/// reader and the setters refuse what a later step would turn into an
/// overflow or a NaN), or "" when it can.
std::string stateValueProblem(const Model &model, size_t index,
                              const void *data) {
  const TensorDesc &t = model.stateTensors[index];
  const std::string &name = t.name;
  auto scalar = [&](auto v) {
    std::memcpy(&v, data, sizeof v);
    return v;
  };
  if (name == "ampc.lr" || name == "ampc.loss_scale") {
    float v = scalar(0.0f);
    bool positive = name == "ampc.loss_scale";
    if (!std::isfinite(v) || v < 0 || (positive && v == 0))
      return format("%g, expected a finite value %s", double(v),
                    positive ? "> 0" : ">= 0");
    return "";
  }
  if (name == "ampc.growth_tracker") {
    int32_t v = scalar(int32_t(0));
    if (v < 0 || v > kMaxGrowthTracker)
      return format("%d, expected 0 to %d", v, kMaxGrowthTracker);
    return "";
  }
  bool counter = name == "ampc.step" || name == "ampc.skipped_steps" ||
                 (t.dtype == AMPC_DTYPE_I64 && t.shape.empty() &&
                  std::find(model.bufferStates.begin(), model.bufferStates.end(),
                            static_cast<int32_t>(index)) !=
                      model.bufferStates.end());
  if (counter) {
    int64_t v = scalar(int64_t(0));
    if (v < 0 || v > kMaxCount)
      return format("%lld, expected a count from 0 to 2^53",
                    static_cast<long long>(v));
    return "";
  }
  // Adam's second moments: a square root is taken of them.
  if (t.dtype == AMPC_DTYPE_F32 && name.size() > 11 &&
      name.compare(name.size() - 11, 11, ".exp_avg_sq") == 0) {
    const float *v = static_cast<const float *>(data);
    for (size_t i = 0; i < t.byteSize / sizeof(float); ++i)
      if (!(v[i] >= 0) || std::isinf(v[i]))
        return format("%g at element %zu, expected second moments that are "
                      "finite and >= 0",
                      double(v[i]), i);
  }
  return "";
}

/// Index of the state tensor `name`, or -1.
int32_t stateIndex(const Model &model, const char *name) {
  for (size_t i = 0; i < model.stateTensors.size(); ++i)
    if (model.stateTensors[i].name == name)
      return static_cast<int32_t>(i);
  return -1;
}

/// Reads (`write` false) or writes one scalar of the training state; the
/// caller holds runMutex and the scalar exists with this type.
template <typename T>
bool stateScalar(Model &model, const char *name, T &value, bool write) {
  int32_t i = stateIndex(model, name);
  if (i < 0)
    return false;
  if (write)
    model.writeState(model.state, i, &value);
  else
    model.readState(model.state, i, &value);
  return true;
}

std::vector<ampc::runtime::StateTensor> checkpointTensors(const Model &model) {
  std::vector<ampc::runtime::StateTensor> tensors;
  for (const TensorDesc &t : model.stateTensors)
    tensors.push_back({t.name, static_cast<int32_t>(t.dtype), t.shape,
                       t.byteSize});
  return tensors;
}
} // namespace

extern "C" {

} // extern "C"

namespace {
/// ampc_model_train_step, on the first `rows` rows of the batch (-1: all).
ampc_status trainStep(const char *call, ampc_model *handle,
                      const ampc_tensor *inputs, int32_t num_inputs,
                      ampc_tensor *loss, int64_t rows,
                      Memory memory = Memory::Host) {
  const char *kTrainStep = call;
  ampc_status status = AMPC_OK;
  std::shared_ptr<Model> model = lookupTraining(handle, kTrainStep, status);
  if (!model)
    return status;
  if (memory == Memory::Device && !model->trainStepDevice)
    return fail(AMPC_ERROR_UNSUPPORTED, kTrainStep,
                format("model '%s' runs on the host (target %s): its tensors "
                       "are host memory (ampc_model_train_step)",
                       model->name.c_str(), model->target.c_str()));
  const int64_t batch = model->inputs.empty() || model->inputs[0].shape.empty()
                            ? 0
                            : model->inputs[0].shape[0];
  if (rows >= 0 && rows != batch) {
    if (rows < 1 || rows > batch)
      return fail(AMPC_ERROR_INVALID_ARGUMENT, kTrainStep,
                  format("rows is %lld, expected 1 to the batch size %lld",
                         static_cast<long long>(rows),
                         static_cast<long long>(batch)));
    if (model->batchRowsState < 0)
      return fail(AMPC_ERROR_UNSUPPORTED, kTrainStep,
                  format("model '%s' cannot train a partial batch (%lld of "
                         "%lld rows): %s; drop it "
                         "(DataLoader(drop_last=True)) or compile a library "
                         "for its size",
                         model->name.c_str(), static_cast<long long>(rows),
                         static_cast<long long>(batch),
                         model->partialRefusal.c_str()));
  }
  const int32_t expectedInputs = static_cast<int32_t>(model->inputs.size());
  if (num_inputs != expectedInputs)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kTrainStep,
                format("the model takes %s, got %d",
                       plural(expectedInputs, "input").c_str(), num_inputs));
  if (num_inputs > 0 && !inputs)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kTrainStep, "inputs is NULL");
  // On the device the loss is optional: NULL copies it nowhere.
  if (!loss && memory == Memory::Host)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kTrainStep, "loss is NULL");
  if (ampc_status status = checkTensors(kTrainStep, *model, Role::Input,
                                       inputs, num_inputs, memory))
    return status;
  if (loss)
    if (ampc_status status =
            checkTensor(kTrainStep, *model, Role::Loss, 0, *loss, memory))
      return status;
  std::vector<Buffer> reads, writes;
  addBuffers(*model, Role::Input, inputs, num_inputs, reads);
  if (loss)
    addBuffers(*model, Role::Loss, loss, 1, writes);
  if (ampc_status status = checkOverlaps(kTrainStep, *model, reads, writes))
    return status;

  std::lock_guard<std::mutex> lock(model->runMutex);
  for (int32_t i = 0; i < num_inputs; ++i)
    model->inputData[static_cast<size_t>(i)] = inputs[i].data;
  // The row count is set for this step only (an asynchronous library
  // copies it in stream order).
  const bool partial = rows >= 0 && rows != batch;
  if (partial)
    model->writeState(model->state, model->batchRowsState, &rows);
  int32_t code = (memory == Memory::Device ? model->trainStepDevice
                                            : model->trainStep)(
      model->state, model->inputData.data(), loss ? loss->data : nullptr);
  if (partial)
    model->writeState(model->state, model->batchRowsState, &batch);
  if (code != 0)
    return fail(AMPC_ERROR_EXECUTION, kTrainStep,
                format("model '%s' failed: %s", model->name.c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}
} // namespace

extern "C" {

ampc_status ampc_model_train_step(ampc_model *handle,
                                  const ampc_tensor *inputs,
                                  int32_t num_inputs, ampc_tensor *loss) {
  return trainStep(kTrainStep, handle, inputs, num_inputs, loss, -1);
}

ampc_status ampc_model_train_step_rows(ampc_model *handle,
                                       const ampc_tensor *inputs,
                                       int32_t num_inputs, ampc_tensor *loss,
                                       int64_t rows) {
  return trainStep("ampc_model_train_step_rows", handle, inputs, num_inputs,
                   loss, rows);
}

ampc_status ampc_model_train_step_device(ampc_model *handle,
                                         const ampc_tensor *inputs,
                                         int32_t num_inputs,
                                         ampc_tensor *loss) {
  return trainStep("ampc_model_train_step_device", handle, inputs,
                   num_inputs, loss, -1, Memory::Device);
}

ampc_status ampc_model_train_step_rows_device(ampc_model *handle,
                                              const ampc_tensor *inputs,
                                              int32_t num_inputs,
                                              ampc_tensor *loss,
                                              int64_t rows) {
  return trainStep("ampc_model_train_step_rows_device", handle, inputs,
                   num_inputs, loss, rows, Memory::Device);
}

ampc_status ampc_model_training_info(const ampc_model *handle,
                                     ampc_training_info *out) {
  ampc_status status = AMPC_OK;
  std::shared_ptr<Model> model = lookupTraining(handle, kTrainingInfo, status);
  if (!model)
    return status;
  if (!out)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kTrainingInfo, "out is NULL");
  out->optimizer = model->optimizer.c_str();
  out->hyperparameters = model->hyperparameters.c_str();
  out->loss_scaling = model->lossScaling.c_str();
  out->num_labels = model->numLabels;
  return AMPC_OK;
}

ampc_status ampc_model_get_learning_rate(const ampc_model *handle,
                                         float *out) {
  ampc_status status = AMPC_OK;
  std::shared_ptr<Model> model =
      lookupTraining(handle, kGetLearningRate, status);
  if (!model)
    return status;
  if (!out)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGetLearningRate, "out is NULL");
  std::lock_guard<std::mutex> lock(model->runMutex);
  stateScalar(*model, "ampc.lr", *out, false);
  return AMPC_OK;
}

ampc_status ampc_model_set_learning_rate(ampc_model *handle,
                                         float learning_rate) {
  ampc_status status = AMPC_OK;
  std::shared_ptr<Model> model =
      lookupTraining(handle, kSetLearningRate, status);
  if (!model)
    return status;
  if (!std::isfinite(learning_rate) || learning_rate < 0)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kSetLearningRate,
                format("the learning rate must be finite and >= 0, got %g",
                       static_cast<double>(learning_rate)));
  std::lock_guard<std::mutex> lock(model->runMutex);
  stateScalar(*model, "ampc.lr", learning_rate, true);
  return AMPC_OK;
}

ampc_status ampc_model_get_scaler_state(const ampc_model *handle,
                                        ampc_scaler_state *out) {
  ampc_status status = AMPC_OK;
  std::shared_ptr<Model> model = lookupTraining(handle, kGetScaler, status);
  if (!model)
    return status;
  if (!out)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kGetScaler, "out is NULL");
  std::lock_guard<std::mutex> lock(model->runMutex);
  ampc_scaler_state state{1.0f, 0, 0, 0};
  stateScalar(*model, "ampc.loss_scale", state.scale, false);
  stateScalar(*model, "ampc.growth_tracker", state.growth_tracker, false);
  stateScalar(*model, "ampc.step", state.steps, false);
  stateScalar(*model, "ampc.skipped_steps", state.skipped_steps, false);
  *out = state;
  return AMPC_OK;
}

ampc_status ampc_model_set_scaler_state(ampc_model *handle,
                                        const ampc_scaler_state *in) {
  ampc_status status = AMPC_OK;
  std::shared_ptr<Model> model = lookupTraining(handle, kSetScaler, status);
  if (!model)
    return status;
  if (!in)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kSetScaler, "in is NULL");
  if (!std::isfinite(in->scale) || !(in->scale > 0) ||
      in->growth_tracker < 0 || in->growth_tracker > kMaxGrowthTracker ||
      in->steps < 0 || in->steps > kMaxCount || in->skipped_steps < 0 ||
      in->skipped_steps > kMaxCount)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kSetScaler,
                format("expected a finite scale > 0, growth_tracker from 0 "
                       "to 2^31-2 and steps from 0 to 2^53, got "
                       "scale %g, growth_tracker %d, steps %lld, "
                       "skipped_steps %lld",
                       static_cast<double>(in->scale), in->growth_tracker,
                       static_cast<long long>(in->steps),
                       static_cast<long long>(in->skipped_steps)));
  std::lock_guard<std::mutex> lock(model->runMutex);
  ampc_scaler_state state = *in;
  bool scaled = stateIndex(*model, "ampc.loss_scale") >= 0;
  if (!scaled && (state.scale != 1.0f || state.growth_tracker != 0 ||
                  state.skipped_steps != 0))
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kSetScaler,
                format("model '%s' has no loss scaler (compiled with loss "
                       "scaling '%s'): only steps can be set, with scale 1",
                       model->name.c_str(), model->lossScaling.c_str()));
  stateScalar(*model, "ampc.loss_scale", state.scale, true);
  stateScalar(*model, "ampc.growth_tracker", state.growth_tracker, true);
  stateScalar(*model, "ampc.step", state.steps, true);
  stateScalar(*model, "ampc.skipped_steps", state.skipped_steps, true);
  return AMPC_OK;
}

ampc_status ampc_model_save_checkpoint(const ampc_model *handle,
                                       const char *path) {
  ampc_status status = AMPC_OK;
  std::shared_ptr<Model> model = lookupTraining(handle, kSave, status);
  if (!model)
    return status;
  if (!path || !*path)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kSave, "path is NULL or empty");
  std::vector<std::vector<unsigned char>> data;
  std::vector<const void *> pointers;
  {
    std::lock_guard<std::mutex> lock(model->runMutex);
    for (size_t i = 0; i < model->stateTensors.size(); ++i) {
      data.emplace_back(model->stateTensors[i].byteSize);
      if (int32_t code = model->readState(
              model->state, static_cast<int32_t>(i), data.back().data()))
        return fail(AMPC_ERROR_EXECUTION, kSave,
                    format("reading '%s' failed: %s",
                           model->stateTensors[i].name.c_str(),
                           model->libraryError(code).c_str()));
    }
  }
  // ZeRO-1 (a library compiled with --shard-optimizer): reading the
  // sharded moments gathered them from every rank (each rank called this),
  // and rank 0 alone writes the file, which does not depend on the number
  // of ranks.
  if (checkpointIsCollective(*model) && model->communicator->comm->rank != 0)
    return AMPC_OK;
  for (const auto &d : data)
    pointers.push_back(d.data());
  std::string error;
  if (!ampc::runtime::writeCheckpoint(path, model->name,
                                      checkpointTensors(*model), pointers,
                                      error))
    return fail(AMPC_ERROR_IO, kSave, error);
  return AMPC_OK;
}

ampc_status ampc_model_load_checkpoint(ampc_model *handle, const char *path) {
  ampc_status status = AMPC_OK;
  std::shared_ptr<Model> model =
      lookupTraining(handle, kLoadCheckpoint, status);
  if (!model)
    return status;
  if (!path || !*path)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoadCheckpoint,
                "path is NULL or empty");
  std::vector<std::vector<unsigned char>> data;
  std::vector<bool> present;
  std::string error;
  bool corrupt = false, incompatible = false;
  if (!ampc::runtime::readCheckpoint(path, model->name,
                                     checkpointTensors(*model), data, present,
                                     error, corrupt, &incompatible))
    return fail(corrupt        ? AMPC_ERROR_CORRUPT
                : incompatible ? AMPC_ERROR_INVALID_ARGUMENT
                               : AMPC_ERROR_IO,
                kLoadCheckpoint, error);
  // The state must be what the setters accept: a checkpoint with a valid
  // checksum can still carry a NaN scale, a negative step count, a count a
  // later step would overflow or a negative second moment.
  for (size_t i = 0; i < data.size(); ++i) {
    if (!present[i])
      continue;
    std::string problem = stateValueProblem(*model, i, data[i].data());
    if (!problem.empty())
      return fail(AMPC_ERROR_CORRUPT, kLoadCheckpoint,
                  format("%s: '%s' is %s (the model is unchanged)", path,
                         model->stateTensors[i].name.c_str(),
                         problem.c_str()));
  }
  // State the file lacks (the loss scaler's, from another precision) keeps
  // its current value.
  std::lock_guard<std::mutex> lock(model->runMutex);
  for (size_t i = 0; i < data.size(); ++i)
    if (present[i])
      model->writeState(model->state, static_cast<int32_t>(i), data[i].data());
  return AMPC_OK;
}

ampc_status ampc_model_wait_stream(ampc_model *handle, void *cuda_stream) {
  constexpr const char *kWaitStream = "ampc_model_wait_stream";
  std::shared_ptr<Model> model = lookup(handle, kWaitStream);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!model->waitStream)
    return fail(AMPC_ERROR_UNSUPPORTED, kWaitStream,
                format("model '%s' runs on the host (target %s): it has no "
                       "stream",
                       model->name.c_str(), model->target.c_str()));
  std::lock_guard<std::mutex> lock(model->runMutex);
  if (int32_t code = model->waitStream(model->state, cuda_stream))
    return fail(AMPC_ERROR_EXECUTION, kWaitStream,
                format("model '%s' failed: %s", model->name.c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}

ampc_status ampc_model_synchronize(ampc_model *handle) {
  constexpr const char *kSynchronize = "ampc_model_synchronize";
  std::shared_ptr<Model> model = lookup(handle, kSynchronize);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!model->synchronize)
    return AMPC_OK;
  std::lock_guard<std::mutex> lock(model->runMutex);
  if (int32_t code = model->synchronize(model->state))
    return fail(AMPC_ERROR_EXECUTION, kSynchronize,
                format("model '%s' failed: %s", model->name.c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}

ampc_status ampc_model_export_onnx(const ampc_model *handle, const char *path) {
  std::shared_ptr<Model> model = lookup(handle, kExport);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
  if (!path || !*path)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kExport, "path is NULL or empty");
  if (!model->onnxModel)
    return fail(AMPC_ERROR_UNSUPPORTED, kExport,
                format("model '%s' does not carry its ONNX model (compile it "
                       "with ampc --mode=train from an ONNX file, without "
                       "--embed-model=false)",
                       model->name.c_str()));
  if (!model->readParameter && !model->parameters.empty())
    return fail(AMPC_ERROR_UNSUPPORTED, kExport,
                format("model '%s' cannot read its parameters",
                       model->name.c_str()));
  // The parameters, and the state that is part of the model (BatchNorm's
  // running statistics: state named after the initializer it came from;
  // optimizer and scaler state match no initializer).
  std::vector<std::vector<unsigned char>> data;
  std::vector<ampc::runtime::NamedTensor> replacements;
  std::vector<const TensorDesc *> tensors;
  std::vector<int32_t> stateIndices;
  for (const TensorDesc &t : model->parameters)
    tensors.push_back(&t);
  for (size_t i = model->parameters.size(); i < model->stateTensors.size();
       ++i) {
    tensors.push_back(&model->stateTensors[i]);
    stateIndices.push_back(static_cast<int32_t>(i));
  }
  {
    std::lock_guard<std::mutex> lock(model->runMutex);
    for (size_t i = 0; i < tensors.size(); ++i) {
      data.emplace_back(tensors[i]->byteSize);
      if (i < model->parameters.size())
        model->readParameter(model->state, static_cast<int32_t>(i),
                             data.back().data());
      else
        model->readState(model->state,
                         stateIndices[i - model->parameters.size()],
                         data.back().data());
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorDesc &t = *tensors[i];
    replacements.push_back({t.name, static_cast<int32_t>(t.dtype), t.shape,
                            data[i].data(), t.byteSize,
                            /*optional=*/i >= model->parameters.size()});
  }
  // The trained weights in the model as it runs for inference (eval mode).
  std::string trained, bytes, error;
  if (!ampc::runtime::rewriteOnnxInitializers(model->onnxModel,
                                              model->onnxModelSize,
                                              replacements, trained, error) ||
      !ampc::runtime::rewriteOnnxEvalMode(
          reinterpret_cast<const unsigned char *>(trained.data()),
          trained.size(), bytes, error))
    return fail(AMPC_ERROR_CORRUPT, kExport, error);
  if (!ampc::writeFileAtomically(path, {{bytes.data(), bytes.size()}},
                                 "the ONNX model", error))
    return fail(AMPC_ERROR_IO, kExport, error);
  return AMPC_OK;
}

} // extern "C"
