// Zarr stores across languages: zarr-python writes stores as upstream's to_zarr lays them out
// (testdata/zarr_fixture.py; with zarr-python 3, Debian 13's, through upstream's own calls), and
// stores of other tools (several chunks with edge chunks, Fortran order, big-endian, a missing
// chunk, "/" separators, strings), and we read them; it writes stores compressed with
// zarr-python's defaults and with each numcodecs compressor, which we read, and a pickled one,
// which we refuse naming the node; the fixture's format 3
// layout (what upstream writes with zarr-python 3) reads the same; and zarr-python checks a store
// we write (values, dtypes, chunks, attributes, consolidated metadata). Needs /usr/bin/python3
// with zarr (Debian's python3-zarr, tools/install_deps.sh); skipped, saying so, without it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"
#include "td/io/zarr.h"

namespace td {
namespace {

const char kScript[] = "td/io/testdata/zarr_fixture.py";

#define TD_REQUIRE_ZARR()                                                              \
  if (std::system("/usr/bin/python3 -c 'import zarr, numpy' 2>/dev/null") != 0) {      \
    GTEST_SKIP() << "no /usr/bin/python3 with zarr (apt-get install python3-zarr)";    \
  }

int RunFixture(const std::string& mode, const std::string& path) {
  return std::system((std::string("/usr/bin/python3 ") + kScript + " " + mode + " " + path).c_str());
}

// What zarr_fixture.py's td.zarr holds.
TensorDict Expected() {
  return TensorDict({{"obs", at::arange(12, at::kFloat).view({4, 3})},
                     {"next",
                      {{"r", at::tensor({10, 20, 30, 40}, at::kLong)},
                       {"done", at::tensor({1, 0, 1, 0}, at::kByte).to(at::kBool)}}},
                     {"note", "hi"},
                     {"cfg", NonTensorData(nlohmann::json{{"lr", 0.5}, {"layers", {1, 2}}})},
                     {"pair", TensorDict({{"m", at::arange(8, at::kDouble).view({4, 2}).div(2)}},
                                         {4, 2})}},
                    {4});
}

void ExpectFixture(const TensorDict& got) {
  EXPECT_EQ(got.batch_size().vec(), std::vector<int64_t>{4});
  // zarr lists a group's members sorted.
  EXPECT_EQ(got.keys(), (std::vector<NestedKey>{"cfg", "next", "note", "obs", "pair"}));
  const TensorDict want = Expected();
  for (const NestedKey& k : std::vector<NestedKey>{"obs", {"next", "r"}, {"next", "done"},
                                                   {"pair", "m"}}) {
    SCOPED_TRACE(k.repr());
    EXPECT_EQ(got.get(k).scalar_type(), want.get(k).scalar_type());
    EXPECT_TRUE(got.get(k).equal(want.get(k)));
  }
  EXPECT_EQ(got.get_tensordict("next").batch_size().vec(), std::vector<int64_t>{4});
  EXPECT_EQ(got.get_tensordict("pair").batch_size().vec(), (std::vector<int64_t>{4, 2}));
  EXPECT_EQ(got.get_non_tensor("note"), "hi");
  EXPECT_EQ(got.get_non_tensor("cfg"), want.get_non_tensor("cfg"));
}

TEST(ZarrCompat, PythonWritesUpstreamsLayoutWeRead) {
  TD_REQUIRE_ZARR();
  const std::string dir = testing_util::FreshDir("py");
  ASSERT_EQ(RunFixture("write", dir), 0);
  ExpectFixture(from_zarr(dir + "/td.zarr"));
  // Format 3, as zarr-python 3 lays out the same content.
  ASSERT_EQ(RunFixture("write_v3", dir), 0);
  ExpectFixture(from_zarr(dir + "/v3.zarr"));
}

TEST(ZarrCompat, StoresOfOtherToolsWeRead) {
  TD_REQUIRE_ZARR();
  const std::string dir = testing_util::FreshDir("foreign");
  ASSERT_EQ(RunFixture("write", dir), 0);
  // No batch metadata: inferred, nested levels first ("sub" [5, 4], the root [5]).
  const TensorDict got = from_zarr(dir + "/foreign.zarr");
  EXPECT_EQ(got.batch_size().vec(), std::vector<int64_t>{5});
  EXPECT_EQ(got.get_tensordict("sub").batch_size().vec(), (std::vector<int64_t>{5, 4}));
  // Chunks (2, 2, 2) over [5, 2, 3]: edge chunks along dims 0 and 2.
  EXPECT_TRUE(got.get("x").equal(at::arange(30, at::kShort).view({5, 2, 3})));
  // Big-endian float64 in Fortran-order chunks (2, 1).
  EXPECT_TRUE(got.get("y").equal(at::arange(10, at::kDouble).view({5, 2}).mul(1.5)));
  // Only the first chunk was written: the others hold the fill value 7.
  EXPECT_TRUE(got.get("z").equal(at::tensor({1, 2, 7, 7, 7}, at::kInt)));
  // "/"-separated chunk keys (sub/w/1/0).
  EXPECT_TRUE(got.get({"sub", "w"}).equal(at::arange(20, at::kByte).view({5, 4})));
  // numpy strings, written in format 2: fixed-size ones (zarr-python 2, and 3.1 and later) read
  // as JSON; zarr-python 3.0 writes them variable-length, through a filter we refuse, naming it.
  // Which one this zarr-python wrote is read from the array's own metadata.
  std::ifstream names_meta(dir + "/strings.zarr/names/.zarray");
  ASSERT_TRUE(names_meta.good());
  const nlohmann::json names_zarray = nlohmann::json::parse(names_meta);
  const bool vlen = names_zarray.value("filters", nlohmann::json()).dump().find("vlen-utf8") !=
                    std::string::npos;
  if (!vlen) {
    const TensorDict strings = from_zarr(dir + "/strings.zarr");
    EXPECT_EQ(strings.get_non_tensor("names"), nlohmann::json({"ab", "c", "d\u00e9f"}));
    EXPECT_EQ(strings.get_non_tensor("raw"), nlohmann::json({"xy", "z"}));
  } else {
    TD_EXPECT_THROW_MSG(from_zarr(dir + "/strings.zarr"), ZarrError,
                        {dir + "/strings.zarr/names", "filters", "vlen-utf8"});
  }
  // Compressed with zarr-python's default (Blosc with 2, Zstd with 3).
  EXPECT_TRUE(from_zarr(dir + "/compressed.zarr").get("a").equal(at::arange(4, at::kFloat)));
  // Refused, naming the node and the reason.
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/pickled.zarr"), ZarrError,
                      {dir + "/pickled.zarr/obj", "'pickle'"});
}

TEST(ZarrCompat, CompressedByZarrPythonWeRead) {
  TD_REQUIRE_ZARR();
  const std::string dir = testing_util::FreshDir("compressed");
  ASSERT_EQ(RunFixture("write_compressed", dir), 0);
  // zarr-python's defaults (2: format 2, Blosc lz4 with shuffle; 3: format 3, zstd).
  const TensorDict got = from_zarr(dir + "/default.zarr");
  const TensorDict want = Expected();
  for (const NestedKey& k : std::vector<NestedKey>{"obs", {"next", "r"}, {"next", "done"},
                                                   {"pair", "m"}}) {
    SCOPED_TRACE(k.repr());
    EXPECT_TRUE(got.get(k).equal(want.get(k)));
  }
  EXPECT_EQ(got.get_tensordict("pair").batch_size().vec(), (std::vector<int64_t>{4, 2}));
  // Each numcodecs compressor, chunks (2, 5) over [5, 12].
  const TensorDict codecs = from_zarr(dir + "/codecs2.zarr");
  for (const char* name : {"zstd", "gzip", "zlib", "blosc"}) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(codecs.get(name).equal(at::arange(60, at::kFloat).view({5, 12})));
  }
  // Format 3 with zstd, gzip and blosc after "bytes".
  ExpectFixture(from_zarr(dir + "/v3c.zarr"));
}

TEST(ZarrCompat, WeWriteZarrPythonChecks) {
  TD_REQUIRE_ZARR();
  const std::string dir = testing_util::FreshDir("cpp");
  to_zarr(Expected(), dir + "/cpp.zarr");
  EXPECT_EQ(RunFixture("check", dir + "/cpp.zarr"), 0);
  // And over a previous store (replaced whole).
  to_zarr(TensorDict({{"stale", at::zeros({2})}}, {2}), dir + "/again.zarr");
  to_zarr(Expected(), dir + "/again.zarr");
  EXPECT_EQ(RunFixture("check", dir + "/again.zarr"), 0);
  // A non-zero exit of the checker fails: a store with a wrong value.
  TensorDict wrong = Expected().clone();
  wrong.set("obs", at::zeros({4, 3}));
  to_zarr(wrong, dir + "/wrong.zarr");
  EXPECT_NE(RunFixture("check", dir + "/wrong.zarr 2>/dev/null"), 0);
}

}  // namespace
}  // namespace td
