// Where the memmap loader reads a tree from (internal to the memmap backend and its archive
// mapping, //td/backends/memmap/archive).
//
// NOTE [ Memmap byte stores ]
// A memmap tree (NOTE [ Memmap directory format ] in format.h) is read by ONE loader
// (memmap_loader.cc: its rules, its checks, its errors) from a Store, which only lists
// directories, reads small files and maps tensor files:
//  * DiskStore: a directory on disk, through descriptors that never follow a symlink below the
//    top and hold the readers' shared flocks (NOTE [ Readers and removers of memmap
//    directories ] in fs.h); its levels are memmap levels (MemmapStorage), whose writes reach
//    the files;
//  * the zip archive of a ".tdz" file (td/backends/memmap/archive/archive.cc: NOTE [ Memmap
//    archive format ] in archive.h), whose entries are the files of such a tree: mapped once,
//    each leaf a view into the mapping (or inflated, or copied when unaligned); its levels are
//    dense TensorDicts (Store::memmap_levels() false).
// The loader names what it reads by paths: a directory's, or in an archive "<archive>::<entry>"
// ("run.tdz::next/meta.json"; the top is "run.tdz::"), so each error names the file or the
// entry.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "td/core/memmap_options.h"
#include "td/core/tensordict.h"
#include "td/executor/executor.h"
#include "td/os/fd.h"
#include "td/os/files.h"

namespace td {
namespace internal {
namespace memmap {

class Store {
 public:
  // A directory of the store: an open descriptor (DiskStore) or the entries' common prefix
  // ("" for the top, "next", "next/0": the archive's).
  struct Dir {
    std::shared_ptr<os::UniqueFd> fd;
    std::string prefix;
  };

  virtual ~Store() = default;
  // The entries of `dir` (at `path`), sorted by name.
  virtual absl::StatusOr<std::vector<os::DirEntry>> List(const Dir& dir,
                                                        const std::string& path) const = 0;
  // The sub-directory `name` of `dir`; `path` is its own.
  virtual absl::StatusOr<Dir> Open(const Dir& dir, const std::string& name,
                                   const std::string& path) const = 0;
  // The whole file `name` of `dir` (at `path`); an error when it is larger than `max_bytes`.
  virtual absl::StatusOr<std::string> Read(const Dir& dir, const std::string& name,
                                           size_t max_bytes, const std::string& path) const = 0;
  // The tensor file `name` of `dir` (at `path`) as a tensor of `dtype` and `shape` (`nbytes`
  // bytes, which the file must hold exactly; `key` names the entry in that error).
  virtual absl::StatusOr<at::Tensor> Map(const Dir& dir, const std::string& name,
                                         const std::string& path, const std::string& key,
                                         c10::ScalarType dtype, const std::vector<int64_t>& shape,
                                         int64_t nbytes, MemmapMode mode) const = 0;
  // Whether levels are MemmapStorage levels of the directory `path` (else dense TensorDicts).
  virtual bool memmap_levels() const = 0;
};

// Loads the tree `top` of `store` (at `path`) as load_memmap does: whatever it holds as a
// TensorDict (a level, a lazy stack, a tensorclass's tensors and fields), every rule checked,
// locked; `threads` map the files.
absl::StatusOr<TensorDict> LoadTree(const Store& store, Store::Dir top, const std::string& path,
                                    MemmapMode mode, const parallel::ParallelOptions& threads);

}  // namespace memmap
}  // namespace internal
}  // namespace td
