// @tensordict//td/backends/h5 alone: to_h5 / open / from_h5 and the typed handle.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/backends/h5/h5.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/h5_alone.h5";
  td::TensorDict data({{"x", at::arange(6, at::kFloat).reshape({3, 2})}}, {3});
  td::h5::to_h5(data, path);
  td::h5::H5TensorDict in = td::h5::open(path);
  REQUIRE(in.filename() == path);
  REQUIRE(in.index({at::tensor({2, 0}, at::kLong)}).get("x").equal(data.get("x").index({at::tensor({2, 0}, at::kLong)})));
  REQUIRE(td::h5::from_h5(path).get("x").equal(data.get("x")));
  try {
    td::h5::open(path + ".missing");
    REQUIRE(false);
  } catch (const td::h5::H5Error&) {
  }
  return 0;
}
