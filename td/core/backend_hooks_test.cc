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
