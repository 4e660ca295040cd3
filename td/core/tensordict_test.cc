#include "td/core/tensordict.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <sstream>
#include <thread>
#include <unordered_map>

#include "td/core/storage.h"
#include "td/core/testing.h"

namespace td {
namespace {

using ::at::indexing::Slice;

TensorDict Sample() {
  return TensorDict({{"a", at::zeros({3, 4, 5})},
                     {"b", at::zeros({3, 4, 1})},
                     {"n", {{"x", at::ones({3, 4, 2})}, {"y", {{"z", at::arange(12).view({3, 4})}}}}},
                     {"s", "a string!"}},
                    {3, 4});
}

TEST(TensorDictTest, ConstructionAndBatchSize) {
  TensorDict t = Sample();
  EXPECT_EQ(t.batch_size(), at::IntArrayRef({3, 4}));
  EXPECT_EQ(t.shape(), at::IntArrayRef({3, 4}));
  EXPECT_EQ(t.batch_dims(), 2);
  EXPECT_EQ(t.ndim(), 2);
  EXPECT_EQ(t.numel(), 12);
  EXPECT_EQ(t.num_keys(), 4u);
  // size() is the batch shape, as torch::Tensor::sizes() and Python's td.size().
  EXPECT_EQ(t.size(), at::IntArrayRef({3, 4}));
  EXPECT_EQ(t.size(0), 3);
  EXPECT_EQ(t.size(-1), 4);
  TD_EXPECT_THROW_MSG(t.size(2), c10::IndexError, {"size", "dimension 2", "[3, 4]"});
  TD_EXPECT_THROW_MSG(TensorDict().size(0), c10::IndexError, {"size", "dimension 0"});
  EXPECT_FALSE(t.device().has_value());
  EXPECT_EQ(t.backend(), "dense");
  EXPECT_EQ(t.get_tensordict("n").batch_size(), at::IntArrayRef({3, 4}));
  EXPECT_EQ(TensorDict().batch_size().size(), 0u);
  EXPECT_EQ(TensorDict().numel(), 1);
  TensorDict empty({}, {10});
  EXPECT_TRUE(empty.is_empty());
  EXPECT_EQ(empty.batch_size(), at::IntArrayRef({10}));
}

TEST(TensorDictTest, ConstructionFromMaps) {
  std::unordered_map<std::string, at::Tensor> um = {{"a", at::ones({2, 3})}};
  TensorDict t = TensorDict::from_map(um, {2});
  EXPECT_TRUE(t.get("a").equal(um["a"]));
  std::map<std::string, at::Tensor> m = {{"b", at::ones({2})}, {"a", at::zeros({2})}};
  EXPECT_EQ(TensorDict::from_map(m, {2}).keys(), (std::vector<NestedKey>{"a", "b"}));
  std::vector<TensorDict::Item> items = {{"x", at::ones({2})}};
  EXPECT_EQ(TensorDict(items, {2}).keys(), std::vector<NestedKey>{"x"});
}

TEST(TensorDictTest, ConstructionErrorsNameKeyShapeAndBatch) {
  TD_EXPECT_THROW_MSG(TensorDict({{"c", at::zeros({4, 3, 1})}}, {3, 4}), BatchSizeError,
                      {"'c'", "torch.Size([4, 3, 1])", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(TensorDict({{"n", {{"x", at::zeros({2})}}}}, {3}), BatchSizeError,
                      {"'x'", "torch.Size([2])"});
  TD_EXPECT_THROW_MSG(TensorDict({}, {-1}), c10::ValueError, {"negative"});
  TD_EXPECT_THROW_MSG(TensorDict({{"a", at::Tensor()}}, {}), c10::ValueError,
                      {"'a'", "undefined"});
}

// A batch whose product overflows int64 is refused wherever it comes from (LibTorch refuses such
// a tensor shape too): BatchSizeError naming the sizes; numel() never wraps around.
TEST(TensorDictTest, BatchSizeProductOverflowIsRefused) {
  const int64_t big = int64_t{1} << 62;
  TD_EXPECT_THROW_MSG(TensorDict({}, {big, 4}), BatchSizeError,
                      {"torch.Size([4611686018427387904, 4])", "does not fit in int64"});
  TD_EXPECT_THROW_MSG(TensorDict({}, {0, big, big}), BatchSizeError,
                      {"torch.Size([0, 4611686018427387904, 4611686018427387904])"});
  TD_EXPECT_THROW_MSG(TensorDict(MakeDenseStorage({big, 4}, std::nullopt)), BatchSizeError,
                      {"torch.Size([4611686018427387904, 4])"});
  TensorDict t({}, {big});
  EXPECT_EQ(t.numel(), big);
  TD_EXPECT_THROW_MSG(t.set_batch_size({big, 2}), BatchSizeError,
                      {"torch.Size([4611686018427387904, 2])"});
  EXPECT_EQ(t.batch_size(), at::IntArrayRef({big}));
  TD_EXPECT_THROW_MSG(td::stack({t, t, t, t}, 0), BatchSizeError,
                      {"torch.Size([4, 4611686018427387904])"});
  EXPECT_EQ(TensorDict({}, {0, big}).numel(), 0);
  EXPECT_EQ(TensorDict({}, {3, 0}).numel(), 0);
}

TEST(TensorDictTest, DeviceIsAppliedOnWrite) {
  TensorDict t({{"a", at::ones({2})}}, {2}, at::Device("cpu"));
  ASSERT_TRUE(t.device().has_value());
  EXPECT_EQ(*t.device(), at::Device("cpu"));
  t.set("b", at::zeros({2, 3}));
  EXPECT_EQ(t.get("b").device(), at::Device("cpu"));
  t.set({"n", "c"}, at::zeros({2}));
  EXPECT_EQ(t.get_tensordict("n").device(), std::optional<at::Device>(at::Device("cpu")));
  TensorDict moved = Sample().to(at::Device("cpu"));
  EXPECT_EQ(moved.device(), std::optional<at::Device>(at::Device("cpu")));
  EXPECT_EQ(moved.get_tensordict({"n", "y"}).device(),
            std::optional<at::Device>(at::Device("cpu")));
}

TEST(TensorDictTest, GetNestedAndDefaults) {
  TensorDict t = Sample();
  EXPECT_TRUE(t.get({"n", "x"}).equal(at::ones({3, 4, 2})));
  EXPECT_TRUE(t.get({"n", {"y", {"z"}}}).equal(at::arange(12).view({3, 4})));
  at::Tensor d = at::full({1}, 7);
  EXPECT_TRUE(t.get("missing", d).is_same(d));
  EXPECT_TRUE(t.get({"n", "missing"}, d).is_same(d));
  EXPECT_EQ(t.get_non_tensor("s"), "a string!");
  EXPECT_TRUE(t.get_value("n").is_tensordict());
  EXPECT_TRUE(t.find({"n", "y", "z"}).has_value());
  EXPECT_FALSE(t.find({"a", "b"}).has_value());
  EXPECT_TRUE(t.contains({"n", "y"}));
  EXPECT_FALSE(t.contains({"n", "q"}));
  EXPECT_FALSE(t.contains({"a", "q"}));
}

TEST(TensorDictTest, GetErrorsNameKeyAndExistingKeys) {
  TensorDict t = Sample();
  TD_EXPECT_THROW_MSG(t.get("zz"), KeyError, {"'zz'", "['a', 'b', 'n', 's']"});
  TD_EXPECT_THROW_MSG(t.get({"n", "q"}), KeyError, {"('n', 'q')", "under 'n'", "['x', 'y']"});
  TD_EXPECT_THROW_MSG(t.get({"a", "q"}), KeyError, {"('a', 'q')", "Tensor, not a TensorDict"});
  TD_EXPECT_THROW_MSG(t.get("n"), c10::TypeError, {"'n'", "TensorDict", "get_tensordict"});
  TD_EXPECT_THROW_MSG(t.get("s"), c10::TypeError, {"'s'", "NonTensorData"});
  TD_EXPECT_THROW_MSG(t.get_tensordict("a"), c10::TypeError, {"'a'", "not a TensorDict"});
  TD_EXPECT_THROW_MSG(t.get_non_tensor("a"), c10::TypeError, {"'a'", "not non-tensor"});
  TD_EXPECT_THROW_MSG(t.get("s", at::ones({1})), c10::TypeError, {"'s'"});
}

// get("k") / get({"a", "b"}) / set("k", v) look keys up without building a NestedKey; they must
// find exactly what the NestedKey overloads find, for every key length (short keys are compared
// word-wise) and for keys that differ only in their first or last byte.
TEST(TensorDictTest, LiteralKeyOverloadsMatchNestedKeyOverloads) {
  for (int64_t width : {1, 5, 12, 20}) {  // 20 keys: the hashed index (past 12 entries) too
    TensorDict t({}, {2});
    std::vector<std::string> keys;
    for (size_t len = 1; len <= 20; ++len) {
      std::string base(len, 'k');
      std::string first = base, last = base;
      first.front() = 'f';
      last.back() = 'l';
      for (const std::string& k : {base, first, last}) {
        if (std::find(keys.begin(), keys.end(), k) != keys.end()) continue;
        if (static_cast<int64_t>(keys.size()) >= width * 3) break;
        keys.push_back(k);
        t.set(k.c_str(), at::full({2}, static_cast<double>(keys.size())));
      }
    }
    for (const std::string& k : keys) {
      at::Tensor by_literal = t.get(k.c_str());
      EXPECT_TRUE(by_literal.is_same(t.get(NestedKey(k)))) << k;
      EXPECT_TRUE(by_literal.is_same(t.get({k.c_str()}))) << k;
    }
    std::string absent(21, 'k');
    TD_EXPECT_THROW_MSG(t.get(absent.c_str()), KeyError, {"not found"});
  }
  TensorDict t = Sample();
  EXPECT_TRUE(t.get({"n", "y", "z"}).is_same(t.get(NestedKey({"n", "y", "z"}))));
  TD_EXPECT_THROW_MSG(t.get({"n", "y"}), c10::TypeError, {"('n', 'y')", "TensorDict"});
  TD_EXPECT_THROW_MSG(t.get({"n", "y", "q"}), KeyError, {"('n', 'y', 'q')", "['z']"});
  TD_EXPECT_THROW_MSG(t.get({"s", "q"}), KeyError, {"('s', 'q')", "NonTensorData"});
  TD_EXPECT_THROW_MSG(t.get(std::initializer_list<const char*>{}), c10::ValueError,
                      {"at least one component"});
  // set("k", v) validates as set(NestedKey("k"), v) does, naming the key; nothing is written.
  TD_EXPECT_THROW_MSG(t.set("d", at::zeros({4, 3})), BatchSizeError, {"'d'", "torch.Size([4, 3])"});
  EXPECT_FALSE(t.contains("d"));
  t.lock_();
  TD_EXPECT_THROW_MSG(t.set("d", at::zeros({3, 4})), LockedError, {"'d'"});
  at::Tensor a = t.get("a");
  t.set("a", at::ones({3, 4, 5}));  // locked: same shape is written in place
  EXPECT_TRUE(t.get("a").is_same(a));
  EXPECT_TRUE(a.eq(1).all().item<bool>());
}

TEST(TensorDictTest, SetCreatesReplacesAndChecksBatch) {
  TensorDict t = Sample();
  t.set("c", at::zeros({3, 4, 2, 2}));
  EXPECT_EQ(t.get("c").sizes(), at::IntArrayRef({3, 4, 2, 2}));
  t.set("a", at::ones({3, 4, 7}));  // replace with another shape
  EXPECT_EQ(t.get("a").sizes(), at::IntArrayRef({3, 4, 7}));
  t.set({"nested", {"supernested", {"key"}}}, at::zeros({3, 4}));
  EXPECT_TRUE((t.get({"nested", "supernested", "key"}) == 0).all().item<bool>());
  EXPECT_EQ(t.get_tensordict({"nested", "supernested"}).batch_size(), at::IntArrayRef({3, 4}));
  TD_EXPECT_THROW_MSG(t.set("d", at::zeros({4, 3, 1})), BatchSizeError,
                      {"'d'", "torch.Size([4, 3, 1])", "torch.Size([3, 4])"});
  TD_EXPECT_THROW_MSG(t.set({"a", "x"}, at::zeros({3, 4})), KeyError, {"('a', 'x')"});
  TD_EXPECT_THROW_MSG(t.set("self", t), c10::ValueError, {"'self'", "itself"});
  // Nested TensorDicts may have a longer batch size, never a shorter or different one.
  t.set("long", TensorDict({{"q", at::ones({3, 4, 5, 6})}}, {3, 4, 5}));
  TD_EXPECT_THROW_MSG(t.set("short", TensorDict({}, {3})), BatchSizeError,
                      {"'short'", "torch.Size([3])", "torch.Size([3, 4])"});
  // Non-tensor data.
  t.set("str", std::string("hello"));
  t.set_non_tensor("num", 3.5);
  t.set("obj", NonTensorData(nlohmann::json{{"k", 1}}));
  EXPECT_EQ(t.get_non_tensor("num"), 3.5);
  EXPECT_EQ(t.get_non_tensor("obj")["k"], 1);
}

TEST(TensorDictTest, HandleSharesNestedWrites) {
  TensorDict t = Sample();
  TensorDict alias = t;
  alias.set("new", at::ones({3, 4}));
  EXPECT_TRUE(t.contains("new"));
  TensorDict sub = t.get_tensordict("n");
  sub.set("w", at::ones({3, 4}));
  EXPECT_TRUE(t.contains({"n", "w"}));
  EXPECT_TRUE(alias.is_same(t));
  EXPECT_FALSE(t.clone().is_same(t));
}

TEST(TensorDictTest, SetInPlace) {
  TensorDict t = Sample();
  at::Tensor a = t.get("a");
  t.set_("a", at::ones({3, 4, 5}));
  EXPECT_TRUE(a.equal(at::ones({3, 4, 5})));  // same storage was written
  t.set_({"n", "x"}, at::full({3, 4, 2}, 2.0));
  EXPECT_EQ(t.get({"n", "x"}).sum().item<double>(), 48.0);
  TD_EXPECT_THROW_MSG(t.set_("zz", at::ones({3, 4})), KeyError, {"'zz'"});
  TD_EXPECT_THROW_MSG(t.set_({"n", "zz"}, at::ones({3, 4})), KeyError, {"('n', 'zz')"});
  TD_EXPECT_THROW_MSG(t.set_("a", at::ones({3, 4, 6})), c10::ValueError,
                      {"'a'", "torch.Size([3, 4, 6])", "torch.Size([3, 4, 5])"});
  TD_EXPECT_THROW_MSG(t.set_("n", at::ones({3, 4})), c10::TypeError, {"'n'", "TensorDict"});
}

// set_ does not broadcast (the header says so): ones({5}) into [3, 4, 5] is an error naming the
// key and both shapes; an explicit expand is the way to broadcast. Writes into a meta tensor
// and copies LibTorch refuses name the key.
TEST(TensorDictTest, SetInPlaceDoesNotBroadcast) {
  TensorDict t = Sample();
  TD_EXPECT_THROW_MSG(t.set_("a", at::ones({5})), c10::ValueError,
                      {"'a'", "torch.Size([5])", "torch.Size([3, 4, 5])", "does not broadcast"});
  t.set_("a", at::ones({5}).expand({3, 4, 5}));
  EXPECT_TRUE(t.get("a").equal(at::ones({3, 4, 5})));
  t.set("m", at::empty({3, 4, 2}, at::TensorOptions().device(at::kMeta)));
  TD_EXPECT_THROW_MSG(t.set_("m", at::ones({3, 4, 2})), c10::ValueError, {"'m'", "meta"});
  // The destination overlaps itself (an expanded tensor): LibTorch's refusal gets the key.
  t.set("e", at::zeros({4, 1}).expand({3, 4, 1}));
  TD_EXPECT_THROW_MSG(t.set_("e", at::ones({3, 4, 1})), c10::Error, {"'e'"});
}

TEST(TensorDictTest, UpdateMergesNested) {
  TensorDict t = Sample();
  t.update({{"a", at::ones({3, 4, 5})}, {"d", at::ones({3, 4, 2})}});
  EXPECT_TRUE(t.get("a").equal(at::ones({3, 4, 5})));
  EXPECT_TRUE(t.contains("d"));
  t.update(TensorDict({{"n", {{"new", at::ones({3, 4})}}}}, {3, 4}));
  EXPECT_TRUE(t.contains({"n", "x"}));  // merged, not replaced
  EXPECT_TRUE(t.contains({"n", "new"}));
  t.update({{"n", {{"lit", at::ones({3, 4})}}}});
  EXPECT_TRUE(t.contains({"n", "x"}));
  EXPECT_TRUE(t.contains({"n", "lit"}));
  TD_EXPECT_THROW_MSG(t.update({{"c", at::zeros({4, 3, 1})}}), BatchSizeError,
                      {"'c'", "torch.Size([4, 3, 1])"});
}

TEST(TensorDictTest, UpdateInPlaceIsAllOrNothing) {
  TensorDict t = Sample();
  at::Tensor a = t.get("a");
  TensorDict good({{"a", at::ones({3, 4, 5})}, {"n", {{"x", at::zeros({3, 4, 2})}}}}, {3, 4});
  t.update_(good);
  EXPECT_TRUE(a.equal(at::ones({3, 4, 5})));
  EXPECT_TRUE(t.get({"n", "x"}).equal(at::zeros({3, 4, 2})));
  // The second key is bad: nothing is written, not even the first.
  TensorDict bad({{"a", at::full({3, 4, 5}, 9.0)}, {"b", at::ones({3, 4, 3})}}, {3, 4});
  TD_EXPECT_THROW_MSG(t.update_(bad), c10::ValueError, {"'b'", "torch.Size([3, 4, 3])"});
  EXPECT_TRUE(a.equal(at::ones({3, 4, 5})));
  TD_EXPECT_THROW_MSG(t.update_(TensorDict({{"q", at::ones({3, 4})}}, {3, 4})), KeyError,
                      {"'q'"});
}

TEST(TensorDictTest, DeletePopRename) {
  TensorDict t = Sample();
  t.del_("b");
  EXPECT_FALSE(t.contains("b"));
  t.erase({"n", "x"});
  EXPECT_FALSE(t.contains({"n", "x"}));
  TD_EXPECT_THROW_MSG(t.del_("b"), KeyError, {"'b'"});
  Value p = t.pop("a");
  EXPECT_TRUE(p.is_tensor());
  EXPECT_FALSE(t.contains("a"));
  EXPECT_TRUE(t.pop("a", "fallback").is_non_tensor());
  TD_EXPECT_THROW_MSG(t.pop("a"), KeyError, {"'a'"});
  t.set("a", at::ones({3, 4}));
  t.rename_key_("a", "renamed");
  EXPECT_TRUE(t.contains("renamed"));
  EXPECT_FALSE(t.contains("a"));
  t.rename_key_("renamed", {"n", "moved"});
  EXPECT_TRUE(t.get({"n", "moved"}).equal(at::ones({3, 4})));
  t.set("other", at::zeros({3, 4}));
  TD_EXPECT_THROW_MSG(t.rename_key_("other", {"n", "moved"}), KeyError,
                      {"('n', 'moved')", "already exists"});
  t.rename_key_("other", {"n", "moved"}, /*safe=*/false);
  EXPECT_TRUE(t.get({"n", "moved"}).equal(at::zeros({3, 4})));
  TD_EXPECT_THROW_MSG(t.rename_key_("nope", "x"), KeyError, {"'nope'"});
}

TEST(TensorDictTest, KeysValuesItems) {
  TensorDict t = Sample();
  EXPECT_EQ(t.keys(), (std::vector<NestedKey>{"a", "b", "n", "s"}));
  EXPECT_EQ(t.keys(KeysOptions().include_nested(true)),
            (std::vector<NestedKey>{"a", "b", "n", {"n", "x"}, {"n", "y"}, {"n", "y", "z"}, "s"}));
  EXPECT_EQ(t.keys(KeysOptions().include_nested(true).leaves_only(true)),
            (std::vector<NestedKey>{"a", "b", {"n", "x"}, {"n", "y", "z"}, "s"}));
  EXPECT_EQ(t.keys(KeysOptions().leaves_only(true)), (std::vector<NestedKey>{"a", "b", "s"}));
  NestedKey tuple_key = {{"n"}, "y", {{"z"}}};
  auto all = t.keys(KeysOptions().include_nested(true));
  EXPECT_NE(std::find(all.begin(), all.end(), tuple_key), all.end());
  std::vector<Value> vals = t.values();
  ASSERT_EQ(vals.size(), 4u);
  EXPECT_EQ(vals[0].tensor().sizes(), at::IntArrayRef({3, 4, 5}));
  EXPECT_EQ(vals[1].tensor().sizes(), at::IntArrayRef({3, 4, 1}));
  auto items = t.items(KeysOptions().include_nested(true).leaves_only(true));
  EXPECT_EQ(items[2].first, NestedKey({"n", "x"}));
  EXPECT_TRUE(items[2].second.tensor().equal(at::ones({3, 4, 2})));
}

TEST(TensorDictTest, InsertionOrderKeptPastIndexThreshold) {
  TensorDict t({}, {2});
  for (int i = 30; i > 0; --i) t.set(std::to_string(i), at::full({2}, i));
  auto keys = t.keys();
  ASSERT_EQ(keys.size(), 30u);
  EXPECT_EQ(keys.front(), NestedKey("30"));
  EXPECT_EQ(keys.back(), NestedKey("1"));
  EXPECT_EQ(t.get("17")[0].item<int64_t>(), 17);
  t.del_("17");
  EXPECT_FALSE(t.contains("17"));
  EXPECT_EQ(t.get("16")[0].item<int64_t>(), 16);
  EXPECT_EQ(t.get("1")[0].item<int64_t>(), 1);
}

// The index of a large level refers to entries by position: it must follow growth (the entries
// reallocate), replacement, erasure, renames and results built whole (clone).
TEST(TensorDictTest, LargeLevelsFindEveryKey) {
  auto name = [](int i) { return "a_key_longer_than_the_small_string_buffer_" + std::to_string(i); };
  TensorDict t({}, {2});
  for (int i = 0; i < 200; ++i) {
    t.set(name(i), at::full({2}, i));
    ASSERT_EQ(t.get(name(i / 2))[0].item<int64_t>(), i / 2) << i;
  }
  t.set(name(7), at::full({2}, -7));  // replaced in place
  EXPECT_EQ(t.get(name(7))[0].item<int64_t>(), -7);
  t.del_(name(0));
  t.rename_key_(name(1), "renamed");
  EXPECT_FALSE(t.contains(name(0)));
  EXPECT_FALSE(t.contains(name(1)));
  EXPECT_FALSE(t.contains("a_key_longer_than_the_small_string_buffer_"));
  TensorDict c = t.clone();
  for (const TensorDict& d : {t, c}) {
    EXPECT_EQ(d.get("renamed")[0].item<int64_t>(), 1);
    for (int i = 2; i < 200; ++i) {
      ASSERT_EQ(d.get(name(i))[0].item<int64_t>(), i == 7 ? -7 : i) << i;
    }
  }
}

// NOTE [ Lazy key index ]: readers of a fresh result may build the index concurrently.
TEST(TensorDictTest, ConcurrentReadersOfALargeLevelAllFindTheirKeys) {
  TensorDict t({}, {});
  for (int i = 0; i < 100; ++i) t.set("k" + std::to_string(i), at::full({}, i));
  for (int round = 0; round < 20; ++round) {
    const TensorDict fresh = t.clone();  // its index is not built yet
    std::vector<int> wrong(4, 0);
    std::vector<std::thread> readers;
    for (int r = 0; r < 4; ++r) {
      readers.emplace_back([&, r] {
        for (int i = 0; i < 100; ++i) {
          const int k = (i * 7 + r * 13) % 100;
          if (fresh.get("k" + std::to_string(k)).item<int64_t>() != k) ++wrong[r];
        }
      });
    }
    for (std::thread& th : readers) th.join();
    EXPECT_EQ(wrong, std::vector<int>(4, 0)) << round;
  }
}

TEST(TensorDictTest, SelectExcludeSplitKeys) {
  TensorDict t = Sample();
  t.set("long", TensorDict({{"q", at::ones({3, 4, 5})}}, {3, 4, 5}));
  TensorDict s = t.select({"a", {"n", "y", "z"}, {"long", "q"}});
  EXPECT_EQ(s.keys(KeysOptions().include_nested(true).leaves_only(true)),
            (std::vector<NestedKey>{"a", {"n", "y", "z"}, {"long", "q"}}));
  EXPECT_EQ(s.get_tensordict("long").batch_size(), at::IntArrayRef({3, 4, 5}));
  EXPECT_TRUE(s.get("a").is_same(t.get("a")));  // values shared
  s.set("only_in_s", at::ones({3, 4}));
  EXPECT_FALSE(t.contains("only_in_s"));
  TD_EXPECT_THROW_MSG(t.select({"a", "zz"}), KeyError, {"'zz'"});
  EXPECT_EQ(t.select({"a", "zz"}, /*strict=*/false).keys(), std::vector<NestedKey>{"a"});

  TensorDict e = t.exclude({"a", {"n", "x"}, "nope"});
  EXPECT_FALSE(e.contains("a"));
  EXPECT_FALSE(e.contains({"n", "x"}));
  EXPECT_TRUE(t.contains({"n", "x"}));  // source untouched
  EXPECT_TRUE(e.contains({"n", "y", "z"}));

  auto parts = t.split_keys({{"a"}, {"b", "s"}});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[0].keys(), std::vector<NestedKey>{"a"});
  EXPECT_EQ(parts[1].keys(), (std::vector<NestedKey>{"b", "s"}));
  EXPECT_EQ(parts[2].keys(), (std::vector<NestedKey>{"n", "long"}));
}

TEST(TensorDictTest, FlattenAndUnflattenKeys) {
  TensorDict data({{"key 1", at::ones({3, 4, 5})},
                   {"key 2", TensorDict({{"sub-key", at::randn({3, 4, 5, 6})}}, {3, 4, 5})}},
                  {3, 4});
  TensorDict flat = data.flatten_keys(".");
  EXPECT_EQ(flat.keys(), (std::vector<NestedKey>{"key 1", "key 2.sub-key"}));
  EXPECT_TRUE(flat.get("key 2.sub-key").is_same(data.get({"key 2", "sub-key"})));
  TensorDict back = flat.unflatten_keys(".");
  EXPECT_TRUE(back.get({"key 2", "sub-key"}).is_same(data.get({"key 2", "sub-key"})));
  EXPECT_EQ(Sample().flatten_keys("/").keys(),
            (std::vector<NestedKey>{"a", "b", "n/x", "n/y/z", "s"}));
  TensorDict clash({{"a", {{"b", at::ones({2})}}}, {"a.b", at::ones({2})}}, {2});
  TD_EXPECT_THROW_MSG(clash.flatten_keys("."), c10::ValueError, {"'a.b'"});
  TensorDict clash2({{"a", at::ones({2})}, {"a.b", at::ones({2})}}, {2});
  TD_EXPECT_THROW_MSG(clash2.unflatten_keys("."), c10::ValueError, {"'a.b'", "collides"});
}

TEST(TensorDictTest, EmptyCloneCopy) {
  TensorDict t = Sample();
  TensorDict e = t.empty();
  EXPECT_TRUE(e.is_empty());
  EXPECT_EQ(e.batch_size(), t.batch_size());
  TensorDict er = t.empty(/*recurse=*/true);
  EXPECT_EQ(er.keys(KeysOptions().include_nested(true)),
            (std::vector<NestedKey>{"n", {"n", "y"}}));

  TensorDict c = t.clone();
  c.set_("a", at::ones({3, 4, 5}));
  EXPECT_TRUE(t.get("a").equal(at::zeros({3, 4, 5})));
  c.get_tensordict("n").set("w", at::ones({3, 4}));
  EXPECT_FALSE(t.contains({"n", "w"}));
  EXPECT_EQ(c.get_non_tensor("s"), "a string!");

  TensorDict sh = t.copy();
  sh.set_("a", at::ones({3, 4, 5}));
  EXPECT_TRUE(t.get("a").equal(at::ones({3, 4, 5})));  // tensors shared
  sh.get_tensordict("n").set("w", at::ones({3, 4}));
  EXPECT_FALSE(t.contains({"n", "w"}));  // structure not shared
}

TEST(TensorDictTest, LockSemantics) {
  TensorDict t = Sample();
  t.lock_();
  EXPECT_TRUE(t.is_locked());
  EXPECT_TRUE(t.get_tensordict("n").is_locked());
  TD_EXPECT_THROW_MSG(t.set("new", at::ones({3, 4})), LockedError, {"'new'", "locked"});
  TD_EXPECT_THROW_MSG(t.set({"n", "new"}, at::ones({3, 4})), LockedError, {"('n', 'new')"});
  TD_EXPECT_THROW_MSG(t.set({"q", "new"}, at::ones({3, 4})), LockedError, {"'q'", "locked"});
  TD_EXPECT_THROW_MSG(t.del_("a"), LockedError, {"'a'", "locked"});
  TD_EXPECT_THROW_MSG(t.pop("a"), LockedError, {"'a'"});
  TD_EXPECT_THROW_MSG(t.rename_key_("a", "z"), LockedError, {"'a'", "'z'"});
  at::Tensor a = t.get("a");
  t.set("a", at::ones({3, 4, 5}));  // same shape: written in place
  EXPECT_TRUE(a.equal(at::ones({3, 4, 5})));
  TD_EXPECT_THROW_MSG(t.set("a", at::ones({3, 4, 6})), LockedError, {"'a'"});
  t.set_("b", at::ones({3, 4, 1}));
  // Non-tensor data cannot be written in place: another value is refused, an equal one is a
  // no-op.
  TD_EXPECT_THROW_MSG(t.set("s", "another string"), LockedError,
                      {"'s'", "NonTensorData", "locked"});
  TD_EXPECT_THROW_MSG(t.set_non_tensor("s", 3), LockedError, {"'s'", "locked"});
  TD_EXPECT_THROW_MSG(t.update(TensorDict({{"s", "x"}}, {3, 4})), LockedError, {"'s'"});
  EXPECT_EQ(t.get_non_tensor("s"), "a string!");
  t.set("s", "a string!");
  t.unlock_();
  EXPECT_FALSE(t.get_tensordict("n").is_locked());
  t.set("new", at::ones({3, 4}));
  EXPECT_TRUE(t.contains("new"));
}

TEST(TensorDictTest, BatchSizeChanges) {
  TensorDict t({{"a", at::zeros({3, 4, 5})}, {"n", {{"x", at::ones({3, 4, 5, 2})}}}}, {3, 4});
  t.set_batch_size({3, 4, 5});
  EXPECT_EQ(t.batch_size(), at::IntArrayRef({3, 4, 5}));
  // The nested TensorDict is given the longer batch size too, since its leaves fit it.
  EXPECT_EQ(t.get_tensordict("n").batch_size(), at::IntArrayRef({3, 4, 5}));
  // Here the nested leaf does not fit: an error, and nothing changes.
  TensorDict u({{"a", at::zeros({3, 4, 5})}, {"n", {{"x", at::ones({3, 4, 2})}}}}, {3, 4});
  TD_EXPECT_THROW_MSG(u.set_batch_size({3, 4, 5}), BatchSizeError,
                      {"('n', 'x')", "torch.Size([3, 4, 2])", "torch.Size([3, 4, 5])"});
  EXPECT_EQ(u.batch_size(), at::IntArrayRef({3, 4}));  // untouched
  u.set_batch_size({3});
  EXPECT_EQ(u.batch_size(), at::IntArrayRef({3}));
  EXPECT_EQ(u.get_tensordict("n").batch_size(), at::IntArrayRef({3, 4}));
  TensorDict v({{"a", at::zeros({3, 4, 5})}, {"b", at::zeros({3, 4})}}, {});
  v.auto_batch_size_();
  EXPECT_EQ(v.batch_size(), at::IntArrayRef({3, 4}));
  TensorDict w({{"a", at::zeros({3, 4, 5})}, {"n", {{"x", at::ones({3, 4, 5, 6})}}}}, {});
  w.auto_batch_size_();
  EXPECT_EQ(w.batch_size(), at::IntArrayRef({3, 4, 5}));
  EXPECT_EQ(w.get_tensordict("n").batch_size(), at::IntArrayRef({3, 4, 5, 6}));
  w.auto_batch_size_(1);
  EXPECT_EQ(w.batch_size(), at::IntArrayRef({3}));
}

TEST(TensorDictTest, ApplyAndApplyInPlace) {
  TensorDict t = Sample();
  TensorDict plus = t.apply([](const at::Tensor& x) { return x + 1; });
  EXPECT_TRUE(plus.get("a").equal(at::ones({3, 4, 5})));
  EXPECT_TRUE(plus.get({"n", "y", "z"}).equal(at::arange(12).view({3, 4}) + 1));
  EXPECT_EQ(plus.get_non_tensor("s"), "a string!");
  TensorDict data({{"a", at::tensor(1.0)}, {"b", at::tensor(1)}}, {});
  TensorDict floats = data.apply(
      [](const at::Tensor& x) { return x.is_floating_point() ? x : at::Tensor(); });
  EXPECT_TRUE(floats.contains("a"));
  EXPECT_FALSE(floats.contains("b"));
  TensorDict reshaped = t.apply([](const at::Tensor& x) { return x.flatten(0, 1); },
                                std::vector<int64_t>{12});
  EXPECT_EQ(reshaped.batch_size(), at::IntArrayRef({12}));
  EXPECT_EQ(reshaped.get_tensordict({"n", "y"}).batch_size(), at::IntArrayRef({12}));
  TD_EXPECT_THROW_MSG(t.apply([](const at::Tensor& x) -> at::Tensor {
    if (x.dim() == 2) TORCH_CHECK(false, "boom");
    return x;
  }),
                      c10::Error, {"boom", "('n', 'y', 'z')"});
  t.apply_([](const at::Tensor& x) { return x.add_(2); });
  EXPECT_TRUE(t.get("a").equal(at::full({3, 4, 5}, 2.0)));
  t.apply_([](const at::Tensor& x) { return x * 0; });
  EXPECT_TRUE(t.get("a").equal(at::zeros({3, 4, 5})));
  TD_EXPECT_THROW_MSG(t.apply_([](const at::Tensor& x) -> at::Tensor {
    if (x.dim() == 2) throw std::runtime_error("bad leaf");
    return x;
  }),
                      c10::Error, {"bad leaf", "('n', 'y', 'z')", "wrote nothing"});
  EXPECT_TRUE(t.get("a").equal(at::zeros({3, 4, 5})));
}

TEST(TensorDictTest, Equality) {
  TensorDict t = Sample();
  TensorDict c = t.clone();
  EXPECT_TRUE((t == c).all());
  EXPECT_FALSE((t != c).any());
  c.set_({"n", "x"}, at::zeros({3, 4, 2}));
  EXPECT_FALSE((t == c).all());
  EXPECT_TRUE((t != c).any());
  TensorDict eq = t == c;
  EXPECT_EQ(eq.get({"n", "x"}).scalar_type(), at::kBool);
  EXPECT_EQ(eq.get("s").sizes(), at::IntArrayRef({3, 4}));
  c.set("extra", at::ones({3, 4}));
  TD_EXPECT_THROW_MSG(t == c, KeyError, {"only in the second: ['extra']"});
  EXPECT_TRUE(allclose(t, t.clone()));
  TensorDict noisy = t.clone();
  noisy.set_("a", at::full({3, 4, 5}, 1e-3));
  EXPECT_FALSE(allclose(t, noisy));
  EXPECT_TRUE(allclose(t, noisy, AllCloseOptions().atol(1e-2)));
  TD_EXPECT_THROW_MSG(assert_allclose(t, noisy), c10::Error, {"'a'", "max abs difference"});
  TD_EXPECT_THROW_MSG(assert_allclose(t, t.select({"a"})), KeyError, {"only in the first"});
}

TEST(TensorDictTest, PrintsPythonLayout) {
  TensorDict t({{"a", at::zeros({3, 4, 5})}, {"n", {{"c", at::zeros({3, 4, 2})}}}}, {3, 4});
  t.set("s", "hi");
  const std::string expected =
      "TensorDict(\n"
      "    fields={\n"
      "        a: Tensor(shape=torch.Size([3, 4, 5]), device=cpu, dtype=torch.float32, "
      "is_shared=False),\n"
      "        n: TensorDict(\n"
      "            fields={\n"
      "                c: Tensor(shape=torch.Size([3, 4, 2]), device=cpu, dtype=torch.float32, "
      "is_shared=False)},\n"
      "            batch_size=torch.Size([3, 4]),\n"
      "            device=None,\n"
      "            is_shared=False),\n"
      "        s: NonTensorData(data=hi, batch_size=torch.Size([3, 4]), device=None)},\n"
      "    batch_size=torch.Size([3, 4]),\n"
      "    device=None,\n"
      "    is_shared=False)";
  EXPECT_EQ(t.repr(), expected);
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), expected);
  EXPECT_EQ(TensorDict({}, {2}, at::Device("cpu")).repr(),
            "TensorDict(\n    fields={\n    },\n    batch_size=torch.Size([2]),\n"
            "    device=cpu,\n    is_shared=False)");
}

TEST(TensorDictTest, IValueRoundTrip) {
  TensorDict t = Sample();
  t.set_non_tensor("n2", nlohmann::json{1, 2.5, "x", true, nullptr});
  c10::IValue iv = t.to_ivalue();
  ASSERT_TRUE(iv.isGenericDict());
  auto dict = iv.toGenericDict();
  EXPECT_TRUE(dict.at("a").isTensor());
  EXPECT_TRUE(dict.at("n").isGenericDict());
  EXPECT_EQ(dict.at("s").toStringRef(), "a string!");
  TensorDict back = TensorDict::from_ivalue(iv, {3, 4});
  EXPECT_TRUE((back == t).all());
  EXPECT_EQ(back.get_non_tensor("n2"), t.get_non_tensor("n2"));
  TD_EXPECT_THROW_MSG(TensorDict::from_ivalue(c10::IValue(3)), c10::TypeError, {"dict"});
  TD_EXPECT_THROW_MSG(TensorDict::from_ivalue(iv, {5}), BatchSizeError, {"'a'"});
}

TEST(TensorDictTest, StateDictRoundTrip) {
  TensorDict t({{"0", {{"weight", at::ones({4, 3})}, {"bias", at::zeros({4})}}},
                {"1", {{"weight", at::ones({2, 4})}}}},
               {});
  auto sd = t.state_dict();
  ASSERT_EQ(sd.size(), 3u);
  EXPECT_EQ(sd.keys(), (std::vector<std::string>{"0.weight", "0.bias", "1.weight"}));
  TensorDict target = t.clone().apply_([](const at::Tensor& x) { return x.zero_(); });
  target.load_state_dict(sd);
  EXPECT_TRUE((target == t).all());
  torch::OrderedDict<std::string, at::Tensor> bad;
  bad.insert("0.weight", at::ones({4, 3}));
  bad.insert("2.weight", at::ones({1}));
  TD_EXPECT_THROW_MSG(target.load_state_dict(bad), KeyError,
                      {"missing keys [('0', 'bias'), ('1', 'weight')]", "unexpected keys ['2.weight']"});
  torch::OrderedDict<std::string, at::Tensor> wrong;
  wrong.insert("0.weight", at::ones({5, 3}));
  TD_EXPECT_THROW_MSG(target.load_state_dict(wrong, /*strict=*/false), c10::ValueError,
                      {"'0.weight'", "torch.Size([5, 3])", "torch.Size([4, 3])"});
  target.load_state_dict(bad, /*strict=*/false);
  EXPECT_TRUE(target.contains({"2", "weight"}));
}

TEST(TensorDictTest, ToDenseAndContiguous) {
  at::Tensor strided = at::arange(12.0).view({3, 4}).t();  // [4, 3], not contiguous
  TensorDict t({{"a", strided}, {"n", {{"x", at::ones({4, 2})}}}}, {4});
  t.set("s", "text");
  TensorDict d = t.to_dense();
  EXPECT_EQ(d.backend(), "dense");
  EXPECT_FALSE(d.is_same(t));
  EXPECT_TRUE(d.get("a").is_same(strided));  // shared, not copied
  EXPECT_FALSE(d.get_tensordict("n").is_same(t.get_tensordict("n")));
  EXPECT_EQ(d.get_non_tensor("s"), "text");
  TensorDict c = t.contiguous();
  EXPECT_TRUE(c.get("a").is_contiguous());
  EXPECT_TRUE(c.get("a").equal(strided));
  EXPECT_TRUE(c.get({"n", "x"}).is_same(t.get({"n", "x"})));  // already contiguous: shared
}

}  // namespace
}  // namespace td
