// The conformance suite on the lazy_stack backend: the reference content split into members along
// one batch dim and stacked back lazily (dim 0, and dim 2 to exercise a stack dim inside the batch).
#include "td/backends/lazy_stack/lazy_stack.h"
#include "tests/conformance/conformance_suite.h"

namespace td {
namespace conformance {
namespace {

template <int64_t kDim>
struct LazyStackTraits {
  static constexpr const char* kBackendId = "lazy_stack";
  static Capabilities capabilities() {
    return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kLazy |
           Capability::kReplaceEntries | Capability::kBatchResize;
  }
  static TensorDict Make(const TensorDict& content) {
    std::vector<int64_t> member_batch = content.batch_size().vec();
    member_batch.erase(member_batch.begin() + kDim);
    std::vector<TensorDict> members;
    for (int64_t i = 0; i < content.batch_size()[kDim]; ++i) {
      members.push_back(content.apply(
          [i](const at::Tensor& t) { return t.select(kDim, i).clone(); }, member_batch));
    }
    return lazy_stack(members, kDim);
  }
};

using LazyStackTypes = ::testing::Types<LazyStackTraits<0>, LazyStackTraits<2>>;
INSTANTIATE_TYPED_TEST_SUITE_P(LazyStack, Conformance, LazyStackTypes);

}  // namespace
}  // namespace conformance
}  // namespace td
