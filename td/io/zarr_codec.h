// The compressors of Zarr chunks (internal to //td/io:zarr_format): which one an array's
// metadata names, in format 2 ("compressor") or 3 ("codecs"), and a chunk file decompressed.
// NOTE [ Zarr codecs ] in td/io/zarr_codec.cc says what is read. Not API.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "td/bytes/codec.h"

namespace td {
namespace internal {
namespace zarr {

// How an array's chunk files hold its bytes: raw, or compressed in one format.
struct ChunkCodec {
  std::optional<codec::Format> format;  // nullopt: raw
  // The codec as named in the metadata ("blosc", "zstd", "numcodecs.zlib"), for messages.
  std::string name;
};

// The compressor of a format 2 array (.zarray's "compressor": null, or an object whose "id" is
// blosc, zstd, gzip or zlib); ZarrError naming `where` and the compressor for another one.
ChunkCodec ParseV2Compressor(const nlohmann::json& compressor, const std::string& where);

// The codecs of a format 3 array (zarr.json's "codecs"): "bytes", then at most one of zstd,
// gzip, blosc. Sets `*big_endian` from bytes' "endian". ZarrError naming `where` and the codecs
// for any other chain (transpose, sharding, crc32c, two compressors).
ChunkCodec ParseV3Codecs(const nlohmann::json& codecs, const std::string& where,
                         bool* big_endian);

// read(2) until `n` bytes are read; ZarrError naming `path` on an error or an early end.
void ReadExactly(int fd, void* data, int64_t n, const std::string& path);

// Reads the chunk file `file` (open as `fd`, `file_size` bytes) into exactly `chunk_bytes` bytes
// at `out`, decompressing it with `c` (NOTE [ Bounded decompression ] in td/bytes/codec.h).
// ZarrError naming `where` (the array), the file and the codec when the file is too large for
// the chunk, corrupt or decompresses to another size.
void ReadChunkFile(const ChunkCodec& c, int fd, int64_t file_size, uint8_t* out,
                   int64_t chunk_bytes, const std::string& file, const std::string& where);

}  // namespace zarr
}  // namespace internal
}  // namespace td
