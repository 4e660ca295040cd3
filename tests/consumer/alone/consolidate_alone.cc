// @tensordict//td/consolidate alone: consolidate, the one-kernel ops and the consolidated file.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/consolidate/consolidate.h"
#include "td/consolidate/consolidated_ops.h"
#include "td/consolidate/file.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string file = std::string(tmp != nullptr ? tmp : "/tmp") + "/consolidate_alone.td";
  td::TensorDict data({{"a", at::ones({3, 2})}, {"n", {{"b", at::zeros({3})}}}}, {3});
  td::TensorDict c = td::consolidate(data);
  REQUIRE(td::is_consolidated(c));
  td::TensorDict twice = td::consolidated::mul(c, 2);
  REQUIRE(td::is_consolidated(twice));
  REQUIRE(twice.get("a").equal(data.get("a") * 2));
  td::save_consolidated(c, file);
  td::TensorDict back = td::load_consolidated(file);
  REQUIRE(back.get({"n", "b"}).equal(data.get({"n", "b"})));
  return 0;
}
