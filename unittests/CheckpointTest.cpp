//===- CheckpointTest.cpp - the runtime's checkpoint files -----------------===//

#include "Checkpoint.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <functional>
#include <grp.h>
#include <iterator>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
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
  bool incompatible = false;
  std::string error;
  std::vector<std::vector<unsigned char>> data;
  std::vector<bool> present;
};

ReadResult read(const std::string &path, const State &state,
                const std::string &model = "mlp") {
  ReadResult r;
  r.ok = readCheckpoint(path, model, state.tensors, r.data, r.present, r.error,
                        r.corrupt, &r.incompatible);
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
  EXPECT_FALSE(r.corrupt);
  EXPECT_TRUE(r.incompatible);
  EXPECT_EQ(r.error, path + ": incompatible with this library: checkpoint of "
                            "model 'a', this model is 'b' (saved by a library "
                            "of another model or compiled with other "
                            "training options)");
}

TEST(CheckpointTest, OtherTensorList) {
  TempDir dir;
  State saved;
  std::string path = dir.path + "/state.ckpt";
  write(path, saved);

  State transposed;
  transposed.tensors[0].shape = {3, 2};
  ReadResult r = read(path, transposed);
  // Intact but not this library's: incompatible, not corrupt.
  EXPECT_FALSE(r.corrupt);
  EXPECT_TRUE(r.incompatible);
  EXPECT_EQ(r.error, path + ": incompatible with this library: checkpoint "
                            "of model 'mlp' has tensor "
                            "'fc1.weight' f32 [2, 3], this model expects "
                            "'fc1.weight' f32 [3, 2] (saved by a library of "
                            "another model or compiled with other training "
                            "options)");

  State renamed;
  renamed.tensors[1].name = "fc1.b";
  r = read(path, renamed);
  EXPECT_EQ(r.error, path + ": incompatible with this library: checkpoint "
                            "of model 'mlp' has tensor "
                            "'fc1.bias' f32 [2], this model expects "
                            "'fc1.b' f32 [2]"
                            " (saved by a library of another model or "
                            "compiled with other training options)");

  State retyped;
  retyped.tensors[3].dtype = I32;
  retyped.tensors[3].bytes = 4;
  r = read(path, retyped);
  EXPECT_EQ(r.error, path + ": incompatible with this library: checkpoint "
                            "of model 'mlp' has tensor "
                            "'ampc.step' i64 [], this model expects "
                            "'ampc.step' i32 []"
                            " (saved by a library of another model or "
                            "compiled with other training options)");

  // The scaler's growth tracker is optional (the model has none: ignored);
  // the step count is not.
  State fewer;
  fewer.tensors.pop_back();
  fewer.tensors.pop_back();
  r = read(path, fewer);
  EXPECT_EQ(r.error, path + ": incompatible with this library: checkpoint "
                            "of model 'mlp' has 5 tensors, this "
                            "model expects 3 (first extra: "
                            "'ampc.step' i64 [])"
                            " (saved by a library of another model or "
                            "compiled with other training options)");

  State more;
  more.tensors.push_back({"ampc.lr", F32, {}, 4});
  r = read(path, more);
  EXPECT_EQ(r.error, path + ": incompatible with this library: checkpoint "
                            "of model 'mlp' has 5 tensors, this "
                            "model expects 6 (first missing: 'ampc.lr' f32 [])"
                            " (saved by a library of another model or "
                            "compiled with other training options)");
  EXPECT_TRUE(r.data.empty());
}

// A checkpoint moves between precisions of one model: the loss scaler's
// state may be missing on either side, nothing else may.
TEST(CheckpointTest, ScalerStateIsOptionalBetweenPrecisions) {
  TempDir dir;
  State fp16;
  float scale = 1024.0f;
  int64_t skipped = 3;
  fp16.tensors.push_back({"ampc.loss_scale", F32, {}, 4});
  fp16.tensors.push_back({"ampc.skipped_steps", I64, {}, 8});
  std::vector<const void *> data = fp16.data();
  data.push_back(&scale);
  data.push_back(&skipped);
  std::string path16 = dir.path + "/fp16.ckpt", error;
  ASSERT_TRUE(writeCheckpoint(path16, "mlp", fp16.tensors, data, error))
      << error;

  // fp16 -> fp32: the model has no scaler; its tensors load, the file's
  // scaler state is ignored.
  State fp32;
  fp32.tensors.pop_back(); // no growth tracker either
  ReadResult r = read(path16, fp32);
  ASSERT_TRUE(r.ok) << r.error;
  ASSERT_EQ(r.present, std::vector<bool>(4, true));
  EXPECT_EQ(0, std::memcmp(r.data[0].data(), fp32.weight.data(), 24));
  int64_t step = 0;
  std::memcpy(&step, r.data[3].data(), 8);
  EXPECT_EQ(step, 42);

  // fp32 -> fp16: the file has no scaler; the model keeps its own.
  std::string path32 = dir.path + "/fp32.ckpt";
  ASSERT_TRUE(writeCheckpoint(path32, "mlp", fp32.tensors,
                              {fp32.weight.data(), fp32.bias.data(),
                               fp32.moment.data(), &fp32.step},
                              error))
      << error;
  r = read(path32, fp16);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.present, (std::vector<bool>{true, true, true, true, false,
                                          false, false}));

  // Anything else missing is still refused.
  State noMoment = fp16;
  noMoment.tensors.erase(noMoment.tensors.begin() + 2);
  r = read(path32, noMoment);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.error, path32 + ": incompatible with this library: checkpoint "
                              "of model 'mlp' has tensor "
                              "'fc1.weight.exp_avg' f32 [2, 3], this model "
                              "expects 'ampc.step' i64 [] (saved by a library "
                              "of another model or compiled with other "
                              "training options)");
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
  EXPECT_EQ(r.error, dir.path + ": cannot open checkpoint: Is a directory");
}

TEST(CheckpointTest, WriteIntoMissingFolder) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/no/such/folder/state.ckpt";
  std::string error;
  EXPECT_FALSE(writeCheckpoint(path, "mlp", state.tensors, state.data(), error));
  EXPECT_EQ(error, path + ": cannot write checkpoint: no folder '" +
                          dir.path + "/no/such/folder'");
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

/// Runs `write` as the owner of `folder`, an unprivileged user: in this
/// process, or, when this process is root (as CI runs), in a child that
/// becomes `nobody` after giving `folder` to it, since root ignores a
/// folder's permissions. The child's result and message come back through
/// a pipe. A child that cannot drop privileges reports that as the
/// message, and the write counts as succeeded, so the test fails rather
/// than skips.
bool writeAsFolderOwner(const std::string &folder,
                        const std::function<bool(std::string &)> &write,
                        std::string &error) {
  if (::geteuid() != 0)
    return write(error);
  const struct passwd *nobody = ::getpwnam("nobody");
  uid_t uid = nobody ? nobody->pw_uid : 65534;
  gid_t gid = nobody ? nobody->pw_gid : 65534;
  int channel[2];
  if (::chown(folder.c_str(), uid, gid) != 0 || ::pipe(channel) != 0) {
    error = std::string("chown or pipe: ") + std::strerror(errno);
    return true;
  }
  pid_t child = ::fork();
  if (child == 0) {
    ::close(channel[0]);
    std::string message;
    char ok = 1;
    if (::setgroups(0, nullptr) != 0 || ::setgid(gid) != 0 ||
        ::setuid(uid) != 0)
      message = std::string("cannot drop root privileges: ") +
                std::strerror(errno);
    else
      ok = write(message) ? 1 : 0;
    std::string reply = std::string(1, ok) + message;
    ssize_t written = ::write(channel[1], reply.data(), reply.size());
    ::_exit(written == static_cast<ssize_t>(reply.size()) ? 0 : 1);
  }
  ::close(channel[1]);
  std::string reply;
  char buffer[256];
  ssize_t n;
  while (child > 0 && (n = ::read(channel[0], buffer, sizeof(buffer))) > 0)
    reply.append(buffer, static_cast<size_t>(n));
  ::close(channel[0]);
  int status = 0;
  if (child > 0)
    ::waitpid(child, &status, 0);
  if (reply.empty()) {
    error = "the unprivileged writer did not answer";
    return true;
  }
  error = reply.substr(1);
  return reply[0] != 0;
}

TEST(CheckpointTest, ReadOnlyFolderKeepsTheOldFile) {
  TempDir dir;
  State state;
  std::string path = dir.path + "/state.ckpt";
  write(path, state);
  std::string before = readFile(path);
  ASSERT_EQ(0, ::chmod(dir.path.c_str(), 0555));
  state.step = 1;
  std::string error;
  EXPECT_FALSE(writeAsFolderOwner(
      dir.path,
      [&](std::string &message) {
        return writeCheckpoint(path, "mlp", state.tensors, state.data(),
                               message);
      },
      error));
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

namespace {

/// Writes a one-byte checkpoint-like file to `path` atomically.
bool writeOneByte(const std::string &path, std::string &error) {
  const char byte = 'x';
  return ampc::writeFileAtomically(path, {{&byte, 1}}, "the file", error);
}

} // namespace

// The atomic write replaces regular files only: renaming over a device, a
// FIFO, a folder or a symbolic link would swap what is there for a file.
TEST(CheckpointTest, AtomicWriteReplacesOnlyRegularFiles) {
  TempDir dir;
  std::string error;
  std::string fifo = dir.path + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_FALSE(writeOneByte(fifo, error));
  EXPECT_EQ(error, fifo + ": cannot write the file: it exists and is not a "
                          "regular file (a FIFO); give the path of a file");
  struct stat info;
  ASSERT_EQ(::lstat(fifo.c_str(), &info), 0);
  EXPECT_TRUE(S_ISFIFO(info.st_mode));

  std::string folder = dir.path + "/sub";
  ASSERT_EQ(::mkdir(folder.c_str(), 0755), 0);
  EXPECT_FALSE(writeOneByte(folder, error));
  EXPECT_NE(error.find("(a folder)"), std::string::npos) << error;
  ::rmdir(folder.c_str());

  std::string target = dir.path + "/target", link = dir.path + "/link";
  writeFile(target, "keep");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(writeOneByte(link, error));
  EXPECT_NE(error.find("it is a symbolic link"), std::string::npos) << error;
  EXPECT_EQ(readFile(target), "keep");
  ASSERT_EQ(::lstat(link.c_str(), &info), 0);
  EXPECT_TRUE(S_ISLNK(info.st_mode));

  // /dev/null stays a device (the campaign found it replaced when run as
  // root).
  EXPECT_FALSE(writeOneByte("/dev/null", error));
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
  // Nothing was left behind.
  for (const std::string &entry : dir.entries())
    EXPECT_EQ(entry.find(".tmp-"), std::string::npos) << entry;
}

// Temporaries an interrupted earlier write left (PATH.tmp-XXXXXX, older than
// ten minutes) are removed by the next write of PATH; a recent one (a write
// in progress) and other files are kept.
TEST(CheckpointTest, AtomicWriteRemovesStaleTemporaries) {
  TempDir dir;
  std::string path = dir.path + "/state.ckpt";
  std::string stale = path + ".tmp-AbC123", recent = path + ".tmp-XyZ789",
              other = path + ".tmp-long-name", unrelated = dir.path + "/x";
  for (const std::string &f : {stale, recent, other, unrelated})
    writeFile(f, "partial");
  struct timeval old[2] = {{::time(nullptr) - 3600, 0},
                           {::time(nullptr) - 3600, 0}};
  for (const std::string &f : {stale, other, unrelated})
    ASSERT_EQ(::utimes(f.c_str(), old), 0);
  std::string error;
  ASSERT_TRUE(writeOneByte(path, error)) << error;
  EXPECT_NE(::access(stale.c_str(), F_OK), 0);
  EXPECT_EQ(::access(recent.c_str(), F_OK), 0);
  EXPECT_EQ(::access(other.c_str(), F_OK), 0);
  EXPECT_EQ(::access(unrelated.c_str(), F_OK), 0);
  EXPECT_EQ(readFile(path), "x");
}
