// Module-level helpers of upstream's tensordict/__init__.py that work on whole TensorDicts or
// keys: `unravel_key`, `unravel_key_list`, `merge_tensordicts`, `assert_close`,
// `parse_tensor_dict_string`.
//
//   td::NestedKey k = td::unravel_key({"a", td::NestedKey{"b", "c"}});        // ("a", "b", "c")
//   td::TensorDict all = td::merge_tensordicts({td0, td1, td2});
//   td::assert_close(actual, expected);       // throws naming the first key that differs
// Bazel: //td/io. See docs/io.md.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "td/core/tensordict.h"

namespace td {

// The parts of nested keys as one flat key: upstream's unravel_key over a nested tuple
// (("a", ("b",)) -> ("a", "b")). td::NestedKey is always flat, so its braced constructor does
// the same; this is the named call. Throws ValueError for no parts.
NestedKey unravel_key(const std::vector<NestedKey>& parts);
// unravel_key of each element.
std::vector<NestedKey> unravel_key_list(const std::vector<std::vector<NestedKey>>& keys);

// Upstream's default_is_leaf and is_leaf_nontensor, as predicates for KeysOptions::is_leaf:
// default_is_leaf counts tensors only (non-tensor data is then a node: listed without
// leaves_only, left out with it), is_leaf_nontensor tensors and non-tensor data (what
// KeysOptions does without a predicate).
//   td.keys(td::KeysOptions().include_nested(true).leaves_only(true).is_leaf(td::default_is_leaf));
bool default_is_leaf(const Value& value);
bool is_leaf_nontensor(const Value& value);

// Options of merge_tensordicts.
struct MergeOptions {
  using Callback = std::function<at::Tensor(const std::vector<at::Tensor>&)>;
  // Called with the values of a tensor entry present in every TensorDict (in order); its
  // result is the merged entry. Unset: the first TensorDict's value.
  TORCH_ARG(Callback, callback_exist) = nullptr;
  // Per-key callbacks, used instead of callback_exist for those keys.
  using Callbacks = std::map<NestedKey, Callback>;
  TORCH_ARG(Callbacks, callbacks) = {};
};

// A new TensorDict (batch size and device of the first) with every entry of every input: for a
// key in all of them, the callback's result when there is one, otherwise the value of the
// first TensorDict holding the key. Throws ValueError for fewer than two inputs, and as set()
// does (BatchSizeError naming the key whose value does not fit the first's batch size).
TensorDict merge_tensordicts(const std::vector<TensorDict>& tds, const MergeOptions& options = {});

// Upstream's parse_tensor_dict_string (a debugging aid): a TensorDict rebuilt from its printed
// form (operator<<, Python's repr): every "Tensor(shape=..., device=..., dtype=...)" entry
// becomes zeros of that shape, dtype and device, nested TensorDicts recurse, and the batch sizes
// and devices are read back. Other entries (non-tensor data, lazy stacks) are skipped, as
// upstream skips them. Throws ValueError naming the offset and what was expected.
//   td::TensorDict shapes = td::parse_tensor_dict_string(c10::str(data));
TensorDict parse_tensor_dict_string(std::string_view repr);

// Options of assert_close (upstream's keyword arguments).
struct AssertCloseOptions {
  // nullopt: torch.testing.assert_close's defaults for the leaf's dtype (float32 1.3e-6 /
  // 1e-5, float64 1e-7 / 1e-7, float16 1e-3 / 1e-5, bfloat16 1.6e-2 / 1e-5, integers and bool
  // exact).
  TORCH_ARG(std::optional<double>, rtol) = std::nullopt;
  TORCH_ARG(std::optional<double>, atol) = std::nullopt;
  TORCH_ARG(bool, equal_nan) = true;
  // Compare only the keys both hold.
  TORCH_ARG(bool, intersection) = false;
  // Prepended to the error message.
  TORCH_ARG(std::string, msg) = "";
};
// Throws c10::Error naming the first key where `actual` and `expected` differ: keys only on one
// side (unless intersection), batch sizes, entry kinds, a tensor's dtype or shape, values out of
// tolerance (with the largest absolute difference), or non-tensor data. Returns true otherwise.
bool assert_close(const TensorDict& actual, const TensorDict& expected,
                  const AssertCloseOptions& options = {});

}  // namespace td
