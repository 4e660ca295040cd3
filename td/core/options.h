// Options structs of TensorDict's keys()/values()/items(), apply and the reductions (part of
// //td/core:options; tensordict.h includes this file).
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>

#include "td/executor/executor.h"

namespace td {

class Value;

// Which entries `keys()`, `values()` and `items()` list.
struct KeysOptions {
  // Also list the entries of nested TensorDicts, as full nested keys (depth first, in order).
  TORCH_ARG(bool, include_nested) = false;
  // Skip the sub-TensorDicts themselves (list tensors and non-tensor data only).
  TORCH_ARG(bool, leaves_only) = false;
  // Sort the result by key (nested keys compared as their "."-joined string, as upstream).
  TORCH_ARG(bool, sort) = false;
  // Which entries count as leaves (upstream's `is_leaf`): an entry for which it returns true is
  // listed as a leaf and not recursed into; unset: tensors and non-tensor data are the leaves.
  //   td.keys(td::KeysOptions().include_nested(true).leaves_only(true)
  //               .is_leaf([](const td::Value& v) { return !v.is_non_tensor(); }));
  TORCH_ARG(std::function<bool(const Value&)>, is_leaf) = nullptr;
};

// Options of TensorDict::apply / named_apply / apply_.
//   td.apply(fn, td::ApplyOptions().batch_size({12}).default_value(at::zeros({})));
//   td.apply(fn, td::ApplyOptions().parallel(false));   // fn is not thread-safe
// parallel / num_threads / min_cost (td::parallel::WithParallelOptions; NOTE [ num_threads ] in
// td/executor/executor.h): whether fn runs on several leaves at once, on td::parallel's threads
// (NOTE [ Thread policy ] there; NOTE [ Parallel apply ] in apply.cc). The cost is the leaves'
// elements: parallel(nullopt), the default, goes parallel when they hold at least `min_cost`
// elements in total (default td::parallel::kDefaultMinParallelCost) and there are two leaves and
// two threads; true: whenever there are two leaves and two threads; false: never — fn is then
// called in key order on the calling thread. The result is the same either way.
struct ApplyOptions : parallel::WithParallelOptions<ApplyOptions> {
  // The result's batch size (default: this TensorDict's).
  ApplyOptions& batch_size(std::vector<int64_t> b) {
    batch_size_ = std::move(b);
    return *this;
  }
  const std::optional<std::vector<int64_t>>& batch_size() const { return batch_size_; }
  // Used in place of a leaf missing in a zipped TensorDict (default: a missing leaf is an error).
  TORCH_ARG(std::optional<at::Tensor>, default_value) = std::nullopt;

 private:
  std::optional<std::vector<int64_t>> batch_size_;
};

// Options of TensorDict::new_zeros / new_ones / new_empty / new_full / new_tensor: each unset
// field keeps the leaf's own (dtype, device).
//   td.new_zeros({8}, td::NewOptions().dtype(at::kFloat).requires_grad(true));
struct NewOptions {
  TORCH_ARG(std::optional<at::ScalarType>, dtype) = std::nullopt;
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
  TORCH_ARG(bool, requires_grad) = false;
};

// Options of the reductions (sum, mean, std, var, min, max, norm).
//   td.std(td::ReduceOptions().dim({0}).keepdim(true).unbiased(false));
struct ReduceOptions {
  // Batch dims to reduce; unset reduces every dim of every leaf.
  ReduceOptions& dim(std::vector<int64_t> d) {
    dim_ = std::move(d);
    return *this;
  }
  const std::optional<std::vector<int64_t>>& dim() const { return dim_; }
  // Keep reduced batch dims as size 1.
  TORCH_ARG(bool, keepdim) = false;
  // std / var: Bessel's correction (divide by N - 1).
  TORCH_ARG(bool, unbiased) = true;

 private:
  std::optional<std::vector<int64_t>> dim_;
};

}  // namespace td
