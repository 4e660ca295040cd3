// @tensordict//td/distributed alone: a one-rank Gloo group over a FileStore, and a collective.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>

#include "alone/check.h"
#include "td/distributed/distributed.h"

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string store = std::string(tmp != nullptr ? tmp : "/tmp") + "/distributed_alone";
  namespace dist = td::distributed;
  auto pg = dist::init_process_group(dist::GroupOptions().world_size(1).file_store_path(store));
  td::TensorDict grads({{"w", at::ones({2, 2})}}, {});
  dist::all_reduce(pg, grads, dist::ReduceOp::kSum);
  REQUIRE(grads.get("w").equal(at::ones({2, 2})));
  return 0;
}
