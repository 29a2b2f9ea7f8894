/*===- ModelAbi.h - what a compiled model library exports ----------*- C -*-===*
 *
 * The contract between libampc_runtime.so and the model libraries the code
 * generators write (lib/Target/Cpu, lib/Target/Cuda). Plain C. A model
 * library exports exactly one symbol, `ampc_model_entry`, which returns a
 * constant descriptor: what the model is, its tensors, and the functions
 * that run it. Applications never see this header; they use ampc.h.
 *
 * Rules for a library:
 *  - All mutable state lives in the per-instance `state` block the runtime
 *    allocates (`state_size` bytes, 64-byte aligned, zeroed). Two instances
 *    of one library (two ampc_model_load calls on one path) share the loaded
 *    code and its globals, so globals must be constant.
 *  - The runtime never calls two functions on one `state` at the same time;
 *    different states may run concurrently.
 *  - The runtime validates every tensor (count, dtype, shape, buffer size)
 *    before calling `infer`, so the library need not.
 *  - Tensors are dense, row-major, with exactly the dtype and shape of the
 *    descriptor, in host memory (in the device's memory for the `_device`
 *    functions).
 *  - Functions return 0 on success. After a non-zero return, `last_error`
 *    (when present) gives a message for that state; the runtime copies it
 *    before making another call.
 *
 * Compatibility: `abi_version` must equal AMPC_ABI_VERSION of the runtime.
 * Fields are only ever appended to the structs that start with
 * `struct_size`; the runtime reads an appended field only when the library's
 * `struct_size` covers it, and a library reads `ampc_abi_config` fields
 * likewise.
 *
 *===----------------------------------------------------------------------===*/

#ifndef AMPC_RUNTIME_MODELABI_H
#define AMPC_RUNTIME_MODELABI_H

#include "ampc/Runtime/ampc.h"

#include <stddef.h>
#include <stdint.h>

/// Name of the one symbol a model library must export.
#define AMPC_MODEL_ENTRY_SYMBOL "ampc_model_entry"

/// Marks `ampc_model_entry` exported when the library is compiled with
/// -fvisibility=hidden.
#if defined(__GNUC__) || defined(__clang__)
#define AMPC_MODEL_EXPORT __attribute__((visibility("default")))
#else
#define AMPC_MODEL_EXPORT
#endif

#ifdef __cplusplus
extern "C" {
#endif

/// One input, output or parameter.
typedef struct ampc_abi_tensor {
  /// The ONNX name; not NULL.
  const char *name;
  /// An ampc_dtype value (ONNX TensorProto code), as a fixed-size integer.
  int32_t dtype;
  /// Number of dimensions, >= 0.
  int32_t rank;
  /// `rank` static dimensions, each >= 0; may be NULL when rank is 0.
  const int64_t *shape;
} ampc_abi_tensor;

/// How the host wants the instance to run; passed to `init`. Fields are
/// appended over time: read one only when `struct_size` covers it.
typedef struct ampc_abi_config {
  /// sizeof(ampc_abi_config) as the runtime knows it.
  size_t struct_size;
  /// Threads a CPU model uses (its pool and OpenBLAS's); 0: every core
  /// sched_getaffinity gives the process.
  int32_t num_threads;
  /// The host's cudaStream_t, or NULL: the library creates its own.
  void *cuda_stream;
  /// Data parallel (appended; issue 41): the ranks' communicator, or NULL
  /// when the instance runs alone. Read by a library with all-reduce
  /// buckets; it must outlive the instance.
  const struct ampc_abi_comm *comm;
} ampc_abi_config;

/// A communicator the runtime gives a data-parallel library (issue 41,
/// docs/distributed.md): the ranks of one job, each with an instance of the
/// same library. Requests are numbered by the library (its buckets); at most
/// one is outstanding per number.
typedef struct ampc_abi_comm {
  /// sizeof(ampc_abi_comm) as the runtime knows it.
  size_t struct_size;
  /// This process's rank and the number of ranks, 0 <= rank < size.
  int32_t rank;
  int32_t size;
  /// Passed back to every function.
  void *handle;
  /// Starts summing `count` elements of `dtype` (AMPC_DTYPE_F32,
  /// AMPC_DTYPE_F16, AMPC_DTYPE_BF16 or AMPC_DTYPE_F64) at
  /// `buffer` over the ranks, in place, as request `request`; every rank
  /// gets the same bits. 0 on success.
  int32_t (*start)(void *handle, int32_t request, void *buffer,
                   uint64_t count, int32_t dtype);
  /// Waits until request `request` has finished. 0 on success.
  int32_t (*wait)(void *handle, int32_t request);
  /// The message after a non-zero return (one line, naming the rank).
  const char *(*last_error)(void *handle);
  /* Appended (read it only when `struct_size` covers it). */

  /// A CUDA library's all-reduce (issue 41): queues the in-place sum of
  /// `count` elements of `dtype` at `buffer` (device memory of the
  /// library's device) on `stream` (a cudaStream_t of that device) and
  /// returns without waiting: the sum runs after the work queued on the
  /// stream before it, and work queued after it sees the sum (NCCL's
  /// ncclAllReduce). Every call may be captured into a CUDA graph, and a
  /// replay of the graph sums again. No `wait` follows. NULL in a
  /// communicator of host memory (libampc_comm_mpi.so): a CUDA library
  /// under the CUDA execution on the CPU, whose device memory is host
  /// memory, then calls `start` and `wait` from a host function on its
  /// stream; on a GPU it refuses such a communicator at init.
  int32_t (*start_on_stream)(void *handle, int32_t request, void *buffer,
                             uint64_t count, int32_t dtype, void *stream);

  /* ZeRO-1 (appended; issue 41, item 3; read them only when `struct_size`
   * covers them: NULL, or not covered, in a communicator without them). */

  /// Starts the in-place reduce-scatter of `count` elements of `dtype` at
  /// `buffer` (`count` a multiple of `size`; the dtypes and sums of
  /// `start`) as request `request`, finished by `wait`: afterwards the
  /// block of rank r, elements [r * count / size, (r + 1) * count / size),
  /// holds on rank r the sum over the ranks of that block (NCCL's in-place
  /// ncclReduceScatter); the rest of `buffer` is unspecified. Every rank
  /// gets the same bits the all-reduce gives for its block.
  int32_t (*reduce_scatter)(void *handle, int32_t request, void *buffer,
                            uint64_t count, int32_t dtype);
  /// Starts the in-place all-gather of `count` elements of `dtype` at
  /// `buffer` (`count` a multiple of `size`; any of `start`'s dtypes, which
  /// are only copied) as request `request`, finished by `wait`: afterwards
  /// every rank's `buffer` holds, in block r, rank r's block.
  int32_t (*all_gather)(void *handle, int32_t request, void *buffer,
                        uint64_t count, int32_t dtype);
  /// The CUDA forms (as `start_on_stream`): queued on `stream`, no `wait`.
  /// NULL in a communicator of host memory.
  int32_t (*reduce_scatter_on_stream)(void *handle, int32_t request,
                                      void *buffer, uint64_t count,
                                      int32_t dtype, void *stream);
  int32_t (*all_gather_on_stream)(void *handle, int32_t request, void *buffer,
                                  uint64_t count, int32_t dtype, void *stream);
} ampc_abi_comm;

/// The descriptor `ampc_model_entry` returns. It and everything it points to
/// must stay valid and unchanged while the library is loaded.
typedef struct ampc_model_abi {
  /// sizeof(ampc_model_abi) as the library was compiled; the runtime rejects
  /// one smaller than the version-1 struct.
  size_t struct_size;
  /// AMPC_ABI_VERSION the library was compiled against.
  uint32_t abi_version;
  /// The model's name, the target ("cpu", "cuda"), the precision ("fp16",
  /// "bf16", "fp32", "fp64") and the mode ("infer" or "train"); not NULL.
  const char *name;
  const char *target;
  const char *precision;
  const char *mode;
  /// Inputs in the order `infer` takes them.
  int32_t num_inputs;
  const ampc_abi_tensor *inputs;
  /// Outputs in the order `infer` writes them.
  int32_t num_outputs;
  const ampc_abi_tensor *outputs;
  /// Parameters (trainable weights), for description and, later,
  /// checkpoints.
  int32_t num_parameters;
  const ampc_abi_tensor *parameters;
  /// Bytes of per-instance state the runtime allocates (64-byte aligned,
  /// zeroed) and passes to every function.
  size_t state_size;
  /// Prepares a fresh state (constants, device memory, handles); `config` is
  /// never NULL. May be NULL when there is nothing to prepare.
  int32_t (*init)(void *state, const ampc_abi_config *config);
  /// Reads `inputs[i]` and writes `outputs[i]`, one data pointer per tensor
  /// in descriptor order. Required in mode "infer".
  int32_t (*infer)(void *state, const void *const *inputs,
                   void *const *outputs);
  /// The message after a non-zero return on `state`; may be NULL.
  const char *(*last_error)(void *state);
  /// Frees what `init` acquired; the runtime then frees the state block.
  /// Called once per successful `init`, never after a failed one (which must
  /// clean up itself). May be NULL.
  void (*release)(void *state);
  /* Version 1 ends here; what follows is appended (read it only when
   * `struct_size` covers it). */

  /// Copies parameter `index` (descriptor order) out of `state` into `out`
  /// (its dtype and shape, dense) or into `state` from `in`. Required when
  /// `num_parameters` > 0 and the library has `gradients`.
  int32_t (*read_parameter)(void *state, int32_t index, void *out);
  int32_t (*write_parameter)(void *state, int32_t index, const void *in);
  /// The gradients `gradients` writes: for each, the index of its parameter
  /// (descriptor order). Frozen parameters (not float, or not reaching the
  /// loss) have none. The gradient of parameter p has p's shape and dtype.
  int32_t num_gradients;
  const int32_t *gradient_parameters;
  /// Reads `inputs` (the descriptor's inputs, labels included) and writes
  /// outputs[0], the loss (a scalar of the dtype of outputs[0] in the
  /// descriptor), and outputs[1 + g], gradient g, without changing the
  /// parameters. NULL when the library was not compiled for training.
  int32_t (*gradients)(void *state, const void *const *inputs,
                       void *const *outputs);

  /* Training (appended). A library compiled with an optimizer sets
   * `train_step`; the rest describes the state it keeps. */

  /// Every tensor of the training state a checkpoint holds, parameters
  /// first (descriptor order), then model state that is not trained
  /// (BatchNorm running statistics, named after their ONNX initializer:
  /// infer reads them, train_step updates them, the ONNX export writes
  /// them), then optimizer moments ("NAME.exp_avg",
  /// "NAME.exp_avg_sq", "NAME.momentum_buffer"), then the scalars
  /// "ampc.lr" (f32), "ampc.step" (i64), and, with loss scaling,
  /// "ampc.loss_scale" (f32), "ampc.growth_tracker" (i32),
  /// "ampc.skipped_steps" (i64). Low-precision weight copies are derived
  /// and not listed: `write_state` refreshes them.
  int32_t num_state_tensors;
  const ampc_abi_tensor *state_tensors;
  int32_t (*read_state)(void *state, int32_t index, void *out);
  int32_t (*write_state)(void *state, int32_t index, const void *in);
  /// One training step: reads `inputs` (descriptor inputs, labels
  /// included) and writes the loss (a scalar of the dtype of outputs[0]) to
  /// `loss`. NULL when the library has no optimizer.
  int32_t (*train_step)(void *state, const void *const *inputs, void *loss);
  /// "sgd", "adam", "adamw"; hyperparameters as "name=value ..."; loss
  /// scaling "dynamic", "static" or "none"; labels: the last `num_labels`
  /// inputs. Not NULL when `train_step` is set.
  const char *optimizer;
  const char *hyperparameters;
  const char *loss_scaling;
  int32_t num_labels;
  /// The ONNX model the library was compiled from (bytes), for export;
  /// NULL/0 when not embedded.
  const unsigned char *onnx_model;
  size_t onnx_model_size;

  /* Asynchronous targets (appended). */

  /// Waits until everything the library started on `state` has finished
  /// (a CUDA library's stream: `train_step` returns before the device is
  /// done, and the loss reaches its buffer when the stream gets there), and
  /// reports an error a kernel found meanwhile. NULL for a library whose
  /// functions finish before they return (the CPU target).
  int32_t (*synchronize)(void *state);

  /* Buffers (appended). */

  /// The state tensors that are the model's buffers (torch's word): state
  /// `train_step` updates that is neither trained nor the optimizer's —
  /// BatchNorm's running statistics and "PREFIX.num_batches_tracked"
  /// counters — as `num_buffers` distinct indices into `state_tensors`.
  /// 0/NULL without an optimizer (the statistics are then parameters).
  int32_t num_buffers;
  const int32_t *buffer_states;

  /* Partial batches (appended). */

  /// "" when `train_step` trains a partial batch: the last state tensor
  /// is then "ampc.batch_rows" (i64 scalar, the rows of the batch that
  /// count; the batch size unless the runtime sets fewer around one step;
  /// not part of a checkpoint). Otherwise why it cannot (one line, e.g.
  /// "BatchNormalization 'bn1' computes statistics over the batch"); NULL:
  /// it cannot, for no stated reason.
  const char *partial_batch_refusal;

  /* Device-resident tensors (appended; issue 37, item 2). */

  /// `train_step` and `infer` with every tensor pointer in memory of the
  /// library's device (cudaMalloc, a torch CUDA tensor): the inputs are
  /// copied device to device into the step's staging buffers, outputs
  /// device to device out of them; `train_step_device`'s `loss` may be
  /// NULL (the loss is then not copied anywhere). NULL for a library
  /// that runs on the host (the CPU target); `train_step_device` NULL too
  /// without an optimizer.
  int32_t (*train_step_device)(void *state, const void *const *inputs,
                               void *loss);
  int32_t (*infer_device)(void *state, const void *const *inputs,
                          void *const *outputs);
  /// Where `pointer` is, as the library's device API sees it: one of
  /// AMPC_ABI_MEMORY_*. The runtime checks every caller tensor of a call
  /// with it (host memory where a call takes device memory, or the
  /// reverse, is an error). It reads nothing of `state` but the device
  /// ordinal, and may run while another function runs on `state`. NULL for
  /// a host library.
  int32_t (*memory_of)(void *state, const void *pointer);
  /// Makes the library's stream wait, on the device, for the work queued
  /// so far on `stream` (a cudaStream_t of the library's device: where the
  /// caller produced a batch). NULL for a host library.
  int32_t (*wait_stream)(void *state, void *stream);

  /* Data parallel (appended; issue 41). */

  /// The all-reduce requests a step makes: > 0 when the library was
  /// compiled with `--data-parallel` and averages its gradients over the
  /// ranks of `ampc_abi_config.comm` (alone without one).
  int32_t num_all_reduce_buckets;
  /// The buckets' buffers, in bucket order: "dtype:count" each (the ONNX
  /// dtype and the elements), separated by ';'. Ranks whose libraries
  /// differ in it, or in the rest of the descriptor, are refused at load.
  const char *all_reduce_layout;
} ampc_model_abi;

/// `memory_of`'s answers.
enum {
  /// Host memory, pageable or pinned.
  AMPC_ABI_MEMORY_HOST = 0,
  /// Device memory of the library's device.
  AMPC_ABI_MEMORY_DEVICE = 1,
  /// Device memory of another device.
  AMPC_ABI_MEMORY_OTHER_DEVICE = 2,
  /// Managed memory (cudaMallocManaged): readable from both.
  AMPC_ABI_MEMORY_MANAGED = 3,
};

/// Exported by every compiled model library; returns its descriptor.
AMPC_MODEL_EXPORT const ampc_model_abi *ampc_model_entry(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AMPC_RUNTIME_MODELABI_H */
