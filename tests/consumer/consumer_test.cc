// Builds against tensordict from another Bazel workspace: proves that
// tensordict_deps() declares every repository a consumer needs and that
// tensordict's labels resolve from outside its own workspace. Keep this to
// the most basic API: it tests the packaging, not the library.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "td/core/tensordict.h"

TEST(Consumer, ConstructsTensorDict) {
  td::TensorDict data({{"a", at::ones({3, 4})}}, {3});
  EXPECT_EQ(data.batch_size(), at::IntArrayRef({3}));
  EXPECT_EQ(data.get("a").sum().item<float>(), 12.0f);
}
