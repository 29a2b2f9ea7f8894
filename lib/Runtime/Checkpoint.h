//===- Checkpoint.h - training-state files for the runtime ------*- C++ -*-===//
//
// The file format behind ampc_model_save_checkpoint / load_checkpoint
// (described at the top of Checkpoint.cpp and in docs/design.md). Internal
// to libampc_runtime: plain C++ over libc, no LLVM, no protobuf.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_LIB_RUNTIME_CHECKPOINT_H
#define AMPC_LIB_RUNTIME_CHECKPOINT_H

#include "ampc/Support/AtomicWrite.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ampc::runtime {

/// One tensor of the training state as a checkpoint records it. `dtype` is an
/// ampc_dtype (ONNX TensorProto code); `bytes` is the size of its data.
struct StateTensor {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  size_t bytes = 0;
};

/// Whether a checkpoint may lack the state tensor `name`, or hold it for a
/// model that has none: the loss scaler's state ("ampc.loss_scale",
/// "ampc.growth_tracker", "ampc.skipped_steps"), which only some precisions
/// of one model keep (fp16 scales by default, bf16 and fp32 do not), so a
/// checkpoint moves between precisions of the same model.
bool isOptionalStateTensor(const std::string &name);

/// The checkpoint format's checksum (FNV-1a 64) of `size` bytes: a file
/// ends with it, little-endian, over everything before it.
uint64_t checkpointChecksum(const void *data, size_t size);

/// Writes every tensor (data[i] holds tensors[i].bytes bytes) to `path`
/// atomically: into a temporary file with a unique name in the same folder,
/// flushed to disk, then renamed over `path`; the temporary is removed on any
/// failure, so `path` is either the old file or the complete new one. On
/// failure returns false and sets `error` to one line naming the file.
bool writeCheckpoint(const std::string &path, const std::string &modelName,
                     const std::vector<StateTensor> &tensors,
                     const std::vector<const void *> &data,
                     std::string &error);

/// Reads the checkpoint at `path` and checks all of it before returning: the
/// magic, the format version, the size (truncation), the checksum, and that
/// it belongs to `modelName` with exactly `tensors` (names, dtypes, shapes,
/// sizes, in order; optional state may be missing on either side). On
/// success present[i] says whether the file holds tensors[i], and then
/// out[i] holds its tensors[i].bytes bytes. On
/// failure returns false, leaves `out` alone, sets `error` to one line
/// starting with the file's path and `corrupt` to true when the file is
/// malformed, false when it could not be read (missing, unreadable) or is
/// intact but another model's or another training setup's (its tensors
/// differ from `tensors`: another optimizer's state, say); then
/// `*incompatible`, when given, is set.
bool readCheckpoint(const std::string &path, const std::string &modelName,
                    const std::vector<StateTensor> &tensors,
                    std::vector<std::vector<unsigned char>> &out,
                    std::vector<bool> &present, std::string &error,
                    bool &corrupt, bool *incompatible = nullptr);

} // namespace ampc::runtime

#endif // AMPC_LIB_RUNTIME_CHECKPOINT_H
