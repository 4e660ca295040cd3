// The conformance suite on the shared_memory backend: every tensor in its own memfd segment.
#include "td/backends/shared_memory/shared_memory.h"
#include "tests/conformance/conformance_suite.h"

namespace td {
namespace conformance {
namespace {

struct SharedMemoryTraits {
  static constexpr const char* kBackendId = "shared_memory";
  static Capabilities capabilities() {
    return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kReplaceEntries |
           Capability::kBatchResize | Capability::kCrossProcess;
  }
  static TensorDict Make(const TensorDict& content) {
    TensorDict t =
        MakeTensorDict("shared_memory", StorageSpec().batch_size(content.batch_size().vec()));
    t.update(content);
    return t;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(SharedMemory, Conformance, ::testing::Types<SharedMemoryTraits>);

}  // namespace
}  // namespace conformance
}  // namespace td
