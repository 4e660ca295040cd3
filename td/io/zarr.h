// Zarr stores as TensorDicts: upstream's `TensorDict.to_zarr` / `from_zarr` (the zarr backend of
// tensordict/persistent.py), read and written here without zarr-python.
//
//   td::to_zarr(data, "/data/rollout.zarr");                    // zarr-python reads it
//   td::TensorDict back = td::from_zarr("/data/rollout.zarr");  // everything in memory
//   td::to_zarr(data, "/data/rows.zarr", td::ToZarrOptions().chunks({1024}));  // 1024 rows a chunk
//
// NOTE [ Zarr layout ]
// The layout upstream's zarr backend gives a store (tensordict/persistent.py, _ZarrBackend):
//  * a TensorDict level is a group; a nested key is a group path ("next/obs"); a tensor is an
//    array of its full shape (batch dims first), uncompressed, C order, chunked as
//    ToZarrOptions::chunks says; edge chunks are full-size files, as zarr writes them.
//  * every group carries the attribute `__tensordict__` = {"batch_size": [...], "version": 1},
//    plus "names": [...] (a string or null per batch dim) when the level has dim names;
//    from_zarr takes each level's batch size from it (else its parent's) and, as upstream, only
//    the root's names. A store without it at the root (another tool's) gets upstream's
//    inference: the longest run of leading dims shared by the arrays, nested levels first.
//  * non-tensor data is a 1-D uint8 array holding the value's JSON text, with the attribute
//    `__tensordict_non_tensor__` = {"encoding": "json"}. Upstream pickles values JSON cannot
//    hold ("pickle"): from_zarr refuses those, naming the key. An array of fixed-size strings
//    (numpy `S` / `U`, from other tools) reads as a JSON string, or a JSON array nested by shape
//    (zarr-python 3 writes strings variable-length, through filters, which are refused).
//  * keys read back in name order (zarr lists a group's members sorted), not insertion order.
// We write Zarr format 2 (.zgroup / .zattrs / .zarray, chunk files "i.j.k", consolidated
// .zmetadata as upstream), which zarr-python 2 and 3 read. We read format 2 (both separators,
// C and F order, either endianness, missing chunks as the fill value) and format 3 (zarr.json,
// regular grid, both chunk key encodings), compressed or not (NOTE [ Zarr codecs ] in
// td/io/zarr_codec.cc). Dtypes: bool, (u)int8/16/32/64, float16/32/64, complex64/128 (uint16
// and up from LibTorch 2.3; numpy has no bfloat16 or float8: refused, naming the key).
// Reading says each node to a structure::Builder (NOTE [ Structure codec ] in
// td/structure/structure.h).
// Bazel: //td/io:zarr. See docs/io.md.
#pragma once

#include <c10/core/Device.h>
#include <c10/util/Exception.h>
#include <torch/arg.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "td/core/tensordict.h"
#include "td/io/zarr_error.h"  // ZarrError

namespace td {

struct ToZarrOptions {
  // The chunk shape of the leading dims of every array (upstream's `chunks=`: a leaf of fewer
  // dims takes the first ones; trailing dims stay whole; values < 1 are 1). Empty: one chunk.
  TORCH_ARG(std::vector<int64_t>, chunks) = {};
  // Replace a store already at the path (upstream opens it with mode "w"); false: ValueError.
  // Only a Zarr store (or an empty directory) is ever replaced.
  TORCH_ARG(bool, overwrite) = true;
};

// Writes `td` (any backend) as a Zarr store at `path` (a directory; NOTE [ Zarr layout ]). The
// store is written beside `path` under a temporary name, then renamed into place (exchanged with
// a previous store atomically, where the file system allows it): a failure part-way leaves the
// previous store, or nothing, at `path`. Throws TypeError naming a key whose dtype Zarr cannot
// hold, ValueError naming a key that cannot be a Zarr name (empty, ".", "..", "/" inside, a
// metadata file name, not UTF-8) or a path that exists without `overwrite` or is not a Zarr
// store, ZarrError naming the file on I/O errors.
void to_zarr(const TensorDict& td, const std::string& path, const ToZarrOptions& options = {});

// Options of from_zarr (upstream's keyword arguments).
struct FromZarrOptions {
  // The root's batch size, instead of the stored one (nested levels keep theirs).
  TORCH_ARG(std::optional<std::vector<int64_t>>, batch_size) = std::nullopt;
  // Infer the batch size after reading (TensorDict::auto_batch_size_), nested levels first.
  TORCH_ARG(bool, auto_batch_size) = false;
  // At most this many inferred batch dims; implies auto_batch_size.
  TORCH_ARG(std::optional<int64_t>, batch_dims) = std::nullopt;
  TORCH_ARG(std::optional<at::Device>, device) = std::nullopt;
};

// Reads the Zarr group store at `path` (ours, upstream's, zarr-python's) into a dense
// TensorDict. Symlinked files are read; symlinked directories and non-regular files are refused.
// Each array costs one listing of its directory plus its chunk files, however large its grid.
// Throws ZarrError naming the store and the node (see ZarrError), ValueError when batch_size is
// combined with auto_batch_size or batch_dims, or is not a list of sizes.
TensorDict from_zarr(const std::string& path, const FromZarrOptions& options = {});

}  // namespace td
