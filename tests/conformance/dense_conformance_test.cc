// The conformance suite on the dense (default, in-memory) backend.
#include "td/core/dense_storage.h"
#include "tests/conformance/conformance_suite.h"

namespace td {
namespace conformance {
namespace {

struct DenseTraits {
  static constexpr const char* kBackendId = "dense";
  static Capabilities capabilities() {
    return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kReplaceEntries |
           Capability::kBatchResize;
  }
  static TensorDict Make(const TensorDict& content) { return content; }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Dense, Conformance, ::testing::Types<DenseTraits>);

}  // namespace
}  // namespace conformance
}  // namespace td
