//===- CudaLibraryTest.cpp - the runtime C API on a CUDA-target library ---===//
//
// The training C API, run on the MLP of test/Target/Cuda/Inputs compiled
// for the CPU target and for the CUDA target under the CUDA execution on the
// CPU (--target=cuda-sim; both built with the unit tests). Every test runs
// on both and, where it computes, compares the two: what a host does with a
// CUDA library (set then step, asynchronous steps, device-side range errors,
// checkpoints) must behave as on the CPU.
//
//===----------------------------------------------------------------------===//

#include "ampc/Runtime/ampc.h"

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

namespace {

struct Library {
  const char *name;
  const char *path;
  const char *target;
};
void PrintTo(const Library &library, std::ostream *os) { *os << library.name; }
const Library kLibraries[] = {
    {"cpu", AMPC_MLP_CPU_LIBRARY, "cpu"},
    {"cuda_sim", AMPC_MLP_CUDA_SIM_LIBRARY, "cuda"},
};

/// x[8, 4], label[8] (int64 classes 0..2); parameters w1[16, 4], b1[16],
/// w2[3, 16], b2[3].
class CudaLibrary : public ::testing::TestWithParam<Library> {
protected:
  void SetUp() override {
    ASSERT_EQ(ampc_model_load(GetParam().path, nullptr, &model), AMPC_OK)
        << ampc_last_error();
    for (int i = 0; i < 32; ++i)
      x[i] = std::sin(0.7f * i);
    for (int i = 0; i < 8; ++i)
      label[i] = i % 3;
  }
  void TearDown() override { ampc_model_release(model); }

  ampc_tensor tensor(float *data, std::vector<int64_t> &shape) {
    return {AMPC_DTYPE_F32, static_cast<int32_t>(shape.size()),
            shape.data(), data, sizeof(float) * count(shape)};
  }
  static size_t count(const std::vector<int64_t> &shape) {
    size_t n = 1;
    for (int64_t d : shape)
      n *= static_cast<size_t>(d);
    return n;
  }
  /// One step on (x, label); the loss after synchronize.
  float step() {
    ampc_tensor inputs[2] = {
        {AMPC_DTYPE_F32, 2, xShape, x, sizeof x},
        {AMPC_DTYPE_I64, 1, labelShape, label, sizeof label}};
    float loss = NAN;
    ampc_tensor out = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof loss};
    EXPECT_EQ(ampc_model_train_step(model, inputs, 2, &out), AMPC_OK)
        << ampc_last_error();
    EXPECT_EQ(ampc_model_synchronize(model), AMPC_OK) << ampc_last_error();
    return loss;
  }
  std::vector<float> parameter(int index) {
    ampc_tensor_info info;
    EXPECT_EQ(ampc_model_parameter_info(model, index, &info), AMPC_OK);
    std::vector<int64_t> shape(info.shape, info.shape + info.rank);
    std::vector<float> v(count(shape));
    ampc_tensor t = tensor(v.data(), shape);
    EXPECT_EQ(ampc_model_get_parameter(model, index, &t), AMPC_OK)
        << ampc_last_error();
    return v;
  }
  void setParameter(int index, const std::vector<float> &value) {
    ampc_tensor_info info;
    ASSERT_EQ(ampc_model_parameter_info(model, index, &info), AMPC_OK);
    std::vector<int64_t> shape(info.shape, info.shape + info.rank);
    std::vector<float> copy = value;
    ampc_tensor t = tensor(copy.data(), shape);
    ASSERT_EQ(ampc_model_set_parameter(model, index, &t), AMPC_OK)
        << ampc_last_error();
    // The caller may reuse its buffer as soon as the call returns.
    std::fill(copy.begin(), copy.end(), 1e30f);
  }

  ampc_model *model = nullptr;
  float x[32];
  int64_t label[8];
  int64_t xShape[2] = {8, 4};
  int64_t labelShape[1] = {8};
};

TEST_P(CudaLibrary, DescribesItsTarget) {
  ampc_model_info info;
  ASSERT_EQ(ampc_model_describe(model, &info), AMPC_OK);
  EXPECT_STREQ(info.target, GetParam().target);
  EXPECT_EQ(info.num_parameters, 4);
}

/// A parameter written, then a step: the step sees the new value. With
/// w2 and b2 zero the logits are 0, so the first loss is exactly ln 3
/// (a CUDA library whose write landed after the step would see the old
/// weights).
TEST_P(CudaLibrary, SetParameterThenStepSeesTheNewValue) {
  setParameter(2, std::vector<float>(48, 0.0f));
  setParameter(3, std::vector<float>(3, 0.0f));
  EXPECT_NEAR(step(), std::log(3.0f), 1e-6f);
}

/// The learning rate written, then a step: with lr 0 AdamW changes nothing.
TEST_P(CudaLibrary, SetLearningRateThenStepSeesIt) {
  std::vector<float> before = parameter(0);
  ASSERT_EQ(ampc_model_set_learning_rate(model, 0.0f), AMPC_OK);
  step();
  EXPECT_EQ(parameter(0), before);
  float lr = -1;
  ASSERT_EQ(ampc_model_get_learning_rate(model, &lr), AMPC_OK);
  EXPECT_EQ(lr, 0.0f);
}

/// The scaler state written, then a step: a scale that overflows skips the
/// step (parameters bit-identical) and backs off.
TEST_P(CudaLibrary, OverflowingScaleSkipsTheStep) {
  std::vector<float> before = parameter(0);
  ampc_scaler_state state = {3e38f, 5, 0, 0};
  ASSERT_EQ(ampc_model_set_scaler_state(model, &state), AMPC_OK)
      << ampc_last_error();
  step();
  EXPECT_EQ(parameter(0), before);
  ASSERT_EQ(ampc_model_get_scaler_state(model, &state), AMPC_OK);
  EXPECT_EQ(state.scale, 3e38f * 0.5f);
  EXPECT_EQ(state.growth_tracker, 0);
  EXPECT_EQ(state.steps, 0);
  EXPECT_EQ(state.skipped_steps, 1);
}

/// Steps queued without waiting: each loss lands in its own buffer.
TEST_P(CudaLibrary, QueuedStepsDeliverEveryLoss) {
  ampc_tensor inputs[2] = {
      {AMPC_DTYPE_F32, 2, xShape, x, sizeof x},
      {AMPC_DTYPE_I64, 1, labelShape, label, sizeof label}};
  float losses[5];
  for (float &loss : losses) {
    loss = NAN;
    ampc_tensor out = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof loss};
    ASSERT_EQ(ampc_model_train_step(model, inputs, 2, &out), AMPC_OK)
        << ampc_last_error();
  }
  ASSERT_EQ(ampc_model_synchronize(model), AMPC_OK);
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(std::isfinite(losses[i])) << i;
    if (i) {
      EXPECT_LT(losses[i], losses[i - 1]) << i;
    }
  }
}

/// A batch in device memory (issue 37, item 2) trains as the same batch
/// from host memory, bit for bit; memory of the wrong kind is refused
/// before anything runs; the CPU target has no device call.
TEST_P(CudaLibrary, DeviceBatchTrainsAsTheHostBatch) {
  float *dx = nullptr, *dloss = nullptr;
  int64_t *dlabel = nullptr;
  ampc_tensor hostInputs[2] = {
      {AMPC_DTYPE_F32, 2, xShape, x, sizeof x},
      {AMPC_DTYPE_I64, 1, labelShape, label, sizeof label}};
  float hostLoss = NAN;
  ampc_tensor hostOut = {AMPC_DTYPE_F32, 0, nullptr, &hostLoss,
                         sizeof hostLoss};
  if (std::strcmp(GetParam().target, "cpu") == 0) {
    EXPECT_EQ(ampc_model_train_step_device(model, hostInputs, 2, nullptr),
              AMPC_ERROR_UNSUPPORTED);
    EXPECT_NE(std::string(ampc_last_error()).find("runs on the host"),
              std::string::npos)
        << ampc_last_error();
    return;
  }
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dx), sizeof x),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dlabel), sizeof label),
            cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(&dloss), sizeof(float)),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, x, sizeof x, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dlabel, label, sizeof label, cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ampc_tensor deviceInputs[2] = {
      {AMPC_DTYPE_F32, 2, xShape, dx, sizeof x},
      {AMPC_DTYPE_I64, 1, labelShape, dlabel, sizeof label}};
  ampc_tensor deviceOut = {AMPC_DTYPE_F32, 0, nullptr, dloss, sizeof(float)};

  ampc_model *twin = nullptr;
  ASSERT_EQ(ampc_model_load(GetParam().path, nullptr, &twin), AMPC_OK);
  for (int s = 0; s < 3; ++s) {
    ASSERT_EQ(ampc_model_train_step(twin, hostInputs, 2, &hostOut), AMPC_OK)
        << ampc_last_error();
    ASSERT_EQ(ampc_model_synchronize(twin), AMPC_OK) << ampc_last_error();
    ASSERT_EQ(ampc_model_train_step_device(model, deviceInputs, 2, &deviceOut),
              AMPC_OK)
        << ampc_last_error();
    ASSERT_EQ(ampc_model_synchronize(model), AMPC_OK) << ampc_last_error();
    float deviceLoss = NAN;
    ASSERT_EQ(cudaMemcpy(&deviceLoss, dloss, sizeof deviceLoss,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_EQ(std::memcmp(&deviceLoss, &hostLoss, sizeof hostLoss), 0)
        << "step " << s << ": " << deviceLoss << " vs " << hostLoss;
  }
  // No loss asked for: the step runs and copies it nowhere.
  EXPECT_EQ(ampc_model_train_step_device(model, deviceInputs, 2, nullptr),
            AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(ampc_model_synchronize(model), AMPC_OK);
  ampc_model_release(twin);

  ampc_scaler_state before{}, after{};
  ASSERT_EQ(ampc_model_get_scaler_state(model, &before), AMPC_OK);
  EXPECT_EQ(ampc_model_train_step_device(model, hostInputs, 2, nullptr),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ampc_last_error()).find("input 0 ('x') is host memory"),
            std::string::npos)
      << ampc_last_error();
  EXPECT_EQ(ampc_model_train_step(model, deviceInputs, 2, &hostOut),
            AMPC_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ampc_last_error()).find("is device memory"),
            std::string::npos)
      << ampc_last_error();
  ASSERT_EQ(ampc_model_get_scaler_state(model, &after), AMPC_OK);
  EXPECT_EQ(after.steps + after.skipped_steps,
            before.steps + before.skipped_steps);
  cudaFree(dx);
  cudaFree(dlabel);
  cudaFree(dloss);
}

/// A label out of range is found on the device and reported by the next
/// synchronising call with the node's name, once; the model still works.
TEST_P(CudaLibrary, DeviceRangeErrorNamesTheNode) {
  label[3] = 7;
  ampc_tensor inputs[2] = {
      {AMPC_DTYPE_F32, 2, xShape, x, sizeof x},
      {AMPC_DTYPE_I64, 1, labelShape, label, sizeof label}};
  float loss = 0;
  ampc_tensor out = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof loss};
  ampc_status s = ampc_model_train_step(model, inputs, 2, &out);
  if (s == AMPC_OK)
    s = ampc_model_synchronize(model);
  EXPECT_EQ(s, AMPC_ERROR_EXECUTION);
  EXPECT_NE(std::string(ampc_last_error()).find("a label is out of range"),
            std::string::npos)
      << ampc_last_error();
  EXPECT_NE(std::string(ampc_last_error()).find("SoftmaxCrossEntropyLoss"),
            std::string::npos);
  label[3] = 0;
  EXPECT_TRUE(std::isfinite(step()));
}

/// A checkpoint saved after two steps and loaded into a fresh instance:
/// the next step of both is the same, bit for bit.
TEST_P(CudaLibrary, CheckpointResumesBitForBit) {
  step();
  step();
  std::string path = ::testing::TempDir() + "cuda_library_" +
                     GetParam().name + ".ckpt";
  ASSERT_EQ(ampc_model_save_checkpoint(model, path.c_str()), AMPC_OK)
      << ampc_last_error();
  ampc_model *fresh = nullptr;
  ASSERT_EQ(ampc_model_load(GetParam().path, nullptr, &fresh), AMPC_OK);
  ASSERT_EQ(ampc_model_load_checkpoint(fresh, path.c_str()), AMPC_OK)
      << ampc_last_error();
  float continued = step();
  std::swap(model, fresh);
  float resumed = step();
  std::swap(model, fresh);
  EXPECT_EQ(continued, resumed);
  ampc_model_release(fresh);
  std::remove(path.c_str());
}

/// A library whose device arena does not fit fails to load with the CUDA
/// call's message (read from the library after its init failed).
TEST(CudaLibraryInit, OutOfDeviceMemoryIsAnErrorWithTheCall) {
  setenv("AMPC_CUDA_SIM_MEMORY", "4096", 1);
  ampc_model *model = nullptr;
  ampc_status status =
      ampc_model_load(AMPC_MLP_CUDA_SIM_LIBRARY, nullptr, &model);
  unsetenv("AMPC_CUDA_SIM_MEMORY");
  EXPECT_EQ(status, AMPC_ERROR_EXECUTION);
  EXPECT_EQ(model, nullptr);
  std::string message = ampc_last_error();
  EXPECT_NE(message.find("model initialization failed: cudaMalloc"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("the model's arena"), std::string::npos) << message;
}

/// One train step of `model` on fixed data, synchronized; its loss.
float stepOf(ampc_model *model, int s) {
  float x[32];
  int64_t label[8], xShape[2] = {8, 4}, labelShape[1] = {8};
  for (int i = 0; i < 32; ++i)
    x[i] = std::cos(0.3f * i + s);
  for (int i = 0; i < 8; ++i)
    label[i] = (i + s) % 3;
  ampc_tensor inputs[2] = {
      {AMPC_DTYPE_F32, 2, xShape, x, sizeof x},
      {AMPC_DTYPE_I64, 1, labelShape, label, sizeof label}};
  float loss = NAN;
  ampc_tensor out = {AMPC_DTYPE_F32, 0, nullptr, &loss, sizeof loss};
  EXPECT_EQ(ampc_model_train_step(model, inputs, 2, &out), AMPC_OK)
      << ampc_last_error();
  EXPECT_EQ(ampc_model_synchronize(model), AMPC_OK) << ampc_last_error();
  return loss;
}

/// The CUDA library computes what the CPU target computes (the MLP's
/// operations sum in the same order on both: bit for bit).
TEST(CudaLibraryAgainstCpu, TenStepsMatch) {
  std::vector<std::vector<float>> parameters[2];
  std::vector<float> losses[2];
  for (int l = 0; l < 2; ++l) {
    ampc_model *model = nullptr;
    ASSERT_EQ(ampc_model_load(kLibraries[l].path, nullptr, &model), AMPC_OK);
    for (int s = 0; s < 10; ++s)
      losses[l].push_back(stepOf(model, s));
    ASSERT_FALSE(::testing::Test::HasFailure());
    for (int p = 0; p < 4; ++p) {
      ampc_tensor_info info;
      ASSERT_EQ(ampc_model_parameter_info(model, p, &info), AMPC_OK);
      size_t n = 1;
      for (int d = 0; d < info.rank; ++d)
        n *= static_cast<size_t>(info.shape[d]);
      std::vector<float> v(n);
      ampc_tensor t = {AMPC_DTYPE_F32, info.rank,
                       const_cast<int64_t *>(info.shape), v.data(), n * 4};
      ASSERT_EQ(ampc_model_get_parameter(model, p, &t), AMPC_OK);
      parameters[l].push_back(v);
    }
    ampc_model_release(model);
  }
  EXPECT_EQ(losses[0], losses[1]);
  EXPECT_EQ(parameters[0], parameters[1]);
}

/// Two models loaded on two devices, called from one thread whatever
/// device the application made current in between (issue 37, item 8): each
/// call binds its model's device and gives the caller's back. Without the
/// binding, the model of device 1 launches on its stream while device 0 is
/// current, which CUDA refuses (the execution too: AMPC_CUDA_SIM_DEVICES).
void twoModelsOnTwoDevices() {
  setenv("AMPC_CUDA_SIM_DEVICES", "2", 1);
  ampc_model *onOne = nullptr;
  ampc_model *onZero = nullptr;
  if (cudaSetDevice(1) != cudaSuccess ||
      ampc_model_load(AMPC_MLP_CUDA_SIM_LIBRARY, nullptr, &onOne) != AMPC_OK ||
      cudaSetDevice(0) != cudaSuccess ||
      ampc_model_load(AMPC_MLP_CUDA_SIM_LIBRARY, nullptr, &onZero) != AMPC_OK)
    std::exit(2);
  bool same = true;
  for (int s = 0; s < 3; ++s) {
    // Device 0 current, then device 1: both models step each time.
    cudaSetDevice(s % 2);
    float a = stepOf(onOne, s);
    float b = stepOf(onZero, s);
    int now = -1;
    cudaGetDevice(&now);
    same &= a == b && std::isfinite(a) && now == s % 2;
    std::fprintf(stderr, "step %d: %g %g, device %d\n", s, a, b, now);
  }
  ampc_model_release(onOne);
  ampc_model_release(onZero);
  std::exit(same && !::testing::Test::HasFailure() ? 0 : 1);
}

TEST(CudaLibraryDevices, TwoModelsOnTwoDevicesFromOneThread) {
  EXPECT_EXIT(twoModelsOnTwoDevices(), ::testing::ExitedWithCode(0),
              "step 2: ");
}

INSTANTIATE_TEST_SUITE_P(Targets, CudaLibrary, ::testing::ValuesIn(kLibraries),
                         [](const auto &info) { return info.param.name; });

} // namespace
