//===- RegularFile.h - reading files that are only regular files -*- C++ -*-===//
//
// Every file ampc and its runtime read on a user's behalf (models, external
// data, rules files, checkpoints, .npy inputs) is opened through here: a
// FIFO, a device or a socket is refused without blocking (a plain open of a
// FIFO waits for a writer forever), a directory is named as one, and reads
// go in bounded chunks of a size known from fstat before anything is
// allocated. Plain POSIX C++: the runtime and ampc-train link no LLVM.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_SUPPORT_REGULARFILE_H
#define AMPC_SUPPORT_REGULARFILE_H

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ampc {

/// The largest read issued at once.
constexpr size_t kReadChunkBytes = size_t(1) << 24;

/// An open file descriptor, closed when it goes out of scope.
class RegularFile {
public:
  RegularFile() = default;
  RegularFile(const RegularFile &) = delete;
  RegularFile &operator=(const RegularFile &) = delete;
  ~RegularFile() {
    if (fd >= 0)
      ::close(fd);
  }

  /// Opens `path` for reading if it is a regular file. On failure returns
  /// false and sets `error` to the reason, without the path ("is a
  /// directory", "not a regular file (a FIFO)", strerror).
  bool open(const std::string &path, std::string &error) {
    // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
    fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      error = std::strerror(errno);
      return false;
    }
    struct stat info;
    if (::fstat(fd, &info) != 0) {
      error = std::strerror(errno);
      return false;
    }
    if (!S_ISREG(info.st_mode)) {
      error = S_ISDIR(info.st_mode)    ? std::strerror(EISDIR)
              : S_ISFIFO(info.st_mode) ? "not a regular file (a FIFO)"
              : S_ISCHR(info.st_mode) || S_ISBLK(info.st_mode)
                  ? "not a regular file (a device)"
              : S_ISSOCK(info.st_mode) ? "not a regular file (a socket)"
                                       : "not a regular file";
      return false;
    }
    size = static_cast<uint64_t>(info.st_size);
    int flags = ::fcntl(fd, F_GETFL);
    if (flags >= 0)
      ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    return true;
  }

  /// Reads exactly `bytes` bytes at `offset` into `out`, in chunks of at
  /// most kReadChunkBytes. Fails (with `error`) on a read error or when the
  /// file ends first (it shrank since open).
  bool readAt(uint64_t offset, void *out, size_t bytes, std::string &error) {
    char *to = static_cast<char *>(out);
    while (bytes > 0) {
      size_t chunk = bytes < kReadChunkBytes ? bytes : kReadChunkBytes;
      ssize_t got = ::pread(fd, to, chunk, static_cast<off_t>(offset));
      if (got < 0) {
        if (errno == EINTR)
          continue;
        error = std::strerror(errno);
        return false;
      }
      if (got == 0) {
        error = "the file ended early (truncated while reading?)";
        return false;
      }
      to += got;
      offset += static_cast<uint64_t>(got);
      bytes -= static_cast<size_t>(got);
    }
    return true;
  }

  /// Reads the whole file into `contents` when it holds at most `maxBytes`.
  bool readAll(std::string &contents, uint64_t maxBytes, std::string &error) {
    if (size > maxBytes) {
      error = "the file has " + std::to_string(size) + " bytes, more than " +
              std::to_string(maxBytes) + " this reader accepts";
      return false;
    }
    contents.resize(static_cast<size_t>(size));
    return readAt(0, contents.data(), contents.size(), error);
  }

  int fd = -1;
  /// The file's size when it was opened.
  uint64_t size = 0;
};

/// Reads the regular file at `path` whole (at most `maxBytes`); on failure
/// `error` gives the reason without the path.
inline bool readRegularFile(const std::string &path, std::string &contents,
                            uint64_t maxBytes, std::string &error) {
  RegularFile file;
  return file.open(path, error) && file.readAll(contents, maxBytes, error);
}

} // namespace ampc

#endif // AMPC_SUPPORT_REGULARFILE_H
