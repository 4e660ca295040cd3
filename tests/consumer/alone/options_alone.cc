// @tensordict//td/core:options alone (header-only options structs).
#include "alone/check.h"
#include "td/core/options.h"
#include "td/core/dict_options.h"
#include "td/core/memmap_options.h"

int main() {
  td::KeysOptions keys = td::KeysOptions().include_nested(true).leaves_only(true);
  REQUIRE(keys.include_nested() && keys.leaves_only());
  td::MemmapOptions memmap = td::MemmapOptions().num_threads(4);
  REQUIRE(memmap.num_threads() == 4);
  return 0;
}
