// Free functions that combine TensorDicts along a batch dim, as torch.stack / torch.cat /
// torch.unbind do for tensors.
//
//   std::vector<td::TensorDict> steps = ...;            // each with batch size [4]
//   td::TensorDict episode = td::stack(steps, 0);        // batch size [T, 4]
//   td::TensorDict both = td::cat({episode, episode}, 0); // batch size [2T, 4]
//   std::vector<td::TensorDict> again = td::unbind(episode, 0);
//
// The inputs must have the same keys at every level (nested included): a difference is a
// KeyError listing the keys only in the first TensorDict and those only in the other one.
// Non-tensor entries must be equal across the inputs (ValueError naming the key and both values
// otherwise) and are carried into the result. The result is a new dense TensorDict with the
// first input's device; its leaves are new tensors (stack/cat copy, like torch).
#pragma once

#include <cstdint>
#include <vector>

#include "td/core/tensordict.h"

namespace td {

// Stacks along a new batch dim `dim` (in [-batch_dims-1, batch_dims]). Every input must have the
// same batch size: a mismatch is a BatchSizeError naming both sizes and the input's position.
// Throws ValueError for an empty list, KeyError/TypeError/ValueError as described above.
TensorDict stack(const std::vector<TensorDict>& tds, int64_t dim = 0);

// Concatenates along batch dim `dim`. The batch sizes must agree except in `dim`
// (BatchSizeError naming both sizes otherwise).
TensorDict cat(const std::vector<TensorDict>& tds, int64_t dim = 0);

// The slices of `td` along batch dim `dim` (views); same as td.unbind(dim).
std::vector<TensorDict> unbind(const TensorDict& td, int64_t dim = 0);

}  // namespace td
