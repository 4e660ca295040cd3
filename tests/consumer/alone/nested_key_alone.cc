// @tensordict//td/core:nested_key alone.
#include "alone/check.h"
#include "td/core/nested_key.h"

int main() {
  td::NestedKey k({"obs", "pixels"});
  REQUIRE(k.size() == 2);
  REQUIRE(k.repr() == "('obs', 'pixels')");
  REQUIRE(td::NestedKey("a") == td::NestedKey({"a"}));
  return 0;
}
