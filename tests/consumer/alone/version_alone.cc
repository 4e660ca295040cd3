// @tensordict//td:version alone: the version string and its macros.
#include <string>

#include "alone/check.h"
#include "td/version.h"

int main() {
  REQUIRE(std::string(td::version()) == std::to_string(TD_VERSION_MAJOR) + "." +
                                            std::to_string(TD_VERSION_MINOR) + "." +
                                            std::to_string(TD_VERSION_PATCH));
  REQUIRE(TD_VERSION_AT_LEAST(0, 0, 0));
  return 0;
}
