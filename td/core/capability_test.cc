// The core enforces the capability flags a backend declares (NOTE [ Storage interface ]): a
// backend lacking one is never asked to do it, and the caller gets an error naming the call,
// the backend and the flag, with nothing changed.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "td/core/internal/entry_list.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace {

// Dense storage declaring only `caps`; counts the writes that reach it.
class LimitedStorage final : public EntryStorage {
 public:
  LimitedStorage(std::vector<int64_t> batch_size, Capabilities caps)
      : EntryStorage(std::move(batch_size), std::nullopt), caps_(caps) {}
  std::string_view backend_id() const override { return "limited"; }
  Capabilities capabilities() const override { return caps_; }
  void set(std::string_view key, Value value) override {
    ++writes;
    entries().set(key, std::move(value));
  }
  bool erase(std::string_view key) override { return entries().erase(key); }
  void set_batch_size(std::vector<int64_t> batch_size) override {
    ++writes;
    Storage::set_batch_size(std::move(batch_size));
  }
  int writes = 0;

 private:
  Capabilities caps_;
};

constexpr Capabilities kAll = Capability::kInPlaceWrite | Capability::kNewKeys |
                              Capability::kReplaceEntries | Capability::kBatchResize;

// The storage is filled directly (a backend lacking kNewKeys could not be filled through set()).
std::pair<TensorDict, LimitedStorage*> Limited(Capabilities caps) {
  auto s = std::make_shared<LimitedStorage>(std::vector<int64_t>{2}, caps);
  LimitedStorage* raw = s.get();
  raw->set("a", at::zeros({2, 3}));
  raw->set("n", TensorDict({{"x", at::zeros({2})}}, {2}));
  raw->writes = 0;
  return {TensorDict(std::move(s)), raw};
}

TEST(CapabilityTest, WithoutReplaceEntriesKindAndShapeStay) {
  auto [t, s] = Limited(kAll.without(Capability::kReplaceEntries));
  t.set("a", at::ones({2, 3}, at::kDouble));  // same kind and shape: the backend's business
  EXPECT_EQ(s->writes, 1);
  TD_EXPECT_THROW_MSG(t.set("a", at::ones({2, 4})), ValueError,
                      {"set:", "'a'", "'limited'", "replace_entries",
                       "Tensor of shape torch.Size([2, 3])", "torch.Size([2, 4])"});
  TD_EXPECT_THROW_MSG(t.set("a", TensorDict({}, {2})), ValueError,
                      {"'a'", "TensorDict of batch size torch.Size([2])"});
  TD_EXPECT_THROW_MSG(t.set("n", at::zeros({2})), ValueError, {"'n'", "replace_entries"});
  TD_EXPECT_THROW_MSG(t.set("n", TensorDict({}, {2, 1})), ValueError,
                      {"'n'", "TensorDict of batch size torch.Size([2, 1])"});
  EXPECT_EQ(s->writes, 1);  // none of the refused writes reached the storage
  EXPECT_EQ(t.get("a").sizes(), at::IntArrayRef({2, 3}));
  t.set("new", at::zeros({2, 5}));  // a new key is kNewKeys' business
  EXPECT_EQ(s->writes, 2);
}

TEST(CapabilityTest, WithoutBatchResizeTheBatchSizeStays) {
  auto [t, s] = Limited(kAll.without(Capability::kBatchResize));
  t.set_batch_size({2});  // unchanged: allowed
  s->writes = 0;
  TD_EXPECT_THROW_MSG(t.set_batch_size({}), BatchSizeError,
                      {"set_batch_size", "'limited'", "batch_resize", "torch.Size([2])",
                       "torch.Size([])", "to_dense()"});
  TD_EXPECT_THROW_MSG(t.auto_batch_size_(0), BatchSizeError,
                      {"auto_batch_size_", "'limited'", "batch_resize"});
  EXPECT_EQ(t.batch_size(), at::IntArrayRef({2}));
  EXPECT_EQ(s->writes, 0);
}

// A level lacking the flag below a dense root: the root is refused before anything changes.
TEST(CapabilityTest, BatchResizeIsCheckedOnEveryLevelFirst) {
  auto storage = std::make_shared<LimitedStorage>(std::vector<int64_t>{2},
                                                  kAll.without(Capability::kBatchResize));
  LimitedStorage* s = storage.get();
  TensorDict inner(std::move(storage));
  inner.set("a", at::zeros({2, 3}));
  TensorDict root({{"sub", inner}}, {2});
  s->writes = 0;
  // The nested level would have to become [2, 3] too: refused before the root changes.
  TD_EXPECT_THROW_MSG(root.set_batch_size({2, 3}), BatchSizeError,
                      {"'limited'", "batch_resize", "torch.Size([2, 3])"});
  EXPECT_EQ(root.batch_size(), at::IntArrayRef({2}));
  EXPECT_EQ(inner.batch_size(), at::IntArrayRef({2}));
  EXPECT_EQ(s->writes, 0);
  root.set_batch_size({});  // a prefix of the nested level's batch size: that level is kept
  EXPECT_EQ(inner.batch_size(), at::IntArrayRef({2}));
}

TEST(CapabilityTest, WithoutNewKeysNoKeyIsAdded) {
  auto [t, s] = Limited(kAll.without(Capability::kNewKeys));
  TD_EXPECT_THROW_MSG(t.set("b", at::zeros({2})), KeyError, {"'b'", "'limited'", "new keys"});
  EXPECT_FALSE(t.contains("b"));
  EXPECT_EQ(s->writes, 0);
}

TEST(CapabilityTest, WithoutInPlaceWriteIndexPutIsRefused) {
  auto [t, s] = Limited(kAll.without(Capability::kInPlaceWrite));
  TD_EXPECT_THROW_MSG(t.index_put_({0}, TensorDict({{"a", at::ones({3})}}, {})), TypeError,
                      {"index_put_", "'limited'", "in-place"});
  EXPECT_TRUE(t.get("a").equal(at::zeros({2, 3})));
}

}  // namespace
}  // namespace td
