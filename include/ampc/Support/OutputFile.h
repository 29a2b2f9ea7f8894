//===- OutputFile.h - the one policy for every file ampc writes -*- C++ -*-===//
//
// Every file ampc, its tools, its runtime and its Python module write on a
// user's behalf (ampc's -o, side files and reports, ampc-train's
// checkpoints, metrics, plots, predictions, the runtime's checkpoints and
// ONNX exports) goes through here, so that one set of rules holds for all
// (docs/design.md, Output files):
//
//  - a name holding a NUL byte is refused (it would name another file);
//  - a symbolic link as the last component of the name is refused, never
//    written through nor replaced (a link in a folder above is followed);
//  - an existing file that is not a regular file (a folder, a device such
//    as /dev/null, a FIFO, a socket) is refused;
//  - an existing file the user cannot write is refused: access(W_OK), and,
//    because root passes that test for any file, a file with no write bit
//    at all (0444) as well;
//  - a file that is an input of the same run, or a library the process has
//    loaded, is refused (compared by device and inode, not by name, so a
//    hard link or another spelling is caught);
//  - the bytes go to a temporary file in the same folder, are flushed and
//    renamed over the name, so a failed write never leaves a half file;
//  - a new file gets 0666 minus the umask; a replaced file keeps its mode
//    (and its owner and group, where the process may set them).
//
// Plain POSIX C++: the runtime and ampc-train link no LLVM. The input-side
// counterpart is RegularFile.h.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_SUPPORT_OUTPUTFILE_H
#define AMPC_SUPPORT_OUTPUTFILE_H

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace ampc {

/// A file's identity: its device and inode.
struct FileId {
  dev_t device = 0;
  ino_t inode = 0;
  bool operator==(const FileId &other) const {
    return device == other.device && inode == other.inode;
  }
};

/// A file an output must not replace, and how messages name it ("the input
/// model 'net.onnx'").
struct ProtectedFile {
  FileId id;
  std::string what;
};

/// The identity of the file `path` names (links followed); false when
/// there is none.
inline bool fileIdOf(const std::string &path, FileId &id) {
  struct stat info;
  if (path.find('\0') != std::string::npos || ::stat(path.c_str(), &info) != 0)
    return false;
  id = {info.st_dev, info.st_ino};
  return true;
}

/// Adds `path` (when it names a file) to `inputs` as `what`.
inline void protectFile(std::vector<ProtectedFile> &inputs,
                        const std::string &path, const std::string &what) {
  FileId id;
  if (fileIdOf(path, id))
    inputs.push_back({id, what});
}

namespace output_detail {

inline std::string folderOf(const std::string &path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

inline std::string baseOf(const std::string &path) {
  return path.substr(path.rfind('/') == std::string::npos ? 0
                                                          : path.rfind('/') + 1);
}

/// The temporaries of `path` are named PREFIX + six characters, PREFIX
/// being the file's name (its first 200 bytes: the whole must fit in
/// NAME_MAX) and ".tmp-".
inline std::string temporaryPrefix(const std::string &path) {
  std::string folder = folderOf(path), base = baseOf(path);
  if (base.size() > 200)
    base.resize(200);
  return (path.rfind('/') == std::string::npos ? std::string()
                                               : folder + "/") +
         base + ".tmp-";
}

inline const char *kindOf(mode_t mode) {
  return S_ISDIR(mode)                      ? "a folder"
         : S_ISLNK(mode)                    ? "a symbolic link"
         : S_ISCHR(mode) || S_ISBLK(mode)   ? "a device"
         : S_ISFIFO(mode)                   ? "a FIFO"
         : S_ISSOCK(mode)                   ? "a socket"
                                            : "not a regular file";
}

inline std::string octalMode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", unsigned(mode & 07777));
  return text;
}

/// Removes what an interrupted earlier write of `path` left: regular files
/// named as its temporaries not modified for ten minutes (a write still in
/// progress is younger).
inline void removeStaleTemporaries(const std::string &path) {
  std::string prefix = baseOf(temporaryPrefix(path)),
              folder = folderOf(path);
  DIR *dir = ::opendir(folder.c_str());
  if (!dir)
    return;
  time_t now = ::time(nullptr);
  while (dirent *entry = ::readdir(dir)) {
    std::string name = entry->d_name;
    if (name.size() != prefix.size() + 6 || name.compare(0, prefix.size(), prefix))
      continue;
    std::string full = folder + "/" + name;
    struct stat info;
    if (::lstat(full.c_str(), &info) == 0 && S_ISREG(info.st_mode) &&
        now - info.st_mtime > 600)
      ::unlink(full.c_str());
  }
  ::closedir(dir);
}

inline bool writeAll(int fd, const void *data, size_t size) {
  const char *p = static_cast<const char *>(data);
  while (size) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return false;
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

} // namespace output_detail

/// Checks `path` as an output against the rules above, without writing.
/// On failure returns false and sets `error` to the reason, without the
/// path ("it is a symbolic link: ..."). `existing`, when given, receives
/// the file's stat when it exists (st_nlink 0 otherwise).
inline bool checkOutputPath(const std::string &path,
                            const std::vector<ProtectedFile> &inputs,
                            std::string &error,
                            struct stat *existing = nullptr) {
  using namespace output_detail;
  if (existing)
    std::memset(existing, 0, sizeof *existing);
  if (path.empty()) {
    error = "the name is empty";
    return false;
  }
  if (path.find('\0') != std::string::npos) {
    error = "the name holds a NUL byte";
    return false;
  }
  if (path.back() == '/') {
    error = "the name ends in '/': give the path of a file";
    return false;
  }
  struct stat info;
  if (::lstat(path.c_str(), &info) == 0) {
    if (S_ISLNK(info.st_mode)) {
      error = "it is a symbolic link; outputs are never written through a "
              "link nor over one: give the path of a file";
      return false;
    }
    if (!S_ISREG(info.st_mode)) {
      error = std::string("it exists and is not a regular file (") +
              kindOf(info.st_mode) + "); give the path of a file";
      return false;
    }
    // access() says yes to root for any file: a file with no write bit is
    // read-only to everyone here.
    if ((info.st_mode & 0222) == 0) {
      error = "it is read-only (mode " + octalMode(info.st_mode) +
              "); it is not replaced";
      return false;
    }
    if (::access(path.c_str(), W_OK) != 0) {
      error = "it is not writable here (mode " + octalMode(info.st_mode) +
              "): " + std::strerror(errno) + "; it is not replaced";
      return false;
    }
    for (const ProtectedFile &input : inputs)
      if (input.id == FileId{info.st_dev, info.st_ino}) {
        error = "it is " + input.what + "; an output never replaces it";
        return false;
      }
    if (existing)
      *existing = info;
  } else if (errno != ENOENT) {
    error = std::strerror(errno);
    return false;
  }
  std::string folder = folderOf(path);
  struct stat folderInfo;
  if (::stat(folder.c_str(), &folderInfo) != 0 || !S_ISDIR(folderInfo.st_mode)) {
    error = "no folder '" + folder + "'";
    return false;
  }
  if (::access(folder.c_str(), W_OK | X_OK) != 0) {
    error = "cannot write in '" + folder + "': " + std::strerror(errno);
    return false;
  }
  return true;
}

/// Whether two output names name the same file: the same existing file, or
/// the same name in the same folder.
inline bool sameOutputPath(const std::string &a, const std::string &b) {
  using namespace output_detail;
  FileId x, y;
  bool hasX = fileIdOf(a, x), hasY = fileIdOf(b, y);
  if (hasX || hasY)
    return hasX && hasY && x == y;
  return baseOf(a) == baseOf(b) && fileIdOf(folderOf(a), x) &&
         fileIdOf(folderOf(b), y) && x == y;
}

/// One output file being written: checked, created as a temporary beside
/// it, then moved into place by commit(). Dropped without commit() (an
/// error, an exception), the temporary is removed and the file is as it
/// was.
class OutputFile {
public:
  OutputFile() = default;
  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile() { discard(); }

  /// Checks `path` (checkOutputPath) and creates the temporary; on failure
  /// returns false with `error` = the reason, without the path.
  bool open(const std::string &path, const std::vector<ProtectedFile> &inputs,
            std::string &error) {
    using namespace output_detail;
    discard();
    target = path;
    protectedFiles = inputs;
    if (!checkOutputPath(path, inputs, error))
      return false;
    removeStaleTemporaries(path);
    std::string prefix = temporaryPrefix(path);
    static const char kLetters[] =
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    uint64_t seed =
        uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        (uint64_t(::getpid()) << 32) ^ uint64_t(uintptr_t(this));
    for (int attempt = 0; attempt < 100; ++attempt) {
      std::string name = prefix;
      for (int i = 0; i < 6; ++i) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        name += kLetters[(seed >> 33) % (sizeof kLetters - 1)];
      }
      // 0666: the kernel takes the umask off (and a default ACL applies).
      fd = ::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
      if (fd >= 0) {
        temporary = name;
        break;
      }
      if (errno != EEXIST) {
        error = "cannot create a temporary file in '" + folderOf(path) +
                "': " + std::strerror(errno);
        return false;
      }
    }
    if (fd < 0) {
      error = "cannot find a free temporary name in '" + folderOf(path) + "'";
      return false;
    }
    return true;
  }

  /// Appends `size` bytes.
  bool write(const void *data, size_t size, std::string &error) {
    if (fd < 0 || !output_detail::writeAll(fd, data, size)) {
      error = "cannot write '" + temporary + "': " + std::strerror(errno);
      return false;
    }
    return true;
  }

  /// The temporary's descriptor (for a stream that writes into it).
  int descriptor() const { return fd; }
  /// The temporary's path, for a program that writes the file itself (a
  /// linker): it may replace the file; commit() moves what is there.
  const std::string &temporaryPath() const { return temporary; }

  /// Flushes the temporary and renames it over the name, after checking
  /// the name again (it may have changed since open()). A replaced file's
  /// mode (and owner and group, where allowed) carry over.
  bool commit(std::string &error) {
    using namespace output_detail;
    if (temporary.empty()) {
      error = "nothing to commit";
      return false;
    }
    auto failWith = [&](const std::string &why) {
      error = why;
      discard();
      return false;
    };
    if (fd >= 0) {
      if (::fsync(fd) != 0)
        return failWith("cannot flush '" + temporary +
                        "' to disk: " + std::strerror(errno));
      int closing = fd;
      fd = -1;
      if (::close(closing) != 0)
        return failWith("cannot close '" + temporary +
                        "': " + std::strerror(errno));
    }
    struct stat now;
    if (!checkOutputPath(target, protectedFiles, error, &now))
      return failWith(error);
    if (now.st_nlink) {
      // Owner first: chown clears the set-id bits chmod then restores.
      if (::lchown(temporary.c_str(), now.st_uid, now.st_gid) != 0)
        (void)::lchown(temporary.c_str(), uid_t(-1), now.st_gid);
      if (::chmod(temporary.c_str(), now.st_mode & 07777) != 0)
        return failWith("cannot set the mode of '" + temporary +
                        "': " + std::strerror(errno));
    }
    if (::rename(temporary.c_str(), target.c_str()) != 0)
      return failWith("cannot rename '" + temporary +
                      "' to it: " + std::strerror(errno));
    temporary.clear();
    // Makes the rename itself durable; a failure here loses nothing that
    // is already written, so it is not reported.
    int folder = ::open(folderOf(target).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (folder >= 0) {
      ::fsync(folder);
      ::close(folder);
    }
    return true;
  }

  /// Removes the temporary; the name keeps what it had.
  void discard() {
    if (fd >= 0)
      ::close(fd);
    fd = -1;
    if (!temporary.empty())
      ::unlink(temporary.c_str());
    temporary.clear();
  }

private:
  std::string target, temporary;
  std::vector<ProtectedFile> protectedFiles;
  int fd = -1;
};

/// Writes `pieces` one after the other to `path` by the rules above. On
/// failure returns false with `error` = the reason, without the path.
inline bool writeOutputFile(
    const std::string &path,
    const std::vector<std::pair<const void *, size_t>> &pieces,
    const std::vector<ProtectedFile> &inputs, std::string &error) {
  OutputFile file;
  if (!file.open(path, inputs, error))
    return false;
  for (const auto &[data, size] : pieces)
    if (!file.write(data, size, error))
      return false;
  return file.commit(error);
}

} // namespace ampc

#endif // AMPC_SUPPORT_OUTPUTFILE_H
