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

// The compressor of a format 2 array (.zarray's "compressor"); ZarrError naming `where` and the
// compressor for one not read here (NOTE [ Zarr codecs ]).
ChunkCodec ParseV2Compressor(const nlohmann::json& compressor, const std::string& where);

// The codecs of a format 3 array (zarr.json's "codecs"), setting `*big_endian` from bytes'
// "endian"; ZarrError naming `where` and the codecs for a chain not read here.
ChunkCodec ParseV3Codecs(const nlohmann::json& codecs, const std::string& where,
                         bool* big_endian);

// read(2) until `n` bytes are read; ZarrError naming `path` on an error or an early end.
void ReadExactly(int fd, void* data, int64_t n, const std::string& path);

// Reads the chunk file `file` (open as `fd`, `file_size` bytes) into exactly `chunk_bytes` bytes
// at `out`, decompressing it with `c`; a ZarrError naming `where` (the array), the file and the
// codec otherwise (NOTE [ Zarr codecs ]).
void ReadChunkFile(const ChunkCodec& c, int fd, int64_t file_size, uint8_t* out,
                   int64_t chunk_bytes, const std::string& file, const std::string& where);

}  // namespace zarr
}  // namespace internal
}  // namespace td
