/*===- ampc.h - the ampc runtime C API ------------------------------*- C -*-===*
 *
 * What an application uses to load a model library compiled by ampc
 * (infer.so / train.so), ask it what it expects, and run it. Plain C (C99 and
 * C++), every symbol prefixed `ampc_`; the library is libampc_runtime.so,
 * which depends on nothing but libc/libstdc++ (docs/design.md, Runtime C API).
 *
 * Conventions (IREE / ONNX Runtime style):
 *  - Opaque handles created by `ampc_*_load`/`_create` and freed by
 *    `ampc_*_release`; `release(NULL)` is a no-op.
 *  - Every call that can fail returns an `ampc_status` (AMPC_OK == 0) and
 *    writes its results to out-parameters; on failure `ampc_last_error()`
 *    gives a one-line message naming the call and what was wrong.
 *  - Options structs start with `struct_size` and are filled by
 *    `ampc_*_options_init`, so fields can be appended without breaking
 *    applications built against an older header.
 *  - A handle that was released (or never created) is detected: calls on it
 *    return AMPC_ERROR_INVALID_ARGUMENT instead of touching freed memory.
 *
 *===----------------------------------------------------------------------===*/

#ifndef AMPC_RUNTIME_AMPC_H
#define AMPC_RUNTIME_AMPC_H

#include <stddef.h>
#include <stdint.h>

/// Version of this API and of the model ABI (ampc/Runtime/ModelAbi.h). Bumped
/// on any incompatible change to either; appending fields to a struct that
/// starts with `struct_size` is compatible and does not bump it.
#define AMPC_ABI_VERSION 1

/// Marks the functions libampc_runtime.so exports; the library is built with
/// -fvisibility=hidden, so nothing else is visible to applications.
#if defined(__GNUC__) || defined(__clang__)
#define AMPC_API __attribute__((visibility("default")))
#else
#define AMPC_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*===----------------------------------------------------------------------===*
 * Status, errors and versions
 *===----------------------------------------------------------------------===*/

/// C++ gives the enums a fixed 32-bit underlying type, so C++ code (the
/// runtime included) may hold any value a C caller passes without undefined
/// behaviour; C compilers give them a 32-bit integer type anyway.
#ifdef __cplusplus
#define AMPC_ENUM_TYPE : int32_t
#else
#define AMPC_ENUM_TYPE
#endif

/// Result of every call that can fail. AMPC_OK is 0, so `if (status)` tests
/// for failure.
typedef enum ampc_status AMPC_ENUM_TYPE {
  /// Success.
  AMPC_OK = 0,
  /// A NULL pointer, an out-of-range index or count, a size too small, a
  /// handle that is not live, or options the runtime does not know.
  AMPC_ERROR_INVALID_ARGUMENT,
  /// A model library that cannot be opened (missing, not a shared library)
  /// or that lacks the entry symbol.
  AMPC_ERROR_NOT_FOUND,
  /// The model library was compiled for another ABI version.
  AMPC_ERROR_ABI_MISMATCH,
  /// A tensor's rank or dimensions differ from what the model expects.
  AMPC_ERROR_SHAPE_MISMATCH,
  /// A tensor's element type differs from what the model expects.
  AMPC_ERROR_DTYPE_MISMATCH,
  /// The model or the request needs something this runtime does not offer.
  AMPC_ERROR_UNSUPPORTED,
  /// The model library reported a failure while initializing or running.
  AMPC_ERROR_EXECUTION,
  /// Reading or writing a file failed.
  AMPC_ERROR_IO,
  /// A model library's self-description (or a file) is malformed.
  AMPC_ERROR_CORRUPT
} ampc_status;

/// A short constant name for `status` ("ok", "invalid argument", ...);
/// "unknown status" for a value outside the enum. Never NULL.
AMPC_API const char *ampc_status_string(ampc_status status);

/// The message of the last call on this thread that returned an error (or,
/// for `ampc_model_release`, that was given a handle that is not live): one
/// line that starts with the call's name, e.g. "ampc_model_infer: input 0
/// ('x') has shape [2, 4], the model expects [2, 3]". Successful calls leave
/// it unchanged, like errno. Empty (never NULL) when no call on this thread
/// has failed. The pointer is valid until the next ampc call on this thread.
AMPC_API const char *ampc_last_error(void);

/// AMPC_ABI_VERSION of the libampc_runtime.so loaded at run time; compare it
/// with the macro to detect an application built against another header.
AMPC_API uint32_t ampc_runtime_abi_version(void);

/*===----------------------------------------------------------------------===*
 * Element types
 *===----------------------------------------------------------------------===*/

/// Tensor element types. The values are ONNX TensorProto.DataType codes.
typedef enum ampc_dtype AMPC_ENUM_TYPE {
  AMPC_DTYPE_F32 = 1,
  AMPC_DTYPE_U8 = 2,
  AMPC_DTYPE_I8 = 3,
  AMPC_DTYPE_U16 = 4,
  AMPC_DTYPE_I16 = 5,
  AMPC_DTYPE_I32 = 6,
  AMPC_DTYPE_I64 = 7,
  AMPC_DTYPE_BOOL = 9, /* one byte per element, 0 or 1 */
  AMPC_DTYPE_F16 = 10,
  AMPC_DTYPE_F64 = 11,
  AMPC_DTYPE_U32 = 12,
  AMPC_DTYPE_U64 = 13,
  AMPC_DTYPE_BF16 = 16
} ampc_dtype;

/// Bytes per element of `dtype`; 0 for a value that is not an ampc_dtype.
AMPC_API size_t ampc_dtype_size(ampc_dtype dtype);

/// Short name of `dtype` ("f32", "u8", "i8", "i32", "i64", "bool", "f16",
/// "f64", "bf16"); "unknown" for a value that is not an ampc_dtype. Never NULL.
AMPC_API const char *ampc_dtype_name(ampc_dtype dtype);

/*===----------------------------------------------------------------------===*
 * Models
 *===----------------------------------------------------------------------===*/

/// A loaded model library with its own instance state. Opaque: the value is a
/// handle the runtime looks up, never dereferenced by the application.
///
/// Threads: any call may come from any thread. Calls that run the model or
/// touch its state (`ampc_model_infer`, `ampc_model_gradients`,
/// `ampc_model_get_parameter`, `ampc_model_set_parameter`) on one handle are
/// serialized by a per-handle mutex, so two threads sharing a handle take
/// turns; use one handle per thread to run in parallel (two handles of one
/// library share nothing mutable).
/// Releasing a handle while another thread is still inside a call on it is
/// safe: the call finishes and the memory goes away afterwards.
typedef struct ampc_model ampc_model;

/// A communicator the application gives a data-parallel library
/// (`ampc_model_options.comm`; issue 41, docs/distributed.md): the ranks of
/// one job, each loading the same library, summing buffers in place. The
/// runtime then uses it instead of creating one from the job's environment
/// (mpirun's), so any engine the application already runs (its own
/// `MPI_Comm`, a torch.distributed process group, threads of one process)
/// carries the gradients. Set `struct_size` to sizeof(ampc_comm); the
/// runtime copies the struct at load, and `handle` and the functions must
/// stay valid until the model is released. The library calls the
/// functions from the thread that runs its step, one call at a time.
typedef struct ampc_comm {
  /// sizeof(ampc_comm) as the application knows it.
  size_t struct_size;
  /// This process's rank and the number of ranks: 0 <= rank < size. A size
  /// of 1 is a job of one: the library trains alone and calls nothing.
  int32_t rank;
  int32_t size;
  /// Passed back to every function; the runtime never reads it.
  void *handle;
  /// Starts summing `count` elements of `dtype` (AMPC_DTYPE_F32,
  /// AMPC_DTYPE_F16, AMPC_DTYPE_BF16 or AMPC_DTYPE_F64) at `buffer` over
  /// the ranks, in place, as request `request` (>= 0, below the library's
  /// number of buckets; at most one outstanding per number). Every rank
  /// must get the same bits (a reduction that is the same on every rank);
  /// FP16 and BF16 sums widen each pair to FP32, add, and round to nearest
  /// even, as libampc_comm_mpi.so does. The buffer stays untouched by the
  /// library until `wait`. 0 on success.
  int32_t (*start)(void *handle, int32_t request, void *buffer,
                   uint64_t count, ampc_dtype dtype);
  /// Waits until request `request` has finished. 0 on success.
  int32_t (*wait)(void *handle, int32_t request);
  /// The message after a non-zero return: one line (the step's error
  /// names the rank before it). NULL is taken as no message.
  const char *(*last_error)(void *handle);
} ampc_comm;

/// How to load a model. Fill it with `ampc_model_options_init`, then change
/// the fields you need.
typedef struct ampc_model_options {
  /// sizeof(ampc_model_options) as the application knows it; set by
  /// `ampc_model_options_init`. The runtime rejects a size it does not know.
  size_t struct_size;
  /// Threads a CPU model uses for each call: its kernels split their work
  /// over a pool of this many threads (the calling one included) that the
  /// handle owns, and OpenBLAS's thread count is set to the same number
  /// (process-wide: the last CPU model loaded sets it). 0 (the default):
  /// every core `sched_getaffinity` gives the process; 1: the calling
  /// thread only. The results are the same bits whatever the count. Ignored
  /// by CUDA models.
  int32_t num_threads;
  /// The host's `cudaStream_t` for a CUDA model to run on; NULL (the
  /// default) lets the library use its own. Ignored by CPU models. A CUDA
  /// model lives on the device current (cudaSetDevice) on the loading
  /// thread when it is loaded, and the stream must be that device's; every
  /// later call makes that device current for its duration and gives the
  /// caller's current device back, so models on several devices can be
  /// used from one thread.
  void *cuda_stream;
  /// Data parallel (appended; issue 41): the application's communicator,
  /// or NULL (the default) for the runtime's own from the job's
  /// environment (mpirun's; alone outside a job). Read by a library
  /// compiled with `--data-parallel`, ignored by others; checked at load
  /// (struct_size, rank in [0, size), no NULL function) either way.
  /// Options of the size before this field (an older header) mean NULL.
  const ampc_comm *comm;
} ampc_model_options;

/// Sets `options` to the defaults and `struct_size` to this header's size.
/// NULL is a no-op.
AMPC_API void ampc_model_options_init(ampc_model_options *options);

/// Loads the model library at `path` (a file path; a bare file name means the
/// current directory, unlike dlopen), checks its ABI version and
/// self-description, and initializes a fresh instance of its state.
/// `options` may be NULL for the defaults. On success `*out_model` holds a
/// new handle to release with `ampc_model_release`; on failure it is NULL.
/// Each load runs the code the file holds at the time of the call: the
/// runtime loads a private in-memory copy of the file (not the file by its
/// path, which the system loader would answer with an object it already
/// holds for that path), so a library rebuilt at the same path loads as the
/// new one while handles of the old one stay live and keep running the old
/// code, unaffected by the file being rewritten or removed. Only a regular
/// file is loaded (a FIFO or a device is refused without blocking).
/// Errors: AMPC_ERROR_NOT_FOUND (cannot open, not a regular file, not a
/// shared library, no
/// `ampc_model_entry`; the message carries the loader's text),
/// AMPC_ERROR_ABI_MISMATCH (names both versions), AMPC_ERROR_CORRUPT (bad
/// self-description), AMPC_ERROR_UNSUPPORTED (a mode this runtime cannot
/// run), AMPC_ERROR_EXECUTION (the library's initialization failed),
/// AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_load(const char *path,
                                     const ampc_model_options *options,
                                     ampc_model **out_model);

/// As `ampc_model_load`, for the model whose entry symbol is `entry` (NULL:
/// `ampc_model_entry`): a library that holds several models, compiled with
/// `ampc --symbol-suffix=S`, has the entry `ampc_model_entry` + S for each.
/// Errors as `ampc_model_load`; AMPC_ERROR_NOT_FOUND names the symbol.
AMPC_API ampc_status ampc_model_load_entry(const char *path, const char *entry,
                                           const ampc_model_options *options,
                                           ampc_model **out_model);

/// Frees the model's state and unloads its library. NULL is a no-op. A handle
/// that is not live (released already, or never created) is left alone and
/// only sets `ampc_last_error`.
AMPC_API void ampc_model_release(ampc_model *model);

/// What a model says about itself. The strings stay valid until the model is
/// released. The layout is fixed for ABI version 1; facts added later
/// (labels, optimizer, ...) come through new calls.
typedef struct ampc_model_info {
  /// The model's name (the ONNX graph name).
  const char *name;
  /// What the library runs on: "cpu" or "cuda".
  const char *target;
  /// The precision it was compiled for: "fp16", "bf16", "fp32" or "fp64".
  const char *precision;
  /// "infer" or "train".
  const char *mode;
  /// Number of inputs, outputs and parameters (see the *_info calls).
  int32_t num_inputs, num_outputs, num_parameters;
} ampc_model_info;

/// One input, output or parameter of a model. `name` and `shape` stay valid
/// until the model is released.
typedef struct ampc_tensor_info {
  /// The ONNX name.
  const char *name;
  /// Element type.
  ampc_dtype dtype;
  /// Number of dimensions; 0 for a scalar.
  int32_t rank;
  /// `rank` dimensions, all static (>= 0); NULL when rank is 0.
  const int64_t *shape;
} ampc_tensor_info;

/// Writes the model's self-description to `*out`.
AMPC_API ampc_status ampc_model_describe(const ampc_model *model,
                                         ampc_model_info *out);

/// Describes input `index` (0 <= index < num_inputs) in `*out`.
AMPC_API ampc_status ampc_model_input_info(const ampc_model *model,
                                           int32_t index,
                                           ampc_tensor_info *out);

/// Describes output `index` (0 <= index < num_outputs) in `*out`.
AMPC_API ampc_status ampc_model_output_info(const ampc_model *model,
                                            int32_t index,
                                            ampc_tensor_info *out);

/// Describes parameter `index` (0 <= index < num_parameters) in `*out`.
AMPC_API ampc_status ampc_model_parameter_info(const ampc_model *model,
                                               int32_t index,
                                               ampc_tensor_info *out);

/// Writes to `*out` how many buffers the model has: state its training step
/// updates that is neither trained nor the optimizer's, as torch calls
/// them (BatchNorm's running_mean, running_var and num_batches_tracked,
/// named as in the torch module's state_dict). 0 for a library without an
/// optimizer, where such tensors are parameters (frozen). Constant buffers
/// (a position encoding, a mask) are frozen parameters, not buffers here.
/// Errors: AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_num_buffers(const ampc_model *model,
                                            int32_t *out);

/// Describes buffer `index` (0 <= index < num_buffers) in `*out`.
AMPC_API ampc_status ampc_model_buffer_info(const ampc_model *model,
                                            int32_t index,
                                            ampc_tensor_info *out);

/*===----------------------------------------------------------------------===*
 * Running
 *===----------------------------------------------------------------------===*/

/// A tensor the application owns: dense, row-major, host memory.
typedef struct ampc_tensor {
  /// Element type; must equal the model's.
  ampc_dtype dtype;
  /// Number of dimensions; must equal the model's.
  int32_t rank;
  /// `rank` dimensions; must equal the model's. May be NULL when rank is 0.
  const int64_t *shape;
  /// The elements. May be NULL only when the tensor has no elements.
  void *data;
  /// Bytes available at `data`; at least elements * ampc_dtype_size(dtype).
  size_t size_bytes;
} ampc_tensor;

/// Runs the model on `inputs` (in the model's input order) and writes
/// `outputs` (in its output order) into buffers the caller allocated. The
/// model runs in eval mode, as PyTorch's `model.eval()`: Dropout is the
/// identity and BatchNormalization uses its running statistics (those a
/// training library's steps have updated), whatever mode the ONNX model was
/// exported in.
/// Before calling the library the runtime checks the counts, that no pointer
/// is NULL, and each tensor's dtype, rank, shape and size_bytes; output
/// buffers must not overlap each other or any input. Outputs are left
/// unspecified when the call fails.
/// Errors: AMPC_ERROR_INVALID_ARGUMENT, AMPC_ERROR_DTYPE_MISMATCH,
/// AMPC_ERROR_SHAPE_MISMATCH, AMPC_ERROR_EXECUTION (the library failed; the
/// message is the library's).
AMPC_API ampc_status ampc_model_infer(ampc_model *model,
                                      const ampc_tensor *inputs,
                                      int32_t num_inputs,
                                      ampc_tensor *outputs,
                                      int32_t num_outputs);

/*===----------------------------------------------------------------------===*
 * Parameters and gradients
 *
 * A library compiled with --mode=train can read and write its parameters and
 * compute the gradient of its loss without changing them; an inference
 * library answers these calls with AMPC_ERROR_UNSUPPORTED. In a training
 * library the model's inputs include the labels, and output 0 of
 * `ampc_model_infer` is the loss. Gradient checkers (ampc-gradcheck) and
 * hosts that run their own optimizer use these calls.
 *===----------------------------------------------------------------------===*/

/// Copies the current value of parameter `index` (0 <= index <
/// num_parameters, the order of `ampc_model_parameter_info`) into `*out`,
/// which must have the parameter's dtype, rank and shape and room for it
/// (`size_bytes`), like a tensor given to `ampc_model_infer`.
/// Errors: AMPC_ERROR_UNSUPPORTED (the library cannot read its parameters:
/// compiled for inference), AMPC_ERROR_INVALID_ARGUMENT,
/// AMPC_ERROR_DTYPE_MISMATCH, AMPC_ERROR_SHAPE_MISMATCH,
/// AMPC_ERROR_EXECUTION.
AMPC_API ampc_status ampc_model_get_parameter(const ampc_model *model,
                                              int32_t index, ampc_tensor *out);

/// Replaces the value of parameter `index` with `*in`, checked like
/// `ampc_model_get_parameter`'s `out`. Later calls on this handle see the
/// new value; other handles of the same library do not.
/// Errors: as `ampc_model_get_parameter`.
AMPC_API ampc_status ampc_model_set_parameter(ampc_model *model, int32_t index,
                                              const ampc_tensor *in);

/// Copies buffer `index` into `*out` (the buffer's dtype and shape), or
/// replaces it with `*in`; later steps start from the new value.
/// Errors: AMPC_ERROR_INVALID_ARGUMENT (index, NULL), AMPC_ERROR_DTYPE_MISMATCH,
/// AMPC_ERROR_SHAPE_MISMATCH, AMPC_ERROR_EXECUTION.
AMPC_API ampc_status ampc_model_get_buffer(const ampc_model *model,
                                           int32_t index, ampc_tensor *out);
AMPC_API ampc_status ampc_model_set_buffer(ampc_model *model, int32_t index,
                                           const ampc_tensor *in);

/// Data parallel (issue 41, docs/distributed.md): a library compiled with
/// `--data-parallel` and loaded by each process of an MPI job (`mpirun -np
/// N`), or given a communicator (`ampc_model_options.comm`), averages its
/// gradients over the N ranks every step; loaded alone, it trains as one
/// compiled without the flag. Writes this instance's rank and the number
/// of ranks (0 and 1 when it runs alone; the application communicator's
/// when it gave one) and the bytes its all-reduces have contributed so far
/// (0 alone; with the application's communicator, the bytes of the
/// buffers its `start` accepted, counted by the runtime); any out pointer
/// may be NULL. Errors: AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_data_parallel(const ampc_model *model,
                                              int32_t *rank,
                                              int32_t *world_size,
                                              uint64_t *bytes_all_reduced);

/// Writes to `*out` how many gradients `ampc_model_gradients` computes: one
/// per trainable parameter (frozen ones, such as integer parameters or those
/// that do not reach the loss, have none). May be 0.
/// Errors: AMPC_ERROR_UNSUPPORTED (no gradients: compiled for inference),
/// AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_num_gradients(const ampc_model *model,
                                              int32_t *out);

/// Writes to `*out_parameter_index` the parameter (index for
/// `ampc_model_parameter_info`) that gradient `g` (0 <= g < num_gradients)
/// belongs to; the gradient has that parameter's dtype and shape.
/// Errors: AMPC_ERROR_UNSUPPORTED, AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_gradient_info(const ampc_model *model,
                                              int32_t g,
                                              int32_t *out_parameter_index);

/// Runs the forward and backward passes on `inputs` (all the model's inputs,
/// labels included, in its input order) and writes the loss to `*loss` (the
/// dtype and shape of output 0) and gradient g of the loss to
/// `gradients[g]` (its parameter's dtype and shape), into buffers the caller
/// allocated. The parameters are left as they were: no optimizer step.
/// Validated like `ampc_model_infer`: counts, NULL pointers, each tensor's
/// dtype, rank, shape and size_bytes, and no result buffer may overlap an
/// input or another result. Results are left unspecified when the call
/// fails. `gradients` may be NULL when the model has no gradients.
/// Errors: AMPC_ERROR_UNSUPPORTED (compiled for inference: compile with
/// --mode=train), AMPC_ERROR_INVALID_ARGUMENT, AMPC_ERROR_DTYPE_MISMATCH,
/// AMPC_ERROR_SHAPE_MISMATCH, AMPC_ERROR_EXECUTION.
AMPC_API ampc_status ampc_model_gradients(ampc_model *model,
                                          const ampc_tensor *inputs,
                                          int32_t num_inputs,
                                          ampc_tensor *loss,
                                          ampc_tensor *gradients,
                                          int32_t num_gradients);

/*===----------------------------------------------------------------------===*
 * Training
 *
 * A library compiled with an optimizer (`ampc MODEL -o train.so`, the
 * default --optimizer=adamw) runs whole training steps: forward, loss,
 * backward, loss scaling, optimizer update on FP32 master weights. Its
 * gradient calls above answer AMPC_ERROR_UNSUPPORTED; compile with
 * --optimizer=none for a library that computes gradients only. An inference
 * library answers every call here with AMPC_ERROR_UNSUPPORTED.
 *===----------------------------------------------------------------------===*/

/// Runs one training step on `inputs` (all the model's inputs, labels
/// included, in its input order, validated like `ampc_model_infer`) and
/// writes the loss of this batch, before the update and unscaled, to
/// `*loss` (the dtype and shape of output 0). With dynamic loss scaling a
/// step whose gradients overflow is skipped: parameters, optimizer state and
/// step count stay bit-identical, the scale backs off (see
/// `ampc_model_get_scaler_state`). On the CPU target the loss is valid when
/// the call returns. On the CUDA target the call returns once the step is
/// queued on the model's stream, without waiting for the device; `*loss`
/// holds the loss after `ampc_model_synchronize` (the buffer must stay valid
/// until then), and every call that reads the model's state waits first.
/// The inputs are copied (into the library's pinned staging buffers) before
/// the call returns: the caller may reuse them at once.
/// Tensors in device memory are an error here (AMPC_ERROR_INVALID_ARGUMENT):
/// `ampc_model_train_step_device` takes them.
/// Errors: AMPC_ERROR_UNSUPPORTED (no optimizer: an inference library or
/// --optimizer=none), AMPC_ERROR_INVALID_ARGUMENT, AMPC_ERROR_DTYPE_MISMATCH,
/// AMPC_ERROR_SHAPE_MISMATCH, AMPC_ERROR_EXECUTION.
AMPC_API ampc_status ampc_model_train_step(ampc_model *model,
                                           const ampc_tensor *inputs,
                                           int32_t num_inputs,
                                           ampc_tensor *loss);

/// `ampc_model_train_step` on a partial batch: only the first `rows` rows
/// of the inputs (full batch size, as the model describes them) are real;
/// the step trains as on a batch of `rows` (the loss is the mean over
/// them, the other rows count in no gradient). Fill the other rows with
/// copies of a real row (finite values). `rows` equal to the batch size is
/// `ampc_model_train_step`. Errors as `ampc_model_train_step`, and
/// AMPC_ERROR_UNSUPPORTED when the library cannot leave rows out (its
/// message says why, e.g. a BatchNormalization's batch statistics: drop the
/// partial batch), AMPC_ERROR_INVALID_ARGUMENT for `rows` outside
/// [1, batch].
AMPC_API ampc_status ampc_model_train_step_rows(ampc_model *model,
                                                const ampc_tensor *inputs,
                                                int32_t num_inputs,
                                                ampc_tensor *loss,
                                                int64_t rows);

/// `ampc_model_train_step` on a batch already on the device (a CUDA
/// library): every input's `data` is memory of the model's device
/// (cudaMalloc, a torch CUDA tensor's data_ptr()), copied device to device
/// into the step's buffers on the model's stream when the step runs, so it
/// must stay unchanged until `ampc_model_synchronize` (or until work the
/// caller queues on that stream after the call). `loss` is NULL (the loss
/// is not copied anywhere, and no host work is queued) or a tensor of the
/// loss's dtype and shape in device memory, written when the step runs.
/// Nothing crosses the host bus. Validated like `ampc_model_train_step`,
/// and each tensor's memory is checked: host memory, or another device's,
/// is AMPC_ERROR_INVALID_ARGUMENT (as is device memory given to the host
/// calls). Partial batches: `ampc_model_train_step_rows_device`.
/// Errors: AMPC_ERROR_UNSUPPORTED (a library that runs on the host, or one
/// without an optimizer), AMPC_ERROR_INVALID_ARGUMENT,
/// AMPC_ERROR_DTYPE_MISMATCH, AMPC_ERROR_SHAPE_MISMATCH,
/// AMPC_ERROR_EXECUTION.
AMPC_API ampc_status ampc_model_train_step_device(ampc_model *model,
                                                  const ampc_tensor *inputs,
                                                  int32_t num_inputs,
                                                  ampc_tensor *loss);

/// `ampc_model_train_step_rows` on a batch already on the device: full-size
/// device inputs (as `ampc_model_train_step_device` takes them) whose first
/// `rows` rows are real; the rest must be finite and count in nothing.
/// Errors: those of both calls.
AMPC_API ampc_status ampc_model_train_step_rows_device(
    ampc_model *model, const ampc_tensor *inputs, int32_t num_inputs,
    ampc_tensor *loss, int64_t rows);

/// Makes the model's stream wait, on the device, for the work queued so
/// far on `cuda_stream` (a cudaStream_t of the model's device, or
/// cudaStreamLegacy / cudaStreamPerThread): call it after producing a
/// batch on another stream and before `ampc_model_train_step_device`. The
/// host does not block. A model created on the producer's stream
/// (ampc_model_options.cuda_stream) needs no wait; to read the loss on
/// another stream, wait for the model with `ampc_model_synchronize`, or
/// create the model on that stream.
/// Errors: AMPC_ERROR_UNSUPPORTED (a library that runs on the host),
/// AMPC_ERROR_INVALID_ARGUMENT, AMPC_ERROR_EXECUTION (not a live stream).
AMPC_API ampc_status ampc_model_wait_stream(ampc_model *model,
                                            void *cuda_stream);

/// `ampc_model_infer` with inputs and outputs in memory of the model's
/// device (a CUDA library): device-to-device copies only; the call returns
/// when the outputs are written. Errors as `ampc_model_infer`, and
/// AMPC_ERROR_UNSUPPORTED for a library that runs on the host,
/// AMPC_ERROR_INVALID_ARGUMENT for a tensor in host memory or on another
/// device.
AMPC_API ampc_status ampc_model_infer_device(ampc_model *model,
                                             const ampc_tensor *inputs,
                                             int32_t num_inputs,
                                             ampc_tensor *outputs,
                                             int32_t num_outputs);

/// What a training library's optimizer and scaler are. Strings stay valid
/// until the model is released.
typedef struct ampc_training_info {
  /// "sgd", "adam" or "adamw".
  const char *optimizer;
  /// The hyperparameters as compiled, "name=value" separated by spaces
  /// (e.g. "lr=0.001 beta1=0.9 beta2=0.999 eps=1e-08 weight_decay=0.01").
  const char *hyperparameters;
  /// "dynamic", "static" or "none".
  const char *loss_scaling;
  /// Number of labels among the inputs (the last inputs), >= 0.
  int32_t num_labels;
} ampc_training_info;

/// Describes the training step of a library compiled with an optimizer.
/// Errors: AMPC_ERROR_UNSUPPORTED, AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_training_info(const ampc_model *model,
                                              ampc_training_info *out);

/// The learning rate the next step uses (runtime state, initially --lr).
/// `set` accepts any finite value >= 0.
/// Errors: AMPC_ERROR_UNSUPPORTED, AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_get_learning_rate(const ampc_model *model,
                                                  float *out);
AMPC_API ampc_status ampc_model_set_learning_rate(ampc_model *model,
                                                  float learning_rate);

/// The dynamic loss scaler's state (torch.amp.GradScaler's algorithm) and
/// the step counters. Without loss scaling `scale` is 1 and
/// `growth_tracker` 0.
typedef struct ampc_scaler_state {
  /// The current loss scale.
  float scale;
  /// Consecutive finite steps since the scale last changed.
  int32_t growth_tracker;
  /// Optimizer steps taken (skipped steps not counted).
  int64_t steps;
  /// Steps skipped because a gradient was not finite.
  int64_t skipped_steps;
} ampc_scaler_state;

/// Reads the scaler state into `*out`.
/// Errors: AMPC_ERROR_UNSUPPORTED, AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_get_scaler_state(const ampc_model *model,
                                                 ampc_scaler_state *out);

/// Replaces the scaler state (`scale` finite and > 0, counters >= 0).
/// Errors: AMPC_ERROR_UNSUPPORTED, AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_set_scaler_state(ampc_model *model,
                                                 const ampc_scaler_state *in);

/// Writes 1 to `*collective` when ampc_model_save_checkpoint is a
/// collective call for this instance: a library compiled with
/// --shard-optimizer running on several ranks, whose optimizer moments are
/// sharded (every rank must call it with the same path; rank 0 writes the
/// file, which does not depend on the number of ranks); 0 otherwise (each
/// instance writes its own file). Errors: AMPC_ERROR_INVALID_ARGUMENT.
AMPC_API ampc_status ampc_model_checkpoint_is_collective(
    const ampc_model *model, int32_t *collective);

/// Writes every piece of training state (parameters, BatchNorm running
/// statistics, optimizer moments, learning rate, scaler state and step
/// counters) to `path`: a versioned,
/// checksummed file, written to a temporary file in the same folder and
/// renamed over `path`, so a crash never leaves a half-written checkpoint.
/// Errors: AMPC_ERROR_UNSUPPORTED, AMPC_ERROR_INVALID_ARGUMENT,
/// AMPC_ERROR_IO.
AMPC_API ampc_status ampc_model_save_checkpoint(const ampc_model *model,
                                                const char *path);

/// Restores the state `ampc_model_save_checkpoint` wrote. The file is
/// checked completely before anything changes: a truncated or corrupted
/// file, another format version, or a checkpoint of a different model
/// (other state names, dtypes or shapes) is refused with a message naming
/// the file and what is wrong, and the model is left as it was.
/// Errors: AMPC_ERROR_UNSUPPORTED, AMPC_ERROR_INVALID_ARGUMENT (also an
/// intact checkpoint of another model or training setup: "incompatible with
/// this library", e.g. AdamW's state into an SGD library), AMPC_ERROR_IO,
/// AMPC_ERROR_CORRUPT (malformed, truncated, checksum).
AMPC_API ampc_status ampc_model_load_checkpoint(ampc_model *model,
                                                const char *path);

/// Waits until the model's queued work has finished: after it, the loss of
/// every `ampc_model_train_step` so far is in its buffer. Reports an error a
/// device kernel found since the last wait (a label or index out of range).
/// A no-op for CPU models.
/// Errors: AMPC_ERROR_INVALID_ARGUMENT, AMPC_ERROR_EXECUTION.
AMPC_API ampc_status ampc_model_synchronize(ampc_model *model);

/// Writes the trained model as ONNX to `path`: the original model the
/// library was compiled from, with every trained initializer replaced by its
/// current FP32 master value and BatchNorm's running statistics by their
/// current values, in eval mode (BatchNormalization with training_mode 0 and
/// without its running-statistics outputs, Dropout without its
/// training_mode input), so it computes what `ampc_model_infer` computes
/// (atomic write as for checkpoints).
/// Errors: AMPC_ERROR_UNSUPPORTED (the library does not carry its model),
/// AMPC_ERROR_INVALID_ARGUMENT, AMPC_ERROR_IO, AMPC_ERROR_CORRUPT.
AMPC_API ampc_status ampc_model_export_onnx(const ampc_model *model,
                                            const char *path);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AMPC_RUNTIME_AMPC_H */
