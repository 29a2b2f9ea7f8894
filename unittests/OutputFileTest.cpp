//===- OutputFileTest.cpp - the rules every output file follows -----------===//
//
// ampc/Support/OutputFile.h: what an output may replace (docs/design.md,
// Output files). The tools' and the runtime's uses are tested end to end in
// test/Tools/output-files.test and test/Python/output-paths.test.
//
//===----------------------------------------------------------------------===//

#include "ampc/Support/OutputFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <dirent.h>
#include <fstream>
#include <sstream>

namespace {

class Folder {
public:
  Folder() {
    char name[] = "/tmp/ampc-output-test-XXXXXX";
    path = ::mkdtemp(name) ? name : "";
  }
  ~Folder() {
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
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string path;
};

std::string contents(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void put(const std::string &path, const std::string &text) {
  std::ofstream(path, std::ios::binary) << text;
}

bool write(const std::string &path, const std::string &text,
           std::string &error,
           const std::vector<ampc::ProtectedFile> &inputs = {}) {
  return ampc::writeOutputFile(path, {{text.data(), text.size()}}, inputs,
                               error);
}

mode_t modeOf(const std::string &path) {
  struct stat info;
  return ::lstat(path.c_str(), &info) == 0 ? info.st_mode & 07777 : 0;
}

TEST(OutputFileTest, NewFileTakesTheUmask) {
  Folder dir;
  std::string error;
  mode_t saved = ::umask(077);
  bool ok = write(dir.path + "/private", "x", error);
  ::umask(022);
  bool ok2 = write(dir.path + "/shared", "x", error);
  ::umask(saved);
  ASSERT_TRUE(ok && ok2) << error;
  EXPECT_EQ(modeOf(dir.path + "/private"), 0600u);
  EXPECT_EQ(modeOf(dir.path + "/shared"), 0644u);
}

TEST(OutputFileTest, ReplacedFileKeepsItsMode) {
  Folder dir;
  std::string path = dir.path + "/kept", error;
  put(path, "old");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  ASSERT_TRUE(write(path, "new", error)) << error;
  EXPECT_EQ(contents(path), "new");
  EXPECT_EQ(modeOf(path), 0640u);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"kept"});
}

// Root passes access(W_OK) for any file: a file without a write bit is
// read-only to root as well.
TEST(OutputFileTest, ReadOnlyFileIsNotReplaced) {
  Folder dir;
  std::string path = dir.path + "/frozen", error;
  put(path, "keep");
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  EXPECT_FALSE(write(path, "lost", error));
  EXPECT_EQ(error, "it is read-only (mode 0444); it is not replaced");
  EXPECT_EQ(contents(path), "keep");
  EXPECT_EQ(modeOf(path), 0444u);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"frozen"});
}

TEST(OutputFileTest, SymbolicLinkIsNeitherFollowedNorReplaced) {
  Folder dir;
  std::string target = dir.path + "/target", link = dir.path + "/link",
              dangling = dir.path + "/dangling", error;
  put(target, "keep");
  ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
  ASSERT_EQ(::symlink((dir.path + "/nowhere").c_str(), dangling.c_str()), 0);
  for (const std::string &path : {link, dangling}) {
    EXPECT_FALSE(write(path, "lost", error));
    EXPECT_EQ(error, "it is a symbolic link; outputs are never written "
                     "through a link nor over one: give the path of a file");
    struct stat info;
    ASSERT_EQ(::lstat(path.c_str(), &info), 0);
    EXPECT_TRUE(S_ISLNK(info.st_mode));
  }
  EXPECT_EQ(contents(target), "keep");
  EXPECT_EQ(dir.entries(),
            (std::vector<std::string>{"dangling", "link", "target"}));
}

// An input is recognised by device and inode: another spelling or a hard
// link of it is refused too.
TEST(OutputFileTest, InputIsNotReplaced) {
  Folder dir;
  std::string input = dir.path + "/data.npy", hard = dir.path + "/alias.npy",
              error;
  put(input, "data");
  ASSERT_EQ(::link(input.c_str(), hard.c_str()), 0);
  std::vector<ampc::ProtectedFile> inputs;
  ampc::protectFile(inputs, input, "the --predict file");
  for (const std::string &path :
       {input, hard, dir.path + "/./data.npy"}) {
    EXPECT_FALSE(write(path, "lost", error, inputs)) << path;
    EXPECT_EQ(error, "it is the --predict file; an output never replaces it");
  }
  EXPECT_EQ(contents(input), "data");
  EXPECT_TRUE(write(dir.path + "/other.npy", "ok", error, inputs)) << error;
}

TEST(OutputFileTest, NameWithNulIsRefused) {
  Folder dir;
  std::string path = dir.path + "/a" + std::string(1, '\0') + "b", error;
  EXPECT_FALSE(write(path, "x", error));
  EXPECT_EQ(error, "the name holds a NUL byte");
  EXPECT_TRUE(dir.entries().empty());
}

TEST(OutputFileTest, NonRegularFileIsRefused) {
  Folder dir;
  std::string error;
  std::string fifo = dir.path + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  EXPECT_FALSE(write(fifo, "x", error));
  EXPECT_EQ(error, "it exists and is not a regular file (a FIFO); give the "
                   "path of a file");
  EXPECT_FALSE(write("/dev/null", "x", error));
  EXPECT_EQ(error, "it exists and is not a regular file (a device); give the "
                   "path of a file");
  struct stat info;
  ASSERT_EQ(::stat("/dev/null", &info), 0);
  EXPECT_TRUE(S_ISCHR(info.st_mode));
}

// Dropped before commit, an output leaves the old file and no temporary.
TEST(OutputFileTest, UncommittedWriteLeavesNothing) {
  Folder dir;
  std::string path = dir.path + "/out", error;
  put(path, "old");
  {
    ampc::OutputFile file;
    ASSERT_TRUE(file.open(path, {}, error)) << error;
    ASSERT_TRUE(file.write("half", 4, error)) << error;
    EXPECT_EQ(dir.entries().size(), 2u);
  }
  EXPECT_EQ(contents(path), "old");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"out"});
}

// The name is checked again when the temporary is moved into place: a
// link planted meanwhile is not replaced.
TEST(OutputFileTest, CommitChecksTheNameAgain) {
  Folder dir;
  std::string path = dir.path + "/out", target = dir.path + "/target", error;
  put(target, "keep");
  ampc::OutputFile file;
  ASSERT_TRUE(file.open(path, {}, error)) << error;
  ASSERT_TRUE(file.write("new", 3, error)) << error;
  ASSERT_EQ(::symlink(target.c_str(), path.c_str()), 0);
  EXPECT_FALSE(file.commit(error));
  EXPECT_NE(error.find("symbolic link"), std::string::npos) << error;
  EXPECT_EQ(contents(target), "keep");
  EXPECT_EQ(dir.entries(), (std::vector<std::string>{"out", "target"}));
}

TEST(OutputFileTest, SameOutputPath) {
  Folder dir;
  std::string a = dir.path + "/a";
  EXPECT_TRUE(ampc::sameOutputPath(a, dir.path + "/./a"));
  EXPECT_FALSE(ampc::sameOutputPath(a, dir.path + "/b"));
  put(a, "x");
  ASSERT_EQ(::link(a.c_str(), (dir.path + "/b").c_str()), 0);
  EXPECT_TRUE(ampc::sameOutputPath(a, dir.path + "/b"));
}

} // namespace
