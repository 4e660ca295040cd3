// @tensordict//td/core:errors alone.
#include <string>

#include "alone/check.h"
#include "td/core/errors.h"

int main() {
  try {
    TD_FAIL(td::KeyError, "key ", std::string("'a'"), " not found");
    REQUIRE(false);
  } catch (const td::KeyError& e) {
    REQUIRE(std::string(e.what()).find("key 'a' not found") != std::string::npos);
  }
  return 0;
}
