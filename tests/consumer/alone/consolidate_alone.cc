// @tensordict//td/consolidate alone: consolidate, members over its one buffer and the consolidated file.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/consolidate/consolidate.h"
#include "td/consolidate/file.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string file = std::string(tmp != nullptr ? tmp : "/tmp") + "/consolidate_alone.td";
  td::TensorDict data({{"a", at::ones({3, 2})}, {"n", {{"b", at::zeros({3})}}}}, {3});
  td::TensorDict c = td::consolidate(data);
  REQUIRE(td::is_consolidated(c));
  td::TensorDict twice = c * 2;  // one kernel over the buffer
  REQUIRE(twice.get("a").storage().is_alias_of(twice.get({"n", "b"}).storage()));
  REQUIRE(twice.get("a").equal(data.get("a") * 2));
  td::save_consolidated(c, file);
  td::TensorDict back = td::load_consolidated(file);
  REQUIRE(back.get({"n", "b"}).equal(data.get({"n", "b"})));
  return 0;
}
