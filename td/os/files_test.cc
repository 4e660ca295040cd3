// The OS toolkit's names in directories: an atomic replacement keeps the previous file whenever
// the new one is not complete and leaves no temporary behind, a directory swap returns the
// previous content, removal never follows a symlink and waits for lock holders.
#include "td/os/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "td/backends/memmap/test_util.h"

namespace td {
namespace internal {
namespace os {
namespace {

using testing_util::ReadText;
using testing_util::WriteText;

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing_util::FreshDir("files_test"); }
  void TearDown() override { EXPECT_TRUE(RemoveAt(AT_FDCWD, dir_, dir_).ok()); }

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  // The names in the directory, through ListDir.
  std::vector<std::string> Names() const {
    UniqueFd fd(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    absl::StatusOr<std::vector<DirEntry>> entries = ListDir(fd.get(), dir_);
    EXPECT_TRUE(entries.ok()) << entries.status();
    std::vector<std::string> names;
    for (const DirEntry& e : *entries) names.push_back(e.name);
    EXPECT_EQ(names, testing_util::ListNames(dir_));
    return names;
  }

  std::string dir_;
};

absl::Status Fill(int fd, const std::string& text) {
  return WriteAll(fd, text.data(), text.size(), "the new file");
}

TEST_F(FilesTest, ReplaceFileWritesTheNewContent) {
  const std::string target = Path("meta.json");
  WriteText(target, "old");
  for (bool sync : {false, true}) {
    ASSERT_TRUE(ReplaceFileAt(AT_FDCWD, target, Path(".tmp-meta"), target, sync,
                              [&](int fd) { return Fill(fd, sync ? "synced" : "new"); })
                    .ok());
    EXPECT_EQ(ReadText(target), sync ? "synced" : "new");
    EXPECT_EQ(Names(), std::vector<std::string>{"meta.json"});  // no temporary left
  }
  struct stat st;
  ASSERT_EQ(::stat(target.c_str(), &st), 0);
  const mode_t umask_now = ::umask(0);
  ::umask(umask_now);
  EXPECT_EQ(st.st_mode & 0777, 0644 & ~umask_now);
  // Relative to a directory descriptor; a new name is created.
  UniqueFd dir(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_TRUE(ReplaceFileAt(dir.get(), "fresh", ".tmp-fresh", Path("fresh"), false,
                            [&](int fd) { return Fill(fd, "x"); })
                  .ok());
  EXPECT_EQ(ReadText(Path("fresh")), "x");
  EXPECT_EQ(Names(), (std::vector<std::string>{"fresh", "meta.json"}));
}

TEST_F(FilesTest, ReplaceFileKeepsThePreviousFileWhenTheWriterFails) {
  const std::string target = Path("meta.json");
  WriteText(target, "previous good copy");
  // The writer fails half-way: an error...
  absl::Status s = ReplaceFileAt(AT_FDCWD, target, Path(".tmp-1"), target, true, [&](int fd) {
    EXPECT_TRUE(Fill(fd, "half").ok());
    return absl::DataLossError("disk full");
  });
  EXPECT_EQ(s, absl::DataLossError("disk full"));
  EXPECT_EQ(ReadText(target), "previous good copy");
  EXPECT_EQ(Names(), std::vector<std::string>{"meta.json"});
  // ... or an exception, which passes through.
  EXPECT_THROW((void)ReplaceFileAt(AT_FDCWD, target, Path(".tmp-2"), target, false,
                                   [&](int fd) -> absl::Status {
                                     EXPECT_TRUE(Fill(fd, "half").ok());
                                     throw std::runtime_error("writer threw");
                                   }),
               std::runtime_error);
  EXPECT_EQ(ReadText(target), "previous good copy");
  EXPECT_EQ(Names(), std::vector<std::string>{"meta.json"});
}

TEST_F(FilesTest, FileReplacementWithoutCommitRemovesItsTemporary) {
  const std::string target = Path("data.td");
  WriteText(target, "previous");
  {
    absl::StatusOr<FileReplacement> f =
        FileReplacement::Begin(AT_FDCWD, target, Path("data.td.tmp"), target);
    ASSERT_TRUE(f.ok()) << f.status();
    EXPECT_EQ(f->temp(), Path("data.td.tmp"));
    ASSERT_TRUE(Fill(f->fd(), "unfinished").ok());
    FileReplacement moved = *std::move(f);  // the moved-from one removes nothing
    EXPECT_EQ(Names(), (std::vector<std::string>{"data.td", "data.td.tmp"}));
  }
  EXPECT_EQ(ReadText(target), "previous");
  EXPECT_EQ(Names(), std::vector<std::string>{"data.td"});
}

TEST_F(FilesTest, ReplaceFileErrorsNameTheFiles) {
  const std::string target = Path("meta.json");
  WriteText(target, "previous");
  // The temporary's name is taken: nothing is replaced or removed.
  WriteText(Path("taken"), "someone else's");
  absl::Status s = ReplaceFileAt(AT_FDCWD, target, Path("taken"), target, false,
                                 [&](int fd) { return Fill(fd, "new"); });
  EXPECT_EQ(s.message(), "cannot create " + target + " (temporary " + Path("taken") +
                             "): " + std::strerror(EEXIST));
  EXPECT_EQ(ReadText(Path("taken")), "someone else's");
  EXPECT_EQ(ReadText(target), "previous");
  // The rename fails (a directory holds the name): the temporary is removed.
  ASSERT_EQ(::mkdir(Path("a_dir").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir(Path("a_dir/x").c_str(), 0755), 0);
  s = ReplaceFileAt(AT_FDCWD, Path("a_dir"), Path(".tmp-a"), Path("a_dir"), false,
                    [&](int fd) { return Fill(fd, "new"); });
  EXPECT_EQ(s.message(), "cannot rename into place " + Path("a_dir") + " (temporary " +
                             Path(".tmp-a") + "): " + std::strerror(EISDIR));
  EXPECT_EQ(Names(), (std::vector<std::string>{"a_dir", "meta.json", "taken"}));
}

TEST_F(FilesTest, CreateFileRefusesAnExistingName) {
  ASSERT_TRUE(CreateFileAt(AT_FDCWD, Path("a"), "content", /*sync=*/true, Path("a")).ok());
  EXPECT_EQ(ReadText(Path("a")), "content");
  absl::Status s = CreateFileAt(AT_FDCWD, Path("a"), "other", false, Path("a"));
  EXPECT_EQ(s.message(), "cannot create " + Path("a") + ": " + std::strerror(EEXIST));
  EXPECT_EQ(ReadText(Path("a")), "content");
  // A symlink under the name is not followed.
  ASSERT_EQ(::symlink(Path("target").c_str(), Path("link").c_str()), 0);
  EXPECT_FALSE(OpenNewFileAt(AT_FDCWD, Path("link"), Path("link")).ok());
  EXPECT_EQ(::access(Path("target").c_str(), F_OK), -1);
}

TEST_F(FilesTest, ReplaceDirReturnsThePreviousContent) {
  UniqueFd dir(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(::mkdir(Path("new1").c_str(), 0755), 0);
  WriteText(Path("new1/f"), "1");
  // No directory under the name yet: nothing to remove.
  absl::StatusOr<std::optional<std::string>> old =
      ReplaceDirAt(dir.get(), "new1", "store", "store.old", Path("store"));
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->has_value());
  EXPECT_EQ(ReadText(Path("store/f")), "1");
  // Replacing it: the previous content comes back under a name for the caller to remove.
  ASSERT_EQ(::mkdir(Path("new2").c_str(), 0755), 0);
  WriteText(Path("new2/f"), "2");
  old = ReplaceDirAt(dir.get(), "new2", "store", "store.old", Path("store"));
  ASSERT_TRUE(old.ok()) << old.status();
  ASSERT_TRUE(old->has_value());
  EXPECT_EQ(ReadText(Path("store/f")), "2");
  EXPECT_EQ(ReadText(Path(**old + "/f")), "1");
  ASSERT_TRUE(RemoveAt(dir.get(), **old, Path(**old)).ok());
  EXPECT_EQ(Names(), std::vector<std::string>{"store"});
  // A missing new directory: an error naming the target.
  old = ReplaceDirAt(dir.get(), "missing", "store", "store.old", Path("store"));
  ASSERT_FALSE(old.ok());
  EXPECT_NE(old.status().message().find(Path("store")), std::string::npos) << old.status();
  EXPECT_EQ(ReadText(Path("store/f")), "2");
}

TEST_F(FilesTest, RemoveNeverFollowsSymlinks) {
  ASSERT_TRUE(MakeDirs(Path("tree/a/b")).ok());
  ASSERT_TRUE(MakeDirs(Path("tree/a/b")).ok());  // already there
  ASSERT_TRUE(MakeDirs(Path("kept")).ok());
  WriteText(Path("kept/file"), "kept");
  WriteText(Path("tree/a/b/leaf"), "x");
  ASSERT_EQ(::symlink(Path("kept").c_str(), Path("tree/a/link").c_str()), 0);
  ASSERT_TRUE(RemoveAt(AT_FDCWD, Path("tree"), Path("tree")).ok());
  EXPECT_EQ(Names(), std::vector<std::string>{"kept"});
  EXPECT_EQ(ReadText(Path("kept/file")), "kept");
  EXPECT_TRUE(RemoveAt(AT_FDCWD, Path("tree"), Path("tree")).ok());  // missing: not an error
  // mkdir -p through a file: refused, naming it.
  absl::Status s = MakeDirs(Path("kept/file/sub"));
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(s.message(), Path("kept/file") + " exists and is not a directory");
}

TEST_F(FilesTest, LockedRemoveWaitsForHolders) {
  ASSERT_TRUE(MakeDirs(Path("held/sub")).ok());
  UniqueFd reader(::open(Path("held/sub").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  ASSERT_EQ(::flock(reader.get(), LOCK_SH), 0);
  // Another open file description: flock excludes it as it would another process.
  UniqueFd other(::open(Path("held/sub").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  const auto soon = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  EXPECT_EQ(LockUntil(other.get(), LOCK_EX, soon), EWOULDBLOCK);
  EXPECT_EQ(LockUntil(other.get(), LOCK_SH, soon), 0);
  absl::Status s = RemoveAt(AT_FDCWD, Path("held"), Path("held"),
                            std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_EQ(s.message(), "cannot remove " + Path("held/sub") + ": readers still hold it (" +
                             std::strerror(EWOULDBLOCK) + ")");
  reader = UniqueFd();
  other = UniqueFd();
  EXPECT_TRUE(RemoveAt(AT_FDCWD, Path("held"), Path("held"),
                       std::chrono::steady_clock::now() + std::chrono::seconds(5))
                  .ok());
  EXPECT_TRUE(Names().empty());
}

TEST_F(FilesTest, SyncDirNamesTheDirectory) {
  EXPECT_TRUE(SyncDirPath(dir_).ok());
  absl::Status s = SyncDirPath(Path("missing"));
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_EQ(s.message(),
            "cannot open directory " + Path("missing") + ": " + std::strerror(ENOENT));
  EXPECT_EQ(JoinPath("a/b", "c"), "a/b/c");
  EXPECT_EQ(JoinPath("a/", "c"), "a/c");
  EXPECT_EQ(JoinPath("", "c"), "c");
}

}  // namespace
}  // namespace os
}  // namespace internal
}  // namespace td
