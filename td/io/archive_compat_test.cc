// Memmap archives across languages: Python's zipfile writes an archive in upstream's layout
// (testdata/archive_fixture.py: force_zip64 local headers, payloads padded to 64 bytes) and we
// load it, zero-copy; an unaligned one (as `zip -0 -r` writes) loads by copying; and Python's
// zipfile checks one we write (CRCs, order, alignment, values). Needs /usr/bin/python3 (standard
// library only); skipped, saying so, without it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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

}  // namespace
}  // namespace td
