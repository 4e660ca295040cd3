// NOTE [ Zarr codecs ]
// What zarr-python writes by default, read here (writing stays uncompressed, compressor null):
//  * format 2 (.zarray "compressor"): "blosc" (zarr-python 2's default), "zstd", "gzip", "zlib".
//    Only "id" selects the decoder: blosc's other fields are in each buffer's header (libblosc
//    undoes the shuffle), levels do not matter to decoding.
//  * format 3 (zarr.json "codecs"): "bytes" (its "endian"), then at most one of "zstd"
//    (zarr-python 3's default), "gzip", "blosc", or numcodecs' names ("numcodecs.zstd", ...).
//    Other codecs, longer chains and format 2's "filters" are refused.
// A chunk file (at most codec::MaxCompressedSize of its raw size) decompresses into exactly its
// raw size (NOTE [ Bounded decompression ] in td/bytes/codec.h), else a ZarrError.
#include "td/io/zarr_format.h"

#include <vector>

#include "td/core/errors.h"
#include "td/os/fd.h"

namespace td {
namespace internal {
namespace zarr {
namespace {

// The compressor `name` (or numcodecs' zarr 3 name "numcodecs.zstd") reads, or nullopt.
std::optional<codec::Format> FormatNamed(std::string name) {
  if (name.rfind("numcodecs.", 0) == 0) name.erase(0, 10);
  for (codec::Format f :
       {codec::Format::kZstd, codec::Format::kGzip, codec::Format::kZlib, codec::Format::kBlosc}) {
    if (name == codec::FormatName(f)) return f;
  }
  return std::nullopt;
}

}  // namespace

void ReadExactly(int fd, void* data, int64_t n, const std::string& path) {
  const size_t got =
      ValueOrThrow<ZarrError>(os::ReadAll(fd, data, static_cast<size_t>(n), path));
  if (got < static_cast<size_t>(n)) {
    TD_FAIL(ZarrError, path, ": the file ended early (it changed while being read)");
  }
}

ChunkCodec ParseV2Compressor(const json& compressor, const std::string& where) {
  if (compressor.is_null()) return {};
  const std::string id =
      compressor.is_object() ? compressor.value("id", std::string()) : std::string();
  const ChunkCodec c{id.rfind("numcodecs.", 0) == 0 ? std::nullopt : FormatNamed(id), id};
  if (!c.format) {
    TD_FAIL(ZarrError, where, ": compressor ", compressor.dump(),
            " is not supported (blosc, zstd, gzip and zlib are read, or none)");
  }
  return c;
}

ChunkCodec ParseV3Codecs(const json& codecs, const std::string& where, bool* big_endian) {
  auto refuse = [&]() {
    TD_FAIL(ZarrError, where, ": codecs ", codecs.dump(),
            " are not supported (\"bytes\", then at most one of \"zstd\", \"gzip\" or "
            "\"blosc\")");
  };
  if (!codecs.is_array() || codecs.empty() || codecs.size() > 2 || !codecs[0].is_object() ||
      codecs[0].value("name", std::string()) != "bytes") {
    refuse();
  }
  const std::string endian =
      codecs[0].value("configuration", json::object()).value("endian", std::string("little"));
  *big_endian = endian == "big";
  if (codecs.size() == 1) return {};
  const std::string name =
      codecs[1].is_object() ? codecs[1].value("name", std::string()) : std::string();
  const ChunkCodec c{FormatNamed(name), name};
  if (!c.format) refuse();
  return c;
}

void ReadChunkFile(const ChunkCodec& c, int fd, int64_t file_size, uint8_t* out,
                   int64_t chunk_bytes, const std::string& file, const std::string& where) {
  if (!c.format) {
    if (file_size != chunk_bytes) {
      TD_FAIL(ZarrError, where, ": chunk file ", file, " holds ", file_size, " bytes, expected ",
              chunk_bytes, " (the array is uncompressed): truncated or corrupt");
    }
    ReadExactly(fd, out, chunk_bytes, file);
    return;
  }
  const uint64_t limit = codec::MaxCompressedSize(static_cast<uint64_t>(chunk_bytes));
  if (static_cast<uint64_t>(file_size) > limit) {
    TD_FAIL(ZarrError, where, ": chunk file ", file, " (codec ", c.name, ") holds ", file_size,
            " bytes, more than any compressed form of a chunk of ", chunk_bytes,
            " bytes takes (at most ", limit, ")");
  }
  std::vector<uint8_t> in(static_cast<size_t>(file_size));
  ReadExactly(fd, in.data(), file_size, file);
  const absl::Status s = codec::Decompress(*c.format, in.data(), in.size(), out,
                                           static_cast<size_t>(chunk_bytes));
  if (!s.ok()) {
    TD_FAIL(ZarrError, where, ": chunk file ", file, " (codec ", c.name, ", ", file_size,
            " bytes, expected to decompress to ", chunk_bytes, "): ", s.message());
  }
}

}  // namespace zarr
}  // namespace internal
}  // namespace td
