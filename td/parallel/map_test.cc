#include "td/parallel/map.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "td/core/testing.h"
#include "td/executor/executor.h"

namespace td {
namespace parallel {
namespace {

constexpr int64_t kRows = 23;

// Rows 0..22 numbered in "x", with a nested level with an extra batch dim and non-tensor data.
TensorDict Data() {
  TensorDict t({{"x", at::arange(kRows * 3, at::kFloat).view({kRows, 3})},
                {"label", at::arange(kRows)}},
               {kRows});
  t.set("nested", TensorDict({{"y", at::arange(kRows * 2).view({kRows, 2})}}, {kRows, 2}));
  t.set_non_tensor("name", "data");
  return t;
}

// The per-row result: x * 2 + 1 and label // 10, as a new TensorDict.
TensorDict Process(const TensorDict& chunk) {
  TensorDict r({{"x2", chunk.get("x") * 2 + 1}, {"cluster", at::floor_divide(chunk.get("label"), 10)}},
               chunk.batch_size());
  TensorDict nested = chunk.get_tensordict("nested");
  r.set("nested", TensorDict({{"y", nested.get("y") - 1}}, nested.batch_size()));
  return r;
}

void ExpectEqualTd(const TensorDict& a, const TensorDict& b) {
  const auto all = KeysOptions().include_nested(true);
  ASSERT_EQ(a.keys(all), b.keys(all));
  ASSERT_EQ(a.batch_size(), b.batch_size());
  for (const auto& [key, va] : a.items(all)) {
    Value vb = b.get_value(key);
    if (va.is_tensor()) {
      EXPECT_TRUE(va.tensor().equal(vb.tensor())) << key;
    } else if (va.is_tensordict()) {
      EXPECT_EQ(va.tensordict().batch_size(), vb.tensordict().batch_size()) << key;
    } else {
      EXPECT_EQ(va.non_tensor(), vb.non_tensor()) << key;
    }
  }
}

TEST(MapTest, ResultsAreConcatenatedInOrderForEveryChunking) {
  const TensorDict data = Data();
  const TensorDict expected = Process(data);
  const std::vector<MapOptions> chunkings = {
      MapOptions(),                   // one chunk per worker
      MapOptions().chunksize(5),      // 5,5,5,5,3
      MapOptions().chunksize(100),    // one chunk
      MapOptions().num_chunks(4),     // 6,6,6,5
      MapOptions().num_chunks(1000),  // capped at 23 chunks of one row
  };
  for (int workers : {1, 2, 3}) {
    for (MapOptions options : chunkings) {
      TensorDict r = map(data, Process, options.num_workers(workers));
      ExpectEqualTd(expected, r);
      EXPECT_EQ(r.get_tensordict("nested").batch_size(), at::IntArrayRef({kRows, 2}));
    }
  }
}

TEST(MapTest, ChunksAreTheRowsTheyClaim) {
  const TensorDict data = Data();
  std::mutex mu;
  std::vector<std::pair<int64_t, int64_t>> seen;
  map(data,
      [&](const TensorDict& chunk, const ChunkInfo& info) {
        EXPECT_EQ(chunk.batch_size(), at::IntArrayRef({info.length()}));
        EXPECT_TRUE(chunk.get("label").equal(at::arange(info.start(), info.start() + info.length())));
        EXPECT_EQ(chunk.get_non_tensor("name"), "data");
        std::lock_guard<std::mutex> lock(mu);
        seen.emplace_back(info.start(), info.length());
        return chunk;
      },
      MapOptions().num_workers(2).num_chunks(4));
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<std::pair<int64_t, int64_t>>{{0, 6}, {6, 6}, {12, 6}, {18, 5}}));
}

TEST(MapTest, ChunksizeZeroMapsItemByItemAndStacks) {
  const TensorDict data = Data();
  std::atomic<int> calls{0};
  TensorDict r = map(data,
                     [&](const TensorDict& item) {
                       ++calls;
                       EXPECT_EQ(item.batch_size(), at::IntArrayRef({}));
                       EXPECT_EQ(item.get_tensordict("nested").batch_size(), at::IntArrayRef({2}));
                       return Process(item);
                     },
                     MapOptions().num_workers(2).chunksize(0));
  EXPECT_EQ(calls.load(), kRows);
  ExpectEqualTd(Process(data), r);
}

TEST(MapTest, OtherBatchDims) {
  TensorDict data({{"a", at::arange(4 * 6 * 2).view({4, 6, 2})}}, {4, 6});
  auto twice = [](const TensorDict& c) {
    return TensorDict({{"a", c.get("a") * 2}}, c.batch_size());
  };
  for (int64_t dim : {1, -1}) {
    TensorDict r = map(data, twice, MapOptions().dim(dim).chunksize(4).num_workers(2));
    EXPECT_TRUE(r.get("a").equal(data.get("a") * 2));
    TensorDict items = map(
        data,
        [](const TensorDict& c) {
          EXPECT_EQ(c.batch_size(), at::IntArrayRef({4}));
          return TensorDict({{"a", c.get("a") * 2}}, c.batch_size());
        },
        MapOptions().dim(dim).chunksize(0).num_workers(2));
    EXPECT_EQ(items.batch_size(), at::IntArrayRef({4, 6}));
    EXPECT_TRUE(items.get("a").equal(data.get("a") * 2));
  }
}

// The seed's example: fn modifies its chunk in place with set_, out is the data itself.
TEST(MapTest, InPlaceFnWithOutWritesIntoTheSourceWithoutCopies) {
  at::manual_seed(0);
  TensorDict data({{"images", at::randint(0, 255, {12, 4, 4, 3}, at::kByte)},
                   {"labels", at::randint(0, 100, {12}, at::kInt)}},
                  {12});
  const TensorDict before = data.clone();
  const void* images_ptr = data.get("images").data_ptr();
  auto process_data = [](TensorDict chunk) {
    chunk.set_("images", chunk.get("images").flip(-2).clone());
    chunk.set_("labels", at::floor_divide(chunk.get("labels"), 10));
  };
  TensorDict r = map(data, process_data, MapOptions().num_workers(4).chunksize(0).out(data));
  EXPECT_TRUE(r.is_same(data));
  EXPECT_EQ(data.get("images").data_ptr(), images_ptr);
  EXPECT_TRUE(data.get("images").equal(before.get("images").flip(-2)));
  EXPECT_TRUE(data.get("labels").equal(at::floor_divide(before.get("labels"), 10)));
}

// Memory-mapped source and output: chunks are views of the source's files, and results are
// written straight into the output's files (the seeds' memmap_like dataset, filled by map).
TEST(MapTest, MemmapSourceAndOut) {
  std::string dir = ::testing::TempDir() + "/map-memmap-XXXXXX";
  ASSERT_NE(::mkdtemp(dir.data()), nullptr);
  TensorDict src = Data().memmap(dir + "/src");
  ASSERT_EQ(src.backend(), "memmap");
  const TensorDict expected = Process(Data());
  TensorDict out = expected.memmap_like(dir + "/out");
  ASSERT_EQ(out.backend(), "memmap");
  const void* ptr = out.get("x2").data_ptr();
  TensorDict r = map(src, Process, MapOptions().num_workers(2).chunksize(5).out(out));
  EXPECT_TRUE(r.is_same(out));
  EXPECT_EQ(out.get("x2").data_ptr(), ptr);  // no copy: the same mapping
  const TensorDict on_disk = TensorDict::load_memmap(dir + "/out");
  for (const NestedKey& k : expected.keys(test::kLeaves)) {
    EXPECT_TRUE(on_disk.get(k).equal(expected.get(k))) << k;
  }
  // In place, item by item, into the source's own files.
  map(src, [](TensorDict c) { c.get("x").mul_(10); },
      MapOptions().num_workers(2).chunksize(0).out(src));
  EXPECT_TRUE(TensorDict::load_memmap(dir + "/src").get("x").equal(Data().get("x") * 10));
}

TEST(MapTest, InPlaceFnWithoutOutReturnsTheModifiedRows) {
  TensorDict data = Data();
  const TensorDict before = data.clone();
  TensorDict r = map(data, [](TensorDict c) { c.get("x").mul_(10); },
                     MapOptions().num_workers(2).chunksize(4));
  EXPECT_FALSE(r.is_same(data));
  EXPECT_TRUE(r.get("x").equal(before.get("x") * 10));
  EXPECT_TRUE(data.get("x").equal(before.get("x") * 10));  // chunks are views of the source
  EXPECT_TRUE(r.get("label").equal(before.get("label")));
}

TEST(MapTest, OutReceivesEachResultInItsRows) {
  const TensorDict data = Data();
  TensorDict out = Process(data).apply([](const at::Tensor& t) { return at::zeros_like(t); });
  const void* ptr = out.get("x2").data_ptr();
  TensorDict r = map(data, Process, MapOptions().num_workers(2).chunksize(6).out(out));
  EXPECT_TRUE(r.is_same(out));
  EXPECT_EQ(out.get("x2").data_ptr(), ptr);
  ExpectEqualTd(Process(data), out);
  // Item by item too.
  TensorDict out2 = Process(data).apply([](const at::Tensor& t) { return at::zeros_like(t); });
  map(data, Process, MapOptions().num_workers(2).chunksize(0).out(out2));
  ExpectEqualTd(Process(data), out2);
}

TEST(MapTest, OutMayLackTheResultKeys) {
  const TensorDict data = Data();
  auto flat = [](const TensorDict& c) {
    return TensorDict({{"x2", c.get("x") * 2}, {"cluster", at::floor_divide(c.get("label"), 10)}},
                      c.batch_size());
  };
  for (std::optional<int64_t> chunksize : {std::optional<int64_t>(4), std::optional<int64_t>(0)}) {
    TensorDict out({}, {kRows});  // keys are created by the first write, as index_put_ does
    map(data, flat, MapOptions().num_workers(3).chunksize(chunksize).out(out));
    EXPECT_TRUE(out.get("x2").equal(data.get("x") * 2));
    EXPECT_TRUE(out.get("cluster").equal(at::floor_divide(data.get("label"), 10)));
  }
}

TEST(MapTest, OrderDoesNotDependOnWhichChunkFinishesFirst) {
  TensorDict data({{"i", at::arange(8)}}, {8});
  TensorDict r = map(
      data,
      [](const TensorDict& c, const ChunkInfo& info) {
        // Early chunks finish last.
        std::this_thread::sleep_for(std::chrono::milliseconds(5 * (8 - info.index())));
        return TensorDict({{"i", c.get("i") * 1}, {"chunk", at::full({c.batch_size()[0]}, info.index())}},
                          c.batch_size());
      },
      MapOptions().num_workers(3).chunksize(1));
  EXPECT_TRUE(r.get("i").equal(at::arange(8)));
  EXPECT_TRUE(r.get("chunk").equal(at::arange(8)));
}

TEST(MapTest, RandomnessRepeatsWhateverTheWorkers) {
  TensorDict data({{"x", at::zeros({40, 3})}}, {40});
  auto noisy = [](const TensorDict& c, const ChunkInfo& info) {
    return TensorDict({{"x", c.get("x") + at::randn(c.get("x").sizes(), info.generator())}},
                      c.batch_size());
  };
  const TensorDict a = map(data, noisy, MapOptions().num_workers(1).chunksize(5).seed(42));
  const TensorDict b = map(data, noisy, MapOptions().num_workers(3).chunksize(5).seed(42));
  EXPECT_TRUE(a.get("x").equal(b.get("x")));
  const TensorDict c = map(data, noisy, MapOptions().num_workers(2).chunksize(5).seed(43));
  EXPECT_FALSE(a.get("x").equal(c.get("x")));
  // Chunks get different streams.
  EXPECT_FALSE(a.get("x").narrow(0, 0, 5).equal(a.get("x").narrow(0, 5, 5)));
  // Without a seed, LibTorch's global seed decides.
  at::manual_seed(7);
  const TensorDict d = map(data, noisy, MapOptions().num_workers(2).chunksize(5));
  at::manual_seed(7);
  const TensorDict e = map(data, noisy, MapOptions().num_workers(1).chunksize(5));
  EXPECT_TRUE(d.get("x").equal(e.get("x")));
}

TEST(MapTest, FnErrorNamesTheFirstFailingChunk) {
  const TensorDict data = Data();
  auto failing = [](const TensorDict& c, const ChunkInfo& info) {
    if (info.index() == 3) TORCH_CHECK_VALUE(false, "bad chunk three");
    if (info.index() == 4) throw std::runtime_error("bad chunk four");
    return Process(c);
  };
  for (int workers : {1, 2}) {
    TD_EXPECT_THROW_MSG(map(data, failing, MapOptions().num_workers(workers).chunksize(5)),
                        c10::ValueError, {"bad chunk three", "chunk 3 (rows [15, 20) along dim 0)"});
  }
  TD_EXPECT_THROW_MSG(map(data,
                          [](const TensorDict& c) -> TensorDict {
                            if (c.get("label").item<int64_t>() == 7) throw std::runtime_error("seven");
                            return c;
                          },
                          MapOptions().num_workers(2).chunksize(0)),
                      c10::Error, {"seven", "item 7 along dim 0"});
  // With out, the chunks before the failing one are written.
  TensorDict out = Process(data).apply([](const at::Tensor& t) { return at::zeros_like(t); });
  EXPECT_THROW(map(data, failing, MapOptions().num_workers(2).chunksize(5).out(out)), c10::Error);
  EXPECT_TRUE(out.get("x2").narrow(0, 0, 15).equal(Process(data).get("x2").narrow(0, 0, 15)));
}

TEST(MapTest, BadOptionsAndResultsAreReported) {
  const TensorDict data = Data();
  TD_EXPECT_THROW_MSG(map(data, Process, MapOptions().chunksize(2).num_chunks(2)), c10::ValueError,
                      {"chunksize (2)", "num_chunks (2)", "not both"});
  TD_EXPECT_THROW_MSG(map(data, Process, MapOptions().chunksize(-1)), c10::ValueError,
                      {"chunksize must be >= 0", "-1"});
  TD_EXPECT_THROW_MSG(map(data, Process, MapOptions().num_chunks(0)), c10::ValueError,
                      {"num_chunks must be >= 1", "0"});
  TD_EXPECT_THROW_MSG(map(data, Process, MapOptions().num_workers(-3)), c10::ValueError,
                      {"num_workers", "-3"});
  TD_EXPECT_THROW_MSG(map(data, Process, MapOptions().dim(1)), c10::IndexError,
                      {"dim 1", "torch.Size([23])", "[-1, 1)"});
  TensorDict short_out({{"x2", at::zeros({5, 3})}}, {5});
  TD_EXPECT_THROW_MSG(map(data, Process, MapOptions().out(short_out)), BatchSizeError,
                      {"torch.Size([5])", "torch.Size([23])", "23 rows along dim 0"});
  TensorDict narrow_out({{"x2", at::zeros({kRows, 5})}}, {kRows});
  TD_EXPECT_THROW_MSG(map(data, Process, MapOptions().out(narrow_out).num_workers(2)),
                      c10::ValueError, {"'x2'", "into out", "chunk 0"});
  TD_EXPECT_THROW_MSG(map(data,
                          [](const TensorDict& c, const ChunkInfo& info) {
                            TensorDict r({{"a", c.get("x")}}, c.batch_size());
                            if (info.index() == 2) r.set("extra", c.get("x"));
                            return r;
                          },
                          MapOptions().num_workers(2).num_chunks(3)),
                      KeyError, {"TensorDict 2", "['extra']", "result of chunk i"});
  // Chunks returning different non-tensor values concatenate into a NonTensorStack, one value
  // per row (as upstream's torch.cat; NOTE [ Non-tensor stacks ]).
  const TensorDict tagged = map(data,
                                [](const TensorDict& c, const ChunkInfo& info) {
                                  TensorDict r({{"a", c.get("x")}}, c.batch_size());
                                  r.set_non_tensor("tag", info.index() == 0 ? "zero" : "other");
                                  return r;
                                },
                                MapOptions().num_chunks(2));
  EXPECT_EQ(tagged.get_value("tag").kind(), "NonTensorStack");
  EXPECT_EQ(tagged.index({0}).get_non_tensor("tag"), "zero");
  EXPECT_EQ(tagged.index({kRows - 1}).get_non_tensor("tag"), "other");
  TD_EXPECT_THROW_MSG(map(data,
                          [](const TensorDict& c) {
                            return TensorDict({{"a", c.get("x").sum()}}, {});
                          },
                          MapOptions().num_chunks(2)),
                      c10::IndexError, {"torch.Size([])", "concatenating the results of map"});
  TD_EXPECT_THROW_MSG(map_iter(data, Process, MapOptions().out(data)), c10::ValueError,
                      {"map_iter", "out"});
  TensorDict empty({{"x", at::zeros({0, 3})}}, {0});
  TD_EXPECT_THROW_MSG(map(empty, [](const TensorDict& c) { return c; }, MapOptions().chunksize(0)),
                      c10::ValueError, {"chunksize 0", "no items"});
}

TEST(MapTest, EmptyDimRunsFnOnceForTheResultsKeys) {
  TensorDict empty({{"x", at::zeros({0, 3})}}, {0});
  std::atomic<int> calls{0};
  TensorDict r = map(empty,
                     [&](const TensorDict& c) {
                       ++calls;
                       return TensorDict({{"y", c.get("x").sum(-1)}}, c.batch_size());
                     },
                     MapOptions().num_workers(2));
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(r.get("y").sizes(), at::IntArrayRef({0}));
}

TEST(MapTest, ProgressBarCountsRows) {
  const TensorDict data = Data();
  std::ostringstream log;
  // No time-based lines (line_seconds): one line per tenth, however slow the machine.
  map(data, Process,
      MapOptions().num_workers(2).chunksize(1).pbar(true).pbar_options(
          ProgressBarOptions().stream(&log).line_seconds(1e9)));
  const std::string s = log.str();
  EXPECT_NE(s.find("map: 100% 23/23 ["), std::string::npos) << s;
  EXPECT_NE(s.find("it/s]\n"), std::string::npos) << s;
  EXPECT_EQ(std::count(s.begin(), s.end(), '\n'), 10) << s;
  // Nothing at all without pbar.
  std::ostringstream quiet;
  map(data, Process, MapOptions().pbar(false).pbar_options(ProgressBarOptions().stream(&quiet)));
  EXPECT_EQ(quiet.str(), "");
  // A terminal gets one line redrawn in place.
  std::ostringstream tty;
  map(data, Process,
      MapOptions().num_workers(2).chunksize(1).pbar(true).pbar_options(
          ProgressBarOptions().stream(&tty).tty(true).desc("prep")));
  const std::string drawn = tty.str();
  EXPECT_EQ(std::count(drawn.begin(), drawn.end(), '\n'), 1);
  EXPECT_NE(drawn.find("\rprep: 100%|####################| 23/23 ["), std::string::npos) << drawn;
}

TEST(MapTest, ParallelLoopsInsideFnStayWithinTheWorkers) {
  TensorDict data({}, {64});
  for (int i = 0; i < 8; ++i) data.set("k" + std::to_string(i), at::randn({64, 16}));
  std::atomic<int> now{0}, peak{0};
  TensorDict r = map(
      data,
      [&](const TensorDict& c) {
        std::vector<NestedKey> keys = c.keys();
        std::vector<at::Tensor> out(keys.size());
        parallel_for(static_cast<int64_t>(keys.size()), 2, [&](int64_t i) {
          const int n = ++now;
          int p = peak.load();
          while (n > p && !peak.compare_exchange_weak(p, n)) {
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
          --now;
          out[i] = c.get(keys[i]).exp();
        });
        TensorDict result({}, c.batch_size());
        for (size_t i = 0; i < keys.size(); ++i) result.set(keys[i], out[i]);
        return result;
      },
      MapOptions().num_workers(2).num_chunks(4));
  EXPECT_LE(peak.load(), 2);
  EXPECT_TRUE(r.get("k3").allclose(data.get("k3").exp()));
}

TEST(MapIterTest, YieldsEachResultInOrder) {
  const TensorDict data = Data();
  MapIter it = map_iter(data, Process, MapOptions().num_workers(2).chunksize(5));
  EXPECT_EQ(it.size(), 5);
  const TensorDict expected = Process(data);
  int64_t start = 0;
  for (const TensorDict& r : it) {
    const int64_t len = r.batch_size()[0];
    EXPECT_TRUE(r.get("x2").equal(expected.get("x2").narrow(0, start, len)));
    start += len;
  }
  EXPECT_EQ(start, kRows);
  EXPECT_FALSE(it.next().has_value());
  // Item by item, with a prefetch window smaller than the number of items.
  int64_t i = 0;
  MapIter items = map_iter(data, Process, MapOptions().num_workers(2).chunksize(0).prefetch(3));
  while (std::optional<TensorDict> r = items.next()) {
    EXPECT_EQ(r->batch_size(), at::IntArrayRef({}));
    EXPECT_TRUE(r->get("x2").equal(expected.get("x2")[i]));
    ++i;
  }
  EXPECT_EQ(i, kRows);
}

TEST(MapIterTest, ErrorComesAtItsChunkAfterTheEarlierResults) {
  const TensorDict data = Data();
  MapIter it = map_iter(
      data,
      [](const TensorDict& c, const ChunkInfo& info) {
        if (info.index() == 2) TORCH_CHECK(false, "chunk two failed");
        return Process(c);
      },
      MapOptions().num_workers(2).chunksize(5));
  EXPECT_TRUE(it.next().has_value());
  EXPECT_TRUE(it.next().has_value());
  TD_EXPECT_THROW_MSG(it.next(), c10::Error, {"chunk two failed", "chunk 2 (rows [10, 15)"});
  EXPECT_FALSE(it.next().has_value());
}

TEST(MapIterTest, StoppingEarlySkipsTheRest) {
  TensorDict data({{"i", at::arange(200)}}, {200});
  std::atomic<int> calls{0};
  {
    MapIter it = map_iter(
        data,
        [&](const TensorDict& c) {
          ++calls;
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          return c;
        },
        MapOptions().num_workers(2).chunksize(1).prefetch(4));
    EXPECT_TRUE(it.next()->get("i").equal(at::arange(0, 1)));
    MapIter moved = std::move(it);
    EXPECT_TRUE(moved.next()->get("i").equal(at::arange(1, 2)));
  }
  EXPECT_LE(calls.load(), 2 + 4);
}

}  // namespace
}  // namespace parallel
}  // namespace td
