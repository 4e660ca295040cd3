// A program that depends on //td/core alone: the backend-provided members link, the questions
// answer false and the actions throw naming the Bazel target to add (NOTE [ Backend entry
// points ]). No backend library is linked into this test.
#include "td/core/backend_hooks.h"

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

TEST(BackendHooksTest, HooksMustBeComplete) {
  EXPECT_THROW(RegisterMemmapHooks(MemmapHooks()), c10::Error);
  EXPECT_THROW(RegisterSharedMemoryHooks(SharedMemoryHooks()), c10::Error);
}

}  // namespace
}  // namespace td
