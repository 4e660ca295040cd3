// @tensordict//td/backends/memmap/archive alone: pack_memmap / load_archive / unpack_memmap, and
// TensorDict::load_memmap of an archive (the slot this target fills).
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/backends/memmap/archive/archive.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/memmap_archive_alone";
  td::TensorDict data({{"x", at::arange(6, at::kFloat).reshape({3, 2})}}, {3});
  data.memmap(dir);
  td::pack_memmap(dir, dir + ".tdz");
  REQUIRE(td::is_memmap_archive(dir + ".tdz"));
  REQUIRE(td::load_archive(dir + ".tdz").get("x").equal(data.get("x")));
  REQUIRE(td::TensorDict::load_memmap(dir + ".tdz").get("x").equal(data.get("x")));
  td::unpack_memmap(dir + ".tdz", dir + "_copy");
  REQUIRE(td::TensorDict::load_memmap(dir + "_copy").get("x").equal(data.get("x")));
  return 0;
}
