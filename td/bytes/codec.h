// Decompression of untrusted bytes (compressed Zarr chunks, deflated .tdz entries). Not API.
//
// NOTE [ Bounded decompression ]
// Every call is told the exact size the data must decompress to (a Zarr chunk's shape times its
// itemsize, a zip entry's size checked against meta.json) and writes into memory of that size,
// allocated by the caller first; decompressing to more, ending early, corrupt data or trailing
// bytes are errors. Sizes a file claims (zstd's frame content size, blosc's header) are only
// checked, never used to allocate, so a small file cannot make a reader allocate gigabytes (a
// decompression bomb). Errors do not name the file: the caller wraps them naming it and the codec.
// Bazel: //td/bytes:codec (zlib, libzstd, c-blosc 1.x).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace td {
namespace internal {
namespace codec {

enum class Format {
  kZstd,        // a Zstandard frame (or frames): numcodecs' Zstd, zarr-python 3's "zstd"
  kGzip,        // RFC 1952: numcodecs' GZip, zarr-python 3's "gzip"
  kZlib,        // RFC 1950: numcodecs' Zlib
  kBlosc,       // a c-blosc 1.x buffer: numcodecs' Blosc, zarr-python 3's "blosc"
  kRawDeflate,  // RFC 1951 without header: zip's method 8
};

// "zstd", "gzip", "zlib", "blosc", "deflate".
const char* FormatName(Format f);

// Decompresses the `n` bytes at `in` into exactly `out_size` bytes at `out`, else
// InvalidArgument (NOTE [ Bounded decompression ]).
absl::Status Decompress(Format f, const uint8_t* in, size_t n, uint8_t* out, size_t out_size);

// Streaming inflate (kGzip, kZlib, kRawDeflate): `source` fills `buf` with up to `cap` bytes,
// returning how many (0: the end); `sink` takes `expected` bytes (NOTE [ Bounded decompression ]).
using Source = std::function<absl::StatusOr<size_t>(uint8_t* buf, size_t cap)>;
using Sink = std::function<absl::Status(const uint8_t* data, size_t n)>;
absl::Status InflateStream(Format f, const Source& source, const Sink& sink, uint64_t expected);

// The largest size any Format here can compress `raw_bytes` bytes to (with room to spare): a
// larger file is refused before it is read.
uint64_t MaxCompressedSize(uint64_t raw_bytes);

// CRC-32 (zip's, zlib's crc32) of `n` bytes, continuing from `crc` (0 to start).
uint32_t Crc32(uint32_t crc, const void* data, size_t n);

}  // namespace codec
}  // namespace internal
}  // namespace td
