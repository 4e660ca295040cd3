#include "td/distributed/multiprocess_testing.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "td/core/errors.h"

namespace td {
namespace distributed {
namespace test {

std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/td_distributed_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) TD_FAIL(c10::Error, "mkdtemp failed for ", tmpl);
  return tmpl;
}

std::vector<std::string> RunRanks(const RunOptions& options,
                                  const std::function<void(int, const ProcessGroupPtr&)>& fn) {
  RunOptions o = options;
  if (!o.deadline()) o.deadline(kDefaultDeadline);
  const std::vector<RankExit> exits = spawn(o, [&fn](int rank, const ProcessGroupPtr& pg) {
    fn(rank, pg);
    return ::testing::Test::HasFailure() ? 2 : 0;
  });
  std::vector<std::string> status;
  for (const RankExit& e : exits) status.push_back(e.to_string());
  return status;
}

void ExpectAllPassed(const std::vector<std::string>& status) {
  for (size_t r = 0; r < status.size(); ++r) {
    EXPECT_EQ(status[r], "ok") << "rank " << r;
  }
}

bool AllEqual(const TensorDict& td, double value) {
  for (const auto& [key, v] : td.items(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!v.is_tensor()) continue;
    if (!at::equal(v.tensor(), at::full_like(v.tensor(), value))) return false;
  }
  return true;
}

}  // namespace test
}  // namespace distributed
}  // namespace td
