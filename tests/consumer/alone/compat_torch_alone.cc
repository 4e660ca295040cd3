// @tensordict//td/compat:torch alone.
#include <string>

#include "alone/check.h"
#include "td/compat/torch.h"

int main() {
  REQUIRE(td::compat::kTorchVersionMajor == TORCH_VERSION_MAJOR);
  const auto loc = td::compat::SourceLoc::current();
  const c10::Error e = td::compat::MakeError<c10::Error>(loc, "message");
  REQUIRE(std::string(e.what_without_backtrace()) == "message");
  REQUIRE(std::string(e.what()).find("compat_torch_alone.cc:") != std::string::npos);
  return 0;
}
