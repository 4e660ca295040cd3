// Zarr's files, codecs, dtypes and metadata, internal to //td/io:zarr (NOTE [ Zarr layout ] in
// td/io/zarr.h). Not API.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "td/bytes/codec.h"
#include "td/io/zarr_error.h"
#include "td/os/files.h"

namespace td {
namespace internal {
namespace zarr {

using json = nlohmann::json;

// ---- files ---------------------------------------------------------------------------------

// The entries of the store's directory `path` (os::ListDir), each kDirectory or kFile (anything
// else: refused when read as a file). A symlink to a directory is never followed: a ZarrError
// with `refuse_dir_links`, else a kDirectory. ZarrError naming `path` when it cannot be listed.
std::vector<os::DirEntry> ListStoreDir(const std::string& path, bool refuse_dir_links);
// structure::ParseJson of `text`; ZarrError naming `path` for text that is not valid JSON.
json ParseJson(std::string_view text, const std::string& path);

// ---- chunk codecs (NOTE [ Zarr codecs ] in td/io/zarr_codec.cc) ---------------------------

// How an array's chunk files hold its bytes: raw, or compressed in one format.
struct ChunkCodec {
  std::optional<codec::Format> format;  // nullopt: raw
  std::string name;  // as named in the metadata ("blosc", "numcodecs.zlib"), for messages
};
// The compressor of a format 2 array (.zarray's "compressor"); ZarrError naming `where` and the
// compressor for one not read here.
ChunkCodec ParseV2Compressor(const json& compressor, const std::string& where);
// The codecs of a format 3 array (zarr.json's "codecs"), setting `*big_endian` from bytes'
// "endian"; ZarrError naming `where` and the codecs for a chain not read here.
ChunkCodec ParseV3Codecs(const json& codecs, const std::string& where, bool* big_endian);
// read(2) until `n` bytes are read; ZarrError naming `path` on an error or an early end.
void ReadExactly(int fd, void* data, int64_t n, const std::string& path);
// Reads the chunk file `file` (open as `fd`, `file_size` bytes) into exactly `chunk_bytes` bytes
// at `out`, decompressing with `c`; else a ZarrError naming `where`, the file and the codec.
void ReadChunkFile(const ChunkCodec& c, int fd, int64_t file_size, uint8_t* out,
                   int64_t chunk_bytes, const std::string& file, const std::string& where);

// ---- dtypes and metadata -------------------------------------------------------------------

// How an array's elements are stored: a LibTorch dtype, or fixed-size strings.
struct ElemType {
  enum Kind { kTensor, kBytes, kUnicode } kind = kTensor;
  at::ScalarType dtype = at::kByte;
  int64_t itemsize = 1;
  bool big_endian = false;
};

// numpy's dtype string of `dtype` ("<f4", "|b1"), or "" when Zarr cannot hold it here.
std::string NumpyDtype(at::ScalarType dtype);

// An array's metadata, from either format.
struct ArrayMeta {
  std::vector<int64_t> shape, chunks;
  ElemType type;
  bool fortran = false;
  json fill;  // null: zeros
  bool v3_default_keys = false;  // "c/0/0" (v3's default) rather than "0.0"
  std::string separator = ".";
  ChunkCodec codec;
};

// A node: a group, an array, or nothing (a directory without Zarr metadata).
struct Node {
  enum Kind { kNone, kGroup, kArray } kind = kNone;
  json attrs = json::object();
  ArrayMeta array;
};

// The metadata files of a node's directory, as read (nullopt: no such file).
struct NodeTexts {
  std::optional<std::string> zarray, zgroup, zattrs, zarr_json;
};
// The node `texts` describe (`where` names its directory in messages): format 2's .zarray, else
// its .zgroup (either with .zattrs), else format 3's zarr.json. ZarrError for metadata malformed
// or not supported. No file system access (the fuzz target zarr_meta_fuzzer.cc calls it).
Node ParseNode(const NodeTexts& texts, const std::string& where);
// ParseNode of the files in directory `dir`.
Node ReadNode(const std::string& dir, const std::string& where);

// ---- array data ----------------------------------------------------------------------------

// The fill value's bytes in stored order ([itemsize] uint8; zeros for null and for strings).
// ZarrError naming `where` for a fill value the dtype cannot hold (300 as int8, NaN as int32).
at::Tensor FillBytes(const ArrayMeta& a, const std::string& where);
// The name of the chunk at grid coordinates `coords` ("0.1", "c/0/1", "0" for a 0-d array).
std::string ChunkKey(const ArrayMeta& a, const std::vector<int64_t>& coords);
// ChunkKey's inverse for the grid `grid` of chunks per dim; nullopt for a name that is no chunk
// of `a` (zarr-python skips those files).
std::optional<std::vector<int64_t>> ChunkCoords(const ArrayMeta& a, const std::string& key,
                                                const std::vector<int64_t>& grid);
// The array's elements in LibTorch's byte order, uint8 of shape [*shape, itemsize], read from the
// chunk files in `dir` (missing ones hold the fill value).
at::Tensor ReadRaw(const ArrayMeta& a, const std::string& dir, const std::string& where);
// Fixed-size strings (raw bytes of a kBytes / kUnicode array from `dim` on) as JSON: a string, or
// arrays nested by shape.
json Strings(const ArrayMeta& a, const uint8_t* p, size_t dim);

}  // namespace zarr
}  // namespace internal
}  // namespace td
