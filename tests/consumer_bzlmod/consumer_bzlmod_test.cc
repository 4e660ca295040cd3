// Builds against tensordict as a Bazel module (bazel_dep + the `tensordict` extension): proves
// that the module declares every repository a consumer needs and that its labels resolve from
// another module. Several targets in one program: core, memmap, stacking and td::nn.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/tensordict.h"
#include "td/nn/common.h"
#include "td/stacking/stacking.h"

TEST(ConsumerBzlmod, ModuleStackMemmapRoundTrip) {
  td::nn::TensorDictModule double_x([](at::Tensor x) { return x * 2; }, {"x"}, {"y"});
  td::TensorDict a({{"x", at::ones({2, 3})}}, {2});
  td::TensorDict both = td::maybe_dense_stack({double_x(a), double_x(a)}, 0);
  ASSERT_EQ(both.batch_size(), at::IntArrayRef({2, 2}));

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/consumer_bzlmod";
  both.memmap(dir);
  td::TensorDict loaded = td::TensorDict::load_memmap(dir);
  EXPECT_TRUE(loaded.get("y").equal(at::full({2, 2, 3}, 2.0)));
  EXPECT_TRUE(loaded.get("x").equal(at::ones({2, 2, 3})));
}
