// TensorDicts to and from plain dictionaries: upstream's `to_dict`, `from_dict`,
// `make_tensordict` and `fromkeys`. A C++ "dict" is either a braced list of items (nested lists
// are nested dicts) or a c10::IValue holding a c10::Dict<std::string, IValue> (what
// torch::pickle_load gives for a Python dict of tensors).
//
//   td::TensorDict td = td::from_dict({{"a", at::zeros({3, 4})}, {"b", {{"c", at::ones({3, 4, 2})}}}},
//                                     td::FromDictOptions().auto_batch_size(true));   // [3, 4]
//   c10::IValue plain = td::to_dict(td);          // {"a": tensor, "b": {"c": tensor}}
//   td::TensorDict zeros = td::fromkeys({"x", {"n", "y"}});   // each key holds tensor(0)
//   td::TensorDict rows = td::from_list({row0, row1, td::Value{{"obs", at::zeros({3})}}});  // [3]
// Bazel: //td/io. See docs/io.md.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <torch/arg.h>

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <vector>

#include "td/core/tensordict.h"

namespace td {

// Options of from_dict / make_tensordict (upstream's keyword arguments).
struct FromDictOptions {
  // The batch size of the result and of every nested dict (nullopt: [] unless inferred).
  TORCH_ARG(std::optional<std::vector<int64_t>>, batch_size) = std::nullopt;
  // Infer the batch size: the longest run of leading dims shared by the leaves, nested levels
  // first (TensorDict::auto_batch_size_).
  TORCH_ARG(bool, auto_batch_size) = false;
  // At most this many inferred batch dims; implies auto_batch_size.
  TORCH_ARG(std::optional<int64_t>, batch_dims) = std::nullopt;
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
};

// A TensorDict holding the items (nested braced lists become nested TensorDicts). Throws
// ValueError when batch_size is given together with auto_batch_size or batch_dims, and
// BatchSizeError naming the key whose shape does not start with the given batch size.
TensorDict from_dict(std::initializer_list<TensorDict::Item> items, const FromDictOptions& options = {});
TensorDict from_dict(const std::vector<TensorDict::Item>& items, const FromDictOptions& options = {});
// From a (nested) c10::Dict<std::string, IValue> of tensors, dicts and JSON-like values (the
// inverse of to_dict). Throws TypeError naming a key whose value is none of these.
TensorDict from_dict(const c10::IValue& dict, const FromDictOptions& options = {});

namespace internal {
// ValueError from `fn` when batch_size is given with auto_batch_size or batch_dims, or batch_dims
// is negative (the options of from_dict and from_zarr).
void CheckBatchOptions(const char* fn, const std::optional<std::vector<int64_t>>& batch_size,
                       bool auto_batch_size, std::optional<int64_t> batch_dims);
}  // namespace internal

// Upstream's functional spelling of from_dict over keyword arguments: the same call.
TensorDict make_tensordict(std::initializer_list<TensorDict::Item> items,
                           const FromDictOptions& options = {});

// Options of from_list (upstream's keyword arguments of TensorDict.from_list).
struct FromListOptions {
  // The batch size of the result; its first dim must be the list's length, the rest is each
  // dict's batch size (as FromDictOptions::batch_size).
  TORCH_ARG(std::optional<std::vector<int64_t>>, batch_size) = std::nullopt;
  // Infer each dict's batch size (FromDictOptions::auto_batch_size).
  TORCH_ARG(bool, auto_batch_size) = false;
  // At most this many batch dims in the result, the stacked one included (each dict gets
  // batch_dims - 1); implies auto_batch_size.
  TORCH_ARG(std::optional<int64_t>, batch_dims) = std::nullopt;
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
  // How the elements are stacked: nullopt (upstream's default) a dense td::stack when they have
  // the same keys and shapes and a lazy stack otherwise (td::maybe_dense_stack); true always
  // lazy (td::lazy_stack); false always dense (td::stack).
  TORCH_ARG(std::optional<bool>, lazy) = std::nullopt;
};

// Python's TensorDict.from_list: each element, a TensorDict as it is (device and batch options
// apply to dicts only, as upstream) or a dict (a braced list of
// items) through from_dict (with the options' device and per-element batch size), stacked along
// a new leading batch dim. Throws ValueError for an empty list, a batch_size whose first dim is
// not the list's length, or batch_size with auto_batch_size / batch_dims; TypeError naming the
// index of an element that is neither a TensorDict nor a dict; what the stack throws (elements
// of differing batch sizes; with lazy(false), differing keys or shapes).
//   td::TensorDict s = td::from_list({td::Value{{"a", at::zeros({2})}}, td::Value{{"a", at::ones({2})}}},
//                                    td::FromListOptions().auto_batch_size(true));   // [2, 2]
TensorDict from_list(const std::vector<Value>& input, const FromListOptions& options = {});
// From a c10 list of dicts and TensorDicts' to_dict() dicts (what torch::pickle_load gives for a
// Python list of dicts): each element through from_dict(IValue), then as above.
TensorDict from_list(const c10::IValue& list, const FromListOptions& options = {});

struct ToDictOptions {
  // false: leave out non-tensor entries holding null (upstream's None).
  TORCH_ARG(bool, retain_none) = true;
};
// A nested c10::Dict<std::string, IValue>: tensors (shared, not copied), nested dicts for
// sub-TensorDicts, and non-tensor data as IValues (strings, numbers, bools, lists, dicts, None).
// Unlike to_ivalue(), no "__batch_size" / "__device" entries. Opens in Python as a plain dict
// through torch::pickle_save.
c10::IValue to_dict(const TensorDict& td, const ToDictOptions& options = {});

// A TensorDict of batch size [] with `value` under each key (upstream's `fromkeys`, whose
// default value is the integer 0: a 0-dim int64 tensor). Tensor values are shared by all keys,
// as Python's dict.fromkeys shares its value; a key given twice is set once. Throws as set()
// does (a key nested under another key's tensor: TypeError naming it).
TensorDict fromkeys(const std::vector<NestedKey>& keys, const Value& value = Value(at::Tensor()));

}  // namespace td
