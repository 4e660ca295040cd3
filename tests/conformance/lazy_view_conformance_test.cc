// The conformance suite on the lazy view backends: each traits type builds a source holding the
// content transformed by the inverse op (and, for index views, surrounded by other rows), then
// views it so that the view holds exactly the content.
#include "td/backends/lazy_view/lazy_view.h"
#include "tests/conformance/conformance_suite.h"

namespace td {
namespace conformance {
namespace {

using at::indexing::Slice;

Capabilities PartialViewCaps() {
  return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kLazy;
}
Capabilities BijectiveViewCaps() { return PartialViewCaps() | Capability::kReplaceEntries; }

// Rows -7 around `content` along dim 0: source batch [6, 3, 2, 1].
TensorDict Padded(const TensorDict& content) {
  return content.apply(
      [](const at::Tensor& t) {
        at::Tensor pad = at::full_like(t.narrow(0, 0, 1), -7);
        return at::cat({pad, t, pad});
      },
      std::vector<int64_t>{6, 3, 2, 1});
}

struct IndexSliceViewTraits {
  static constexpr const char* kBackendId = "index_view";
  // Does not cover every element of its source: a NonTensorStack cannot be set through it.
  static constexpr bool kHoldsNonTensorStacks = false;
  static Capabilities capabilities() { return PartialViewCaps(); }
  static TensorDict Make(const TensorDict& content) {
    return index_view(Padded(content), {Slice(1, 5)});
  }
};

struct IndexIntViewTraits {
  static constexpr const char* kBackendId = "index_view";
  // Does not cover every element of its source: a NonTensorStack cannot be set through it.
  static constexpr bool kHoldsNonTensorStacks = false;
  static Capabilities capabilities() { return PartialViewCaps(); }
  static TensorDict Make(const TensorDict& content) {
    return index_view(
        stack({content.apply([](const at::Tensor& t) { return t * 0 - 1; }), content}, 0), {1});
  }
};

// Advanced indexing: get() returns copies, so every write must go through the view.
struct IndexTensorViewTraits {
  static constexpr const char* kBackendId = "index_view";
  // Does not cover every element of its source: a NonTensorStack cannot be set through it.
  static constexpr bool kHoldsNonTensorStacks = false;
  static Capabilities capabilities() { return PartialViewCaps(); }
  static TensorDict Make(const TensorDict& content) {
    return index_view(Padded(content), {at::tensor({1, 2, 3, 4}, at::kLong)});
  }
};

struct PermuteViewTraits {
  static constexpr const char* kBackendId = "permute_view";
  static Capabilities capabilities() { return BijectiveViewCaps(); }
  static TensorDict Make(const TensorDict& content) {
    // view dim i = source dim dims[i]; the source is the content permuted by the inverse.
    const std::vector<int64_t> dims = {2, 0, 3, 1};
    return permute_view(content.permute({1, 3, 0, 2}).contiguous(), dims);
  }
};

struct TransposeViewTraits {
  static constexpr const char* kBackendId = "permute_view";
  static Capabilities capabilities() { return BijectiveViewCaps(); }
  static TensorDict Make(const TensorDict& content) {
    return transpose_view(content.transpose(0, 2).contiguous(), 0, 2);
  }
};

struct UnsqueezeViewTraits {
  static constexpr const char* kBackendId = "unsqueeze_view";
  static Capabilities capabilities() { return BijectiveViewCaps(); }
  static TensorDict Make(const TensorDict& content) {
    return unsqueeze_view(content.squeeze(3), 3);
  }
};

struct SqueezeViewTraits {
  static constexpr const char* kBackendId = "squeeze_view";
  static Capabilities capabilities() { return BijectiveViewCaps(); }
  static TensorDict Make(const TensorDict& content) {
    return squeeze_view(content.unsqueeze(1), 1);
  }
};

struct ReshapeViewTraits {
  static constexpr const char* kBackendId = "reshape_view";
  static Capabilities capabilities() { return BijectiveViewCaps(); }
  static TensorDict Make(const TensorDict& content) {
    return reshape_view(content.reshape({12, 2}).clone(), {4, 3, 2, 1});
  }
};

using LazyViewTypes =
    ::testing::Types<IndexSliceViewTraits, IndexIntViewTraits, IndexTensorViewTraits,
                     PermuteViewTraits, TransposeViewTraits, UnsqueezeViewTraits,
                     SqueezeViewTraits, ReshapeViewTraits>;
INSTANTIATE_TYPED_TEST_SUITE_P(LazyView, Conformance, LazyViewTypes);

}  // namespace
}  // namespace conformance
}  // namespace td
