//===- Checkpoint.cpp - training-state files for the runtime ---------------===//
//
// The checkpoint format, version 1. Every integer is little-endian with the
// size given; there is no padding.
//
//   offset  size   field
//   0       8      magic "AMPCCKPT"
//   8       u32    format version (1)
//   12      u32    T, the number of tensors
//   16      u64    H, the header size: bytes from offset 0 to the end of the
//                  tensor table (where the data starts)
//   24      u64    F, the size of the whole file, checksum included
//   32      u32 n, then n bytes   the model name (UTF-8, no terminator)
//           T entries             u32 n, n bytes of name; i32 dtype (ONNX
//                                 TensorProto code); u32 rank; rank x i64
//                                 dimensions; u64 bytes of data
//   H       the tensors' data, in table order, back to back
//   F - 8   u64    FNV-1a 64 of bytes [0, F - 8): header and data
//
// H, F and the data sizes must add up (H + sum(bytes) + 8 == F), so a
// truncated file is told apart from a corrupted one before the checksum is
// computed, and the message can name the tensor the file stops in. A reader
// checks, in order: magic, version, header, size, checksum, then that the
// file belongs to the model: its name and the list of tensors (names,
// dtypes, shapes, in order), where the loss scaler's state may be missing
// on either side (isOptionalStateTensor): a model without it ignores the
// file's, a model with it keeps its own values when the file has none.
//
// Files are written atomically (ampc/Support/AtomicWrite.h): into
// "PATH.tmp-XXXXXX" in the same folder, fsync, rename over PATH, fsync of
// the folder; the temporary is unlinked on any failure.
//
//===----------------------------------------------------------------------===//

#include "Checkpoint.h"

#include "ampc/Runtime/ampc.h"
#include "ampc/Support/AtomicWrite.h"
#include "ampc/Support/RegularFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ampc::runtime {
namespace {

constexpr char kMagic[8] = {'A', 'M', 'P', 'C', 'C', 'K', 'P', 'T'};
constexpr uint32_t kFormatVersion = 1;
/// Magic, version, T, H, F.
constexpr size_t kFixedHeaderSize = 32;
constexpr size_t kChecksumSize = 8;
/// More dimensions than any ampc tensor has; bounds what a corrupted rank
/// field can make the reader allocate.
constexpr uint32_t kMaxRank = 64;

/// FNV-1a, 64 bits: simple, no table, and every single-byte change alters it.
class Fnv1a64 {
public:
  void update(const void *data, size_t size) {
    const unsigned char *bytes = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < size; ++i) {
      hash ^= bytes[i];
      hash *= 0x100000001b3ull;
    }
  }
  uint64_t value() const { return hash; }

private:
  uint64_t hash = 0xcbf29ce484222325ull;
};

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void putU64(std::string &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint32_t getU32(const unsigned char *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}
uint64_t getU64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = v << 8 | p[i];
  return v;
}

std::string describeTensor(const std::string &name, int32_t dtype,
                           const std::vector<int64_t> &shape) {
  std::string s = "'" + name + "' " +
                  ampc_dtype_name(static_cast<ampc_dtype>(dtype)) + " [";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::string describeTensor(const StateTensor &t) {
  return describeTensor(t.name, t.dtype, t.shape);
}

std::string systemError() { return std::strerror(errno); }

/// read(2) until `size` bytes or end of file; returns the bytes read, or -1
/// with errno on an error.
ssize_t readAll(int fd, void *data, size_t size) {
  char *p = static_cast<char *>(data);
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, p + done, size - done);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (n == 0)
      break;
    done += static_cast<size_t>(n);
  }
  return static_cast<ssize_t>(done);
}

/// The header (everything before the data) of a checkpoint.
std::string encodeHeader(const std::string &modelName,
                         const std::vector<StateTensor> &tensors,
                         uint64_t &fileSize) {
  std::string table;
  putU32(table, static_cast<uint32_t>(modelName.size()));
  table += modelName;
  uint64_t dataBytes = 0;
  for (const StateTensor &t : tensors) {
    putU32(table, static_cast<uint32_t>(t.name.size()));
    table += t.name;
    putU32(table, static_cast<uint32_t>(t.dtype));
    putU32(table, static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape)
      putU64(table, static_cast<uint64_t>(d));
    putU64(table, t.bytes);
    dataBytes += t.bytes;
  }
  uint64_t headerSize = kFixedHeaderSize + table.size();
  fileSize = headerSize + dataBytes + kChecksumSize;
  std::string header(kMagic, sizeof(kMagic));
  putU32(header, kFormatVersion);
  putU32(header, static_cast<uint32_t>(tensors.size()));
  putU64(header, headerSize);
  putU64(header, fileSize);
  return header + table;
}

/// What a checkpoint's header says.
struct ParsedHeader {
  std::string modelName;
  std::vector<StateTensor> tensors;
};

/// Parses the tensor table in header[32, H). False when a field runs past
/// H, a rank is implausible, or the table does not end exactly at H.
bool parseTable(const unsigned char *header, size_t headerSize,
                uint32_t numTensors, ParsedHeader &parsed) {
  size_t at = kFixedHeaderSize;
  auto need = [&](size_t n) { return n <= headerSize - at; };
  auto readString = [&](std::string &s) {
    if (!need(4))
      return false;
    uint32_t n = getU32(header + at);
    at += 4;
    if (!need(n))
      return false;
    s.assign(reinterpret_cast<const char *>(header + at), n);
    at += n;
    return true;
  };
  if (!readString(parsed.modelName))
    return false;
  // Each entry takes at least 20 bytes, which bounds a corrupted count.
  if (numTensors > (headerSize - at) / 20)
    return false;
  parsed.tensors.resize(numTensors);
  for (StateTensor &t : parsed.tensors) {
    if (!readString(t.name) || !need(8))
      return false;
    t.dtype = static_cast<int32_t>(getU32(header + at));
    uint32_t rank = getU32(header + at + 4);
    at += 8;
    if (rank > kMaxRank || !need(8 * size_t(rank) + 8))
      return false;
    t.shape.resize(rank);
    for (int64_t &d : t.shape) {
      d = static_cast<int64_t>(getU64(header + at));
      at += 8;
    }
    uint64_t bytes = getU64(header + at);
    at += 8;
    if (bytes > SIZE_MAX)
      return false;
    t.bytes = static_cast<size_t>(bytes);
  }
  return at == headerSize;
}

/// The first difference between what the file holds and what the model
/// expects, or "" when they are equal.
/// Matches the file's tensors with the model's: fileIndex[j] is the file's
/// index of model tensor j, or -1 for optional state the file lacks.
std::string compareWithModel(const ParsedHeader &fileHeader,
                             const std::string &modelName,
                             const std::vector<StateTensor> &tensors,
                             std::vector<int64_t> &fileIndex) {
  std::string prefix = "checkpoint of model '" + fileHeader.modelName + "'";
  if (fileHeader.modelName != modelName)
    return prefix + ", this model is '" + modelName + "'";
  // The lists without the optional tensors the other side lacks.
  auto has = [](const std::vector<StateTensor> &list, const std::string &n) {
    return std::any_of(list.begin(), list.end(),
                       [&](const StateTensor &t) { return t.name == n; });
  };
  std::vector<size_t> file, model;
  for (size_t i = 0; i < fileHeader.tensors.size(); ++i)
    if (!isOptionalStateTensor(fileHeader.tensors[i].name) ||
        has(tensors, fileHeader.tensors[i].name))
      file.push_back(i);
  for (size_t j = 0; j < tensors.size(); ++j)
    if (!isOptionalStateTensor(tensors[j].name) ||
        has(fileHeader.tensors, tensors[j].name))
      model.push_back(j);
  size_t common = std::min(file.size(), model.size());
  for (size_t k = 0; k < common; ++k) {
    const StateTensor &have = fileHeader.tensors[file[k]];
    const StateTensor &want = tensors[model[k]];
    if (have.name != want.name || have.dtype != want.dtype ||
        have.shape != want.shape)
      return prefix + " has tensor " + describeTensor(have) +
             ", this model expects " + describeTensor(want);
    if (have.bytes != want.bytes)
      return prefix + " has " + std::to_string(have.bytes) +
             " bytes for tensor " + describeTensor(have) +
             ", this model expects " + std::to_string(want.bytes);
  }
  if (file.size() > model.size())
    return prefix + " has " + std::to_string(fileHeader.tensors.size()) +
           " tensors, this model expects " + std::to_string(tensors.size()) +
           " (first extra: " +
           describeTensor(fileHeader.tensors[file[common]]) + ")";
  if (file.size() < model.size())
    return prefix + " has " + std::to_string(fileHeader.tensors.size()) +
           " tensors, this model expects " + std::to_string(tensors.size()) +
           " (first missing: " + describeTensor(tensors[model[common]]) + ")";
  fileIndex.assign(tensors.size(), -1);
  for (size_t k = 0; k < common; ++k)
    fileIndex[model[k]] = static_cast<int64_t>(file[k]);
  return "";
}

} // namespace

uint64_t checkpointChecksum(const void *data, size_t size) {
  Fnv1a64 checksum;
  checksum.update(data, size);
  return checksum.value();
}

bool isOptionalStateTensor(const std::string &name) {
  return name == "ampc.loss_scale" || name == "ampc.growth_tracker" ||
         name == "ampc.skipped_steps";
}

bool writeCheckpoint(const std::string &path, const std::string &modelName,
                     const std::vector<StateTensor> &tensors,
                     const std::vector<const void *> &data,
                     std::string &error) {
  if (data.size() != tensors.size()) {
    error = path + ": cannot write checkpoint: " +
            std::to_string(tensors.size()) + " tensors but " +
            std::to_string(data.size()) + " data pointers";
    return false;
  }
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].bytes && !data[i]) {
      error = path + ": cannot write checkpoint: no data for tensor '" +
              tensors[i].name + "'";
      return false;
    }

  uint64_t fileSize = 0;
  std::string header = encodeHeader(modelName, tensors, fileSize);
  Fnv1a64 checksum;
  checksum.update(header.data(), header.size());
  std::vector<std::pair<const void *, size_t>> pieces = {
      {header.data(), header.size()}};
  for (size_t i = 0; i < tensors.size(); ++i) {
    checksum.update(data[i], tensors[i].bytes);
    pieces.push_back({data[i], tensors[i].bytes});
  }
  std::string trailer;
  putU64(trailer, checksum.value());
  pieces.push_back({trailer.data(), trailer.size()});
  return writeFileAtomically(path, pieces, "checkpoint", error);
}

bool readCheckpoint(const std::string &path, const std::string &modelName,
                    const std::vector<StateTensor> &tensors,
                    std::vector<std::vector<unsigned char>> &out,
                    std::vector<bool> &present, std::string &error,
                    bool &corrupt, bool *incompatible) {
  corrupt = false;
  if (incompatible)
    *incompatible = false;
  auto ioError = [&](const std::string &what) {
    error = path + ": " + what + ": " + systemError();
    corrupt = false;
    return false;
  };
  auto malformed = [&](const std::string &what) {
    error = path + ": " + what;
    corrupt = true;
    return false;
  };

  // Only a regular file: a FIFO would block the open, a device never end.
  ampc::RegularFile file;
  std::string reason;
  if (!file.open(path, reason)) {
    error = path + ": cannot open checkpoint: " + reason;
    return false;
  }
  uint64_t actualSize = file.size;

  std::vector<unsigned char> header(kFixedHeaderSize);
  ssize_t got = readAll(file.fd, header.data(), kFixedHeaderSize);
  if (got < 0)
    return ioError("cannot read checkpoint");
  size_t fixed = static_cast<size_t>(got);
  if (std::memcmp(header.data(), kMagic, std::min(fixed, sizeof(kMagic))) ||
      fixed == 0)
    return malformed("not an ampc checkpoint");
  if (fixed < kFixedHeaderSize)
    return malformed("truncated: the file has " + std::to_string(fixed) +
                     " bytes, a checkpoint header has at least " +
                     std::to_string(kFixedHeaderSize));
  uint32_t version = getU32(header.data() + 8);
  if (version != kFormatVersion)
    return malformed("format version " + std::to_string(version) +
                     ", this runtime reads " + std::to_string(kFormatVersion));
  uint32_t numTensors = getU32(header.data() + 12);
  uint64_t headerSize = getU64(header.data() + 16);
  uint64_t fileSize = getU64(header.data() + 24);
  if (headerSize < kFixedHeaderSize + 4 || fileSize < kChecksumSize ||
      headerSize > fileSize - kChecksumSize || headerSize > SIZE_MAX)
    return malformed("malformed header (corrupted)");
  if (actualSize < headerSize)
    return malformed("truncated: the file has " + std::to_string(actualSize) +
                     " bytes, its header alone takes " +
                     std::to_string(headerSize));

  header.resize(static_cast<size_t>(headerSize));
  got = readAll(file.fd, header.data() + kFixedHeaderSize,
                header.size() - kFixedHeaderSize);
  if (got < 0)
    return ioError("cannot read checkpoint");
  if (static_cast<size_t>(got) != header.size() - kFixedHeaderSize)
    return malformed("truncated while reading the header");
  ParsedHeader parsed;
  if (!parseTable(header.data(), header.size(), numTensors, parsed))
    return malformed("malformed tensor table (corrupted)");
  uint64_t expectedSize = headerSize + kChecksumSize;
  for (const StateTensor &t : parsed.tensors) {
    if (t.bytes > UINT64_MAX - expectedSize)
      return malformed("malformed tensor table (corrupted)");
    expectedSize += t.bytes;
  }
  if (expectedSize != fileSize)
    return malformed("malformed header: the sizes do not add up (corrupted)");

  if (actualSize < fileSize) {
    uint64_t offset = headerSize;
    for (const StateTensor &t : parsed.tensors) {
      if (offset + t.bytes > actualSize)
        return malformed("truncated: expected " + std::to_string(t.bytes) +
                         " bytes of tensor '" + t.name + "', found " +
                         std::to_string(actualSize - offset));
      offset += t.bytes;
    }
    return malformed("truncated: expected an 8-byte checksum, found " +
                     std::to_string(actualSize - offset) + " bytes");
  }
  if (actualSize > fileSize)
    return malformed(std::to_string(actualSize - fileSize) +
                     " bytes after the end of the checkpoint (corrupted)");

  Fnv1a64 checksum;
  checksum.update(header.data(), header.size());
  std::vector<std::vector<unsigned char>> data(parsed.tensors.size());
  for (size_t i = 0; i < parsed.tensors.size(); ++i) {
    data[i].resize(parsed.tensors[i].bytes);
    got = readAll(file.fd, data[i].data(), data[i].size());
    if (got < 0)
      return ioError("cannot read checkpoint");
    if (static_cast<size_t>(got) != data[i].size())
      return malformed("truncated while reading tensor '" +
                       parsed.tensors[i].name + "'");
    checksum.update(data[i].data(), data[i].size());
  }
  unsigned char trailer[kChecksumSize];
  got = readAll(file.fd, trailer, sizeof(trailer));
  if (got < 0)
    return ioError("cannot read checkpoint");
  if (static_cast<size_t>(got) != sizeof(trailer))
    return malformed("truncated while reading the checksum");
  if (getU64(trailer) != checksum.value())
    return malformed("checksum mismatch (corrupted)");

  std::vector<int64_t> fileIndex;
  std::string mismatch = compareWithModel(parsed, modelName, tensors, fileIndex);
  if (!mismatch.empty()) {
    // Intact (the checksum held), only not for this library.
    error = path + ": incompatible with this library: " + mismatch +
            " (saved by a library of another model or compiled with other "
            "training options)";
    if (incompatible)
      *incompatible = true;
    return false;
  }
  out.assign(tensors.size(), {});
  present.assign(tensors.size(), false);
  for (size_t j = 0; j < tensors.size(); ++j)
    if (fileIndex[j] >= 0) {
      out[j] = std::move(data[static_cast<size_t>(fileIndex[j])]);
      present[j] = true;
    }
  return true;
}

} // namespace ampc::runtime
