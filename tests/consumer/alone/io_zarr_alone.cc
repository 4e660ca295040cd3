// @tensordict//td/io:zarr alone: a Zarr store written and read back.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/io/zarr.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string store = std::string(tmp != nullptr ? tmp : "/tmp") + "/io_zarr_alone.zarr";
  td::TensorDict data({{"a", at::ones({3, 2})}, {"n", {{"b", at::arange(3)}}}}, {3});
  td::to_zarr(data, store);
  td::TensorDict back = td::from_zarr(store);
  REQUIRE(back.batch_size().vec() == std::vector<int64_t>{3});
  REQUIRE(back.get({"n", "b"}).equal(data.get({"n", "b"})));
  return 0;
}
