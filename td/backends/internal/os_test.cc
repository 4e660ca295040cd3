// The shared OS helpers: descriptors and mappings are released exactly once, errno errors name
// the path.
#include "td/backends/internal/os.h"

#include <errno.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

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
  absl::StatusOr<MappedRegion> empty = MappedRegion::Map(fd, 0, PROT_READ, MAP_SHARED, "memfd");
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->addr(), nullptr);
  absl::StatusOr<MappedRegion> bad = MappedRegion::Map(-1, 4096, PROT_READ, MAP_SHARED, "nothing");
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cannot mmap nothing"), std::string::npos);
}

}  // namespace
}  // namespace os
}  // namespace internal
}  // namespace td
