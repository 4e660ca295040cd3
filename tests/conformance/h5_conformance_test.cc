// The conformance suite on the h5 backend: the content written with td::h5::to_h5 and
// opened read-write; then the same content as an index of a larger file (the rows of a slice, and
// of an index tensor in another order), which reads and writes the file through a selection.
#include <ATen/ATen.h>
#include <stdlib.h>

#include "td/backends/h5/h5.h"
#include "tests/conformance/conformance_suite.h"

namespace td {
namespace conformance {
namespace {

std::string FreshH5Path() {
  std::string dir = ::testing::TempDir() + "/h5-conformance-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  return dir + "/td.h5";
}

Capabilities H5Caps() {
  return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kLazy;
}

struct H5Traits {
  static constexpr const char* kBackendId = "h5";
  // HDF5 (as upstream's PersistentTensorDict) has no form for a NonTensorStack, and stores
  // MetaData as its value.
  static constexpr bool kHoldsNonTensorStacks = false;
  static constexpr bool kKeepsMetaData = false;
  static Capabilities capabilities() {
    return H5Caps() | Capability::kReplaceEntries | Capability::kBatchResize;
  }
  static TensorDict Make(const TensorDict& content) { return h5::to_h5(content, FreshH5Path()); }
};

// Rows 1..4 of a file of 6 rows whose rows 0 and 5 hold other values.
struct H5SliceTraits {
  static constexpr const char* kBackendId = "h5";
  // HDF5 (as upstream's PersistentTensorDict) has no form for a NonTensorStack, and stores
  // MetaData as its value.
  static constexpr bool kHoldsNonTensorStacks = false;
  static constexpr bool kKeepsMetaData = false;
  static Capabilities capabilities() { return H5Caps(); }
  static TensorDict Make(const TensorDict& content) {
    TensorDict pad = content.index({at::indexing::Slice(0, 1)}).apply(
        [](const at::Tensor& x) { return x * 0 - 5; });
    TensorDict file = h5::to_h5(cat({pad, content, pad}, 0), FreshH5Path());
    return file.index({at::indexing::Slice(1, 5)});
  }
};

// The reference rows stored in the order {2, 0, 3, 1}, read back through an index tensor.
struct H5ListTraits {
  static constexpr const char* kBackendId = "h5";
  // HDF5 (as upstream's PersistentTensorDict) has no form for a NonTensorStack, and stores
  // MetaData as its value.
  static constexpr bool kHoldsNonTensorStacks = false;
  static constexpr bool kKeepsMetaData = false;
  static Capabilities capabilities() { return H5Caps(); }
  static TensorDict Make(const TensorDict& content) {
    const at::Tensor stored = at::tensor({1, 3, 0, 2}, at::kLong);  // file row of each ref row
    TensorDict file =
        h5::to_h5(content.index({at::tensor({2, 0, 3, 1}, at::kLong)}), FreshH5Path());
    return file.index({stored});
  }
};

using H5Types = ::testing::Types<H5Traits, H5SliceTraits, H5ListTraits>;
INSTANTIATE_TYPED_TEST_SUITE_P(H5, Conformance, H5Types);

}  // namespace
}  // namespace conformance
}  // namespace td
