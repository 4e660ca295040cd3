// The "memmap" storage backend: one TensorDict level backed by a directory in the format of
// NOTE [ Memmap directory format ] (td/backends/memmap/format.h). Tensors are MemoryMappedTensors
// of the level's `.memmap` files, nested TensorDicts are MemmapStorages of sub-directories, and
// non-tensor data lives in its entry's meta.json. Users reach it through TensorDict::memmap,
// memmap_like and load_memmap (declared in td/core/tensordict.h, defined here); see
// docs/memmap.md.
//
// Capabilities: in_place_write | new_keys | replace_entries | batch_resize | cross_process when
// opened read-write; batch_resize alone when read-only (every write throws then; the batch size
// changes in memory only). Its device is always the CPU. Opened by id ("memmap") with
// StorageSpec::path, it creates an empty memmap directory there (refusing an existing one);
// without a path, in a new directory under $TMPDIR that the caller owns.
// Writes to existing tensors (set_, index_put_, in-place ops) go straight to the files. A new,
// replaced or deleted key swaps in the level's next directory, so a kill at any moment leaves the
// level as before or after the write (NOTE [ Crash-safe level writes ] in memmap_internal.h); a
// tensor a caller still holds keeps the old file's data. set_batch_size replaces meta.json
// atomically.
// Indexing reads the files where they are: a basic index (a slice, an integer, Ellipsis, None)
// of a memory-mapped TensorDict gives a dense TensorDict whose tensors are views of the mapped
// files (writes into them write the files); an advanced index (a tensor of rows, a mask) and
// td::data::BatchLoader batches are copies. See docs/memmap.md.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "td/backends/memmap/memory_mapped_tensor.h"
#include "td/core/internal/entry_list.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {

// td.memmap_like(prefix, options), except that every file's blocks are reserved up front
// (posix_fallocate) instead of left sparse: filling the TensorDict later can no longer run out of
// disk space (which, through a mapping, is a SIGBUS that kills the process, not an error), at the
// price of writing or allocating the whole size now. Throws MemmapError naming the file and the
// key ("no room: cannot reserve the N bytes of ...: No space left on device") when the file system
// cannot hold it; nothing is then left under `prefix`. See docs/memmap.md.
//   td::TensorDict data = td::MemmapLikeReserved(spec.expand({1000000}), "/data/ds");
TensorDict MemmapLikeReserved(const TensorDict& td, const std::string& prefix,
                              const MemmapOptions& options = MemmapOptions());

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
  // Loader only: fills entry `index` once its file is mapped (or its lazy stack built).
  void SetLoaded(size_t index, Value value);
  // Loader only: appends a field of the tensorclass whose tensors this level holds; it is
  // stored in that tensorclass's `meta_path`, so it is never written to this level's meta.json
  // and set() / del_() of it throw ValueError.
  void AddField(std::string key, Value value, std::string meta_path);
  // Loader only: `key`'s file is `name` (a raw pre-0.13 name; "" for a zero-element tensor
  // without a file) rather than its escaped name.
  void SetFileName(const std::string& key, std::string name);

  // The names `key`'s value `v` occupies in this level's directory: its file or directory as
  // loaded (the escaped name unless SetFileName said otherwise), and a nested tensor's sizes
  // file; none for a zero-element tensor without a file.
  std::vector<std::string> FilesOf(const std::string& key, const Value& v) const;
  // True for a tensorclass field added by AddField.
  bool IsField(const std::string& key) const;

 private:
  void RequireWritable(std::string_view what, std::string_view key) const;
  void RequireNotField(std::string_view what, std::string_view key) const;
  // meta.json of this level from the entries in memory with `batch_size`, without `skip_key`,
  // with `add_key` set to `add_value` (in its place when it exists, else last).
  std::string MetaJson(at::IntArrayRef batch_size, const std::string* skip_key,
                       const std::string* add_key, const Value* add_value) const;

  std::string dir_;
  MemmapMode mode_;
  bool root_;
  absl::flat_hash_map<std::string, std::string> fields_;  // tensorclass field -> its meta.json
  absl::flat_hash_map<std::string, std::string> file_names_;  // key -> file, when not escaped
};

}  // namespace td
