// @tensordict//td/core:errors alone.
#include <string>

#include "alone/check.h"
#include "td/core/errors.h"

int main() {
  try {
    TD_FAIL(td::KeyError, "key ", std::string("'a'"), " not found");
    REQUIRE(false);
  } catch (const td::KeyError& e) {
    REQUIRE(std::string(e.what_without_backtrace()) == "key 'a' not found");
    // The location of the TD_FAIL above, as the consumer's build spells this file.
    REQUIRE(std::string(e.what()).find("errors_alone.cc:9") != std::string::npos);
  }
  return 0;
}
