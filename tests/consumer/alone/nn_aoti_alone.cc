// @tensordict//td/nn/aoti alone (only where LibTorch has AOTInductor's package loader): a file
// that is no package is a ValueError naming it; the options and the module type link. The
// packages themselves are run by td/nn/aoti/aoti_module_test.cc (they need Python to export).
#include <c10/util/Exception.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "alone/check.h"
#include "td/nn/aoti/aoti_module.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(tmp != nullptr ? tmp : "/tmp") + "/nn_aoti_alone.pt2";
  std::ofstream(path) << "not a zip archive";
  try {
    td::nn::AotiModule policy(path, td::nn::AotiModuleOptions().model_name("model"));
    REQUIRE(false);
  } catch (const c10::ValueError& e) {
    const std::string what = e.what();
    REQUIRE(what.find("cannot load the AOTInductor package") != std::string::npos);
    REQUIRE(what.find(path) != std::string::npos);
  }
  return 0;
}
