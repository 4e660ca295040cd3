// What printing a TensorDict shows (repr() / operator<<, and a TensorClass's repr()): Python
// tensordict's get_printoptions / set_printoptions. Part of //td/core:print_options (a leaf
// library); tensordict.h includes this file.
//
//   td::set_printoptions(td::get_printoptions().show_device(false).show_is_shared(false));
//   {
//     td::PrintOptionsGuard scoped(td::PrintOptions().verbose(false));   // shapes only
//     std::cout << data;
//   }                                                  // the previous options are back
//
// The options are process-wide, as upstream's: every thread prints with the options current
// when its repr() starts. Reading and replacing them is thread-safe.
#pragma once

#include <torch/arg.h>

#include <functional>
#include <string>

namespace td {

// How each level's keys are ordered when printed.
enum class KeyOrder {
  kAlphabetical,  // sorted (upstream's sort_keys="alphabetical", the default)
  kInsertion,     // as the level holds them (upstream's "insertion")
};

// The print options (upstream's names; defaults as upstream's).
struct PrintOptions {
  // TensorDict-level lines: batch_size=, device=, is_shared=.
  TORCH_ARG(bool, show_batch_size) = true;
  TORCH_ARG(bool, show_device) = true;
  TORCH_ARG(bool, show_is_shared) = true;
  // Inside each Tensor(...) field: shape=, device=, dtype=, is_shared=.
  TORCH_ARG(bool, show_shape) = true;
  TORCH_ARG(bool, show_field_device) = true;
  TORCH_ARG(bool, show_dtype) = true;
  TORCH_ARG(bool, show_field_is_shared) = true;
  // Opt-in fields: requires_grad=, is_contiguous=, is_view=, storage_size= (bytes of the
  // tensor's storage), and with `plain` a value summary (mean= / std= of floating-point and
  // complex tensors, min= / max= of the others, [] when empty). They read the tensor itself,
  // so a lazy entry is computed; a ragged one (shape printed with -1), a nested or sparse
  // tensor show the four fields above only, as upstream, and a meta tensor has no summary.
  TORCH_ARG(bool, show_grad) = false;
  TORCH_ARG(bool, show_is_contiguous) = false;
  TORCH_ARG(bool, show_is_view) = false;
  TORCH_ARG(bool, show_storage_size) = false;
  TORCH_ARG(bool, plain) = false;
  // Key order of every level.
  TORCH_ARG(KeyOrder, sort_keys) = KeyOrder::kAlphabetical;
  // When set, keys are sorted by sort_key(key) instead (upstream's callable sort_keys, which is
  // given the printed "key: ..." line; here the key).
  //   td::PrintOptions().sort_key([](const std::string& k) { return std::string(k.rbegin(), k.rend()); });
  TORCH_ARG(std::function<std::string(const std::string& key)>, sort_key) = nullptr;

 public:
  // Upstream's verbose=False: hides device=, is_shared= (both levels) and dtype=. verbose(true)
  // changes nothing. Options set after this call win: PrintOptions().verbose(false)
  // .show_dtype(true) shows dtypes, as upstream's explicit keywords override verbose.
  PrintOptions& verbose(bool verbose) {
    if (!verbose) {
      show_device_ = show_is_shared_ = show_field_device_ = show_dtype_ = false;
      show_field_is_shared_ = false;
    }
    return *this;
  }
};

// The current options (a copy: changing it changes nothing until set_printoptions).
PrintOptions get_printoptions();
// Replaces the current options for the whole process (upstream's set_printoptions(...).set()).
// Start from get_printoptions() to change some options and keep the others.
void set_printoptions(PrintOptions options);

// Upstream's `with set_printoptions(...)`: sets `options` for its lifetime and restores the
// options it replaced when destroyed (guards nest).
class PrintOptionsGuard {
 public:
  explicit PrintOptionsGuard(PrintOptions options);
  ~PrintOptionsGuard();
  PrintOptionsGuard(const PrintOptionsGuard&) = delete;
  PrintOptionsGuard& operator=(const PrintOptionsGuard&) = delete;

 private:
  PrintOptions previous_;
};

}  // namespace td
