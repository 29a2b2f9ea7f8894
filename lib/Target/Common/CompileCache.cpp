//===- CompileCache.cpp - the compile cache of generated sources ----------===//
//
// Builds a generated source into a library (emit::compileLibrary) so that
// a rebuild redoes little (docs/design.md, "Faster rebuilds"): the runtime
// headers come from GCC's precompiled header, built once per compiler and
// flags into ampc's cache folder; the code is compiled apart from the data
// (kDataMarker), in pieces compiled at once (kPieceMarker), each piece's
// object kept in the cache under the hash of its compiler, flags and text.
// The cache is a speed-up only: whenever it cannot be used (off, another
// process building the header, a compiler that is not GCC, a failed
// build) the compile does the work itself and produces the same library.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/LibraryEmitter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <cstdlib>
#include <optional>
#include <unistd.h>

using namespace llvm;

namespace {

/// A lock older than this was left by a compile that died.
constexpr auto kStaleLock = std::chrono::minutes(10);

std::string cacheRoot() {
  if (const char *dir = std::getenv("AMPC_CACHE_DIR"))
    return StringRef(dir) == "off" ? "" : dir;
  SmallString<256> path;
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) {
    path = xdg;
  } else if (!sys::path::home_directory(path)) {
    return "";
  } else {
    sys::path::append(path, ".cache");
  }
  sys::path::append(path, "ampc");
  return path.str().str();
}

/// The files a dependency file (-MD) names after its target.
SmallVector<std::string> dependencies(StringRef depFile) {
  SmallVector<std::string> files;
  auto text = MemoryBuffer::getFile(depFile);
  if (!text)
    return files;
  StringRef rest = (*text)->getBuffer();
  rest = rest.split(':').second; // after "target:"
  SmallVector<StringRef> words;
  rest.split(words, ' ', -1, /*KeepEmpty=*/false);
  for (StringRef w : words) {
    w = w.trim();
    if (w.empty() || w == "\\")
      continue;
    files.push_back(w.str());
  }
  return files;
}

sys::TimePoint<> modified(StringRef path) {
  sys::fs::file_status status;
  if (sys::fs::status(path, status))
    return sys::TimePoint<>::max();
  return status.getLastModificationTime();
}

/// Whether `output` and its dependency file exist and `output` is newer
/// than every file it was built from but the first (the source: the cache
/// key holds its text), as make decides.
bool upToDate(StringRef output, StringRef depFile) {
  if (!sys::fs::exists(output) || !sys::fs::exists(depFile))
    return false;
  SmallVector<std::string> deps = dependencies(depFile);
  if (deps.empty())
    return false;
  sys::TimePoint<> built = modified(output);
  for (size_t i = 1; i < deps.size(); ++i)
    if (modified(deps[i]) > built)
      return false;
  return true;
}

/// The cache key's start for the compiler `program` (its real path, size
/// and time stamp) run with `flags`; nullopt when it cannot be found.
std::optional<std::string> compilerKey(StringRef program,
                                       ArrayRef<std::string> flags) {
  SmallString<256> real;
  sys::fs::file_status status;
  if (sys::fs::real_path(program, real) || sys::fs::status(real, status))
    return std::nullopt;
  std::string key;
  raw_string_ostream k(key);
  k << real << '\0' << status.getSize() << '\0'
    << status.getLastModificationTime().time_since_epoch().count();
  for (const std::string &flag : flags)
    k << '\0' << flag;
  return key;
}

std::string hexHash(StringRef text) {
  return utohexstr(xxh3_64bits(text), /*LowerCase=*/true);
}

} // namespace

std::vector<std::string>
ampc::emit::precompiledHeader(StringRef program,
                              ArrayRef<std::string> compileFlags,
                              ArrayRef<StringRef> headers) {
  // GCC finds NAME.gch beside a header named by -include; other compilers
  // spell precompiled headers differently.
  SmallString<256> real;
  if (sys::fs::real_path(program, real) ||
      !sys::path::filename(real).contains("g++"))
    return {};
  std::string root = cacheRoot();
  if (root.empty())
    return {};

  // One folder per compiler (its file and time stamp) and flags.
  std::optional<std::string> key = compilerKey(real, compileFlags);
  if (!key)
    return {};
  for (StringRef header : headers)
    *key += std::string(1, '\0') + header.str();
  SmallString<256> dir(root);
  sys::path::append(dir, "pch-" + hexHash(*key));
  SmallString<256> header(dir), gch(dir), depFile(dir), lock(dir);
  sys::path::append(header, "ampc_pch.h");
  sys::path::append(gch, "ampc_pch.h.gch");
  sys::path::append(depFile, "ampc_pch.d");
  sys::path::append(lock, "lock");
  std::vector<std::string> use = {"-include", header.str().str()};
  if (upToDate(gch, depFile))
    return use;

  // Build it, one process at a time; the others compile without it.
  if (sys::fs::create_directories(dir))
    return {};
  int lockFd;
  if (sys::fs::openFileForWrite(lock, lockFd, sys::fs::CD_CreateNew)) {
    if (std::chrono::system_clock::now() - modified(lock) < kStaleLock)
      return {};
    sys::fs::remove(lock);
    if (sys::fs::openFileForWrite(lock, lockFd, sys::fs::CD_CreateNew))
      return {};
  }
  sys::Process::SafelyCloseFileDescriptor(lockFd);
  FileRemover removeLock(lock);
  {
    std::error_code ec;
    raw_fd_ostream out(header, ec);
    if (ec)
      return {};
    out << "// ampc's precompiled runtime headers (lib/Target/Common/"
           "CompileCache.cpp)\n";
    for (StringRef h : headers)
      out << "#include \"" << h << "\"\n";
  }
  std::string tmpGch = (gch + ".tmp").str(), tmpDep = (depFile + ".tmp").str();
  std::vector<std::string> args = {real.str().str()};
  args.insert(args.end(), compileFlags.begin(), compileFlags.end());
  args.insert(args.end(), {"-x", "c++-header", header.str().str(), "-o", tmpGch,
                           "-MD", "-MF", tmpDep});
  std::string error;
  if (!runCompiler(args, "the precompiled header", header, error) ||
      sys::fs::rename(tmpDep, depFile) || sys::fs::rename(tmpGch, gch)) {
    sys::fs::remove(tmpGch);
    sys::fs::remove(tmpDep);
    return {};
  }
  return use;
}

namespace {

/// The code and the data of a generated source with one kDataMarker line.
std::optional<std::pair<StringRef, StringRef>> splitAtData(StringRef text) {
  size_t at = text.find(ampc::emit::kDataMarker);
  if (at == StringRef::npos || (at > 0 && text[at - 1] != '\n') ||
      text.find(ampc::emit::kDataMarker, at + 1) != StringRef::npos)
    return std::nullopt;
  return std::make_pair(text.take_front(at), text.drop_front(at));
}

bool writeText(StringRef path, StringRef text) {
  std::error_code ec;
  raw_fd_ostream out(path, ec);
  if (ec)
    return false;
  out << text;
  return true;
}

/// Keeps the objects folder under $AMPC_CACHE_MAX_MB (default 1024):
/// the least recently used objects go first, never those in `keep` (the
/// one just built).
void trimObjects(StringRef dir, ArrayRef<std::string> keep) {
  uint64_t limit = 1024;
  if (const char *mb = std::getenv("AMPC_CACHE_MAX_MB"))
    StringRef(mb).getAsInteger(10, limit);
  limit <<= 20;
  struct Entry {
    std::string path;
    sys::TimePoint<> time;
    uint64_t size;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    sys::fs::file_status status;
    if (sys::fs::status(it->path(), status))
      continue;
    entries.push_back(
        {it->path(), status.getLastModificationTime(), status.getSize()});
    total += status.getSize();
  }
  if (total <= limit)
    return;
  llvm::sort(entries,
             [](const Entry &a, const Entry &b) { return a.time < b.time; });
  for (const Entry &e : entries) {
    if (total <= limit / 4 * 3)
      break;
    if (llvm::is_contained(keep, e.path))
      continue;
    sys::fs::remove(e.path);
    total -= e.size;
  }
}

} // namespace

bool ampc::emit::compileLibrary(const LibraryCompile &how,
                                StringRef sourcePath, StringRef output,
                                std::string &error) {
  std::vector<std::string> pch =
      precompiledHeader(how.program, how.compileFlags, how.headers);
  auto withFlags = [&](bool code) {
    std::vector<std::string> args = {how.program.str()};
    args.insert(args.end(), how.compileFlags.begin(), how.compileFlags.end());
    if (code) {
      args.insert(args.end(), pch.begin(), pch.end());
      args.insert(args.end(), how.uncachedCodeFlags.begin(),
                  how.uncachedCodeFlags.end());
    }
    return args;
  };
  // Compiles the code with `args`, then lets checkAfter read the log.
  auto compileCode = [&](ArrayRef<std::string> args) {
    std::string log;
    if (!runCompiler(args, how.what, sourcePath, error, &log))
      return false;
    return !how.checkAfter || how.checkAfter(log, error);
  };
  auto text = MemoryBuffer::getFile(sourcePath);
  std::optional<std::pair<StringRef, StringRef>> parts;
  if (text)
    parts = splitAtData((*text)->getBuffer());
  if (!parts) {
    if (how.checkBefore && !how.checkBefore(error))
      return false;
    // One translation unit (a source with its data as arrays, several
    // sources combined, a hand-written one).
    std::vector<std::string> args = withFlags(true);
    args.insert(args.end(), {"-shared", "-x", how.language.str(),
                             sourcePath.str(), "-o", output.str()});
    args.insert(args.end(), how.linkFlags.begin(), how.linkFlags.end());
    if (compileCode(args))
      return true;
    sys::fs::remove(output);
    return false;
  }

  SmallString<128> work;
  if (sys::fs::createUniqueDirectory("ampc-objects", work)) {
    error = "cannot create a temporary folder";
    return false;
  }
  llvm::scope_exit removeWork([&] { sys::fs::remove_directories(work); });
  auto inWork = [&](StringRef name) {
    SmallString<128> path(work);
    sys::path::append(path, name);
    return path.str().str();
  };

  // The code's objects, one per piece: from the cache, else compiled
  // (into the cache), the misses at once.
  SmallVector<StringRef> pieceText;
  StringRef shared;
  {
    SmallVector<StringRef> cut;
    parts->first.split(cut, (Twine(kPieceMarker) + "\n").str());
    if (cut.size() > 1)
      shared = cut.front();
    pieceText.assign(cut.size() > 1 ? cut.begin() + 1 : cut.begin(),
                     cut.end());
  }
  std::optional<std::string> key;
  if (!cacheRoot().empty())
    key = compilerKey(how.program, how.compileFlags);
  SmallString<256> objects(cacheRoot());
  sys::path::append(objects, "objects");
  bool cache = key.has_value() && !sys::fs::create_directories(objects);
  struct Piece {
    std::string object, depFile;
    bool hit = false;
  };
  std::vector<Piece> pieces(pieceText.size());
  // Objects are written under temporary names and renamed when whole.
  std::string suffix = ".tmp" + std::to_string(::getpid());
  std::vector<std::vector<std::string>> compiles;
  std::vector<size_t> compiled;
  for (auto [i, text] : llvm::enumerate(pieceText)) {
    Piece &piece = pieces[i];
    std::string stem = "code" + std::to_string(i);
    piece.object = inWork(stem + ".o");
    piece.depFile = inWork(stem + ".d");
    if (cache) {
      std::string hash = hexHash(*key + std::string(1, '\0') + shared.str() +
                                 std::string(1, '\0') + text.str());
      piece.object = (objects + "/" + hash + ".o").str();
      piece.depFile = (objects + "/" + hash + ".d").str();
      piece.hit = upToDate(piece.object, piece.depFile);
    }
    if (piece.hit) {
      // Recently used: the trimming removes the oldest written first.
      int fd;
      if (!sys::fs::openFileForReadWrite(piece.object, fd,
                                         sys::fs::CD_OpenExisting,
                                         sys::fs::OF_None)) {
        sys::fs::setLastAccessAndModificationTime(
            fd, std::chrono::system_clock::now());
        sys::Process::SafelyCloseFileDescriptor(fd);
      }
      continue;
    }
    std::string code = inWork(stem + ".cpp");
    if (!writeText(code, (shared + text).str())) {
      error = "cannot write " + code;
      return false;
    }
    std::vector<std::string> args = withFlags(true);
    args.insert(args.end(),
                {"-x", how.language.str(), "-c", code, "-o",
                 piece.object + suffix, "-MD", "-MF", piece.depFile + suffix});
    compiles.push_back(std::move(args));
    compiled.push_back(i);
  }
  if (!compiles.empty()) {
    if (how.checkBefore && !how.checkBefore(error))
      return false;
    auto removeTemporaries = [&] {
      for (size_t i : compiled) {
        sys::fs::remove(pieces[i].object + suffix);
        sys::fs::remove(pieces[i].depFile + suffix);
      }
    };
    std::vector<std::string> logs;
    bool ok = runCompilers(compiles, how.what, sourcePath, error, &logs);
    for (size_t j = 0; ok && how.checkAfter && j < logs.size(); ++j)
      ok = how.checkAfter(logs[j], error);
    if (!ok) {
      removeTemporaries();
      return false;
    }
    // Dependency file first: an object without one is never used.
    for (size_t i : compiled) {
      Piece &piece = pieces[i];
      if (sys::fs::rename(piece.depFile + suffix, piece.depFile) ||
          sys::fs::rename(piece.object + suffix, piece.object)) {
        removeTemporaries();
        error = "cannot write " + piece.object;
        return false;
      }
    }
  }

  // The data's object (host C++ whatever the compiler), then the library.
  std::string data = inWork("data.cpp"), dataObject = inWork("data.o");
  if (!writeText(data, parts->second)) {
    error = "cannot write " + data;
    return false;
  }
  std::vector<std::string> args = withFlags(false);
  args.insert(args.end(), {"-c", data, "-o", dataObject});
  if (!runCompiler(args, how.what, sourcePath, error))
    return false;
  std::vector<std::string> link = {how.program.str(), "-shared"};
  for (const Piece &piece : pieces)
    link.push_back(piece.object);
  link.insert(link.end(), {dataObject, "-o", output.str()});
  link.insert(link.end(), how.linkFlags.begin(), how.linkFlags.end());
  if (!runCompiler(link, how.what, sourcePath, error))
    return false;
  if (cache && !compiled.empty()) {
    std::vector<std::string> keep;
    for (const Piece &piece : pieces)
      keep.insert(keep.end(), {piece.object, piece.depFile});
    trimObjects(objects, keep);
  }
  return true;
}
