// @tensordict//td/executor alone.
#include <atomic>

#include "alone/check.h"
#include "td/executor/executor.h"

int main() {
  td::parallel::set_num_threads(2);
  REQUIRE(td::parallel::num_threads() == 2);
  std::atomic<int64_t> sum{0};
  td::parallel::parallel_for(100, 2, [&](int64_t i) { sum += i; });
  REQUIRE(sum.load() == 4950);
  return 0;
}
