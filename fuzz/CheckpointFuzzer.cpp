//===- CheckpointFuzzer.cpp - libFuzzer target: the checkpoint reader -----===//
//
// One input is one checkpoint file, read for a fixed model: "fuzz" with a
// parameter w f32 [2, 3], a bias b f16 [3], a step counter i64 [] and the
// loss scaler's state (optional in a checkpoint). Inputs of even size get a
// valid checksum written over their last 8 bytes first, so that mutations
// reach the checks after it (a forged checksum is what a hostile file has).
// The reader must accept or refuse; a crash, a sanitizer finding, or an
// accepted file that fills a tensor with the wrong number of bytes stops the
// run.
//
// The file goes through a memfd, read by its /proc/self/fd path: the reader
// takes a path, as the runtime's callers give it one.
//
// AMPC_FUZZ_WRITE_SEED=PATH: write a valid checkpoint of the fixed model to
// PATH and exit (the seed corpus, fuzz/make-corpus).
//
//===----------------------------------------------------------------------===//

#define FUZZ_WITH_CHECKPOINT
#include "FuzzSupport.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using ampc::runtime::StateTensor;

namespace {

std::vector<StateTensor> modelTensors() {
  auto tensor = [](const char *name, int32_t dtype, std::vector<int64_t> shape,
                   size_t bytes) {
    StateTensor t;
    t.name = name;
    t.dtype = dtype;
    t.shape = std::move(shape);
    t.bytes = bytes;
    return t;
  };
  return {tensor("w", 1, {2, 3}, 24), tensor("b", 10, {3}, 6),
          tensor("ampc.step", 7, {}, 8), tensor("ampc.loss_scale", 1, {}, 4),
          tensor("ampc.growth_tracker", 7, {}, 8)};
}

int memfd = -1;
std::string memfdPath;

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  if (const char *seed = std::getenv("AMPC_FUZZ_WRITE_SEED")) {
    std::vector<StateTensor> tensors = modelTensors();
    std::vector<std::vector<unsigned char>> values;
    std::vector<const void *> data;
    for (size_t i = 0; i < tensors.size(); ++i)
      values.emplace_back(tensors[i].bytes, static_cast<unsigned char>(i + 1));
    for (const auto &v : values)
      data.push_back(v.data());
    std::string error;
    if (!ampc::runtime::writeCheckpoint(seed, "fuzz", tensors, data, error)) {
      std::fprintf(stderr, "%s\n", error.c_str());
      std::exit(1);
    }
    std::exit(0);
  }
  memfdPath = ampc::fuzz::openCheckpointFile("ampc-fuzz-checkpoint", memfd);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ampc::fuzz::writeCheckpointInput(memfd, data, size);
  std::vector<StateTensor> tensors = modelTensors();
  std::vector<std::vector<unsigned char>> out;
  std::vector<bool> present;
  std::string error;
  bool corrupt = false;
  if (!ampc::runtime::readCheckpoint(memfdPath, "fuzz", tensors, out, present,
                                     error, corrupt))
    return 0;
  if (out.size() != tensors.size() || present.size() != tensors.size()) {
    std::fprintf(stderr, "accepted with %zu tensors, %zu presence flags\n",
                 out.size(), present.size());
    std::abort();
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    if (present[i] && out[i].size() != tensors[i].bytes) {
      std::fprintf(stderr, "tensor %s: %zu bytes, expected %zu\n",
                   tensors[i].name.c_str(), out[i].size(), tensors[i].bytes);
      std::abort();
    }
  return 0;
}
