// @tensordict//td/backends:all alone: every backend registered, each opens by its id.
#include <string>
#include <vector>

#include "alone/check.h"
#include "td/core/storage.h"

int main() {
  const std::vector<std::string> ids = td::RegisteredStorageBackends();
  for (const char* id : {"dense", "memmap", "shared_memory"}) {
    bool found = false;
    for (const std::string& r : ids) found = found || r == id;
    REQUIRE(found);
  }
  REQUIRE(td::MakeTensorDict("dense", td::StorageSpec().batch_size({2})).backend() == "dense");
  return 0;
}
