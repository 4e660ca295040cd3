// Memmap archives across languages: Python's zipfile writes an archive in upstream's layout
// (testdata/archive_fixture.py: force_zip64 local headers, payloads padded to 64 bytes) and we
// load it, zero-copy; an unaligned one (as `zip -0 -r` writes) loads by copying; and Python's
// zipfile checks one we write (CRCs, order, alignment, values). Needs /usr/bin/python3 (standard
// library only); skipped, saying so, without it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/backends/memmap/test_util.h"
#include "td/io/archive.h"
#include "td/io/io.h"

namespace td {
namespace {

const char kScript[] = "td/io/testdata/archive_fixture.py";

#define TD_REQUIRE_PYTHON()                                                      \
  if (std::system("/usr/bin/python3 -c 'import zipfile' 2>/dev/null") != 0) {    \
    GTEST_SKIP() << "no /usr/bin/python3";                                       \
  }

std::string Command(const std::string& mode, const std::string& path) {
  return std::string("/usr/bin/python3 ") + kScript + " " + mode + " " + path;
}

// What archive_fixture.py holds.
TensorDict Expected() {
  return TensorDict({{"obs", at::arange(12, at::kFloat).view({4, 3})},
                     {"next", {{"r", at::tensor({10, 20, 30, 40}, at::kLong)}}},
                     {"note", "hi"}},
                    {4});
}

void ExpectFixture(const TensorDict& got) {
  EXPECT_EQ(got.batch_size().vec(), std::vector<int64_t>{4});
  EXPECT_TRUE(got.get("obs").equal(Expected().get("obs")));
  EXPECT_TRUE(got.get({"next", "r"}).equal(Expected().get({"next", "r"})));
  EXPECT_EQ(got.get_non_tensor("note"), "hi");
}

TEST(ArchiveCompat, PythonWritesWeMap) {
  TD_REQUIRE_PYTHON();
  const std::string path = testing_util::FreshDir("py") + "/py.tdz";
  ASSERT_EQ(std::system(Command("write", path).c_str()), 0);
  ASSERT_TRUE(is_memmap_archive(path));
  TensorDict got = load(path);
  ExpectFixture(got);
  // Aligned payloads: views of the archive's one mapping, not copies.
  EXPECT_EQ(MemoryMappedTensor::filename_of(got.get("obs")), MemoryMappedTensor::filename_of(
                                                                  got.get({"next", "r"})));
  // Python's archive unpacks into a directory load_memmap opens.
  const std::string dir = testing_util::FreshDir("pyx");
  unpack_memmap(path, dir);
  ExpectFixture(TensorDict::load_memmap(dir));
}

TEST(ArchiveCompat, UnalignedArchiveLoadsByCopying) {
  TD_REQUIRE_PYTHON();
  const std::string path = testing_util::FreshDir("una") + "/una.tdz";
  ASSERT_EQ(std::system(Command("write_unaligned", path).c_str()), 0);
  ExpectFixture(load(path));
}

TEST(ArchiveCompat, WeWritePythonChecks) {
  TD_REQUIRE_PYTHON();
  const std::string dir = testing_util::FreshDir("cpp");
  save(Expected(), dir + "/cpp.tdz");
  EXPECT_EQ(std::system(Command("check", dir + "/cpp.tdz").c_str()), 0);
  // save() of a memory-mapped TensorDict packs its directory.
  TensorDict mapped = Expected().memmap(dir + "/d");
  save(mapped, dir + "/packed.tdz");
  EXPECT_EQ(std::system(Command("check", dir + "/packed.tdz").c_str()), 0);
}

// What archive_fixture.py's lazy stack holds: 3 members along batch dim 1.
TensorDict ExpectedStack() {
  std::vector<TensorDict> members;
  for (int64_t i = 0; i < 3; ++i) {
    members.push_back(TensorDict(
        {{"x", at::arange(10 * i, 10 * i + 2, at::kFloat)},
         {"n", {{"y", at::arange(6 * i, 6 * i + 6, at::kLong).view({2, 3})}}}},
        {2}));
  }
  return TensorDict(lazy_stack(members, 1));
}

void ExpectStack(const TensorDict& got) {
  ASSERT_EQ(got.backend(), "lazy_stack");
  EXPECT_EQ(LazyStackedTensorDict(got).stack_dim(), 1);
  EXPECT_EQ(got.batch_size().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(got.get("x").equal(ExpectedStack().get("x")));
  EXPECT_TRUE(got.get({"n", "y"}).equal(ExpectedStack().get({"n", "y"})));
}

// Lazy stacks both ways; one loaded from disk (a Python archive, or our directory)
// saves to an archive Python reads.
TEST(ArchiveCompat, LazyStackLoadedFromDiskSavesForPython) {
  TD_REQUIRE_PYTHON();
  const std::string dir = testing_util::FreshDir("stack");
  ASSERT_EQ(std::system(Command("write_stack", dir + "/py.tdz").c_str()), 0);
  TensorDict from_py = TensorDict::load_memmap(dir + "/py.tdz");
  ExpectStack(from_py);
  save(from_py, dir + "/re.tdz");
  EXPECT_EQ(std::system(Command("check_stack", dir + "/re.tdz").c_str()), 0);

  save(ExpectedStack(), dir + "/d");
  TensorDict from_dir = TensorDict::load_memmap(dir + "/d");
  ExpectStack(from_dir);
  save(from_dir, dir + "/cpp.tdz");
  EXPECT_EQ(std::system(Command("check_stack", dir + "/cpp.tdz").c_str()), 0);
  ExpectStack(load(dir + "/cpp.tdz"));
}

}  // namespace
}  // namespace td
