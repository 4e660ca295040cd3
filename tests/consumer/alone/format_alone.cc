// @tensordict//td/format alone: the registry of format drivers, with a driver of its own.
#include <ATen/ATen.h>

#include <string>

#include "alone/check.h"
#include "td/format/format.h"

TD_REGISTER_FORMAT_DRIVER([] {
  td::format::Driver d;
  d.id = "echo";
  d.summary = "bytes that name a leaf count";
  d.traits.dtypes = td::format::EveryDtype();
  d.encode = [](const td::TensorDict& td) { return std::to_string(td.keys().size()); };
  d.decode = [](const std::string& bytes) {
    return td::TensorDict({{"n", at::full({}, std::stod(bytes))}}, {});
  };
  return d;
}());

int main() {
  REQUIRE(td::format::RegisteredDrivers() == std::vector<std::string>{"echo"});
  const td::format::Driver& echo = td::format::GetDriver("echo");
  REQUIRE(!echo.is_path_format());
  td::TensorDict data({{"a", at::ones({3})}, {"b", at::zeros({3})}}, {3});
  REQUIRE(echo.decode(echo.encode(data)).get("n").item<double>() == 2.0);
  REQUIRE(td::format::DriverForSuffix("x.tdz") == nullptr);
  return 0;
}
