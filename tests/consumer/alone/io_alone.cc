// @tensordict//td/io alone: save / load through a .tdz archive, to_dict / from_dict.
#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "alone/check.h"
#include "td/io/dict.h"
#include "td/io/io.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string file = std::string(tmp != nullptr ? tmp : "/tmp") + "/io_alone.tdz";
  td::TensorDict data({{"a", at::ones({3, 2})}, {"n", {{"b", at::arange(3)}}}}, {3});
  td::save(data, file);
  REQUIRE(std::filesystem::is_regular_file(file));  // one zip file, not a directory
  td::TensorDict back = td::load(file);
  REQUIRE(back.get({"n", "b"}).equal(data.get({"n", "b"})));
  td::TensorDict again = td::from_dict(td::to_dict(back), td::FromDictOptions().auto_batch_size(true));
  REQUIRE(again.batch_size().vec() == std::vector<int64_t>{3});
  return 0;
}
