// Builds against tensordict through CMake (find_package(tensordict) on an installed prefix, or
// add_subdirectory of the source tree): several targets in one program, td::nn among them.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/tensordict.h"
#include "td/nn/common.h"
#include "td/stacking/stacking.h"

int main() {
  td::nn::TensorDictModule double_x([](at::Tensor x) { return x * 2; }, {"x"}, {"y"});
  td::TensorDict a({{"x", at::ones({2, 3})}}, {2});
  td::TensorDict both = td::maybe_dense_stack({double_x(a), double_x(a)}, 0);
  REQUIRE(both.batch_size() == at::IntArrayRef({2, 2}));

  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/consumer_cmake";
  both.memmap(dir);
  td::TensorDict loaded = td::TensorDict::load_memmap(dir);
  REQUIRE(loaded.get("y").equal(at::full({2, 2, 3}, 2.0)));
  REQUIRE(loaded.get("x").equal(at::ones({2, 2, 3})));
  return 0;
}
