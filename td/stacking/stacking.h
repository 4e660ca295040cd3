// Stacking TensorDicts that may not fit one dense stack: td::maybe_dense_stack (dense when the
// members agree, lazy otherwise), td::pad_sequence (pad along a batch dim to the longest, then
// stack, with optional masks) and td::densify (a lazy stack as dense, zero-padded tensors).
// Depend on //td/stacking (consumers: @tensordict//td/stacking).
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/tensordict.h"

namespace td {

// Python's TensorDict.maybe_dense_stack(tds, dim): td::stack when every member has the same keys
// and leaf shapes, td::lazy_stack otherwise. Throws what td::lazy_stack throws (ValueError for an
// empty list, BatchSizeError when the batch sizes differ).
//   td::TensorDict s = td::maybe_dense_stack({step0, step1}, 0);   // lazy if shapes differ
TensorDict maybe_dense_stack(const std::vector<TensorDict>& tds, int64_t dim = 0);

// Options of td::pad_sequence.
struct PadSequenceOptions {
  // The batch dim padded to the longest member (negative counts from the end).
  TORCH_ARG(int64_t, pad_dim) = 0;
  TORCH_ARG(double, padding_value) = 0.0;
  // Adds a "masks" sub-TensorDict with, for each leaf key, a bool tensor of shape
  // [N, *batch with pad_dim at the longest length] that is true on real data.
  TORCH_ARG(bool, return_mask) = false;
};

// Python's tensordict.pad_sequence(tds, pad_dim, padding_value, return_mask): every member padded
// (after its data) along batch dim `pad_dim` to the longest member, then stacked along a new
// leading dim: batch [N, *batch with pad_dim = longest]. Members must have the same keys and
// batch dims, equal except along pad_dim. Throws ValueError for an empty list, for members with
// no batch dims and for batch sizes that differ elsewhere; KeyError for differing keys.
//   td::TensorDict padded = td::pad_sequence({a, b}, td::PadSequenceOptions().return_mask(true));
TensorDict pad_sequence(const std::vector<TensorDict>& tds, const PadSequenceOptions& options = {});

// LazyStackedTensorDict.densify(): a dense TensorDict (same batch size and keys) whose every leaf
// is the members' tensors zero-padded (`padding_value`) to the largest size of every dim and
// stacked — LazyStackedTensorDict::get_padded for every leaf key. A dense TensorDict is returned
// as is. Throws what get_padded throws (ValueError when members differ in number of dims).
//   td::TensorDict dense = td::densify(td::lazy_stack({short_ep, long_ep}, 0));
TensorDict densify(const TensorDict& td, double padding_value = 0.0);

}  // namespace td
