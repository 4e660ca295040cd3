// The format conformance suite: every registered format driver (NOTE [ Format drivers ] in
// td/format/format.h) against the same checks, as tests/conformance runs every storage backend.
//  * Seeded random TensorDicts (nesting, batch sizes with empty dims, every dtype the driver
//    holds, non-tensor data of the kinds it holds, dim names where it keeps them) round-trip
//    exactly.
//  * A dtype it does not hold is refused by a named error naming the key and the dtype, and a
//    refused write leaves the previous copy whole.
//  * A second write replaces the first entirely: no key of the old copy survives.
//  * Truncated files (path formats) and truncated bytes (byte formats) are a named error naming
//    the path, or read back equal, never a crash and never other values; corrupt bytes are a
//    named error or a TensorDict, never a crash. Both run in a child process (td::test::
//    ErrorInChild), so a SIGBUS or SIGSEGV fails the case instead of the binary.
//  * Nesting at the depth limit (td::kMaxNestingDepth, which TensorDict itself enforces)
//    round-trips.
// The Python-written fixtures of each format and the fuzz-corpus replays stay with their format
// (//td/backends/memmap/archive:archive_compat_test, //td/consolidate:file_compat_test,
// //td/io:zarr_compat_test, //td/backends/h5:h5_compat_test, //tests/fixtures:compat_fixtures_test,
// //tests/fuzz).
// TD_FORMAT_SEED / TD_FORMAT_CASES change the generated cases (default seed 4949, 24 cases).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "td/core/testing.h"
#include "td/format/format.h"
#include "tests/format_conformance/random_tensordict.h"

namespace td {
namespace {

namespace fs = std::filesystem;
using format::Driver;

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 10) : fallback;
}

class FormatConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    at::set_num_threads(1);  // ErrorInChild forks: no LibTorch pool threads
    dir_ = fs::path(::testing::TempDir()) / ("format_" + GetParam());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  const Driver& driver() const { return format::GetDriver(GetParam()); }

  // `td` written and read back by the driver (through bytes for a byte format).
  TensorDict RoundTrip(const TensorDict& td, const std::string& name) {
    const Driver& d = driver();
    if (d.is_path_format()) {
      const std::string path = (dir_ / name).string();
      d.save(td, path);
      return d.load(path);
    }
    TensorDict shared = td.clone();
    shared.share_memory_();
    held_.push_back(shared);  // a handle names memory its TensorDict holds
    return d.decode(d.encode(shared));
  }

  fs::path dir_;
  std::vector<TensorDict> held_;
};

TEST(FormatRegistry, EveryFormatOfTheLibraryIsRegistered) {
  EXPECT_EQ(format::RegisteredDrivers(),
            (std::vector<std::string>{"consolidated", "h5", "memmap", "shm_handle", "tdz",
                                      "wire", "zarr"}));
}

TEST_P(FormatConformance, RandomTensorDictsRoundTrip) {
  const Driver& d = driver();
  const uint64_t seed = static_cast<uint64_t>(EnvInt("TD_FORMAT_SEED", 4949));
  const int64_t cases = EnvInt("TD_FORMAT_CASES", 24);
  std::mt19937_64 rng(seed);
  for (int64_t i = 0; i < cases; ++i) {
    const TensorDict td = test::RandomTensorDict(rng, d.traits);
    SCOPED_TRACE(::testing::Message() << GetParam() << " case " << i << " (seed " << seed
                                      << "):\n" << td);
    TensorDict back;
    try {
      back = RoundTrip(td, "case" + std::to_string(i));
    } catch (const c10::Error& e) {
      ADD_FAILURE() << "round trip threw: " << e.what_without_backtrace();
      continue;
    }
    EXPECT_EQ(test::Difference(td, back, d.traits), "");
  }
}

TEST_P(FormatConformance, EveryDtypeItHoldsRoundTrips) {
  const Driver& d = driver();
  for (c10::ScalarType dtype : d.traits.dtypes) {
    SCOPED_TRACE(c10::toString(dtype));
    const TensorDict td({{"x", test::RandomValues(dtype, {3, 2}, 7)}}, {3});
    EXPECT_EQ(test::Difference(td, RoundTrip(td, std::string("dtype_") + c10::toString(dtype)),
                               d.traits),
              "");
  }
}

TEST_P(FormatConformance, DtypesItDoesNotHoldAreRefusedByName) {
  const Driver& d = driver();
  for (c10::ScalarType dtype : format::EveryDtype()) {
    if (test::Holds(d.traits, dtype)) continue;
    SCOPED_TRACE(c10::toString(dtype));
    const TensorDict td({{"odd_leaf", test::RandomValues(dtype, {2}, 3)}}, {2});
    try {
      RoundTrip(td, std::string("refused_") + c10::toString(dtype));
      ADD_FAILURE() << GetParam() << " wrote and read a " << c10::toString(dtype)
                    << " leaf, which its traits say it does not hold";
    } catch (const c10::Error& e) {
      const std::string msg = e.what_without_backtrace();
      EXPECT_NE(msg.find("odd_leaf"), std::string::npos) << msg;
      EXPECT_NE(msg.find(test::DtypeWord(dtype)), std::string::npos) << msg;
    }
  }
}

TEST_P(FormatConformance, FailedWriteLeavesThePreviousCopy) {
  const Driver& d = driver();
  if (!d.is_path_format()) GTEST_SKIP() << "a byte format writes no file";
  std::optional<TensorDict> refused = test::RefusedTensorDict(d.traits);
  if (!refused) GTEST_SKIP() << GetParam() << " holds everything the generator makes";
  std::mt19937_64 rng(11);
  const TensorDict good = test::RandomTensorDict(rng, d.traits);
  const std::string path = (dir_ / "kept").string();
  d.save(good, path);
  EXPECT_THROW(d.save(*refused, path), c10::Error);
  EXPECT_EQ(test::Difference(good, d.load(path), d.traits), "");
  // Nothing else beside it: the failed write's temporaries are gone.
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename());
  EXPECT_EQ(names, std::vector<std::string>{"kept"});
}

TEST_P(FormatConformance, SecondWriteReplacesTheFirst) {
  const Driver& d = driver();
  if (!d.is_path_format()) GTEST_SKIP() << "a byte format writes no file";
  const std::string path = (dir_ / "twice").string();
  const TensorDict first({{"old", at::ones({4, 3})}, {"shared", at::zeros({4})}}, {4});
  const TensorDict second({{"shared", at::arange(2, at::kFloat)}, {"new", at::ones({2, 5})}}, {2});
  d.save(first, path);
  d.save(second, path);
  EXPECT_EQ(test::Difference(second, d.load(path), d.traits), "");
}

// Every regular file under `path` (or `path` itself), sorted.
std::vector<fs::path> FilesUnder(const fs::path& path) {
  std::vector<fs::path> out;
  if (fs::is_regular_file(path)) return {path};
  for (const auto& e : fs::recursive_directory_iterator(path)) {
    if (e.is_regular_file()) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string ReadBytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// What reading a damaged copy gave, in a child process: a td error naming `named`, the
// original (`equal`), other values (`differs`), or a failure of the suite's own kind.
enum class Read { kNamedError, kEqual, kDiffers };

::testing::AssertionResult ReadDamaged(const std::function<TensorDict()>& read,
                                       const TensorDict& original, const format::Traits& traits,
                                       const std::string& named, Read* how) {
  const test::ChildOutcome o = test::ErrorInChild<c10::Error>([&] {
    const std::string diff = test::Difference(original, read(), traits);
    if (!diff.empty()) throw std::runtime_error("differs: " + diff);
  });
  if (o.kind == "error") {
    *how = Read::kNamedError;
    if (o.message.find(named) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the error does not name " << named << ": "
                                         << o.message;
  }
  if (o.kind == "no error") {
    *how = Read::kEqual;
    return ::testing::AssertionSuccess();
  }
  if (o.kind == "other error" && o.message.rfind("differs: ", 0) == 0) {
    *how = Read::kDiffers;
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << o;
}

TEST_P(FormatConformance, TruncationIsANamedErrorNeverOtherValues) {
  const Driver& d = driver();
  std::mt19937_64 rng(23);
  const TensorDict td = test::RandomTensorDict(rng, d.traits, /*min_leaves=*/3);
  if (!d.is_path_format()) {
    TensorDict shared = td.clone();
    shared.share_memory_();
    const std::string bytes = d.encode(shared);
    for (size_t cut : {size_t{0}, size_t{1}, bytes.size() / 2, bytes.size() - 1}) {
      SCOPED_TRACE(::testing::Message() << "cut at " << cut << " of " << bytes.size());
      Read how;
      EXPECT_TRUE(ReadDamaged([&] { return d.decode(bytes.substr(0, cut)); }, td, d.traits, "",
                              &how));
      EXPECT_NE(how, Read::kDiffers);
    }
    return;
  }
  const fs::path saved = dir_ / "whole";
  d.save(td, saved.string());
  const std::vector<fs::path> files = FilesUnder(saved);
  ASSERT_FALSE(files.empty());
  for (const fs::path& file : files) {
    const std::string bytes = ReadBytes(file);
    std::set<size_t> cuts = {0, bytes.size() / 2};
    if (bytes.size() > 0) cuts.insert(bytes.size() - 1);
    for (size_t cut : cuts) {
      if (cut >= bytes.size()) continue;
      SCOPED_TRACE(::testing::Message() << fs::relative(file, saved) << " cut at " << cut
                                        << " of " << bytes.size());
      const fs::path copy = dir_ / "cut";
      fs::remove_all(copy);
      fs::copy(saved, copy, fs::copy_options::recursive);
      WriteBytes(copy / fs::relative(file, saved), bytes.substr(0, cut));
      if (fs::is_regular_file(saved)) WriteBytes(copy, bytes.substr(0, cut));
      Read how;
      EXPECT_TRUE(ReadDamaged([&] { return d.load(copy.string()); }, td, d.traits,
                              copy.string(), &how));
      EXPECT_NE(how, Read::kDiffers) << "a truncated file read back as other values";
    }
  }
}

TEST_P(FormatConformance, CorruptBytesAreANamedErrorOrATensorDict) {
  const Driver& d = driver();
  std::mt19937_64 rng(31);
  const TensorDict td = test::RandomTensorDict(rng, d.traits, /*min_leaves=*/3);
  const int flips = 40;
  if (!d.is_path_format()) {
    TensorDict shared = td.clone();
    shared.share_memory_();
    const std::string bytes = d.encode(shared);
    for (int i = 0; i < flips; ++i) {
      std::string bad = bytes;
      bad[rng() % bad.size()] ^= static_cast<char>(1 + rng() % 255);
      SCOPED_TRACE(bad);
      Read how;
      EXPECT_TRUE(ReadDamaged([&] { return d.decode(bad); }, td, d.traits, "", &how));
    }
    return;
  }
  const fs::path saved = dir_ / "whole";
  d.save(td, saved.string());
  const std::vector<fs::path> files = FilesUnder(saved);
  for (int i = 0; i < flips; ++i) {
    const fs::path& file = files[rng() % files.size()];
    std::string bytes = ReadBytes(file);
    if (bytes.empty()) continue;
    const size_t at = rng() % bytes.size();
    bytes[at] ^= static_cast<char>(1 + rng() % 255);
    SCOPED_TRACE(::testing::Message() << fs::relative(file, saved) << " byte " << at);
    const fs::path copy = dir_ / "flip";
    fs::remove_all(copy);
    fs::copy(saved, copy, fs::copy_options::recursive);
    WriteBytes(fs::is_regular_file(saved) ? copy : copy / fs::relative(file, saved), bytes);
    Read how;
    EXPECT_TRUE(
        ReadDamaged([&] { return d.load(copy.string()); }, td, d.traits, copy.string(), &how));
  }
}

TEST_P(FormatConformance, NestingAtTheDepthLimitRoundTrips) {
  const Driver& d = driver();
  const TensorDict at_limit = test::Nested(kMaxNestingDepth);
  EXPECT_EQ(test::Difference(at_limit, RoundTrip(at_limit, "deep"), d.traits), "");
  // One level deeper exists nowhere to be written: TensorDict refuses to make it, so every
  // format's reader may refuse it too (each format's own tests feed its reader deeper files).
  EXPECT_THROW(test::Nested(kMaxNestingDepth + 1), NestingError);
}

INSTANTIATE_TEST_SUITE_P(Drivers, FormatConformance,
                         ::testing::ValuesIn(format::RegisteredDrivers()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace td
