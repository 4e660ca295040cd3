// The "h5" storage backend: an HDF5 file (or a group inside one) as a TensorDict, the C++
// counterpart of Python tensordict's PersistentTensorDict (`TensorDict.from_h5`, `to_h5`).
//
//   td::h5::H5TensorDict data = td::h5::open("demos.hdf5", td::h5::OpenOptions().group("data"));
//   at::Tensor actions = data.get({"demo_0", "actions"});      // reads that dataset only
//   td::TensorDict rows = data.index({at::tensor({7, 3, 9})});  // lazy: nothing read yet
//   rows.get("obs");                                            // reads rows 3, 7, 9 only
//   td::h5::to_h5(td, "out.h5");                                // upstream's layout, h5py reads it
//   td::TensorDict dense = td::h5::from_h5("out.h5");           // everything in memory
//
// NOTE [ HDF5 layout ]
// Python tensordict's layout (tensordict/persistent.py), so files go both ways with h5py:
//  * a nested TensorDict is a group, a tensor a dataset of its full shape (batch dims first) and
//    dtype (bool as h5py's enum {FALSE, TRUE} of int8, float16 as h5py's IEEE half); nested keys
//    are group paths ("next/obs"). A key that cannot be one HDF5 name ('/' inside, ".", "") is a
//    ValueError naming it.
//  * non-tensor data: a string is a scalar variable-length UTF-8 string dataset; bools, numbers
//    and rectangular arrays of one kind of them or of strings are h5py's tagged opaque data, as
//    upstream v0.14 writes them (NOTE [ HDF5 opaque data ] in npy_opaque.h); any other JSON value
//    is a scalar string dataset of its JSON text with the attribute `tensordict_json` = 1. On
//    reading, a scalar string dataset is a JSON string, an array of strings (h5py's `S` / `str`)
//    a JSON array of strings, opaque data its JSON value or, without one, its description.
//  * batch sizes: every group we write carries the attribute `__tensordict__`, the JSON text
//    {"batch_size": [...], "version": 1} (as upstream's zarr backend; h5py and upstream's from_h5
//    ignore it). On opening, a group's batch size is the one given (OpenOptions::batch_size;
//    sub-groups take it, or their stored one where that extends it), else the attribute, else
//    the inference of upstream's _check_batch_size: the longest prefix of its datasets' shapes
//    and sub-groups' batch sizes, non-tensor data left out (v0.14's from_h5 counts opaque data).
//  * links iterate in creation order where the group tracks it (every group we create does), in
//    name order otherwise (h5py's default).
//  * attributes are not entries: H5TensorDict::attrs() reads them as JSON (robomimic keeps
//    env_args there), leaving out the layout's own two, which set_attr refuses. h5py.Empty reads
//    as null; bools as NOTE [ HDF5 bools ] in h5_io.h says.
// Reads are lazy: get() reads one dataset through the selection; index() with integers, slices
// (step > 0), Ellipsis and at most one 1-D index or mask tensor composes into the selection
// (nothing read); other indices read the keys and index in memory. Writes go to the file:
// set_(), index_put_() and in-place math write the selected hyperslab; set() of a new key
// creates a dataset (of the file's full batch dims when written through a selection); set()
// replacing a key with another shape or dtype, del_(), rename_key_() and set_batch_size() change
// the file (on the opened TensorDict only). Errors: NOTE [ HDF5 errors ] in h5_io.h.
//
// Capabilities: in_place_write | new_keys | replace_entries | batch_resize | lazy | persistent |
// cpu_only opened read-write; an index of it lacks replace_entries and batch_resize; read-only,
// lazy | persistent | cpu_only (every write is a ValueError naming the file). Threads: NOTE [ One
// HDF5 lock ] in h5_io.h. Bazel: //td/backends/h5. See docs/backends.md.
#pragma once

#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "td/core/errors.h"
#include "td/core/tensordict.h"

namespace td::h5 {

// An HDF5 file that cannot be opened, read or written, or whose content does not fit a
// TensorDict (NOTE [ HDF5 errors ] in h5_io.h); the message names the file and the key.
class H5Error : public c10::Error {
 public:
  using c10::Error::Error;
};

enum class Mode { kReadOnly, kReadWrite };

// How new datasets are laid out (to_h5, set() of new keys): upstream's create_dataset `**kwargs`.
struct DatasetOptions {
  // "" (contiguous, uncompressed) or "gzip" (deflate, chunked).
  TORCH_ARG(std::string, compression) = "";
  // gzip level, 0-9.
  TORCH_ARG(int, compression_level) = 4;
  // Rows (first dim) per chunk when chunked; 0 picks about 1 MiB per chunk.
  TORCH_ARG(int64_t, chunk_rows) = 0;
};

struct OpenOptions {
  // Upstream's default mode is "r".
  TORCH_ARG(Mode, mode) = Mode::kReadOnly;
  // The group to open ("/" or "" for the whole file; "/data/demo_0" for one group).
  TORCH_ARG(std::string, group) = "/";
  // The opened group's batch size; nullopt: from the file (NOTE [ HDF5 layout ]).
  TORCH_ARG(std::optional<std::vector<int64_t>>, batch_size) = std::nullopt;
  // For datasets created through the TensorDict.
  TORCH_ARG(DatasetOptions, datasets) = {};
};

struct ToH5Options {
  // Replace an existing file at the path (upstream's mode "w"); false: H5Error when it exists.
  TORCH_ARG(bool, overwrite) = true;
  TORCH_ARG(DatasetOptions, datasets) = {};
};

// A TensorDict on the "h5" backend, with the HDF5-specific queries; copies share the file.
class H5TensorDict : public TensorDict {
 public:
  // `td` as an H5TensorDict, or nullopt when it is on another backend.
  //   if (auto h = td::h5::H5TensorDict::from(t)) std::cout << h->filename();
  static std::optional<H5TensorDict> from(const TensorDict& td);

  // The file's path, as it was opened.
  const std::string& filename() const;
  // The HDF5 path of this level's group ("/", "/data/demo_0").
  std::string group() const;
  Mode mode() const;
  // True when this TensorDict is an index of an opened one (it reads a selection of the rows).
  bool is_selection() const;
  // The attributes of this level's group (key "") or of `key` below it as a JSON object. Throws
  // KeyError for a missing key, H5Error naming the attribute for a type JSON cannot hold.
  //   int64_t n = demo.attrs()["num_samples"];
  nlohmann::json attrs(const NestedKey& key = "") const;
  // Sets (or replaces) attribute `name` of this level's group (key "") or of `key` below it: a
  // number, bool or string, or an array of one of them (null: an empty attribute). ValueError
  // when read-only, or for the layout's own names.
  void set_attr(const std::string& name, const nlohmann::json& value,
                const NestedKey& key = "");
  // Writes HDF5's buffers to the file (H5Fflush); also done when the last handle closes it.
  void flush() const;

 private:
  explicit H5TensorDict(const TensorDict& td) : TensorDict(td) {}
};

// Opens `path` (a file h5py, upstream's to_h5 or ours wrote) as a TensorDict. Throws H5Error
// naming the file and the problem (NOTE [ HDF5 errors ] in h5_io.h, or a missing group),
// ValueError for bad options.
//   auto demo = td::h5::open(path, td::h5::OpenOptions().group("/data/demo_0"));
H5TensorDict open(const std::string& path, const OpenOptions& options = {});

// Writes `td` (any backend) to a new HDF5 file at `path` in upstream's layout and returns it
// opened read-write. Throws H5Error (file exists without overwrite, I/O) naming the file, or
// TypeError naming a key whose dtype HDF5 cannot store here (complex, bfloat16, quantized).
//   td::h5::H5TensorDict file = td::h5::to_h5(data, "/data/out.h5");
H5TensorDict to_h5(const TensorDict& td, const std::string& path, const ToH5Options& options = {});

// Reads the whole file (or OpenOptions::group) into a dense TensorDict.
TensorDict from_h5(const std::string& path, const OpenOptions& options = {});

}  // namespace td::h5
