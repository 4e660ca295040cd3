// @tensordict//td/core alone: every TensorDict member links, including those whose work belongs
// to a backend that is not linked here (is_memmap / is_shared answer false; memmap and
// share_memory_ throw naming the target to add). td::stack / td::cat come with the core.
#include <ATen/ATen.h>

#include <string>

#include "alone/check.h"
#include "td/core/tensordict.h"

int main() {
  td::TensorDict data({{"obs", at::ones({4, 3})}, {"next", {{"r", at::zeros({4})}}}}, {4});
  REQUIRE(!data.is_memmap());
  REQUIRE(!data.is_shared());
  td::TensorDict both = td::cat({data, data}, 0);
  REQUIRE(both.batch_size()[0] == 8);
  REQUIRE(td::stack({data, data}, 0).batch_size()[1] == 4);
  try {
    data.memmap("/nonexistent-consumer-dir");
    REQUIRE(false);
  } catch (const c10::Error& e) {
    REQUIRE(std::string(e.what()).find("@tensordict//td/backends/memmap") != std::string::npos);
  }
  try {
    data.share_memory_();
    REQUIRE(false);
  } catch (const c10::Error& e) {
    REQUIRE(std::string(e.what()).find("@tensordict//td/backends/shared_memory") !=
          std::string::npos);
  }
  return 0;
}
