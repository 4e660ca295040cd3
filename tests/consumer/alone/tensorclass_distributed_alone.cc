// @tensordict//td/tensorclass:distributed alone: a one-rank Gloo group over a FileStore, and
// collectives on a class.
#include <ATen/ATen.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "alone/check.h"
#include "td/tensorclass/distributed.h"

class Step : public td::TensorClass<Step> {
 public:
  TD_TENSORCLASS(Step, (at::Tensor, obs), (std::string, env))
};

int main() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string store =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/tensorclass_distributed_alone";
  namespace dist = td::distributed;
  auto pg = dist::init_process_group(dist::GroupOptions().world_size(1).file_store_path(store));
  Step step(at::ones({2, 2}), "env", {2});
  dist::all_reduce(pg, step, dist::ReduceOp::kSum);
  REQUIRE(step.obs().equal(at::ones({2, 2})));
  std::vector<Step> all = dist::all_gather(pg, step);
  REQUIRE(all.size() == 1 && all[0].env() == "env");
  return 0;
}
