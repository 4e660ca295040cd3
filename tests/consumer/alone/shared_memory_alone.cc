// @tensordict//td/backends/shared_memory alone (the memmap backend is not linked: is_memmap
// answers false).
#include <ATen/ATen.h>

#include "alone/check.h"
#include "td/backends/shared_memory/shared_memory.h"

int main() {
  td::TensorDict data({{"x", at::ones({3, 2})}}, {3});
  data.share_memory_();
  REQUIRE(data.is_shared());
  REQUIRE(!data.is_memmap());
  td::TensorDict attached = td::AttachSharedMemory(td::SharedMemoryHandle(data));
  REQUIRE(attached.get("x").equal(data.get("x")));
  return 0;
}
