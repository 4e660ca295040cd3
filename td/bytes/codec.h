// Decompression of untrusted bytes for the format readers (not API): Zarr chunks compressed with
// zstd, gzip, zlib or blosc (td/io/zarr_codec.cc) and deflated .tdz entries
// (td/backends/memmap/archive/archive.cc).
//
// NOTE [ Bounded decompression ]
// Every call is told the exact size the data must decompress to (a Zarr chunk's shape times its
// itemsize, a zip entry's declared size checked against what meta.json needs) and writes into
// memory of that size, allocated by the caller before any byte is decompressed; a stream that
// decompresses to more stops when that memory is full and is an error, as is one that ends
// early, is corrupt or is followed by other bytes. Sizes a file claims (zstd's frame content
// size, blosc's header) are checked against the expected size, never used to allocate, so a
// small file cannot make a reader allocate gigabytes (a decompression bomb). Errors are
// absl::Status messages without the file's name: the caller wraps them into its own error type
// naming the store, the node or the entry, and the codec.
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

// Decompresses the `n` bytes at `in` into exactly `out_size` bytes at `out` (NOTE [ Bounded
// decompression ]). InvalidArgument when the data is corrupt, decompresses to another size or
// is followed by other bytes.
absl::Status Decompress(Format f, const uint8_t* in, size_t n, uint8_t* out, size_t out_size);

// Streaming inflate (kGzip, kZlib, kRawDeflate) of data too large to hold: `source` fills its
// buffer with up to `cap` compressed bytes and returns how many (0: no more), `sink` takes the
// output piece by piece, `expected` bytes in all (NOTE [ Bounded decompression ]).
using Source = std::function<absl::StatusOr<size_t>(uint8_t* buf, size_t cap)>;
using Sink = std::function<absl::Status(const uint8_t* data, size_t n)>;
absl::Status InflateStream(Format f, const Source& source, const Sink& sink, uint64_t expected);

// The largest file a chunk of `raw_bytes` bytes can take compressed by any Format here (the
// worst case of incompressible data plus headers, with room to spare): a file larger than this
// is refused before it is read.
uint64_t MaxCompressedSize(uint64_t raw_bytes);

// CRC-32 (zip's, zlib's crc32) of `n` bytes, continuing from `crc` (0 to start).
uint32_t Crc32(uint32_t crc, const void* data, size_t n);

}  // namespace codec
}  // namespace internal
}  // namespace td
