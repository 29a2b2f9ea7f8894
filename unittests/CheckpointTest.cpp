//===- CheckpointTest.cpp - the runtime's checkpoint files -----------------===//

#include "Checkpoint.h"

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using ampc::runtime::readCheckpoint;
using ampc::runtime::StateTensor;
using ampc::runtime::writeCheckpoint;

namespace {

constexpr int32_t F32 = 1, I64 = 7, I32 = 6;

/// A fresh folder, removed with what is in it at the end of the test.
class TempDir {
public:
  TempDir() {
    char name[] = "/tmp/ampc-checkpoint-test-XXXXXX";
    path = ::mkdtemp(name) ? name : "";
  }
  ~TempDir() {
    ::chmod(path.c_str(), 0755);
    for (const std::string &entry : entries())
      ::unlink((path + "/" + entry).c_str());
    ::rmdir(path.c_str());
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> names;
    if (DIR *dir = ::opendir(path.c_str())) {
      while (dirent *e = ::readdir(dir))
        if (std::string(e->d_name) != "." && std::string(e->d_name) != "..")
          names.push_back(e->d_name);
      ::closedir(dir);
    }
    return names;
  }
  std::string path;
};

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeFile(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

/// A small training state: a weight, a bias, an Adam moment and two scalars.
struct State {
  std::vector<StateTensor> tensors;
  std::vector<float> weight{1.5f, -2.0f, 0.25f, 3.0f, 4.0f, -0.5f};
  std::vector<float> bias{0.1f, 0.2f};
  std::vector<float> moment{0.0f, 1e-3f, 2e-3f, 3e-3f, 4e-3f, 5e-3f};
  int64_t step = 42;
  int32_t tracker = 7;

  State() {
    tensors = {{"fc1.weight", F32, {2, 3}, weight.size() * 4},
               {"fc1.bias", F32, {2}, bias.size() * 4},
               {"fc1.weight.exp_avg", F32, {2, 3}, moment.size() * 4},
               {"ampc.step", I64, {}, 8},
               {"ampc.growth_tracker", I32, {}, 4}};
  }
  std::vector<const void *> data() const {
    return {weight.data(), bias.data(), moment.data(), &step, &tracker};
  }
};

struct ReadResult {
  bool ok = false;
  bool corrupt = false;
  std::string error;
  std::vector<std::vector<unsigned char>> data;
};

ReadResult read(const std::string &path, const State &state,
                const std::string &model = "mlp") {
  ReadResult r;
  r.ok = readCheckpoint(path, model, state.tensors, r.data, r.error, r.corrupt);
  return r;
}

std::string write(const std::string &path, const State &state,
                  const std::string &model = "mlp") {
  std::string error;
  EXPECT_TRUE(writeCheckpoint(path, model, state.tensors, state.data(), error))
      << error;
  return error;
}

TEST(CheckpointTest, RoundTrip) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state);
  ReadResult r = read(path, state);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.data.size(), state.tensors.size());
  std::vector<const void *> expected = state.data();
  for (size_t i = 0; i < r.data.size(); ++i) {
    ASSERT_EQ(r.data[i].size(), state.tensors[i].bytes);
    EXPECT_EQ(0, std::memcmp(r.data[i].data(), expected[i], r.data[i].size()))
        << state.tensors[i].name;
  }
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"state.ckpt"});
  struct stat info;
  ASSERT_EQ(0, ::stat(path.c_str(), &info));
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

TEST(CheckpointTest, EmptyStateAndEmptyTensor) {
  TempDir dir;
  State state;
  state.tensors = {{"empty", F32, {0, 3}, 0}};
  std::string path = dir.path + "/empty.ckpt";
  std::string error;
  ASSERT_TRUE(writeCheckpoint(path, "m", state.tensors, {nullptr}, error))
      << error;
  ReadResult r = read(path, state, "m");
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_TRUE(r.data[0].empty());
}

TEST(CheckpointTest, OverwritesAnOldFile) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state);
  state.step = 43;
  write(path, state);
  ReadResult r = read(path, state);
  ASSERT_TRUE(r.ok) << r.error;
  int64_t step;
  std::memcpy(&step, r.data[3].data(), 8);
  EXPECT_EQ(step, 43);
  EXPECT_EQ(dir.entries().size(), 1u);
}

TEST(CheckpointTest, TruncatedAtEveryLength) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state);
  std::string full = readFile(path);
  std::string cut = dir.path + "/cut.ckpt";
  for (size_t length = 0; length < full.size(); ++length) {
    writeFile(cut, full.substr(0, length));
    ReadResult r = read(cut, state);
    ASSERT_FALSE(r.ok) << "length " << length;
    EXPECT_TRUE(r.corrupt) << "length " << length;
    EXPECT_EQ(r.error.rfind(cut + ": ", 0), 0u) << r.error;
    EXPECT_EQ(r.error.find('\n'), std::string::npos) << r.error;
    if (length == 0)
      EXPECT_NE(r.error.find("not an ampc checkpoint"), std::string::npos)
          << r.error;
    else
      EXPECT_NE(r.error.find("truncated"), std::string::npos)
          << "length " << length << ": " << r.error;
  }
  // Cut inside the bias: the message names the tensor and both sizes.
  size_t biasEnd = full.size() - 8 - 4 - 8 - 24;
  writeFile(cut, full.substr(0, biasEnd - 3));
  EXPECT_EQ(read(cut, state).error,
            cut + ": truncated: expected 8 bytes of tensor 'fc1.bias', found 5");
}

TEST(CheckpointTest, EveryFlippedByteIsDetected) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state);
  std::string full = readFile(path);
  std::string bad = dir.path + "/bad.ckpt";
  for (size_t i = 0; i < full.size(); ++i) {
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string flipped = full;
      flipped[i] = static_cast<char>(flipped[i] ^ mask);
      writeFile(bad, flipped);
      ReadResult r = read(bad, state);
      ASSERT_FALSE(r.ok) << "byte " << i << " mask " << int(mask);
      EXPECT_TRUE(r.corrupt) << r.error;
      EXPECT_EQ(r.error.rfind(bad + ": ", 0), 0u) << r.error;
    }
  }
  // A flip in the data is caught by the checksum.
  std::string flipped = full;
  flipped[full.size() - 10] ^= 1;
  writeFile(bad, flipped);
  EXPECT_EQ(read(bad, state).error, bad + ": checksum mismatch (corrupted)");
}

TEST(CheckpointTest, TrailingBytes) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state);
  writeFile(path, readFile(path) + "xyz");
  ReadResult r = read(path, state);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.corrupt);
  EXPECT_EQ(r.error,
            path + ": 3 bytes after the end of the checkpoint (corrupted)");
}

TEST(CheckpointTest, NotACheckpointAndOtherVersion) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/model.onnx";
  writeFile(path, "\x08\x08\x12\x04onnx and more bytes than a header has");
  ReadResult r = read(path, state);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.corrupt);
  EXPECT_EQ(r.error, path + ": not an ampc checkpoint");

  std::string ckpt = dir.path + "/state.ckpt";
  write(ckpt, state);
  std::string bytes = readFile(ckpt);
  bytes[8] = 9;
  writeFile(ckpt, bytes);
  r = read(ckpt, state);
  EXPECT_TRUE(r.corrupt);
  EXPECT_EQ(r.error, ckpt + ": format version 9, this runtime reads 1");
}

TEST(CheckpointTest, OtherModel) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state, "a");
  ReadResult r = read(path, state, "b");
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(r.corrupt);
  EXPECT_EQ(r.error, path + ": checkpoint of model 'a', this model is 'b'");
}

TEST(CheckpointTest, OtherTensorList) {
  TempDir dir;
  State saved;
  std::string path = dir.path + "/state.ckpt";
  write(path, saved);

  State transposed;
  transposed.tensors[0].shape = {3, 2};
  ReadResult r = read(path, transposed);
  EXPECT_TRUE(r.corrupt);
  EXPECT_EQ(r.error, path + ": checkpoint of model 'mlp' has tensor "
                            "'fc1.weight' f32 [2, 3], this model expects "
                            "'fc1.weight' f32 [3, 2]");

  State renamed;
  renamed.tensors[1].name = "fc1.b";
  r = read(path, renamed);
  EXPECT_EQ(r.error, path + ": checkpoint of model 'mlp' has tensor "
                            "'fc1.bias' f32 [2], this model expects "
                            "'fc1.b' f32 [2]");

  State retyped;
  retyped.tensors[3].dtype = I32;
  retyped.tensors[3].bytes = 4;
  r = read(path, retyped);
  EXPECT_EQ(r.error, path + ": checkpoint of model 'mlp' has tensor "
                            "'ampc.step' i64 [], this model expects "
                            "'ampc.step' i32 []");

  State fewer;
  fewer.tensors.pop_back();
  r = read(path, fewer);
  EXPECT_EQ(r.error, path + ": checkpoint of model 'mlp' has 5 tensors, this "
                            "model expects 4 (first extra: "
                            "'ampc.growth_tracker' i32 [])");

  State more;
  more.tensors.push_back({"ampc.lr", F32, {}, 4});
  r = read(path, more);
  EXPECT_EQ(r.error, path + ": checkpoint of model 'mlp' has 5 tensors, this "
                            "model expects 6 (first missing: 'ampc.lr' f32 [])");
  EXPECT_TRUE(r.data.empty());
}

TEST(CheckpointTest, MissingFileIsAnIoError) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/absent.ckpt";
  ReadResult r = read(path, state);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.corrupt);
  EXPECT_EQ(r.error,
            path + ": cannot open checkpoint: No such file or directory");
  r = read(dir.path, state);
  EXPECT_FALSE(r.ok);
  EXPECT_FALSE(r.corrupt);
  EXPECT_EQ(r.error, dir.path + ": cannot read checkpoint: is a directory");
}

TEST(CheckpointTest, WriteIntoMissingFolder) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/no/such/folder/state.ckpt";
  std::string error;
  EXPECT_FALSE(writeCheckpoint(path, "mlp", state.tensors, state.data(), error));
  EXPECT_EQ(error, path + ": cannot write checkpoint: cannot create a "
                          "temporary file in '" + dir.path +
                          "/no/such/folder': No such file or directory");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(CheckpointTest, FailedWriteKeepsTheOldFile) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state);
  std::string before = readFile(path);

  // The file-size limit makes write(2) fail part-way (EFBIG) even for root,
  // who could write into a read-only folder.
  State big;
  std::vector<float> huge(1 << 16, 1.0f);
  big.tensors[0] = {"fc1.weight", F32, {1 << 16}, huge.size() * 4};
  std::vector<const void *> data = big.data();
  data[0] = huge.data();
  struct rlimit saved;
  ASSERT_EQ(0, ::getrlimit(RLIMIT_FSIZE, &saved));
  struct rlimit limited = saved;
  limited.rlim_cur = 4096;
  auto oldHandler = std::signal(SIGXFSZ, SIG_IGN);
  ASSERT_EQ(0, ::setrlimit(RLIMIT_FSIZE, &limited));
  std::string error;
  bool ok = writeCheckpoint(path, "mlp", big.tensors, data, error);
  ::setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, oldHandler);
  EXPECT_FALSE(ok);
  EXPECT_EQ(error.rfind(path + ": cannot write checkpoint: cannot write '" +
                            path + ".tmp-",
                        0),
            0u)
      << error;
  EXPECT_NE(error.find("File too large"), std::string::npos) << error;
  EXPECT_EQ(readFile(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"state.ckpt"});
}

TEST(CheckpointTest, ReadOnlyFolderKeepsTheOldFile) {
  if (::geteuid() == 0)
    GTEST_SKIP() << "root writes into read-only folders";
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state);
  std::string before = readFile(path);
  ASSERT_EQ(0, ::chmod(dir.path.c_str(), 0555));
  state.step = 1;
  std::string error;
  EXPECT_FALSE(writeCheckpoint(path, "mlp", state.tensors, state.data(), error));
  ::chmod(dir.path.c_str(), 0755);
  EXPECT_NE(error.find("Permission denied"), std::string::npos) << error;
  EXPECT_EQ(readFile(path), before);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"state.ckpt"});
}

TEST(CheckpointTest, MismatchedDataList) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  std::string error;
  EXPECT_FALSE(writeCheckpoint(path, "mlp", state.tensors, {}, error));
  EXPECT_EQ(error, path + ": cannot write checkpoint: 5 tensors but 0 data "
                          "pointers");
  std::vector<const void *> data = state.data();
  data[1] = nullptr;
  EXPECT_FALSE(writeCheckpoint(path, "mlp", state.tensors, data, error));
  EXPECT_EQ(error, path + ": cannot write checkpoint: no data for tensor "
                          "'fc1.bias'");
  EXPECT_TRUE(dir.entries().empty());
}

} // namespace
