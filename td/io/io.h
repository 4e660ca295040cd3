// Saving and loading TensorDicts, upstream's module-level `save` / `load` and the members around
// them (`dumps`, `load_`, `load_memmap_`, `memmap_refresh_`, `saved_path`, `make_memmap*`), as
// free functions, through the format drivers (NOTE [ Format drivers ] in td/format/format.h):
// all Python tensordict 0.14's formats, chosen as SaveOptions::format / LoadOptions::format say.
//
//   td::save(data, "/ckpt/step100");              // a memmap directory, as data.memmap(...)
//   td::save(data, "/ckpt/step100.tdz");          // one file; Python's TensorDict.load reads it
//   td::TensorDict back = td::load("/ckpt/step100.tdz");
//   td::save(data, "/ckpt/c", td::SaveOptions().format("consolidated"));
//   td::load_(live, "/ckpt/step100");             // the file's entries into an existing TensorDict
// Bazel: //td/io. See docs/io.md.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Storage.h>
#include <torch/arg.h>

#include <optional>
#include <string>

#include "td/core/tensordict.h"
#include "td/executor/executor.h"

namespace td {

// Options of save / dumps. The parallel options: the threads writing leaves, as MemmapOptions'
// (an archive is then written by one thread).
struct SaveOptions : parallel::WithParallelOptions<SaveOptions> {
  SaveOptions() : parallel::WithParallelOptions<SaveOptions>(MemmapOptions().parallel_options()) {}
  // true: write a memmap archive (one zip file); false: a memmap directory; nullopt (upstream's
  // default): an archive when the path ends in ".tdz".
  TORCH_ARG(std::optional<bool>, archive) = std::nullopt;
  // As MemmapOptions::copy_existing.
  TORCH_ARG(bool, copy_existing) = false;
  // false: ValueError when a memmap directory or a file is already at the path.
  TORCH_ARG(bool, exists_ok) = true;
  // The format driver to write with ("memmap", "tdz", "consolidated", "zarr", "h5", those
  // linked); nullopt: "tdz" for archive(true), else the one of the path's suffix (".tdz", ".zarr",
  // ".h5"), else "memmap". The parallel options and copy_existing apply to "memmap" and "tdz".
  TORCH_ARG(std::optional<std::string>, format) = std::nullopt;
};

// Writes `td` to `prefix` (in the format SaveOptions chooses) and returns it loaded from there
// (an archive read-only). A TensorDict on the memmap backend is packed from its directory.
// Throws as TensorDict::memmap and pack_memmap do, ValueError for an existing path without
// exists_ok.
//   td::save(params, "/ckpt/params.tdz");
TensorDict save(const TensorDict& td, const std::string& prefix, const SaveOptions& options = {});
// Upstream's alias of save.
TensorDict dumps(const TensorDict& td, const std::string& prefix, const SaveOptions& options = {});

// Options of load / load_. The parallel options: the threads mapping a directory's files.
struct LoadOptions : parallel::WithParallelOptions<LoadOptions> {
  LoadOptions()
      : parallel::WithParallelOptions<LoadOptions>(LoadMemmapOptions().parallel_options()) {}
  // nullopt: each format's default, read-write mapping for a directory (as load_memmap) and a
  // private copy-on-write one for an archive (as upstream's mode "r"); see MemmapMode.
  TORCH_ARG(std::optional<MemmapMode>, mode) = std::nullopt;
  // Load the sub-TensorDict at this key only.
  TORCH_ARG(std::optional<NestedKey>, sub_path) = std::nullopt;
  // The format driver to read with; nullopt: the one that recognises the path (Driver::detect),
  // else as SaveOptions::format. mode and parallel apply to "memmap" and "tdz".
  TORCH_ARG(std::optional<std::string>, format) = std::nullopt;
};

// Loads what save() (or Python's save / memmap / pack_memmap) wrote, as LoadOptions::format
// says. Throws MemmapError naming the path and the problem.
TensorDict load(const std::string& prefix, const LoadOptions& options = {});

// Loads `prefix` and writes its entries into `td` (upstream's load_ / load_memmap_): update()
// with the loaded entries (keys of `td` the file lacks stay; nested levels merge). A locked
// TensorDict on the memmap backend is unlocked for the update and locked again (its files then
// hold the loaded values); another locked TensorDict throws LockedError for a key it lacks.
// Throws as load() and update() do (BatchSizeError naming a key that does not fit `td`).
TensorDict& load_(TensorDict& td, const std::string& prefix, const LoadOptions& options = {});
TensorDict& load_memmap_(TensorDict& td, const std::string& prefix,
                         const LoadOptions& options = {});

// The directory of a TensorDict on the memmap backend (a sub-TensorDict's is its
// sub-directory). Throws ValueError when `td` is on another backend (upstream's AttributeError).
std::string saved_path(const TensorDict& td);

// Re-reads the memmap directory `td` was loaded from (saved_path) and makes `td` that fresh
// TensorDict, with the keys another process added or removed since (upstream's
// memmap_refresh_); tensor data needs no refresh (mapped shared). Other copies of the handle keep
// the old view. Throws ValueError when `td` is not on the memmap backend.
TensorDict& memmap_refresh_(TensorDict& td);

// A new zero-filled memory-mapped tensor as a new file under `key` of `td`, which must be on the
// memmap backend (upstream's make_memmap); missing levels are created, the lock is ignored.
// Throws ValueError when `td` is not memory-mapped or `key` exists, and as set() does.
//   at::Tensor frames = td::make_memmap(ds, {"obs", "pixels"}, {n, 84, 84}, at::kByte);
at::Tensor make_memmap(TensorDict& td, const NestedKey& key, at::IntArrayRef shape,
                       at::ScalarType dtype = at::kFloat);
// A new file under `key` holding a copy of `tensor` (or zeros of its shape and dtype when
// !copy_data). Throws as make_memmap.
at::Tensor make_memmap_from_tensor(TensorDict& td, const NestedKey& key, const at::Tensor& tensor,
                                   bool copy_data = true);
// A new file under `key` holding a copy of the first numel(shape) elements of `storage` viewed as
// `dtype`. Throws ValueError naming the key when the storage is too small, and as make_memmap.
at::Tensor make_memmap_from_storage(TensorDict& td, const NestedKey& key, const c10::Storage& storage,
                                    at::IntArrayRef shape, at::ScalarType dtype = at::kFloat);

}  // namespace td
