// Memmap archives: pack / unpack / load round trips over nested, non-tensor and lazy-stacked
// content, the zip layout (order, alignment, CRCs), in-place writes and checksums, and bad input.
#include "td/backends/memmap/archive/archive.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"
#include "td/io/io.h"

namespace td {
namespace {

using testing_util::Exists;
using testing_util::FreshDir;
using testing_util::ReadText;
using testing_util::WriteText;

uint32_t Le32(const std::string& s, size_t at) {
  return static_cast<uint32_t>(static_cast<unsigned char>(s[at])) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 1])) << 8) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 2])) << 16) |
         (static_cast<uint32_t>(static_cast<unsigned char>(s[at + 3])) << 24);
}
uint16_t Le16(const std::string& s, size_t at) {
  return static_cast<uint16_t>(static_cast<unsigned char>(s[at]) |
                               (static_cast<unsigned char>(s[at + 1]) << 8));
}

// (name, payload offset, method) of each local header, walking the file from the start.
struct Local {
  std::string name;
  size_t payload;
  uint16_t method;
};
std::vector<Local> LocalHeaders(const std::string& zip) {
  std::vector<Local> out;
  size_t at = 0;
  while (at + 30 <= zip.size() && Le32(zip, at) == 0x04034b50) {
    const uint16_t n = Le16(zip, at + 26), x = Le16(zip, at + 28);
    // sizes from the zip64 extra block (the 32-bit fields are 0xFFFFFFFF)
    uint64_t size = Le32(zip, at + 22);
    for (size_t k = at + 30 + n; k + 4 <= at + 30 + n + x;) {
      const uint16_t id = Le16(zip, k), len = Le16(zip, k + 2);
      if (id == 1) size = Le32(zip, k + 4) | (static_cast<uint64_t>(Le32(zip, k + 8)) << 32);
      k += 4 + len;
    }
    out.push_back({zip.substr(at + 30, n), at + 30 + n + x, Le16(zip, at + 8)});
    at = at + 30 + n + x + size;
  }
  return out;
}

TensorDict Sample() {
  at::manual_seed(1);
  TensorDict data({{"obs", at::randn({4, 3})},
                   {"done", at::tensor({1, 0, 1, 0}, at::kLong).to(at::kBool)},
                   {"next", {{"reward", at::arange(4, at::kLong)}, {"w", at::randn({4, 2}, at::kDouble)}}},
                   {"a b/c", at::ones({4}, at::kHalf)},
                   {"note", "hello"}},
                  {4});
  return data;
}

TEST(Archive, PackLoadRoundTripIsOneMapping) {
  const std::string dir = FreshDir("arch");
  TensorDict data = Sample();
  data.memmap(dir + "/td");
  EXPECT_FALSE(is_memmap_archive(dir + "/td"));  // a directory
  EXPECT_EQ(pack_memmap(dir + "/td", dir + "/td.tdz"), dir + "/td.tdz");
  EXPECT_TRUE(is_memmap_archive(dir + "/td.tdz"));
  TensorDict back = load_archive(dir + "/td.tdz");
  EXPECT_TRUE(back.is_locked());
  EXPECT_EQ(back.batch_size().vec(), std::vector<int64_t>{4});
  EXPECT_TRUE(back.get("obs").equal(data.get("obs")));
  EXPECT_TRUE(back.get("done").equal(data.get("done")));
  EXPECT_TRUE(back.get({"next", "reward"}).equal(data.get({"next", "reward"})));
  EXPECT_TRUE(back.get({"next", "w"}).equal(data.get({"next", "w"})));
  EXPECT_TRUE(back.get("a b/c").equal(data.get("a b/c")));
  EXPECT_EQ(back.get_non_tensor("note"), "hello");
  // Every aligned leaf is a view of the one mapping of the archive.
  EXPECT_EQ(*MemoryMappedTensor::filename_of(back.get("obs")), *MemoryMappedTensor::filename_of(
                                                                    back.get({"next", "w"})));
  EXPECT_TRUE(back.get("obs").storage().is_alias_of(back.get({"next", "reward"}).storage()));
  // Copy-on-write by default: a write stays in memory, the file keeps its bytes.
  back.get("obs").fill_(7);
  TensorDict again = load_archive(dir + "/td.tdz");
  EXPECT_TRUE(again.get("obs").equal(data.get("obs")));
}

TEST(Archive, LayoutOrderAlignmentAndChecksums) {
  const std::string dir = FreshDir("layout");
  Sample().memmap(dir + "/td");
  pack_memmap(dir + "/td", dir + "/td.tdz");
  const std::string zip = ReadText(dir + "/td.tdz");
  const std::vector<Local> locals = LocalHeaders(zip);
  std::vector<std::string> names;
  for (const Local& l : locals) {
    names.push_back(l.name);
    EXPECT_EQ(l.method, 0) << l.name;
    if (l.name.size() > 7 && l.name.substr(l.name.size() - 7) == ".memmap") {
      EXPECT_EQ(l.payload % 64, 0u) << l.name;
    }
  }
  // meta.json first at each level, then the level's files by name, then sub-directories.
  ASSERT_GE(names.size(), 7u);
  EXPECT_EQ(names.front(), "meta.json");
  EXPECT_EQ(names, (std::vector<std::string>{"meta.json", "a%20b%2Fc.memmap", "done.memmap",
                                             "obs.memmap", "next/meta.json", "next/reward.memmap",
                                             "next/w.memmap", "note/meta.json",
                                             "note/_tensordict/meta.json"}));
  // unpack_memmap checks every CRC-32 and rebuilds the directory.
  unpack_memmap(dir + "/td.tdz", dir + "/copy");
  TensorDict copy = TensorDict::load_memmap(dir + "/copy");
  EXPECT_TRUE(copy.get({"next", "w"}).equal(Sample().get({"next", "w"})));
  EXPECT_EQ(ReadText(dir + "/copy/obs.memmap"), ReadText(dir + "/td/obs.memmap"));
  // Same data, same bytes.
  pack_memmap(dir + "/copy", dir + "/copy.tdz");
  EXPECT_EQ(ReadText(dir + "/copy.tdz"), zip);
}

TEST(Archive, ReadWriteMappingThenRefreshChecksums) {
  const std::string dir = FreshDir("rw");
  save(Sample(), dir + "/td.tdz");
  TensorDict rw = load_archive(dir + "/td.tdz", ArchiveLoadOptions().mode(MemmapMode::kReadWrite));
  rw.get({"next", "reward"}).fill_(42);
  TensorDict seen = load_archive(dir + "/td.tdz");
  EXPECT_TRUE(seen.get({"next", "reward"}).equal(at::full({4}, 42, at::kLong)));
  // The stored CRC no longer matches: extraction refuses, naming the entry.
  TD_EXPECT_THROW_MSG(unpack_memmap(dir + "/td.tdz", dir + "/x"), MemmapError,
                      {"next/reward.memmap", "CRC-32", "refresh_archive_checksums"});
  EXPECT_EQ(refresh_archive_checksums(dir + "/td.tdz"), dir + "/td.tdz");
  unpack_memmap(dir + "/td.tdz", dir + "/y");
  EXPECT_TRUE(TensorDict::load_memmap(dir + "/y").get({"next", "reward"}).equal(
      at::full({4}, 42, at::kLong)));
}

TEST(Archive, LazyStackAndSubPath) {
  const std::string dir = FreshDir("lazy");
  TensorDict a({{"x", at::zeros({2})}, {"y", at::ones({2, 3})}}, {2});
  TensorDict b({{"x", at::ones({2})}, {"y", at::zeros({2, 3})}}, {2});
  TensorDict outer({{"stack", TensorDict(lazy_stack({a, b}, 0))}, {"z", at::arange(2)}}, {});
  save(outer, dir + "/s.tdz");
  TensorDict back = load(dir + "/s.tdz");
  EXPECT_EQ(back.get_tensordict("stack").backend(), "lazy_stack");
  EXPECT_TRUE(back.get({"stack", "y"}).equal(at::stack({a.get("y"), b.get("y")})));
  TensorDict sub = load_archive(dir + "/s.tdz", ArchiveLoadOptions().sub_path(NestedKey("stack")));
  EXPECT_EQ(sub.batch_size().vec(), (std::vector<int64_t>{2, 2}));
  TD_EXPECT_THROW_MSG(load_archive(dir + "/s.tdz", ArchiveLoadOptions().sub_path(NestedKey("nope"))),
                      KeyError, {"'nope'", "s.tdz"});
}

// The three non-tensor kinds (NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h)
// are written in the memmap layouts inside the archive and read back as they were, nested levels
// included; a NonTensorStack whose values do not fit its level is refused by name.
TEST(Archive, NonTensorKinds) {
  const std::string dir = FreshDir("kinds");
  TensorDict n({{"x", at::zeros({3, 2})}}, {3, 2});
  n.set("ids", NonTensorData::stack({{1, 2}, {3, 4}, {5, nullptr}}));
  TensorDict t({{"obs", at::zeros({3})}, {"n", n}}, {3});
  t.set("task", NonTensorData::stack({"walk", "run", "jump"}));
  t.set("robot", NonTensorData::meta({{"arm", "franka"}}));
  t.set("note", "plain");
  save(t, dir + "/k.tdz");
  const TensorDict back = load(dir + "/k.tdz");
  for (const NestedKey& k : {NestedKey("task"), NestedKey("robot"), NestedKey("note"),
                             NestedKey({"n", "ids"})}) {
    EXPECT_EQ(back.get_value(k).non_tensor_data(), t.get_value(k).non_tensor_data()) << k;
  }
  EXPECT_EQ(back.index({2}).get_non_tensor({"n", "ids"}), nlohmann::json::parse("[5, null]"));
  // The same through a memmap directory, which the archive holds.
  t.memmap(dir + "/k");
  const TensorDict dir_back = TensorDict::load_memmap(dir + "/k");
  EXPECT_EQ(dir_back.get_value("task").non_tensor_data(), t.get_value("task").non_tensor_data());
  EXPECT_EQ(dir_back.get_value("robot").kind(), "MetaData");
  // Upstream's NonTensorStack of two values in a level of batch size [3]: refused by name.
  {
    std::ofstream meta(dir + "/k/task/meta.json");
    meta << R"({"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":0,)"
         << R"("device":null,"data":["a","b"]})";
  }
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap(dir + "/k"), MemmapError,
                      {"task/meta.json", "lists of shape torch.Size([2])", "batch size torch.Size([3])"});
}

TEST(Archive, BadInput) {
  const std::string dir = FreshDir("bad");
  WriteText(dir + "/not.zip", "hello, not a zip file at all");
  EXPECT_FALSE(is_memmap_archive(dir + "/not.zip"));
  EXPECT_FALSE(is_memmap_archive(dir + "/missing.tdz"));
  TD_EXPECT_THROW_MSG(load_archive(dir + "/not.zip"), MemmapError, {"not.zip", "not a memmap archive"});
  TD_EXPECT_THROW_MSG(unpack_memmap(dir + "/not.zip", dir + "/o"), ValueError, {"not.zip"});
  TD_EXPECT_THROW_MSG(refresh_archive_checksums(dir + "/not.zip"), ValueError, {"not.zip"});
  TD_EXPECT_THROW_MSG(pack_memmap(dir, dir + "/x.tdz"), ValueError, {"no meta.json", dir});

  Sample().memmap(dir + "/td");
  pack_memmap(dir + "/td", dir + "/td.tdz");
  std::string zip = ReadText(dir + "/td.tdz");
  // Truncated: the end record is gone.
  WriteText(dir + "/cut.tdz", zip.substr(0, zip.size() / 2));
  EXPECT_FALSE(is_memmap_archive(dir + "/cut.tdz"));
  // A stored entry claimed deflated (method 8 in its central record): the inflate fails,
  // naming it.
  size_t at = zip.find(std::string("PK\x01\x02", 4));
  while (at != std::string::npos) {
    const std::string name = zip.substr(at + 46, Le16(zip, at + 28));
    if (name == "obs.memmap") zip[at + 10] = 8;
    at = zip.find(std::string("PK\x01\x02", 4), at + 4);
  }
  WriteText(dir + "/deflated.tdz", zip);
  TD_EXPECT_THROW_MSG(load_archive(dir + "/deflated.tdz"), MemmapError,
                      {"deflated.tdz::obs.memmap", "deflate"});
  // Method 14 (lzma): refused, naming the entry and the method.
  for (at = zip.find(std::string("PK\x01\x02", 4)); at != std::string::npos;
       at = zip.find(std::string("PK\x01\x02", 4), at + 4)) {
    if (zip.substr(at + 46, Le16(zip, at + 28)) == "obs.memmap") zip[at + 10] = 14;
  }
  WriteText(dir + "/lzma.tdz", zip);
  TD_EXPECT_THROW_MSG(load_archive(dir + "/lzma.tdz"), MemmapError,
                      {"lzma.tdz::obs.memmap", "method 14", "lzma"});
  // A tensor entry whose size does not fit meta.json's shape.
  const std::string other = dir + "/td2";
  TensorDict small({{"obs", at::zeros({4, 3})}}, {4});
  small.memmap(other);
  WriteText(other + "/obs.memmap", std::string(8, '\0'));
  pack_memmap(other, dir + "/short.tdz");
  TD_EXPECT_THROW_MSG(load_archive(dir + "/short.tdz"), MemmapError,
                      {"short.tdz::obs.memmap", "'obs'", "48 bytes", "holds 8"});
  // A name that leaves the directory.
  std::string evil = ReadText(dir + "/short.tdz");
  for (size_t p = evil.find("obs.memmap"); p != std::string::npos; p = evil.find("obs.memmap", p + 1)) {
    evil.replace(p, 10, "../x.memma");
  }
  WriteText(dir + "/evil.tdz", evil);
  TD_EXPECT_THROW_MSG(unpack_memmap(dir + "/evil.tdz", dir + "/e"), MemmapError, {"'../x.memma'"});
  EXPECT_FALSE(Exists(dir + "/x.memma"));
}

// A stored entry's central record declares 60 MiB of data while the archive holds a few hundred
// bytes: every reader would take the declared size from the payload, past the file's end.
TEST(Archive, DeclaredSizeBeyondStoredSizeIsRefused) {
  const std::string dir = FreshDir("declared");
  TensorDict({{"x", at::zeros({2})}}, {2}).memmap(dir + "/td");
  pack_memmap(dir + "/td", dir + "/td.tdz");
  std::string zip = ReadText(dir + "/td.tdz");
  ASSERT_LT(zip.size(), 2000u);
  bool patched = false;
  for (size_t at = zip.find(std::string("PK\x01\x02", 4)); at != std::string::npos;
       at = zip.find(std::string("PK\x01\x02", 4), at + 4)) {
    if (zip.substr(at + 46, Le16(zip, at + 28)) != "meta.json") continue;
    const uint32_t big = uint32_t{60} << 20;  // the uncompressed size, 32-bit field at +24
    for (int b = 0; b < 4; ++b) zip[at + 24 + b] = static_cast<char>((big >> (8 * b)) & 0xFF);
    patched = true;
  }
  ASSERT_TRUE(patched);
  WriteText(dir + "/big.tdz", zip);
  EXPECT_FALSE(is_memmap_archive(dir + "/big.tdz"));
  TD_EXPECT_THROW_MSG(load_archive(dir + "/big.tdz"), MemmapError,
                      {"big.tdz", "'meta.json'", "62914560 bytes", "must be equal"});
  TD_EXPECT_THROW_MSG(unpack_memmap(dir + "/big.tdz", dir + "/out"), ValueError,
                      {"big.tdz", "'meta.json'", "must be equal"});
  TD_EXPECT_THROW_MSG(refresh_archive_checksums(dir + "/big.tdz"), ValueError,
                      {"big.tdz", "'meta.json'"});
}

// A lazy stack along batch dim 1 (batch [2, 3]) of two members with nested content.
TensorDict Stack() {
  at::manual_seed(2);
  TensorDict a({{"x", at::randn({2})}, {"n", {{"y", at::arange(6).view({2, 3})}}}}, {2});
  TensorDict b({{"x", at::randn({2})}, {"n", {{"y", at::arange(6, 12).view({2, 3})}}}}, {2});
  TensorDict c({{"x", at::randn({2})}, {"n", {{"y", at::arange(12, 18).view({2, 3})}}}}, {2});
  return TensorDict(lazy_stack({a, b, c}, 1));
}

void ExpectStack(const TensorDict& got, const TensorDict& want, const std::string& where) {
  SCOPED_TRACE(where);
  ASSERT_EQ(got.backend(), "lazy_stack");
  EXPECT_EQ(LazyStackedTensorDict(got).stack_dim(), 1);
  EXPECT_EQ(LazyStackedTensorDict(got).tensordicts().size(), 3u);
  EXPECT_EQ(got.batch_size().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_TRUE(got.get("x").equal(want.get("x")));
  EXPECT_TRUE(got.get({"n", "y"}).equal(want.get({"n", "y"})));
}

// A lazy stack loaded from disk (members memory-mapped, or views of an archive's
// mapping) saves to an archive, also onto the archive it was loaded from.
TEST(ArchiveResave, LazyStackLoadedFromDisk) {
  const std::string dir = FreshDir("restack");
  const TensorDict want = Stack();
  save(want, dir + "/d");
  TensorDict from_dir = load(dir + "/d");
  ExpectStack(from_dir, want, "from the directory");
  save(from_dir, dir + "/a.tdz");
  ExpectStack(load(dir + "/a.tdz"), want, "directory -> a.tdz");

  TensorDict from_tdz = load(dir + "/a.tdz");
  save(from_tdz, dir + "/b.tdz");
  ExpectStack(load(dir + "/b.tdz"), want, "a.tdz -> b.tdz");
  // Onto itself: written beside and renamed, so the leaves still read the old file's bytes.
  save(from_tdz, dir + "/a.tdz");
  ExpectStack(from_tdz, want, "the source after saving onto its own archive");
  ExpectStack(load(dir + "/a.tdz"), want, "a.tdz -> a.tdz");
  unpack_memmap(dir + "/a.tdz", dir + "/unpacked");
  ExpectStack(TensorDict::load_memmap(dir + "/unpacked"), want, "a.tdz unpacked");
}

// The same for a plain TensorDict loaded by load_memmap, and one loaded from an archive.
TEST(ArchiveResave, PlainLoadedFromDisk) {
  const std::string dir = FreshDir("replain");
  const TensorDict want = Sample();
  auto expect = [&](const TensorDict& got, const std::string& where) {
    SCOPED_TRACE(where);
    EXPECT_EQ(got.batch_size().vec(), std::vector<int64_t>{4});
    for (const NestedKey& k : std::vector<NestedKey>{"obs", "done", {"next", "reward"},
                                                     {"next", "w"}, "a b/c"}) {
      EXPECT_TRUE(got.get(k).equal(want.get(k))) << k.repr();
    }
    EXPECT_EQ(got.get_non_tensor("note"), "hello");
  };
  want.memmap(dir + "/d");
  TensorDict mapped = TensorDict::load_memmap(dir + "/d");
  save(mapped, dir + "/a.tdz");
  expect(load(dir + "/a.tdz"), "load_memmap -> a.tdz");
  TensorDict next = TensorDict::load_memmap(dir + "/d", LoadMemmapOptions().sub_path("next"));
  save(next, dir + "/next.tdz");
  EXPECT_TRUE(load(dir + "/next.tdz").get("w").equal(want.get({"next", "w"})));

  TensorDict from_tdz = load(dir + "/a.tdz");
  save(from_tdz, dir + "/b.tdz");
  expect(load(dir + "/b.tdz"), "a.tdz -> b.tdz");
  save(from_tdz, dir + "/a.tdz");
  expect(from_tdz, "the source after saving onto its own archive");
  expect(load(dir + "/a.tdz"), "a.tdz -> a.tdz");
  // A nested level of an archive-loaded TensorDict, too.
  save(from_tdz.get_tensordict("next"), dir + "/n.tdz");
  EXPECT_TRUE(load(dir + "/n.tdz").get("w").equal(want.get({"next", "w"})));
}

// TensorDict::load_memmap opens an archive as upstream 0.14's load_memmap does (NOTE
// [ load_memmap of an archive ] in td/backends/memmap/archive_hook.h).
TEST(ArchiveLoadMemmap, OpensArchivesCopyOnWrite) {
  const std::string dir = FreshDir("lmm");
  const TensorDict want = Sample();
  save(want, dir + "/a.tdz");
  TensorDict back = TensorDict::load_memmap(dir + "/a.tdz");
  EXPECT_TRUE(back.is_locked());
  EXPECT_EQ(back.batch_size().vec(), std::vector<int64_t>{4});
  EXPECT_TRUE(back.get("obs").equal(want.get("obs")));
  EXPECT_TRUE(back.get({"next", "w"}).equal(want.get({"next", "w"})));
  EXPECT_EQ(back.get_non_tensor("note"), "hello");
  EXPECT_EQ(*MemoryMappedTensor::filename_of(back.get("obs")),
            *MemoryMappedTensor::filename_of(back.get({"next", "w"})));
  // Copy-on-write (upstream's default mode "r"), also when kReadWrite (LoadMemmapOptions'
  // default) is asked for: writes never reach the archive through load_memmap.
  back.get("obs").fill_(7);
  TensorDict rw = TensorDict::load_memmap(dir + "/a.tdz",
                                          LoadMemmapOptions().mode(MemmapMode::kReadWrite));
  rw.get("obs").fill_(8);
  EXPECT_TRUE(load_archive(dir + "/a.tdz").get("obs").equal(want.get("obs")));
  unpack_memmap(dir + "/a.tdz", dir + "/x");  // CRCs intact
  // sub_path, as for a directory (a missing one is a MemmapError, as for a directory).
  TensorDict next = TensorDict::load_memmap(dir + "/a.tdz", LoadMemmapOptions().sub_path("next"));
  EXPECT_EQ(next.batch_size().vec(), std::vector<int64_t>{4});
  EXPECT_TRUE(next.get("reward").equal(want.get({"next", "reward"})));
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap(dir + "/a.tdz", LoadMemmapOptions().sub_path("no")),
                      MemmapError, {"load_memmap", "'no'", "a.tdz"});
  // A lazy stack.
  save(Stack(), dir + "/s.tdz");
  ExpectStack(TensorDict::load_memmap(dir + "/s.tdz"), Stack(), "load_memmap of s.tdz");
  // A file that is no archive: ValueError naming it, as upstream raises.
  WriteText(dir + "/plain.txt", "not a zip");
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap(dir + "/plain.txt"), ValueError,
                      {"load_memmap", dir + "/plain.txt", "not a memmap archive"});
  // Directories load as before.
  EXPECT_EQ(TensorDict::load_memmap(dir + "/x").backend(), "memmap");
}

}  // namespace
}  // namespace td
