// TensorDict comparison: ==, !=, all, any, allclose, assert_allclose.
#include "td/core/tensordict.h"

#include <ATen/ATen.h>

#include "absl/strings/str_cat.h"
#include "absl/container/flat_hash_set.h"
#include "td/core/dtype.h"
#include "td/core/internal/tensordict_util.h"
#include "td/core/internal/leaves.h"
#include "td/core/storage.h"

namespace td {
namespace {

using internal::WithKeyContext;

// Entry-wise binary op over two TensorDicts with the same keys.
TensorDict ZipImpl(const TensorDict& a, const TensorDict& b,
                   const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& fn,
                   const std::function<at::Tensor(const Value&, const Value&)>& other_fn,
                   const NestedKey* prefix) {
  const Storage& sa = a.storage();
  const Storage& sb = b.storage();
  std::vector<std::string> ka = sa.keys();
  std::vector<std::string> kb = sb.keys();
  std::vector<std::string> only_a, only_b;
  for (const auto& k : ka) {
    if (!sb.contains(k)) only_a.push_back(k);
  }
  for (const auto& k : kb) {
    if (!sa.contains(k)) only_b.push_back(k);
  }
  if (!only_a.empty() || !only_b.empty()) {
    TD_FAIL(KeyError, "the TensorDicts have different keys", prefix ? " under " : "",
                   prefix ? prefix->repr() : "", ": only in the first: ", KeysRepr(only_a),
                   ", only in the second: ", KeysRepr(only_b));
  }
  TensorDict out(MakeDenseStorage(a.batch_size().vec(), a.device()));
  for (const std::string& k : ka) {
    Value va = *sa.get(k);
    Value vb = *sb.get(k);
    NestedKey full = prefix ? *prefix + NestedKey(k) : NestedKey(k);
    if (va.is_tensordict() && vb.is_tensordict()) {
      out.set(k, ZipImpl(va.tensordict(), vb.tensordict(), fn, other_fn, &full));
    } else if (va.is_tensor() && vb.is_tensor()) {
      out.set(k, WithKeyContext(full, "combining", [&] { return fn(va.tensor(), vb.tensor()); }));
    } else {
      out.set(k, other_fn(va, vb));
    }
  }
  return out;
}

}  // namespace

// ---- comparison ---------------------------------------------------------------------------

namespace {
at::Tensor NonTensorCompare(const TensorDict& shape_of, const Value& a, const Value& b,
                            bool equal) {
  bool same = a.kind() == b.kind() && a.is_non_tensor() && a.non_tensor_data() == b.non_tensor_data();
  return at::full(shape_of.batch_size(), same == equal, at::kBool);
}
}  // namespace

TensorDict TensorDict::operator==(const TensorDict& other) const {
  return ZipImpl(
      *this, other, [](const at::Tensor& a, const at::Tensor& b) { return a.eq(b); },
      [this](const Value& a, const Value& b) { return NonTensorCompare(*this, a, b, true); },
      nullptr);
}

TensorDict TensorDict::operator!=(const TensorDict& other) const {
  return ZipImpl(
      *this, other, [](const at::Tensor& a, const at::Tensor& b) { return a.ne(b); },
      [this](const Value& a, const Value& b) { return NonTensorCompare(*this, a, b, false); },
      nullptr);
}

bool allclose(const TensorDict& a, const TensorDict& b, const AllCloseOptions& options) {
  try {
    assert_allclose(a, b, options);
    return true;
  } catch (const c10::Error&) {
    return false;
  }
}

void assert_allclose(const TensorDict& a, const TensorDict& b, const AllCloseOptions& options) {
  if (a.batch_size() != b.batch_size()) {
    TD_FAIL(BatchSizeError, "batch sizes differ: ", SizeRepr(a.batch_size()), " vs ",
                         SizeRepr(b.batch_size()));
  }
  const KeysOptions all_leaves = KeysOptions().include_nested(true).leaves_only(true);
  std::vector<NestedKey> ka = a.keys(all_leaves);
  std::vector<NestedKey> kb = b.keys(all_leaves);
  absl::flat_hash_set<NestedKey> sa(ka.begin(), ka.end()), sb(kb.begin(), kb.end());
  std::vector<NestedKey> only_a, only_b;
  for (const auto& k : ka) {
    if (!sb.contains(k)) only_a.push_back(k);
  }
  for (const auto& k : kb) {
    if (!sa.contains(k)) only_b.push_back(k);
  }
  if (!only_a.empty() || !only_b.empty()) {
    TD_FAIL(KeyError, "the TensorDicts have different keys: only in the first: ", KeysRepr(only_a),
                   ", only in the second: ", KeysRepr(only_b));
  }
  for (const NestedKey& k : ka) {
    Value va = a.get_value(k);
    Value vb = b.get_value(k);
    if (va.kind() != vb.kind()) {
      TD_FAIL(c10::Error, "key ", k.repr(), " is a ", va.kind(), " in the first and a ", vb.kind(),
                       " in the second");
    }
    if (va.is_non_tensor()) {
      if (va.non_tensor_data() != vb.non_tensor_data()) {
        TD_FAIL(c10::Error, "key ", k.repr(), " differs: ", va.non_tensor().dump(), " vs ",
                         vb.non_tensor().dump());
      }
      continue;
    }
    const at::Tensor& ta = va.tensor();
    const at::Tensor& tb = vb.tensor();
    if (ta.sizes() != tb.sizes()) {
      TD_FAIL(c10::Error, "key ", k.repr(), " has shape ", SizeRepr(ta.sizes()), " vs ",
                       SizeRepr(tb.sizes()));
    }
    if (ta.scalar_type() != tb.scalar_type()) {
      TD_FAIL(c10::Error, "key ", k.repr(), " has dtype ", DtypeName(ta.scalar_type()), " vs ",
                       DtypeName(tb.scalar_type()));
    }
    const bool floating = ta.is_floating_point() || ta.is_complex();
    const bool close = floating ? at::allclose(ta, tb.to(ta.device()), options.rtol(),
                                               options.atol(), options.equal_nan())
                                : at::equal(ta, tb.to(ta.device()));
    if (!close) {
      std::string detail;
      if (floating) {
        detail = absl::StrCat(" (max abs difference ",
                              (ta - tb.to(ta.device())).abs().max().item<double>(), ")");
      }
      TD_FAIL(c10::Error, "key ", k.repr(), " differs", detail);
    }
  }
}

}  // namespace td
