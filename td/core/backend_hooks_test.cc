// A program that depends on //td/core alone: the backend-provided members link, the questions
// answer false and the actions throw naming the Bazel target to add (NOTE [ Backend entry
// points ]). No backend library is linked into this test.
#include "td/core/internal/backend_hooks.h"

#include <gtest/gtest.h>

#include "td/core/core.h"
#include "td/core/testing.h"

namespace td {
namespace {

TEST(BackendHooksTest, CoreAloneLinksAndExplainsWhatToAdd) {
  TensorDict t = test::SampleTensorDict();
  EXPECT_FALSE(t.is_memmap());
  EXPECT_FALSE(t.is_shared());
  TD_EXPECT_THROW_MSG(t.memmap("/nonexistent/never-written"), c10::Error,
                      {"TensorDict::memmap", "@tensordict//td/backends/memmap"});
  TD_EXPECT_THROW_MSG(t.memmap_like("/nonexistent/never-written"), c10::Error,
                      {"TensorDict::memmap_like", "//td/backends/memmap"});
  TD_EXPECT_THROW_MSG(t.memmap_("/nonexistent/never-written"), c10::Error,
                      {"TensorDict::memmap_", "//td/backends/memmap"});
  TD_EXPECT_THROW_MSG(TensorDict::load_memmap("/nonexistent/never-written"), c10::Error,
                      {"TensorDict::load_memmap", "//td/backends/memmap"});
  TD_EXPECT_THROW_MSG(t.share_memory_(), c10::Error,
                      {"TensorDict::share_memory_", "@tensordict//td/backends/shared_memory"});
  EXPECT_FALSE(t.is_locked());  // nothing happened to it
}

// Under lazy_legacy() the shape ops and td::stack need the lazy backends; without them they say
// which target to link, and nothing changes once the switch is off again.
TEST(BackendHooksTest, LazyLegacyWithoutTheLazyBackendsNamesThem) {
  TensorDict t = test::SampleTensorDict();  // batch size [3, 4]
  {
    SetLazyLegacy lazy(true);
    EXPECT_TRUE(lazy_legacy());
    TD_EXPECT_THROW_MSG(t.permute({1, 0}), c10::Error,
                        {"TensorDict::permute under lazy_legacy()", "//td/backends/lazy_view"});
    TD_EXPECT_THROW_MSG(t.transpose(0, 1), c10::Error, {"transpose", "//td/backends/lazy_view"});
    TD_EXPECT_THROW_MSG(t.unsqueeze(0), c10::Error, {"unsqueeze", "//td/backends/lazy_view"});
    TD_EXPECT_THROW_MSG(t.view({12}), c10::Error, {"view", "//td/backends/lazy_view"});
    TD_EXPECT_THROW_MSG(stack({t, t}), c10::Error,
                        {"td::stack under lazy_legacy()", "//td/backends/lazy_stack"});
    // Argument errors come first, in the ops' own words.
    EXPECT_THROW(t.permute({0, 0}), c10::ValueError);
    // No size-1 dim: nothing to squeeze, no view needed. The same batch size: the TensorDict.
    EXPECT_EQ(t.squeeze().batch_size(), t.batch_size());
    EXPECT_TRUE(t.view({3, 4}).is_same(t));
  }
  EXPECT_FALSE(lazy_legacy());
  EXPECT_EQ(t.permute({1, 0}).backend(), "dense");
  EXPECT_EQ(stack({t, t}).batch_size(), at::IntArrayRef({2, 3, 4}));
}

TEST(BackendHooksTest, DenseIsRegisteredByTheCore) {
  EXPECT_EQ(MakeTensorDict("dense", StorageSpec().batch_size({2})).backend(), "dense");
  EXPECT_EQ(TensorDict({}, {2}).backend(), "dense");
}

bool AnswerTrue(const TensorDict&) { return true; }
bool AnswerFalse(const TensorDict&) { return false; }

// The generic slot: the first registration wins, nullptr is refused, get() is nullptr until one.
TEST(BackendHooksTest, TheFirstRegistrationWins) {
  static internal::BackendHook<bool(const TensorDict&)> hook("TensorDict::is_test", "test");
  EXPECT_EQ(hook.get(), nullptr);
  TD_EXPECT_THROW_MSG(hook.require(), c10::Error,
                      {"TensorDict::is_test needs the test backend", "//td/backends/test"});
  EXPECT_THROW(hook.Register(nullptr), c10::Error);
  EXPECT_TRUE(hook.Register(&AnswerTrue));
  EXPECT_FALSE(hook.Register(&AnswerFalse));
  EXPECT_TRUE(hook.require()(TensorDict()));
}

}  // namespace
}  // namespace td
