// Memmap archives across languages: Python's zipfile writes an archive in upstream's layout
// (testdata/archive_fixture.py: force_zip64 local headers, payloads padded to 64 bytes) and we
// load it, zero-copy; an unaligned one (as `zip -0 -r` writes) loads by copying; and Python's
// zipfile checks one we write (CRCs, order, alignment, values). Needs /usr/bin/python3 (standard
// library only); skipped, saying so, without it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/archive/archive.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"
#include "td/io/io.h"

namespace td {
namespace {

const char kScript[] = "td/backends/memmap/archive/testdata/archive_fixture.py";

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

size_t Le16(const std::string& s, size_t at) {
  return static_cast<size_t>(static_cast<uint8_t>(s[at]) | static_cast<uint8_t>(s[at + 1]) << 8);
}

// The zip records of `name` in `zip`: its local header's offset and its central record's.
std::pair<size_t, size_t> Records(const std::string& zip, const std::string& name) {
  auto le16 = [&](size_t at) { return Le16(zip, at); };
  size_t local = std::string::npos, central = std::string::npos;
  for (size_t at = zip.find("PK\x03\x04"); at != std::string::npos;
       at = zip.find("PK\x03\x04", at + 4)) {
    if (zip.compare(at + 30, name.size(), name) == 0 && le16(at + 26) == name.size()) local = at;
  }
  for (size_t at = zip.find("PK\x01\x02"); at != std::string::npos;
       at = zip.find("PK\x01\x02", at + 4)) {
    if (zip.compare(at + 46, name.size(), name) == 0 && le16(at + 28) == name.size()) {
      central = at;
    }
  }
  return {local, central};
}

// upstream's save(..., compression="deflate"): the .memmap entries deflated, inflated on load
// into memory of their own (not views of the mapping), checked against their CRC-32 and their
// declared size; read-write loading refused for them, as upstream's mode="r+" refuses.
TEST(ArchiveCompat, DeflatedArchiveLoadsInflated) {
  TD_REQUIRE_PYTHON();
  const std::string dir = testing_util::FreshDir("defl");
  const std::string path = dir + "/d.tdz";
  ASSERT_EQ(std::system(Command("write_deflated", path).c_str()), 0);
  ASSERT_TRUE(is_memmap_archive(path));
  const TensorDict got = load(path);
  ExpectFixture(got);
  EXPECT_FALSE(MemoryMappedTensor::is_memory_mapped(got.get("obs")));
  ExpectFixture(TensorDict::load_memmap(path));  // copy-on-write: inflated the same
  ExpectFixture(load_archive(path));
  TD_EXPECT_THROW_MSG(load_archive(path, ArchiveLoadOptions().mode(MemmapMode::kReadWrite)),
                      MemmapError, {"d.tdz::obs.memmap", "compressed (deflate)", "read-only"});
  unpack_memmap(path, dir + "/x");
  ExpectFixture(TensorDict::load_memmap(dir + "/x"));

  const std::string zip = testing_util::ReadText(path);
  const auto [local, central] = Records(zip, "obs.memmap");
  ASSERT_NE(local, std::string::npos);
  ASSERT_NE(central, std::string::npos);
  // A corrupt payload: the inflate or the CRC-32 check names the entry.
  std::string bad = zip;
  const size_t payload = local + 30 + Le16(zip, local + 26) + Le16(zip, local + 28);
  bad[payload + 3] = static_cast<char>(bad[payload + 3] ^ 0x21);
  testing_util::WriteText(dir + "/bad.tdz", bad);
  TD_EXPECT_THROW_MSG(load(dir + "/bad.tdz"), MemmapError, {"bad.tdz::obs.memmap", "deflate"});
  TD_EXPECT_THROW_MSG(unpack_memmap(dir + "/bad.tdz", dir + "/y"), MemmapError,
                      {"bad.tdz::obs.memmap"});
  // A declared size of 1 GiB: refused against meta.json's 48 bytes before anything is
  // allocated; unpack_memmap streams, and stops when the stream ends short of it.
  std::string big = zip;
  const uint32_t gib = uint32_t{1} << 30;
  for (int b = 0; b < 4; ++b) big[central + 24 + b] = static_cast<char>((gib >> (8 * b)) & 0xFF);
  testing_util::WriteText(dir + "/big.tdz", big);
  TD_EXPECT_THROW_MSG(load(dir + "/big.tdz"), MemmapError,
                      {"big.tdz::obs.memmap", "needs 48 bytes", "holds 1073741824"});
  TD_EXPECT_THROW_MSG(unpack_memmap(dir + "/big.tdz", dir + "/z"), MemmapError,
                      {"big.tdz::obs.memmap", "decompresses to 48 bytes, expected 1073741824"});
  // bzip2 (and lzma) stay refused, naming the entry and the method.
  ASSERT_EQ(std::system(Command("write_bzip2", dir + "/b.tdz").c_str()), 0);
  TD_EXPECT_THROW_MSG(load(dir + "/b.tdz"), MemmapError, {"b.tdz::obs.memmap", "method 12",
                                                          "bzip2"});
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
