// Options structs and the state-dict type of TensorDict's dict verbs (set / update options,
// state_dict_with_metadata), declared in td/core/ops.def. Part of //td/core:options;
// tensordict.h includes this file.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/arg.h>
#include <torch/ordered_dict.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "td/core/nested_key.h"

namespace td {

// Options of TensorDict::set(key, value, options).
//   td.set("obs", t, td::SetOptions().inplace(true));   // copy into "obs" if it exists
struct SetOptions {
  // When the key already holds a tensor, copy the value into it (set_ rules: same shape, dtype
  // and device converted) instead of replacing it; a new key is created as by set().
  TORCH_ARG(bool, inplace) = false;
};

// Options of TensorDict::update(other, options).
//   td.update(other, td::UpdateOptions().inplace(true).keys_to_update({"a", {"n", "x"}}));
struct UpdateOptions {
  // Existing tensors are written in place (as set with SetOptions::inplace).
  TORCH_ARG(bool, inplace) = false;
  // Only these keys of `other` (a nested key also selects everything below it); unset: all.
  TORCH_ARG(std::optional<std::vector<NestedKey>>, keys_to_update) = std::nullopt;
  // The values of `other` are cloned first, so the result shares no memory with it.
  TORCH_ARG(bool, clone) = false;
};

// Batch size and device of one TensorDict level, as upstream's state_dict `_metadata` entries.
struct LevelMetadata {
  std::vector<int64_t> batch_size;
  std::optional<at::Device> device;
};

// Python's TensorDict.state_dict(): the flat "a.b" -> tensor entries, plus one metadata entry per
// level ("" for the root, "n" for a nested TensorDict under "n", ...) carrying batch size and
// device, like upstream's `destination._metadata`.
struct StateDict {
  torch::OrderedDict<std::string, at::Tensor> tensors;
  torch::OrderedDict<std::string, LevelMetadata> metadata;
};

}  // namespace td
