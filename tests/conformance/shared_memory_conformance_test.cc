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
  static TensorDict Make() {
    TensorDict t = MakeTensorDict("shared_memory", StorageSpec().batch_size(Batch()));
    t.update(ReferenceContent());
    return t;
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(SharedMemory, Conformance, ::testing::Types<SharedMemoryTraits>);

}  // namespace
}  // namespace conformance
}  // namespace td
