// consolidate(): every tensor leaf of a TensorDict (nested ones included) copied into ONE buffer,
// each leaf a view into it, so that cloning, casting or an element-wise op over the whole
// TensorDict (td.clone(), td.to(at::kHalf), td * 2, td.add_(other), ...) is one copy or kernel
// (NOTE [ One buffer, one kernel ] in td/core/leafwise.cc), and saving it is one write. Python
// tensordict's `consolidate()` / `is_consolidated()`. Layout and recognition:
// NOTE [ Consolidated buffer layout ] (td/consolidate/internal/layout.h); the file format:
// td/consolidate/file.h.
//
//   #include "td/consolidate/consolidate.h"      // dep: //td/consolidate
//   td::TensorDict c = td::consolidate(data);
//   td::is_consolidated(c);                        // true
//   td::TensorDict d = c.to(at::kDouble);          // one kernel; d is one new buffer
//
// A consolidated TensorDict is an ordinary dense TensorDict, not locked (unlike Python's): what
// keeps it consolidated and what ends it is NOTE [ Consolidated buffer layout ], "Recognition".
#pragma once

#include <torch/arg.h>

#include <c10/core/Device.h>

#include <optional>
#include <string>

#include "td/core/tensordict.h"
#include "td/executor/executor.h"

namespace td {

// Options of consolidate().
//   td::consolidate(td, td::ConsolidateOptions().pin_memory(true).num_threads(4));
// parallel / num_threads / min_cost (NOTE [ num_threads ] in td/executor/executor.h): the threads
// copying leaves into the buffer; the cost is the bytes to copy.
struct ConsolidateOptions : parallel::WithParallelOptions<ConsolidateOptions> {
  // Puts the buffer in a memory-mapped file at this path, in the consolidated file format
  // (td/consolidate/file.h), readable by load_consolidated() and Python's from_consolidated. The
  // result's leaves map the file (shared: writes reach it). Exclusive with `device` (CPU only).
  TORCH_ARG(std::optional<std::string>, filename) = std::nullopt;
  // Puts the buffer in one shared-memory segment (through TensorDict::share_memory_(): link
  // //td/backends/shared_memory or it throws). Ignored for accelerator devices.
  TORCH_ARG(bool, share_memory) = false;
  // Puts the buffer in pinned (page-locked) host memory; ignored without CUDA (no error).
  TORCH_ARG(bool, pin_memory) = false;
  // The buffer's device (default: the TensorDict's, else the first leaf's); the result's device().
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
};

// A new dense TensorDict with the same structure, batch sizes, non-tensor data and values, whose
// tensor leaves are views into one buffer (NOTE [ Consolidated buffer layout ]). A TensorDict
// that is already consolidated is returned as is (options ignored, as in Python). Works on every
// backend. The result does not track gradients. Throws ValueError for a leaf that is not a
// strided tensor, for `filename` with a non-CPU device, or for a key the file format cannot hold
// (see save_consolidated() in file.h for the file's errors).
//   td::TensorDict c = td::consolidate(td, td::ConsolidateOptions().num_threads(4));
TensorDict consolidate(const TensorDict& td, const ConsolidateOptions& options = {});

// True when every tensor leaf of `td` (at least one) is the view consolidate() placed in one
// buffer (NOTE [ Consolidated buffer layout ], "Recognition"). Costs one pass over the leaves.
bool is_consolidated(const TensorDict& td);

// The buffer of a consolidated TensorDict as a 1-D uint8 tensor sharing its memory (gaps
// between leaves included), or nullopt when `td` is not consolidated.
//   at::Tensor bytes = *td::consolidated_buffer(c);   // send it, hash it, ...
std::optional<at::Tensor> consolidated_buffer(const TensorDict& td);

}  // namespace td
