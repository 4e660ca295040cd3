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
  static TensorDict Make(const TensorDict& content) {
    std::string dir = ::testing::TempDir() + "/memmap-conformance-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    TensorDict t = content.memmap(dir + "/td");
    t.unlock_();
    return t;
  }
};

// The backend with the fewest capabilities: a directory opened with MemmapMode::kReadOnly. Only
// the batch size changes (in memory); every write is refused.
struct ReadOnlyMemmapTraits {
  static constexpr const char* kBackendId = "memmap";
  static Capabilities capabilities() { return Capability::kBatchResize; }
  static TensorDict Make(const TensorDict& content) {
    std::string dir = ::testing::TempDir() + "/memmap-ro-conformance-XXXXXX";
    if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    content.memmap(dir + "/td");
    TensorDict t =
        TensorDict::load_memmap(dir + "/td", LoadMemmapOptions().mode(MemmapMode::kReadOnly));
    t.unlock_();
    return t;
  }
};

using MemmapTypes = ::testing::Types<MemmapTraits, ReadOnlyMemmapTraits>;
INSTANTIATE_TYPED_TEST_SUITE_P(Memmap, Conformance, MemmapTypes);

}  // namespace
}  // namespace conformance
}  // namespace td
