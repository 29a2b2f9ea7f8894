//===- CompileCache.cpp - the compile cache of generated sources ----------===//
//
// Builds a generated source into a library (emit::compileLibrary) so that
// a rebuild redoes little (docs/design.md, "Faster rebuilds"): the runtime
// headers come from GCC's precompiled header, built once per compiler and
// flags into ampc's cache folder; the code is compiled apart from the data
// (Artifact::data), in pieces compiled at once (Artifact::pieces), each
// piece's object kept in the cache. The emitter hands the pieces over as
// they are: nothing here reads them out of a text.
//
// The cache keys on contents, never on time stamps (docs/design.md, "A
// compile cache that cannot be poisoned"): an entry's name is the BLAKE3
// hash of the compiler's identity (its bytes and `--version`), the flags
// and the code's text (and the precompiled header's inputs); a manifest
// beside it records its size and checksum and the checksum of every file
// the compiler read (its dependency file). An entry is used only when all
// of them match and the folder and files are the user's own, writable by
// no one else. The cache is a speed-up only: whenever it cannot be used
// (off, refused, another process building the header, a compiler that is
// not GCC, a failed build, an entry that fails its check) the compile does
// the work itself and produces the same library.
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/LibraryEmitter.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/BLAKE3.h"
#include "llvm/Support/Chrono.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Support/xxhash.h"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

using namespace llvm;

namespace {

/// A lock older than this was left by a compile that died.
constexpr auto kStaleLock = std::chrono::minutes(10);
/// The first line of every manifest: entries of another layout (an older
/// ampc's) are not used, and are replaced.
constexpr StringLiteral kManifestHeader = "ampc compile cache 2";

/// Where the cache lives ($AMPC_CACHE_DIR, else $XDG_CACHE_HOME/ampc or
/// ~/.cache/ampc); "" when it is off or there is no home.
std::string configuredRoot() {
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

/// Prints "warning: PATH: MESSAGE" once per process.
void warnOnce(StringRef path, const Twine &message) {
  static std::mutex mutex;
  static StringSet<> said;
  std::string line = ("warning: " + path + ": " + message).str();
  std::lock_guard<std::mutex> lock(mutex);
  if (said.insert(line).second)
    errs() << line << "\n";
}

/// Why the cache must not use `path`, "" when it may: a folder (with
/// `file`, a regular file that is not a symbolic link) that the user
/// running ampc owns and that neither group nor others can write, as ssh
/// asks of ~/.ssh. Anyone else who can write there could plant an object
/// that the next compile links.
std::string distrust(StringRef path, bool file) {
  sys::fs::file_status status;
  if (std::error_code ec = sys::fs::status(path, status, /*Follow=*/!file))
    return "cannot be read (" + ec.message() + ")";
  if (file && status.type() != sys::fs::file_type::regular_file)
    return "not a regular file";
  if (!file && status.type() != sys::fs::file_type::directory_file)
    return "not a folder";
  if (status.getUser() != ::geteuid())
    return formatv("owned by uid {0}, not by uid {1} who runs ampc",
                   status.getUser(), ::geteuid());
  sys::fs::perms perms = status.permissions();
  bool group = perms & sys::fs::group_write;
  bool others = perms & sys::fs::others_write;
  if (!group && !others)
    return "";
  std::string why;
  raw_string_ostream(why) << "writable by "
                          << (group && others ? "group and others"
                              : group         ? "group"
                                              : "others")
                          << " (mode "
                          << format("%04o", unsigned(perms & sys::fs::all_perms))
                          << ")";
  return why;
}

/// Whether `path` can be a folder of the cache: created (0700) when
/// missing, then owned by the user and writable by no one else. A folder
/// that is not is refused with one warning (per process), and the compile
/// goes on without the cache.
bool usableFolder(StringRef path) {
  if (sys::fs::create_directories(path, /*IgnoreExisting=*/true,
                                  sys::fs::owner_all))
    return false;
  std::string why = distrust(path, /*file=*/false);
  if (why.empty())
    return true;
  warnOnce(path, "not used as the compile cache: " + why +
                     "; compiling without it");
  return false;
}

/// The cache folder, "" when off or refused.
std::string cacheRoot() {
  std::string root = configuredRoot();
  return !root.empty() && usableFolder(root) ? root : "";
}

std::string blake3Hex(StringRef bytes) {
  return toHex(BLAKE3::hash(arrayRefFromStringRef(bytes)), /*LowerCase=*/true);
}

/// An entry's name: 128 bits of the BLAKE3 of its key (a cryptographic
/// hash: a model's text, which someone else may write, is part of the key).
std::string entryName(StringRef key) {
  return toHex(BLAKE3::hash<16>(arrayRefFromStringRef(key)),
               /*LowerCase=*/true);
}

/// The checksum of a file's bytes (XXH3, 128 bits: it tells a changed or
/// damaged file from the one recorded; who could forge one, by writing the
/// cache or the headers, is kept out by the folder's checks or could
/// change the code anyway), as hex.
std::string checksum(StringRef bytes) {
  XXH128_hash_t h = xxh3_128bits(arrayRefFromStringRef(bytes));
  return utohexstr(h.high64, /*LowerCase=*/true, /*Width=*/16) +
         utohexstr(h.low64, /*LowerCase=*/true, /*Width=*/16);
}

/// The checksum of the bytes of `path`; nullopt when it cannot be read.
/// With `remember` (headers: several pieces and the precompiled header
/// read the same ones) each path is read once per process.
std::optional<std::string> fileHash(StringRef path, bool remember) {
  static std::mutex mutex;
  static StringMap<std::string> known;
  if (remember) {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(path); it != known.end())
      return it->getValue();
  }
  auto bytes = MemoryBuffer::getFile(path, /*IsText=*/false,
                                     /*RequiresNullTerminator=*/false);
  if (!bytes)
    return std::nullopt;
  std::string hash = checksum((*bytes)->getBuffer());
  if (remember) {
    std::lock_guard<std::mutex> lock(mutex);
    known[path] = hash;
  }
  return hash;
}

/// Writes `text` to `path` through a temporary file renamed over it, mode
/// 0600 (a reader sees the old file or the new one, whole).
bool replaceFile(StringRef path, StringRef text) {
  std::string temporary = (path + ".tmp" + Twine(::getpid())).str();
  {
    int fd;
    if (sys::fs::openFileForWrite(temporary, fd, sys::fs::CD_CreateAlways,
                                  sys::fs::OF_None, 0600))
      return false;
    raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << text;
    out.close();
    if (out.has_error()) {
      out.clear_error();
      sys::fs::remove(temporary);
      return false;
    }
  }
  if (sys::fs::rename(temporary, path)) {
    sys::fs::remove(temporary);
    return false;
  }
  return true;
}

/// What identifies the compiler `program`: the BLAKE3 of its real path,
/// the checksum of its file's bytes and what `PROGRAM --version` prints, so
/// that a compiler replaced in place, whatever its time stamps, makes new
/// keys. Computed once per process, and kept in the cache folder
/// (compilers/NAME) under the compiler file's device, inode, size,
/// modification and status-change times: tar, dpkg and `touch -d` can set
/// the modification time, not the status-change time (any write, rename
/// or utimes sets it to the current time), and a file put in place by
/// rename has a new inode. nullopt when the compiler cannot be identified.
std::optional<std::string> compilerIdentity(StringRef program) {
  static std::mutex mutex;
  static StringMap<std::optional<std::string>> known;
  SmallString<256> real;
  struct stat st;
  if (sys::fs::real_path(program, real) || ::stat(real.c_str(), &st))
    return std::nullopt;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = known.find(real); it != known.end())
      return it->getValue();
  }
  // The remembered identity, checked as a manifest is.
  SmallString<256> remembered(cacheRoot());
  if (!remembered.empty()) {
    sys::path::append(remembered, "compilers");
    if (usableFolder(remembered))
      sys::path::append(
          remembered,
          entryName(formatv("{0}\n{1} {2} {3} {4}.{5} {6}.{7}", real,
                            uint64_t(st.st_dev), uint64_t(st.st_ino),
                            uint64_t(st.st_size), int64_t(st.st_mtim.tv_sec),
                            int64_t(st.st_mtim.tv_nsec),
                            int64_t(st.st_ctim.tv_sec),
                            int64_t(st.st_ctim.tv_nsec))
                        .str()));
    else
      remembered.clear();
  }
  std::optional<std::string> identity;
  if (!remembered.empty() && sys::fs::exists(remembered)) {
    if (std::string why = distrust(remembered, /*file=*/true); !why.empty()) {
      warnOnce(remembered, "compile cache entry not used: " + why +
                               "; building it again");
    } else if (auto text = MemoryBuffer::getFile(remembered)) {
      auto [body, end] = (*text)->getBuffer().rsplit("end ");
      StringRef value = body;
      if (end == checksum(body) + "\n" &&
          value.consume_front(kManifestHeader) &&
          value.consume_front("\ncompiler ") && value.consume_back("\n") &&
          value.size() == 64 && llvm::all_of(value, isHexDigit))
        identity = value.str();
    }
  }
  if (!identity) {
    SmallString<256> versionLog;
    std::optional<std::string> bytes = fileHash(real, /*remember=*/true);
    if (bytes && !sys::fs::createTemporaryFile("ampc-compiler-version", "txt",
                                               versionLog)) {
      FileRemover removeLog(versionLog);
      StringRef args[] = {real, "--version"};
      std::optional<StringRef> redirects[] = {
          StringRef(""), StringRef(versionLog), StringRef(versionLog)};
      if (sys::ExecuteAndWait(real, args, std::nullopt, redirects) == 0)
        if (auto version = MemoryBuffer::getFile(versionLog))
          identity = blake3Hex(
              (real + "\n" + *bytes + "\n" + (*version)->getBuffer()).str());
    }
    if (identity && !remembered.empty()) {
      std::string text =
          (kManifestHeader + "\ncompiler " + *identity + "\n").str();
      replaceFile(remembered, text + "end " + checksum(text) + "\n");
    }
  }
  std::lock_guard<std::mutex> lock(mutex);
  known[real] = identity;
  return identity;
}

/// The cache key's start for the compiler `program` run with `flags`;
/// nullopt when the compiler cannot be identified.
std::optional<std::string> compilerKey(StringRef program,
                                       ArrayRef<std::string> flags) {
  std::optional<std::string> key = compilerIdentity(program);
  if (!key)
    return std::nullopt;
  for (const std::string &flag : flags)
    *key += std::string(1, '\0') + flag;
  return key;
}

/// The files a dependency file (-MD) names after its target, as make reads
/// them (a backslash before a space or '#' escapes it, "$$" is '$', a
/// backslash before a line end continues the line).
SmallVector<std::string> dependencies(StringRef depFile) {
  SmallVector<std::string> files;
  auto text = MemoryBuffer::getFile(depFile);
  if (!text)
    return files;
  StringRef rest = (*text)->getBuffer();
  // After "TARGET:" (a colon before white space: a path may hold one).
  size_t colon = 0;
  while ((colon = rest.find(':', colon)) != StringRef::npos &&
         colon + 1 < rest.size() && !isSpace(rest[colon + 1]))
    ++colon;
  if (colon == StringRef::npos)
    return files;
  rest = rest.drop_front(colon + 1);
  std::string word;
  auto finish = [&] {
    if (!word.empty())
      files.push_back(std::move(word));
    word.clear();
  };
  for (size_t i = 0; i < rest.size(); ++i) {
    char c = rest[i];
    if (c == '\\' && i + 1 < rest.size() &&
        (rest[i + 1] == ' ' || rest[i + 1] == '#')) {
      word += rest[++i];
    } else if (c == '\\' && i + 1 < rest.size() &&
               (rest[i + 1] == '\n' || rest[i + 1] == '\r')) {
      finish();
    } else if (c == '$' && i + 1 < rest.size() && rest[i + 1] == '$') {
      word += '$';
      ++i;
    } else if (isSpace(c)) {
      finish();
    } else {
      word += c;
    }
  }
  finish();
  return files;
}

/// Whether an input of the entry `entry` is hashed once per process: not
/// when it lies in the entry's folder (the precompiled header's
/// ampc_pch.h, which a rebuild rewrites).
bool remembered(StringRef input, StringRef entry) {
  return !input.starts_with(sys::path::parent_path(entry));
}

/// The manifest of a cache entry: the key it was built for, the entry's
/// size and checksum, the checksum of every input file the compiler read,
/// and last the checksum of the lines above (a manifest cut short is no
/// manifest):
///
///   ampc compile cache 2
///   key NAME
///   entry SIZE HASH
///   input HASH PATH
///   ...
///   end HASH
///
/// nullopt when a file cannot be read (or a path would not fit on a line).
std::optional<std::string> manifestText(StringRef name, StringRef entry,
                                        ArrayRef<std::string> inputs) {
  auto bytes = MemoryBuffer::getFile(entry, /*IsText=*/false,
                                     /*RequiresNullTerminator=*/false);
  if (!bytes)
    return std::nullopt;
  std::string text;
  raw_string_ostream os(text);
  os << kManifestHeader << "\nkey " << name << "\nentry "
     << (*bytes)->getBufferSize() << " " << checksum((*bytes)->getBuffer())
     << "\n";
  for (const std::string &input : inputs) {
    std::optional<std::string> hash = fileHash(input, remembered(input, entry));
    if (!hash || StringRef(input).contains('\n') ||
        StringRef(input).contains('\r'))
      return std::nullopt;
    os << "input " << *hash << " " << input << "\n";
  }
  std::string sum = checksum(text);
  os << "end " << sum << "\n";
  return text;
}

/// What an entry's inputs were (the precompiled header's identity, part
/// of the key of every object compiled with it): the BLAKE3 of its
/// manifest's key and input lines.
std::string inputsDigest(StringRef manifest) {
  std::string kept;
  for (StringRef line : split(manifest, '\n'))
    if (line.starts_with("key ") || line.starts_with("input "))
      kept += (line + "\n").str();
  return blake3Hex(kept);
}

/// Whether the cache entry `entry` can be used for the key named `name`:
/// it and its manifest are the user's files, writable by no one else; the
/// manifest is whole, of this layout and for this key; the entry has the
/// size it records and (with `bytes`) its checksum, and every input the
/// contents it records. `digest`, when given, receives inputsDigest. An
/// entry that fails is built again and replaced; one that is not the
/// user's own is reported once. (Without `bytes`, for a precompiled header
/// that a compile may not need: its checksum is checked before one uses
/// it.)
bool verified(StringRef entry, StringRef manifest, StringRef name,
              std::string *digest, bool bytes = true) {
  if (!sys::fs::exists(manifest) || !sys::fs::exists(entry))
    return false;
  for (StringRef file : {manifest, entry})
    if (std::string why = distrust(file, /*file=*/true); !why.empty()) {
      warnOnce(file, "compile cache entry not used: " + why +
                         "; building it again");
      return false;
    }
  auto text = MemoryBuffer::getFile(manifest);
  if (!text)
    return false;
  StringRef all = (*text)->getBuffer();
  // The end line checks the lines before it.
  size_t endAt = all.rfind("end ");
  if (endAt == StringRef::npos || (endAt > 0 && all[endAt - 1] != '\n') ||
      all.drop_front(endAt) !=
          "end " + checksum(all.take_front(endAt)) + "\n")
    return false;
  SmallVector<StringRef> lines;
  all.take_front(endAt).split(lines, '\n', -1, /*KeepEmpty=*/false);
  if (lines.size() < 3 || lines[0] != kManifestHeader ||
      lines[1] != ("key " + name).str())
    return false;
  StringRef entryLine = lines[2];
  if (!entryLine.consume_front("entry "))
    return false;
  auto [sizeText, sum] = entryLine.split(' ');
  uint64_t size;
  sys::fs::file_status status;
  if (sizeText.getAsInteger(10, size) || sys::fs::status(entry, status) ||
      status.getSize() != size ||
      (bytes && fileHash(entry, /*remember=*/false) != sum))
    return false;
  for (StringRef line : ArrayRef(lines).drop_front(3)) {
    if (!line.consume_front("input "))
      return false;
    auto [hash, path] = line.split(' ');
    if (fileHash(path, remembered(path, entry)) != hash)
      return false;
  }
  if (digest)
    *digest = inputsDigest(all);
  return true;
}

/// Makes `temporary`, just built from `inputs`, the cache entry `entry`
/// (for the key named `name`), mode 0600, then writes its manifest: an
/// entry whose manifest does not describe it is never used, so a reader
/// between the two renames builds the entry itself. False when `temporary`
/// cannot be moved into place (it is then removed). An entry whose
/// manifest cannot be written stays without one (never used; trimmed).
bool commitEntry(StringRef temporary, StringRef entry, StringRef manifest,
                 StringRef name, ArrayRef<std::string> inputs,
                 std::string *digest) {
  sys::fs::setPermissions(temporary, sys::fs::owner_read | sys::fs::owner_write);
  std::optional<std::string> text = manifestText(name, temporary, inputs);
  if (sys::fs::rename(temporary, entry)) {
    sys::fs::remove(temporary);
    return false;
  }
  if (!text || !replaceFile(manifest, *text)) {
    sys::fs::remove(manifest);
    return true;
  }
  // (`digest` stays as it was without a manifest.)
  if (digest)
    *digest = inputsDigest(*text);
  return true;
}

sys::TimePoint<> modified(StringRef path) {
  sys::fs::file_status status;
  if (sys::fs::status(path, status))
    return sys::TimePoint<>::max();
  return status.getLastModificationTime();
}

/// The files of a precompiled header in the cache: a folder per compiler,
/// flags and list of headers.
struct PchFiles {
  std::string real, name;
  SmallString<256> header, gch, manifest, lock;
  std::vector<std::string> use() const {
    return {"-include", header.str().str()};
  }
};

/// Where the precompiled header of `program` run with `compileFlags` for
/// `headers` lives; nullopt when there can be none (not GCC, no cache or
/// a refused one, a compiler that cannot be identified).
std::optional<PchFiles> pchFiles(StringRef program,
                                 ArrayRef<std::string> compileFlags,
                                 ArrayRef<StringRef> headers) {
  // GCC finds NAME.gch beside a header named by -include; other compilers
  // spell precompiled headers differently.
  SmallString<256> real;
  if (sys::fs::real_path(program, real) ||
      !sys::path::filename(real).contains("g++"))
    return std::nullopt;
  std::string root = cacheRoot();
  if (root.empty())
    return std::nullopt;
  std::optional<std::string> key = compilerKey(real, compileFlags);
  if (!key)
    return std::nullopt;
  for (StringRef header : headers)
    *key += std::string(1, '\0') + header.str();
  PchFiles files;
  files.real = real.str().str();
  files.name = entryName(*key);
  SmallString<256> dir(root);
  sys::path::append(dir, "pch-" + files.name);
  if (!usableFolder(dir))
    return std::nullopt;
  for (auto [path, file] :
       {std::pair(&files.header, "ampc_pch.h"),
        std::pair(&files.gch, "ampc_pch.h.gch"),
        std::pair(&files.manifest, "ampc_pch.manifest"),
        std::pair(&files.lock, "lock")}) {
    *path = dir;
    sys::path::append(*path, file);
  }
  return files;
}

/// Builds the precompiled header `files` and its manifest, one process at
/// a time (the others compile without it); its identity (inputsDigest),
/// nullopt when it was not built.
std::optional<std::string> buildPch(const PchFiles &files,
                                    ArrayRef<std::string> compileFlags,
                                    ArrayRef<StringRef> headers) {
  int lockFd;
  if (sys::fs::openFileForWrite(files.lock, lockFd, sys::fs::CD_CreateNew,
                                sys::fs::OF_None, 0600)) {
    if (std::chrono::system_clock::now() - modified(files.lock) < kStaleLock)
      return std::nullopt;
    sys::fs::remove(files.lock);
    if (sys::fs::openFileForWrite(files.lock, lockFd, sys::fs::CD_CreateNew,
                                  sys::fs::OF_None, 0600))
      return std::nullopt;
  }
  sys::Process::SafelyCloseFileDescriptor(lockFd);
  FileRemover removeLock(files.lock);
  std::string text = "// ampc's precompiled runtime headers "
                     "(lib/Target/Common/CompileCache.cpp)\n";
  for (StringRef h : headers)
    text += ("#include \"" + h + "\"\n").str();
  if (!replaceFile(files.header, text))
    return std::nullopt;
  std::string suffix = ".tmp" + std::to_string(::getpid());
  std::string tmpGch = (files.gch + suffix).str();
  std::string tmpDep = (files.manifest + ".d" + suffix).str();
  FileRemover removeDep(tmpDep);
  std::vector<std::string> args = {files.real};
  args.insert(args.end(), compileFlags.begin(), compileFlags.end());
  args.insert(args.end(), {"-x", "c++-header", files.header.str().str(), "-o",
                           tmpGch, "-MD", "-MF", tmpDep});
  std::string error, digest;
  SmallVector<std::string> inputs;
  // Used only with its manifest: the objects compiled with it are keyed on
  // its inputs (their own dependency files do not name its headers).
  if (!ampc::emit::runCompiler(args, "the precompiled header", files.header,
                               error) ||
      (inputs = dependencies(tmpDep)).empty() ||
      !commitEntry(tmpGch, files.gch, files.manifest, files.name, inputs,
                   &digest) ||
      digest.empty()) {
    sys::fs::remove(tmpGch);
    return std::nullopt;
  }
  return digest;
}

} // namespace

std::vector<std::string>
ampc::emit::precompiledHeader(StringRef program,
                              ArrayRef<std::string> compileFlags,
                              ArrayRef<StringRef> headers,
                              std::string *identity) {
  if (identity)
    identity->clear();
  std::optional<PchFiles> files = pchFiles(program, compileFlags, headers);
  if (!files)
    return {};
  std::string digest;
  if (!verified(files->gch, files->manifest, files->name, &digest)) {
    std::optional<std::string> built = buildPch(*files, compileFlags, headers);
    if (!built)
      return {};
    digest = *built;
  }
  if (identity)
    *identity = digest;
  return files->use();
}

namespace {

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
                                const Artifact &source, StringRef sourcePath,
                                StringRef output, std::string &error) {
  // The cache folder first: a refused one is reported before any compile.
  std::string root = cacheRoot();
  // The precompiled header: its manifest and inputs checked now (its
  // identity is part of the objects' keys), its bytes only when a compile
  // is to read it (a rebuild whose code is all in the cache reads none).
  std::optional<PchFiles> pchAt =
      pchFiles(how.program, how.compileFlags, how.headers);
  std::string pchIdentity;
  std::vector<std::string> pch;
  bool pchChecked = false;
  auto ensurePch = [&] {
    if (!pchAt || pchChecked)
      return;
    pchChecked = true;
    std::string digest;
    std::optional<std::string> usable;
    if (verified(pchAt->gch, pchAt->manifest, pchAt->name, &digest))
      usable = digest;
    else
      usable = buildPch(*pchAt, how.compileFlags, how.headers);
    // Headers that changed since the keys were made: no precompiled header
    // (an object compiled without one records every header it read).
    if (!usable || (!pch.empty() && *usable != pchIdentity)) {
      pch.clear();
      return;
    }
    pchIdentity = *usable;
    pch = pchAt->use();
  };
  if (pchAt && verified(pchAt->gch, pchAt->manifest, pchAt->name,
                        &pchIdentity, /*bytes=*/false))
    pch = pchAt->use();
  else
    ensurePch();
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
  if (!source.data) {
    if (how.checkBefore && !how.checkBefore(error))
      return false;
    ensurePch();
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
  ArrayRef<std::string> pieceText = source.pieces;
  const std::string &shared = source.shared;
  SmallString<256> objects(root);
  sys::path::append(objects, "objects");
  std::optional<std::string> key;
  if (!root.empty() && usableFolder(objects))
    key = compilerKey(how.program, how.compileFlags);
  bool cache = key.has_value();
  struct Piece {
    std::string object, depFile, name, manifest;
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
      // The precompiled header's inputs are part of the key: an object's
      // dependency file does not name the headers GCC read from it.
      piece.name =
          entryName(*key + std::string(1, '\0') + "pch " + pchIdentity +
                    std::string(1, '\0') + shared +
                    std::string(1, '\0') + text);
      piece.object = (objects + "/" + piece.name + ".o").str();
      piece.manifest = (objects + "/" + piece.name + ".manifest").str();
      piece.hit = verified(piece.object, piece.manifest, piece.name, nullptr);
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
    compiled.push_back(i);
  }
  if (!compiled.empty())
    ensurePch();
  for (size_t i : compiled) {
    std::string code = inWork("code" + std::to_string(i) + ".cpp");
    if (!writeText(code, shared + pieceText[i])) {
      error = "cannot write " + code;
      return false;
    }
    std::vector<std::string> args = withFlags(true);
    args.insert(args.end(),
                {"-x", how.language.str(), "-c", code, "-o",
                 pieces[i].object + suffix, "-MD", "-MF", pieces[i].depFile});
    compiles.push_back(std::move(args));
  }
  if (!compiles.empty()) {
    if (how.checkBefore && !how.checkBefore(error))
      return false;
    auto removeTemporaries = [&] {
      for (size_t i : compiled)
        sys::fs::remove(pieces[i].object + suffix);
    };
    std::vector<std::string> logs;
    bool ok = runCompilers(compiles, how.what, sourcePath, error, &logs);
    for (size_t j = 0; ok && how.checkAfter && j < logs.size(); ++j)
      ok = how.checkAfter(logs[j], error);
    if (!ok) {
      removeTemporaries();
      return false;
    }
    for (size_t i : compiled) {
      Piece &piece = pieces[i];
      bool placed;
      SmallVector<std::string> inputs;
      if (cache)
        inputs = dependencies(piece.depFile);
      if (!inputs.empty()) {
        // Every file the compile read but the piece's source (its text is
        // in the key).
        inputs.erase(inputs.begin());
        placed = commitEntry(piece.object + suffix, piece.object,
                             piece.manifest, piece.name, inputs, nullptr);
      } else {
        // Without its dependency file, an object without a manifest: never
        // used again.
        if (cache)
          sys::fs::remove(piece.manifest);
        placed = !sys::fs::rename(piece.object + suffix, piece.object);
      }
      if (!placed) {
        removeTemporaries();
        error = "cannot write " + piece.object;
        return false;
      }
    }
  }

  // The data's object (host C++ whatever the compiler), then the library.
  std::string data = inWork("data.cpp"), dataObject = inWork("data.o");
  if (!writeText(data, (kDataMarker + *source.data).str())) {
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
      keep.insert(keep.end(), {piece.object, piece.manifest});
    trimObjects(objects, keep);
  }
  return true;
}
