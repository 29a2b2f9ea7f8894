//===- LiveCheckpointFuzzer.cpp - libFuzzer target: checkpoints, then steps ===//
//
// One input is one checkpoint file, loaded through the C API
// (ampc_model_load_checkpoint) into a live instance of a compiled training
// library, which then takes a training step and an inference step. The
// library is fuzz/live-model.onnxtext compiled at --precision=fp16
// (fuzz/make-corpus compiles it with the sanitized ampc; AMPC_FUZZ_MODEL
// names it): parameters, BatchNormalization's running statistics, AdamW's
// moments, the learning rate, the loss scaler's state and the step
// counters all come from the file. The runtime (lib/Runtime/Runtime.cpp)
// is compiled into this program, instrumented; the library's own code is
// not (the host compiler builds it).
//
// As for ampc-fuzz-checkpoint, inputs of even size get a valid checksum
// written over their last 8 bytes, so that mutations reach the checks after
// it. The oracles, besides the sanitizers: a checkpoint the runtime refuses
// leaves every parameter and the scaler state as they were; the steps may
// fail with an error status (a NaN the file put in a moment), never crash.
//
// AMPC_FUZZ_WRITE_SEED=PATH: train the library for two steps, save its
// checkpoint to PATH and exit (the seed corpus, fuzz/make-corpus).
// AMPC_FUZZ_VERBOSE=1: print why each input was refused, or that the
// steps ran.
//
//===----------------------------------------------------------------------===//

#define FUZZ_WITH_CHECKPOINT
#include "FuzzSupport.h"

#include "ampc/Runtime/ampc.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace {

std::string modelPath;
/// Keeps the library loaded between inputs, and holds its initial state.
ampc_model *pristine = nullptr;
int memfd = -1;
std::string memfdPath;
/// AMPC_FUZZ_VERBOSE=1: say what became of each input (reproductions).
bool verbose = false;

[[noreturn]] void die(const char *what) {
  std::fprintf(stderr, "ampc-fuzz-live-checkpoint: %s: %s\n", what,
               ampc_last_error());
  std::abort();
}

/// A tensor for each input (or output) of `model`: float inputs hold 0.5,
/// the others (class ids) 0.
struct Tensors {
  std::vector<std::vector<unsigned char>> storage;
  std::vector<ampc_tensor> tensors;

  void add(const ampc_tensor_info &info) {
    size_t count = 1;
    for (int32_t d = 0; d < info.rank; ++d)
      count *= static_cast<size_t>(info.shape[d]);
    size_t bytes = count * ampc_dtype_size(info.dtype);
    std::vector<unsigned char> data(bytes, 0);
    if (info.dtype == AMPC_DTYPE_F32)
      for (size_t i = 0; i < count; ++i) {
        float v = 0.5f;
        std::memcpy(&data[i * 4], &v, 4);
      }
    storage.push_back(std::move(data));
    tensors.push_back(
        {info.dtype, info.rank, info.shape, nullptr, bytes});
  }
  ampc_tensor *get() {
    for (size_t i = 0; i < tensors.size(); ++i)
      tensors[i].data = storage[i].data();
    return tensors.data();
  }
};

/// Every input, labels included (a training library's inference takes them
/// too: its output 0 is the loss).
Tensors inputsOf(const ampc_model *model) {
  Tensors t;
  ampc_model_info info;
  if (ampc_model_describe(model, &info))
    die("describe");
  for (int32_t i = 0; i < info.num_inputs; ++i) {
    ampc_tensor_info input;
    if (ampc_model_input_info(model, i, &input))
      die("input info");
    t.add(input);
  }
  return t;
}

Tensors outputsOf(const ampc_model *model) {
  Tensors t;
  ampc_model_info info;
  if (ampc_model_describe(model, &info))
    die("describe");
  for (int32_t i = 0; i < info.num_outputs; ++i) {
    ampc_tensor_info output;
    if (ampc_model_output_info(model, i, &output))
      die("output info");
    t.add(output);
  }
  return t;
}

/// Every parameter's bytes, then the scaler state's.
std::vector<unsigned char> snapshot(const ampc_model *model) {
  std::vector<unsigned char> all;
  ampc_model_info info;
  if (ampc_model_describe(model, &info))
    die("describe");
  for (int32_t i = 0; i < info.num_parameters; ++i) {
    ampc_tensor_info p;
    if (ampc_model_parameter_info(model, i, &p))
      die("parameter info");
    Tensors t;
    t.add(p);
    if (ampc_model_get_parameter(model, i, t.get()))
      die("get parameter");
    all.insert(all.end(), t.storage[0].begin(), t.storage[0].end());
  }
  ampc_scaler_state scaler;
  if (ampc_model_get_scaler_state(model, &scaler) == AMPC_OK) {
    const auto *bytes = reinterpret_cast<const unsigned char *>(&scaler);
    all.insert(all.end(), bytes, bytes + sizeof scaler);
  }
  return all;
}

bool trainStep(ampc_model *model) {
  Tensors inputs = inputsOf(model);
  float loss = 0;
  ampc_tensor lossTensor = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof loss};
  return ampc_model_train_step(model, inputs.get(),
                               static_cast<int32_t>(inputs.tensors.size()),
                               &lossTensor) == AMPC_OK;
}

void inferStep(ampc_model *model) {
  Tensors inputs = inputsOf(model);
  Tensors outputs = outputsOf(model);
  (void)ampc_model_infer(model, inputs.get(),
                         static_cast<int32_t>(inputs.tensors.size()),
                         outputs.get(),
                         static_cast<int32_t>(outputs.tensors.size()));
}

} // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
  const char *path = std::getenv("AMPC_FUZZ_MODEL");
  if (!path || !*path) {
    std::fprintf(stderr, "ampc-fuzz-live-checkpoint: set AMPC_FUZZ_MODEL to "
                         "the library fuzz/make-corpus compiles\n");
    std::exit(1);
  }
  modelPath = path;
  verbose = std::getenv("AMPC_FUZZ_VERBOSE") != nullptr;
  if (ampc_model_load(modelPath.c_str(), nullptr, &pristine)) {
    std::fprintf(stderr, "ampc-fuzz-live-checkpoint: %s\n", ampc_last_error());
    std::exit(1);
  }
  if (const char *seed = std::getenv("AMPC_FUZZ_WRITE_SEED")) {
    if (!trainStep(pristine) || !trainStep(pristine) ||
        ampc_model_save_checkpoint(pristine, seed)) {
      std::fprintf(stderr, "ampc-fuzz-live-checkpoint: %s\n",
                   ampc_last_error());
      std::exit(1);
    }
    std::exit(0);
  }
  memfdPath = ampc::fuzz::openCheckpointFile("ampc-fuzz-live-checkpoint", memfd);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ampc::fuzz::writeCheckpointInput(memfd, data, size);
  ampc_model *model = nullptr;
  if (ampc_model_load(modelPath.c_str(), nullptr, &model))
    die("load");
  if (ampc_model_load_checkpoint(model, memfdPath.c_str()) != AMPC_OK) {
    if (verbose)
      std::fprintf(stderr, "refused: %s\n", ampc_last_error());
    if (snapshot(model) != snapshot(pristine)) {
      std::fprintf(stderr, "a refused checkpoint changed the model (%s)\n",
                   ampc_last_error());
      std::abort();
    }
    ampc_model_release(model);
    return 0;
  }
  bool trained = trainStep(model);
  if (verbose)
    std::fprintf(stderr, "loaded; the training step %s\n",
                 trained ? "ran" : ampc_last_error());
  inferStep(model);
  ampc_model_release(model);
  return 0;
}
