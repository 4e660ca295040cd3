// The OS toolkit's descriptors, mappings and transfers: descriptors and mappings are released
// exactly once, errno errors name the path, reads and writes move every byte.
#include "td/os/fd.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace td {
namespace internal {
namespace os {
namespace {

bool IsOpen(int fd) { return ::fcntl(fd, F_GETFD) != -1; }

TEST(OsTest, UniqueFdClosesOnceAndMoves) {
  int raw = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(raw, 0);
  {
    UniqueFd a(raw);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_EQ(b.get(), raw);
    UniqueFd c;
    c = std::move(b);
    EXPECT_TRUE(IsOpen(raw));
  }
  EXPECT_FALSE(IsOpen(raw));
  UniqueFd d(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int released = d.release();
  EXPECT_FALSE(d.valid());
  EXPECT_TRUE(IsOpen(released));
  ::close(released);
}

TEST(OsTest, ErrnoErrorNamesThePath) {
  absl::Status s = ErrnoError(ENOENT, "cannot open", "/no/such");
  EXPECT_TRUE(absl::IsNotFound(s));
  EXPECT_EQ(s.message(), std::string("cannot open /no/such: ") + std::strerror(ENOENT));
  EXPECT_TRUE(absl::IsDataLoss(ErrnoError(EACCES, "cannot write", "/x")));
  // Without a path: "<what>: <strerror>".
  EXPECT_EQ(ErrnoError(EMFILE, "memfd_create failed", "").message(),
            std::string("memfd_create failed: ") + std::strerror(EMFILE));
}

TEST(OsTest, CloseReportsAndReleases) {
  UniqueFd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int raw = fd.get();
  EXPECT_TRUE(fd.Close("/dev/null").ok());
  EXPECT_FALSE(fd.valid());
  EXPECT_FALSE(IsOpen(raw));
  EXPECT_TRUE(fd.Close("/dev/null").ok());  // nothing left to close
  UniqueFd bad(1 << 20);                     // not an open descriptor
  absl::Status s = bad.Close("nowhere");
  EXPECT_NE(s.message().find("cannot close nowhere: "), std::string::npos) << s;
  EXPECT_FALSE(bad.valid());
}

// `n` bytes of a pattern that does not repeat at powers of two.
std::vector<char> Pattern(size_t n) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<char>((i * 131 + 7) % 251);
  return v;
}

TEST(OsTest, WriteAllReadAllRoundTrip) {
  UniqueFd fd(::memfd_create("os_test", MFD_CLOEXEC));
  ASSERT_TRUE(fd.valid());
  // More than one 1 MiB write call, and not a multiple of it.
  const std::vector<char> data = Pattern((size_t{3} << 20) + 12345);
  ASSERT_TRUE(WriteAll(fd.get(), data.data(), data.size(), "memfd").ok());
  ASSERT_EQ(::lseek(fd.get(), 0, SEEK_SET), 0);
  std::vector<char> back(data.size() + 100, 0);
  absl::StatusOr<size_t> n = ReadAll(fd.get(), back.data(), back.size(), "memfd");
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, data.size());  // fewer than asked: the file ended
  back.resize(*n);
  EXPECT_EQ(back, data);

  // At offsets, without moving the file position.
  const std::vector<char> patch = Pattern(5000);
  ASSERT_TRUE(WriteAll(fd.get(), patch.data(), patch.size(), "memfd", 1000).ok());
  std::vector<char> got(patch.size());
  absl::StatusOr<size_t> m = ReadAll(fd.get(), got.data(), got.size(), "memfd", 1000);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, patch.size());
  EXPECT_EQ(got, patch);
  EXPECT_EQ(::lseek(fd.get(), 0, SEEK_CUR), static_cast<off_t>(data.size()));
  absl::StatusOr<size_t> past = ReadAll(fd.get(), got.data(), got.size(), "memfd", 1 << 30);
  ASSERT_TRUE(past.ok());
  EXPECT_EQ(*past, 0u);
}

TEST(OsTest, ReadAndWriteErrorsNameThePath) {
  UniqueFd ro(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  absl::Status w = WriteAll(ro.get(), "x", 1, "/dev/null (read-only)");
  EXPECT_EQ(w.message(),
            std::string("cannot write /dev/null (read-only): ") + std::strerror(EBADF));
  UniqueFd wo(::open("/dev/null", O_WRONLY | O_CLOEXEC));
  char c;
  absl::StatusOr<size_t> r = ReadAll(wo.get(), &c, 1, "/dev/null (write-only)");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            std::string("cannot read /dev/null (write-only): ") + std::strerror(EBADF));
  EXPECT_TRUE(WriteAll(wo.get(), "", 0, "nothing").ok());
}

TEST(OsTest, MappedRegionMapsAndUnmaps) {
  const int fd = ::memfd_create("os_test", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  UniqueFd owned(fd);
  ASSERT_EQ(::ftruncate(fd, 4096), 0);
  void* addr = nullptr;
  {
    absl::StatusOr<MappedRegion> r =
        MappedRegion::Map(fd, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, "memfd");
    ASSERT_TRUE(r.ok()) << r.status();
    static_cast<char*>(r->addr())[0] = 'x';
    MappedRegion moved = *std::move(r);
    addr = moved.addr();
    EXPECT_EQ(moved.length(), 4096u);
    char c = 0;
    ASSERT_EQ(::pread(fd, &c, 1, 0), 1);
    EXPECT_EQ(c, 'x');
  }
  // Unmapped: the page is no longer mapped in this process.
  unsigned char vec = 0;
  EXPECT_EQ(::mincore(addr, 4096, &vec), -1);
  EXPECT_EQ(errno, ENOMEM);
  // A zero length maps nothing, even from a descriptor that could not be mapped.
  absl::StatusOr<MappedRegion> empty = MappedRegion::Map(fd, 0, PROT_READ, MAP_SHARED, "memfd");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->addr(), nullptr);
  EXPECT_EQ(empty->length(), 0u);
  absl::StatusOr<MappedRegion> none = MappedRegion::Map(-1, 0, PROT_READ, MAP_SHARED, "nothing");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->addr(), nullptr);
  absl::StatusOr<MappedRegion> bad = MappedRegion::Map(-1, 4096, PROT_READ, MAP_SHARED, "nothing");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cannot mmap nothing"), std::string::npos);
}

}  // namespace
}  // namespace os
}  // namespace internal
}  // namespace td
