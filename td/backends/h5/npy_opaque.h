// Internal to //td/backends/h5: non-tensor data as h5py's tagged opaque data, the form Python
// tensordict stores non-string non-tensor values in HDF5. Bytes only; h5_io.cc does the I/O.
//
// NOTE [ HDF5 opaque data ]
// Upstream v0.14's _H5Backend.encode_non_tensor (tensordict/persistent.py) stores a non-string
// non-tensor value as `np.array(value)` cast to `h5py.opaque_dtype(...)`: an HDF5 opaque type of
// numpy's item size tagged "NUMPY:" + the dtype's str ("NUMPY:<i8" for the int 5, "NUMPY:<U2"
// for ["a", "bc"]), holding numpy's bytes in the dataset's shape. h5py reads it back as that
// numpy dtype (np.int64(5) for 5, an ndarray for a list). Nothing is pickled: object arrays
// (None, dicts, ragged lists, ints past 64 bits) are a TypeError in upstream.
//  * Reading (DecodeOpaque): tags of bool, int8-64, uint8-64, float16/32/64 (any byte order) and
//    fixed-size unicode ("U") and byte ("S") strings decode to JSON (an ndarray as nested arrays).
//    Any other opaque data (complex, datetime, structured, another or no tag, an item size that
//    disagrees with the tag, bytes not UTF-8) is not an error: it reads as its description
//    {"hdf5_opaque": {"tag": "NUMPY:<c16", "shape": [2], "item_size": 16, "base64": "..."}},
//    which written back is the same opaque dataset again.
//  * Writing (EncodeOpaque): the values whose numpy form reads back as the same JSON: a bool, an
//    integer in int64 ("<i8"; a scalar in (2^63, 2^64): "<u8"), a float ("<f8"), and rectangular
//    arrays of all bools ("|b1"), all integers in int64 ("<i8"), numbers with a float ("<f8",
//    integers up to 2^53 only), all strings ("<U" + the longest in code points); [] is numpy's
//    empty float64. Other values are nullopt: the caller keeps the JSON-text form
//    (NOTE [ HDF5 layout ] in h5.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace td::h5::internal {

// The largest opaque dataset read as a non-tensor value (a get() of a larger one is an error).
inline constexpr int64_t kMaxOpaqueBytes = int64_t{64} << 20;

struct OpaqueData {
  std::string tag;             // the HDF5 opaque tag ("NUMPY:<i8"); "" when it has none
  int64_t item_size = 0;       // the HDF5 type's size in bytes
  std::vector<int64_t> shape;  // the dataspace's dims; [] for a scalar
  std::string bytes;           // numel x item_size bytes, row-major
};

// `flat` (row-major, numel of `shape` values) nested as arrays by `shape`; flat[0] for [].
nlohmann::json NestFlat(std::vector<nlohmann::json> flat, const std::vector<int64_t>& shape);

// The JSON value of opaque data, or its description. InvalidArgument only when `bytes` does not
// hold numel x item_size bytes, or for more than 32 dims.
absl::StatusOr<nlohmann::json> DecodeOpaque(const OpaqueData& data);

// `value` as upstream would store it, or nullopt when it keeps the JSON-text form. A description
// encodes to its data; InvalidArgument naming what is wrong when it is malformed.
absl::StatusOr<std::optional<OpaqueData>> EncodeOpaque(const nlohmann::json& value);

}  // namespace td::h5::internal
