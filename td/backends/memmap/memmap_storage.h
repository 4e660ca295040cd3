// The "memmap" storage backend: one TensorDict level backed by a directory in the format of
// NOTE [ Memmap directory format ] (td/backends/memmap/format.h). Tensors are MemoryMappedTensors
// of the level's `.memmap` files, nested TensorDicts are MemmapStorages of sub-directories, and
// non-tensor data lives in its entry's meta.json. Users reach it through TensorDict::memmap,
// memmap_like and load_memmap (declared in td/core/tensordict.h, defined here); see
// docs/memmap.md.
//
// Capabilities: in_place_write | new_keys | replace_entries | batch_resize | persistent |
// cross_process | cpu_only when opened read-write; persistent | cpu_only when read-only (every
// write throws ValueError then). Opened by id ("memmap") with StorageSpec::path, it creates an
// empty memmap directory there (refusing an existing one); without a path, in a new directory
// under $TMPDIR that the caller owns.
// Writes to existing tensors (set_, index_put_, in-place ops) go straight to the files. A new or
// replaced key writes a new file under a temporary name and renames it into place, then rewrites
// meta.json atomically (a tensor a caller still holds keeps the old file's data); a deleted key
// rewrites meta.json, then removes the file. Each of those steps is atomic on its own; the whole
// directory is replaced atomically only by memmap() (NOTE [ Crash-safe memmap writes ]).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/entry_list.h"
#include "td/core/storage.h"

namespace td {

class MemmapStorage final : public EntryStorage {
 public:
  // A level whose directory is `dir` (absolute). `root`: the level load_memmap / memmap opened,
  // whose path may go through a symlink; nested levels never follow one. Entries are added by
  // the loader (AddLoaded).
  MemmapStorage(std::string dir, std::vector<int64_t> batch_size, MemmapMode mode, bool root);

  std::string_view backend_id() const override { return "memmap"; }
  Capabilities capabilities() const override;
  // Writes the value to the directory (see the file comment) and keeps the mapped result.
  // Throws ValueError when read-only or for a key that cannot be stored, MemmapError on I/O
  // failure (the entry is then unchanged).
  void set(std::string_view key, Value value) override;
  void set_(std::string_view key, const at::Tensor& value) override;
  bool erase(std::string_view key) override;
  // Also rewrites meta.json when read-write.
  void set_batch_size(std::vector<int64_t> batch_size) override;

  // The level's directory and how it was opened.
  const std::string& path() const { return dir_; }
  MemmapMode mode() const { return mode_; }

  // Loader only: appends an entry read from disk, writing nothing. Returns its index.
  size_t AddLoaded(std::string key, Value value);
  // Loader only: fills the tensor of entry `index` once its file is mapped.
  void SetLoadedTensor(size_t index, at::Tensor tensor);

 private:
  void RequireWritable(std::string_view what, std::string_view key) const;
  // meta.json of this level from the entries in memory, replaced atomically.
  void WriteMeta(int dirfd) const;
  int OpenLevel() const;  // a new descriptor of dir_ (caller closes)

  std::string dir_;
  MemmapMode mode_;
  bool root_;
};

}  // namespace td
