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

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
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

struct Model {
  void *library = nullptr;
  const ampc_model_abi *abi = nullptr;
  std::string path;
  std::string name, target, precision, mode;
  std::vector<TensorDesc> inputs, outputs, parameters;
  void *state = nullptr;
  bool initialized = false;

  /// Serializes calls that run the model; the library may assume one call
  /// per state at a time (ModelAbi.h). Guards the pointer arrays below.
  std::mutex runMutex;
  std::vector<const void *> inputData;
  std::vector<void *> outputData;

  Model() = default;
  Model(const Model &) = delete;
  Model &operator=(const Model &) = delete;

  ~Model() {
    if (initialized && abi->release)
      abi->release(state);
    std::free(state);
    if (library)
      dlclose(library);
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

/// Bytes of the version-1 descriptor; a library's struct_size must cover it.
constexpr size_t kAbiVersion1Size =
    offsetof(ampc_model_abi, release) + sizeof(ampc_model_abi::release);

/// Copies and checks one tensor list of the descriptor.
ampc_status readTensors(const Model &model, const char *kind, int32_t count,
                        const ampc_abi_tensor *tensors,
                        std::vector<TensorDesc> &out) {
  const char *path = model.path.c_str();
  if (count < 0)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor has %d %ss", path, count, kind));
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

  if (model.mode == "train")
    return fail(AMPC_ERROR_UNSUPPORTED, kLoad,
                format("'%s' is a training library (mode 'train'), which "
                       "this runtime cannot run yet",
                       path));
  if (model.mode != "infer")
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': the descriptor's mode is '%s', expected 'infer' "
                       "or 'train'",
                       path, model.mode.c_str()));
  if (!abi->infer)
    return fail(AMPC_ERROR_CORRUPT, kLoad,
                format("'%s': mode 'infer' but the descriptor's infer "
                       "function is NULL",
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
  return AMPC_OK;
}

ampc_status checkOptions(const ampc_model_options *options) {
  if (!options)
    return AMPC_OK;
  if (options->struct_size != sizeof(ampc_model_options))
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                format("options->struct_size is %zu, this runtime knows %zu "
                       "(fill options with ampc_model_options_init)",
                       options->struct_size, sizeof(ampc_model_options)));
  if (options->num_threads < 0)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kLoad,
                format("options->num_threads is %d, expected 0 (the "
                       "library decides) or more",
                       options->num_threads));
  return AMPC_OK;
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
  ampc_abi_config config;
  std::memset(&config, 0, sizeof(config));
  config.struct_size = sizeof(config);
  config.num_threads = options ? options->num_threads : 0;
  config.cuda_stream = options ? options->cuda_stream : nullptr;
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

/// Checks one caller tensor against the model's description.
ampc_status checkTensor(const char *kind, int32_t index,
                        const ampc_tensor &tensor, const TensorDesc &desc) {
  std::string label = desc.label(kind, index);
  if (tensor.dtype != desc.dtype)
    return fail(AMPC_ERROR_DTYPE_MISMATCH, kInfer,
                format("%s has dtype %s, the model expects %s", label.c_str(),
                       dtypeText(tensor.dtype).c_str(),
                       dtypeText(desc.dtype).c_str()));
  if (tensor.rank != desc.rank())
    return fail(AMPC_ERROR_SHAPE_MISMATCH, kInfer,
                format("%s has rank %d, the model expects rank %d (shape %s)",
                       label.c_str(), tensor.rank, desc.rank(),
                       shapeText(desc.shapeData(), desc.rank()).c_str()));
  if (tensor.rank > 0 && !tensor.shape)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer,
                format("%s has rank %d but a NULL shape", label.c_str(),
                       tensor.rank));
  for (int32_t d = 0; d < tensor.rank; ++d)
    if (tensor.shape[d] != desc.shape[static_cast<size_t>(d)])
      return fail(AMPC_ERROR_SHAPE_MISMATCH, kInfer,
                  format("%s has shape %s, the model expects %s",
                         label.c_str(),
                         shapeText(tensor.shape, tensor.rank).c_str(),
                         shapeText(desc.shapeData(), desc.rank()).c_str()));
  if (!tensor.data && desc.byteSize > 0)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer,
                format("%s has NULL data", label.c_str()));
  if (tensor.size_bytes < desc.byteSize)
    return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer,
                format("%s has size_bytes %zu, %s %s needs %zu",
                       label.c_str(), tensor.size_bytes,
                       dtypeText(desc.dtype).c_str(),
                       shapeText(desc.shapeData(), desc.rank()).c_str(),
                       desc.byteSize));
  return AMPC_OK;
}

bool overlaps(const void *a, size_t aBytes, const void *b, size_t bBytes) {
  if (aBytes == 0 || bBytes == 0)
    return false;
  uintptr_t aBegin = reinterpret_cast<uintptr_t>(a);
  uintptr_t bBegin = reinterpret_cast<uintptr_t>(b);
  return aBegin < bBegin + bBytes && bBegin < aBegin + aBytes;
}

/// Outputs are written while inputs are still read, so no output buffer may
/// share bytes with an input or another output.
ampc_status checkOverlaps(const Model &model, const ampc_tensor *inputs,
                          const ampc_tensor *outputs) {
  for (size_t o = 0; o < model.outputs.size(); ++o) {
    const TensorDesc &out = model.outputs[o];
    for (size_t i = 0; i < model.inputs.size(); ++i)
      if (overlaps(outputs[o].data, out.byteSize, inputs[i].data,
                   model.inputs[i].byteSize))
        return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer,
                    format("%s overlaps %s in memory",
                           out.label("output", static_cast<int32_t>(o)).c_str(),
                           model.inputs[i]
                               .label("input", static_cast<int32_t>(i))
                               .c_str()));
    for (size_t p = 0; p < o; ++p)
      if (overlaps(outputs[o].data, out.byteSize, outputs[p].data,
                   model.outputs[p].byteSize))
        return fail(AMPC_ERROR_INVALID_ARGUMENT, kInfer,
                    format("%s overlaps %s in memory",
                           out.label("output", static_cast<int32_t>(o)).c_str(),
                           model.outputs[p]
                               .label("output", static_cast<int32_t>(p))
                               .c_str()));
  }
  return AMPC_OK;
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

size_t ampc_dtype_size(ampc_dtype dtype) {
  switch (dtype) {
  case AMPC_DTYPE_U8:
  case AMPC_DTYPE_I8:
  case AMPC_DTYPE_BOOL:
    return 1;
  case AMPC_DTYPE_F16:
  case AMPC_DTYPE_BF16:
    return 2;
  case AMPC_DTYPE_F32:
  case AMPC_DTYPE_I32:
    return 4;
  case AMPC_DTYPE_I64:
  case AMPC_DTYPE_F64:
    return 8;
  }
  return 0;
}

const char *ampc_dtype_name(ampc_dtype dtype) {
  switch (dtype) {
  case AMPC_DTYPE_F32:
    return "f32";
  case AMPC_DTYPE_U8:
    return "u8";
  case AMPC_DTYPE_I8:
    return "i8";
  case AMPC_DTYPE_I32:
    return "i32";
  case AMPC_DTYPE_I64:
    return "i64";
  case AMPC_DTYPE_BOOL:
    return "bool";
  case AMPC_DTYPE_F16:
    return "f16";
  case AMPC_DTYPE_F64:
    return "f64";
  case AMPC_DTYPE_BF16:
    return "bf16";
  }
  return "unknown";
}

void ampc_model_options_init(ampc_model_options *options) {
  if (!options)
    return;
  std::memset(options, 0, sizeof(*options));
  options->struct_size = sizeof(*options);
  options->num_threads = 0;
  options->cuda_stream = nullptr;
}

ampc_status ampc_model_load(const char *path,
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
  // dlopen searches the library path for a name without a slash; a model is
  // a file the application names, so a bare name means the current folder.
  std::string openPath = std::strchr(path, '/') ? model->path
                                                : "./" + model->path;
  dlerror();
  model->library = dlopen(openPath.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!model->library) {
    const char *why = dlerror();
    return fail(AMPC_ERROR_NOT_FOUND, kLoad,
                format("cannot open '%s': %s", path,
                       why ? why : "unknown loader error"));
  }
  dlerror();
  void *entry = dlsym(model->library, AMPC_MODEL_ENTRY_SYMBOL);
  if (!entry) {
    const char *why = dlerror();
    return fail(AMPC_ERROR_NOT_FOUND, kLoad,
                format("'%s' is not an ampc model library: %s", path,
                       why ? why : "no " AMPC_MODEL_ENTRY_SYMBOL " symbol"));
  }
  using EntryFn = const ampc_model_abi *(*)(void);
  model->abi = reinterpret_cast<EntryFn>(entry)();
  if (ampc_status status = readDescriptor(*model))
    return status;
  if (ampc_status status = createState(*model, options))
    return status;
  model->inputData.resize(model->inputs.size());
  model->outputData.resize(model->outputs.size());

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

ampc_status ampc_model_infer(ampc_model *handle, const ampc_tensor *inputs,
                             int32_t num_inputs, ampc_tensor *outputs,
                             int32_t num_outputs) {
  std::shared_ptr<Model> model = lookup(handle, kInfer);
  if (!model)
    return AMPC_ERROR_INVALID_ARGUMENT;
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
  for (int32_t i = 0; i < num_inputs; ++i)
    if (ampc_status status = checkTensor(
            "input", i, inputs[i], model->inputs[static_cast<size_t>(i)]))
      return status;
  for (int32_t i = 0; i < num_outputs; ++i)
    if (ampc_status status = checkTensor(
            "output", i, outputs[i], model->outputs[static_cast<size_t>(i)]))
      return status;
  if (ampc_status status = checkOverlaps(*model, inputs, outputs))
    return status;

  std::lock_guard<std::mutex> lock(model->runMutex);
  for (int32_t i = 0; i < num_inputs; ++i)
    model->inputData[static_cast<size_t>(i)] = inputs[i].data;
  for (int32_t i = 0; i < num_outputs; ++i)
    model->outputData[static_cast<size_t>(i)] = outputs[i].data;
  int32_t code = model->abi->infer(model->state, model->inputData.data(),
                                   model->outputData.data());
  if (code != 0)
    return fail(AMPC_ERROR_EXECUTION, kInfer,
                format("model '%s' failed: %s", model->name.c_str(),
                       model->libraryError(code).c_str()));
  return AMPC_OK;
}

} // extern "C"
