// The conformance suite on the memmap backend: every TensorDict lives in its own directory of
// memory-mapped files (written by memmap(), then unlocked so that structural tests can run).
#include <stdlib.h>

#include "td/backends/memmap/memmap_storage.h"
#include "tests/conformance/conformance_suite.h"

namespace td {
namespace conformance {
namespace {

struct MemmapTraits {
  static constexpr const char* kBackendId = "memmap";
  static Capabilities capabilities() {
    return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kReplaceEntries |
           Capability::kBatchResize | Capability::kCrossProcess;
  }
  static TensorDict Make() {
    std::string dir = ::testing::TempDir() + "/memmap-conformance-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    TensorDict t = ReferenceContent().memmap(dir + "/td");
    t.unlock_();
    return t;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Memmap, Conformance, ::testing::Types<MemmapTraits>);

}  // namespace
}  // namespace conformance
}  // namespace td
