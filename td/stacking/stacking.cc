// td::maybe_dense_stack, td::pad_sequence and td::densify (td/stacking/stacking.h).
#include "td/stacking/stacking.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>

#include "td/core/dtype.h"
#include "td/core/errors.h"

namespace td {
namespace {

const KeysOptions kLeafKeys = KeysOptions().include_nested(true).leaves_only(true);

// True when every member has the first member's leaf keys with the same shapes.
bool SameLayout(const std::vector<TensorDict>& tds) {
  const std::vector<NestedKey> keys = tds[0].keys(kLeafKeys);
  for (size_t i = 1; i < tds.size(); ++i) {
    if (tds[i].keys(kLeafKeys).size() != keys.size()) return false;
    for (const NestedKey& k : keys) {
      std::optional<Value> a = tds[0].find(k), b = tds[i].find(k);
      if (!b || a->is_tensor() != b->is_tensor()) return false;
      if (a->is_tensor() && a->tensor().sizes() != b->tensor().sizes()) return false;
    }
  }
  return true;
}

}  // namespace

TensorDict maybe_dense_stack(const std::vector<TensorDict>& tds, int64_t dim) {
  if (!tds.empty() && SameLayout(tds)) return td::stack(tds, dim);
  return lazy_stack(tds, dim);
}

TensorDict pad_sequence(const std::vector<TensorDict>& tds, const PadSequenceOptions& options) {
  if (tds.empty()) TD_FAIL(ValueError, "pad_sequence: the list of TensorDicts is empty");
  const int64_t nd = tds[0].batch_dims();
  if (nd == 0) TD_FAIL(ValueError, "pad_sequence: the TensorDicts have no batch dims to pad");
  int64_t d = options.pad_dim();
  if (d < -nd || d >= nd) {
    TD_FAIL(c10::IndexError, "pad_sequence: pad_dim ", options.pad_dim(), " is out of range for batch size ",
                          SizeRepr(tds[0].batch_size()));
  }
  if (d < 0) d += nd;
  int64_t longest = 0;
  for (size_t i = 0; i < tds.size(); ++i) {
    const at::IntArrayRef b = tds[i].batch_size();
    bool ok = static_cast<int64_t>(b.size()) == nd;
    for (int64_t j = 0; ok && j < nd; ++j) ok = j == d || b[j] == tds[0].batch_size()[j];
    if (!ok) {
      TD_FAIL(ValueError, "pad_sequence: TensorDict ", i, " has batch size ", SizeRepr(b),
                       ", which differs from TensorDict 0's ", SizeRepr(tds[0].batch_size()),
                       " outside pad_dim ", d);
    }
    longest = std::max(longest, b[d]);
  }
  std::vector<TensorDict> padded;
  std::vector<at::Tensor> masks;
  for (const TensorDict& t : tds) {
    std::vector<int64_t> pad(2 * nd, 0);
    pad[2 * d + 1] = longest - t.batch_size()[d];
    padded.push_back(t.pad(pad, options.padding_value()));
    if (options.return_mask()) {
      std::vector<int64_t> shape = t.batch_size().vec();
      std::vector<int64_t> mpad(2 * nd, 0);
      mpad[2 * (nd - 1 - d) + 1] = longest - t.batch_size()[d];   // at::constant_pad_nd: last dim first
      masks.push_back(at::constant_pad_nd(at::ones(shape, at::kBool), mpad, 0));
    }
  }
  TensorDict out = td::stack(padded, 0);
  if (options.return_mask()) {
    const at::Tensor mask = at::stack(masks, 0);
    for (const NestedKey& k : out.keys(kLeafKeys)) {
      if (out.get_value(k).is_tensor()) out.set(NestedKey("masks") + k, mask);
    }
  }
  return out;
}

TensorDict densify(const TensorDict& td, double padding_value) {
  const std::optional<LazyStackedTensorDict> stack = LazyStackedTensorDict::from(td);
  if (!stack) return td;
  const LazyStackedTensorDict& s = *stack;
  TensorDict out({}, td.batch_size(), td.device());
  // Keys and kinds from the first member: listing or reading the stack itself would stack the
  // ragged tensors (get_padded throws KeyError for a key another member lacks).
  for (const NestedKey& k : s.tensordicts()[0].keys(kLeafKeys)) {
    // The kind from the first member: reading the stack itself would stack ragged tensors.
    if (s.tensordicts()[0].get_value(k).is_tensor()) {
      out.set(k, s.get_padded(k, PadOptions().padding_value(padding_value)));
    } else {
      out.set(k, td.get_value(k));
    }
  }
  return out;
}

}  // namespace td
