// @tensordict//td/io:schema alone: a zero-filled TensorDict from a schema, dense and memmap.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/io/schema.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/io_schema_alone";
  const td::Schema schema = {{"obs", {{4}, at::kByte}}, {{"n", "r"}, {{}, at::kFloat}}};
  td::TensorDict dense = td::from_schema(schema, td::FromSchemaOptions().batch_size({3}));
  REQUIRE(dense.get("obs").sizes().vec() == (std::vector<int64_t>{3, 4}));
  td::TensorDict mm = td::from_schema(
      schema, td::FromSchemaOptions().batch_size({3}).storage(td::SchemaStorage::kMemmap).prefix(dir));
  REQUIRE(mm.is_memmap());
  return 0;
}
