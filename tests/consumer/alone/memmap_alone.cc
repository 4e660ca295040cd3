// @tensordict//td/backends/memmap alone: TensorDict::memmap / load_memmap / is_memmap.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/backends/memmap/memory_mapped_tensor.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/memmap_alone";
  td::TensorDict data({{"x", at::arange(6, at::kFloat).reshape({3, 2})}}, {3});
  td::TensorDict mapped = data.memmap(dir);
  REQUIRE(mapped.is_memmap());
  td::TensorDict loaded =
      td::TensorDict::load_memmap(dir, td::LoadMemmapOptions().mode(td::MemmapMode::kReadOnly));
  REQUIRE(loaded.get("x").equal(data.get("x")));
  REQUIRE(!loaded.is_shared());
  try {
    td::TensorDict::load_memmap(dir + "/missing");
    REQUIRE(false);
  } catch (const td::MemmapError&) {
  }
  return 0;
}
