// Shared-memory TensorDicts: TensorDict::share_memory_() (declared in td/core/tensordict.h,
// defined here), the "shared_memory" storage backend, and attaching from another process.
//
// NOTE [ Shared-memory segments ]
// Shared tensors live in segments made with memfd_create(2): anonymous memory with no name in any
// file system (nothing in /dev/shm), mapped MAP_SHARED. The kernel frees a segment when the last
// mapping and descriptor are gone, so nothing is left behind even when processes are killed.
//   * A child created by fork() inherits the mappings: it reads and writes the same memory.
//   * Any other process of the same user attaches with AttachSharedMemory(handle), where the
//     handle (SharedMemoryHandle; NOTE [ Shared-memory handles ] in handle.h) names each
//     segment's creating process and descriptor (opened through /proc/<pid>/fd/<fd>), its size
//     and a random 128-bit token stored in its header. The creating process must still hold the
//     segment then (it does while any of its tensors uses it); attached processes keep it alive.
//   * Only the memory is shared, not the structure: keys added later in one process are not seen
//     by the others (share_memory_ locks the TensorDict, as in Python).
// share_memory_() copies all leaves of a TensorDict into one segment (64-byte aligned slots);
// the "shared_memory" backend gives each tensor it stores its own segment.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "td/core/internal/entry_list.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {

// True when `tensor`'s memory is a shared-memory segment made by this library.
bool IsSharedMemoryTensor(const at::Tensor& tensor);

// A copy of `tensor` (any device, any strides) in a new shared-memory segment of its own.
// Throws ValueError for a non-strided tensor, c10::Error when the segment cannot be created.
at::Tensor ToSharedMemory(const at::Tensor& tensor);

// The handle another process passes to AttachSharedMemory to see `td`'s tensors (see the NOTE
// above); throws ValueError naming the first leaf that is not in shared memory.
//   td.share_memory_();
//   std::string handle = td::SharedMemoryHandle(td);   // send it to the other process
std::string SharedMemoryHandle(const TensorDict& td);

// A locked "shared_memory" TensorDict whose tensors are the memory `handle` describes, shared
// with every process using it. Throws ValueError for a malformed handle, c10::Error naming the
// process and descriptor when a segment cannot be attached (gone, not ours, token mismatch).
//   td::TensorDict shared = td::AttachSharedMemory(handle);
//   shared.get("x").add_(1);   // the creating process sees it
TensorDict AttachSharedMemory(const std::string& handle);

// The "shared_memory" storage backend: entries in memory, every tensor in shared memory (a
// tensor set here is copied into a new segment unless it already is in one), always on the CPU.
class SharedMemoryStorage final : public EntryStorage {
 public:
  explicit SharedMemoryStorage(std::vector<int64_t> batch_size);

  std::string_view backend_id() const override { return "shared_memory"; }
  Capabilities capabilities() const override {
    return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kReplaceEntries |
           Capability::kBatchResize | Capability::kCrossProcess;
  }
  // Tensors are moved into shared memory, nested TensorDicts become shared_memory levels.
  void set(std::string_view key, Value value) override;
  bool erase(std::string_view key) override;

  // Stores `value` as is (it is already shared / already a shared_memory level).
  void set_unchecked(std::string key, Value value);
};

}  // namespace td
