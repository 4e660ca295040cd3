// Decompression of untrusted bytes (NOTE [ Bounded decompression ] in td/bytes/codec.h).
#include "td/bytes/codec.h"

#include <blosc.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <algorithm>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"

namespace td {
namespace internal {
namespace codec {
namespace {

// zlib counts in uInt (32 bits): larger buffers go through in pieces of this size.
constexpr size_t kZlibPiece = size_t{1} << 30;

template <class... Args>
absl::Status Wrong(Format f, const Args&... what) {
  return absl::InvalidArgumentError(absl::StrCat(FormatName(f), ": ", what...));
}

absl::Status Zstd(const uint8_t* in, size_t n, uint8_t* out, size_t out_size) {
  // Single-shot into the caller's buffer: ZSTD_decompress stops with dstSize_tooSmall instead
  // of writing past it, whatever the frame header says; concatenated frames are decoded.
  const size_t got = ZSTD_decompress(out, out_size, in, n);
  if (ZSTD_isError(got)) {
    if (ZSTD_getErrorCode(got) == ZSTD_error_dstSize_tooSmall) {
      return Wrong(Format::kZstd, "decompresses to more than the expected ", out_size, " bytes");
    }
    return Wrong(Format::kZstd, "corrupt stream (", ZSTD_getErrorName(got), ")");
  }
  if (got != out_size) {
    return Wrong(Format::kZstd, "decompresses to ", got, " bytes, expected ", out_size);
  }
  return absl::OkStatus();
}

absl::Status Blosc(const uint8_t* in, size_t n, uint8_t* out, size_t out_size) {
  if (n < BLOSC_MIN_HEADER_LENGTH) {
    return Wrong(Format::kBlosc, n, " bytes are shorter than a blosc header");
  }
  size_t nbytes = 0, cbytes = 0, blocksize = 0;
  blosc_cbuffer_sizes(in, &nbytes, &cbytes, &blocksize);
  if (cbytes != n) {
    return Wrong(Format::kBlosc, "the header says ", cbytes, " compressed bytes, the data holds ",
                 n);
  }
  if (nbytes != out_size) {
    return Wrong(Format::kBlosc, "the header says ", nbytes, " decompressed bytes, expected ",
                 out_size);
  }
  // Checks the header against the buffer's length: what makes decompressing it memory-safe.
  if (blosc_cbuffer_validate(in, n, &nbytes) != 0 || nbytes != out_size) {
    return Wrong(Format::kBlosc, "corrupt header");
  }
  if (out_size > static_cast<size_t>(std::numeric_limits<int>::max())) {
    return Wrong(Format::kBlosc, "buffers past 2 GiB are not blosc 1.x buffers");
  }
  // The context form: no global state, no lock, safe from several threads; shuffle and
  // bitshuffle are undone from the header's flags.
  const int got = blosc_decompress_ctx(in, out, out_size, /*numinternalthreads=*/1);
  if (got < 0 || static_cast<size_t>(got) != out_size) {
    return Wrong(Format::kBlosc, "corrupt stream (blosc_decompress_ctx returned ", got, ")");
  }
  return absl::OkStatus();
}

}  // namespace

const char* FormatName(Format f) {
  static constexpr const char* kNames[] = {"zstd", "gzip", "zlib", "blosc", "deflate"};
  const auto i = static_cast<size_t>(f);
  return i < std::size(kNames) ? kNames[i] : "?";
}

absl::Status Decompress(Format f, const uint8_t* in, size_t n, uint8_t* out, size_t out_size) {
  if (f == Format::kZstd) return Zstd(in, n, out, out_size);
  if (f == Format::kBlosc) return Blosc(in, n, out, out_size);
  size_t read = 0, written = 0;
  return InflateStream(
      f,
      [&](uint8_t* buf, size_t cap) -> absl::StatusOr<size_t> {
        const size_t k = std::min(cap, n - read);
        std::copy(in + read, in + read + k, buf);
        read += k;
        return k;
      },
      [&](const uint8_t* data, size_t k) {
        std::copy(data, data + k, out + written);  // k <= out_size - written: InflateStream checks
        written += k;
        return absl::OkStatus();
      },
      out_size);
}

absl::Status InflateStream(Format f, const Source& source, const Sink& sink, uint64_t expected) {
  if (f != Format::kGzip && f != Format::kZlib && f != Format::kRawDeflate) {
    return Wrong(f, "not a deflate format");
  }
  // gzip: header and trailer; zlib: header, not auto-detected (numcodecs writes one kind).
  const int window_bits = f == Format::kGzip   ? 16 + MAX_WBITS
                          : f == Format::kZlib ? MAX_WBITS
                                               : -MAX_WBITS;
  z_stream z{};
  if (inflateInit2(&z, window_bits) != Z_OK) return Wrong(f, "cannot start zlib's inflate");
  const absl::Cleanup end = [&z] { inflateEnd(&z); };
  std::vector<uint8_t> in(1 << 20);
  std::vector<uint8_t> out(static_cast<size_t>(std::min<uint64_t>(expected + 1, 1 << 20)));
  bool input_done = false;
  auto refill = [&]() -> absl::Status {  // called when z.avail_in is 0
    absl::StatusOr<size_t> got = source(in.data(), in.size());
    if (!got.ok()) return got.status();
    input_done = *got == 0;
    z.next_in = in.data();
    z.avail_in = static_cast<uInt>(*got);
    return absl::OkStatus();
  };
  uint64_t produced = 0;
  for (int rc = Z_OK; rc != Z_STREAM_END;) {
    if (z.avail_in == 0 && !input_done) {
      if (absl::Status s = refill(); !s.ok()) return s;
    }
    z.next_out = out.data();
    z.avail_out = static_cast<uInt>(out.size());
    rc = inflate(&z, input_done ? Z_FINISH : Z_NO_FLUSH);
    const size_t n = out.size() - z.avail_out;
    if (n > expected - produced) {
      return Wrong(f, "decompresses to more than the expected ", expected, " bytes");
    }
    if (n > 0) {
      if (absl::Status s = sink(out.data(), n); !s.ok()) return s;
      produced += n;
    }
    if (rc == Z_DATA_ERROR || rc == Z_NEED_DICT) {
      return Wrong(f, "corrupt stream after ", produced, " bytes (",
                   z.msg != nullptr ? z.msg : "zlib's Z_DATA_ERROR", ")");
    } else if (rc == Z_MEM_ERROR) {
      return Wrong(f, "out of memory");
    } else if (rc == Z_BUF_ERROR && input_done && n == 0) {
      return Wrong(f, "the stream ends early, after ", produced, " of the ", expected,
                   " bytes expected");
    }
  }
  if (produced != expected) {
    return Wrong(f, "decompresses to ", produced, " bytes, expected ", expected);
  }
  // Nothing may follow the stream.
  if (z.avail_in == 0 && !input_done) {
    if (absl::Status s = refill(); !s.ok()) return s;
  }
  if (z.avail_in > 0) return Wrong(f, "other bytes follow the compressed stream");
  return absl::OkStatus();
}

uint64_t MaxCompressedSize(uint64_t raw_bytes) {
  // zstd's and zlib's compressBound are below raw + raw/128 + 1 KiB; blosc adds 16 bytes per
  // buffer and 4 per block.
  return raw_bytes + raw_bytes / 64 + (uint64_t{64} << 10);
}

uint32_t Crc32(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const Bytef*>(data);
  while (n > 0) {
    const size_t k = std::min(n, kZlibPiece);
    crc = static_cast<uint32_t>(crc32(crc, p, static_cast<uInt>(k)));
    p += k;
    n -= k;
  }
  return crc;
}

}  // namespace codec
}  // namespace internal
}  // namespace td
