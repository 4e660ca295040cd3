// Compressed Zarr chunks (NOTE [ Zarr codecs ] in td/io/zarr_codec.cc) written here with zlib,
// libzstd and c-blosc directly: each compressor read in both formats, and the chunks a hostile
// writer can make (a decompression bomb, a short or corrupt stream, bytes after the stream, a
// blosc header that lies, a file too large for its chunk) refused with a ZarrError naming the
// array, the file and the codec, without allocating more than the chunk's size.
#include <ATen/ATen.h>
#include <blosc.h>
#include <gtest/gtest.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "td/backends/memmap/test_util.h"
#include "td/core/testing.h"
#include "td/io/zarr.h"

namespace td {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing_util::FreshDir;
using testing_util::WriteText;
using Bytes = std::string;

Bytes Raw(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return Bytes(static_cast<const char*>(c.data_ptr()), c.nbytes());
}

Bytes Zstd(const Bytes& raw) {
  Bytes out(ZSTD_compressBound(raw.size()), '\0');
  const size_t n = ZSTD_compress(out.data(), out.size(), raw.data(), raw.size(), 3);
  EXPECT_FALSE(ZSTD_isError(n));
  out.resize(n);
  return out;
}

// zlib's deflate with `window_bits` (15: zlib, 31: gzip).
Bytes Deflate(const Bytes& raw, int window_bits) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY), Z_OK);
  Bytes out(deflateBound(&z, raw.size()) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(raw.data()));
  z.avail_in = static_cast<uInt>(raw.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

Bytes Blosc(const Bytes& raw, size_t typesize, int shuffle) {
  Bytes out(raw.size() + BLOSC_MAX_OVERHEAD, '\0');
  const int n = blosc_compress_ctx(5, shuffle, typesize, raw.size(), raw.data(), out.data(),
                                   out.size(), "lz4", 0, 1);
  EXPECT_GT(n, 0);
  out.resize(static_cast<size_t>(n));
  return out;
}

// A format 2 store at `store` holding the float32 array "a" of `shape` in chunks `chunks`,
// with `compressor` (JSON; chunk files written by the caller).
void V2(const std::string& store, const json& shape, const json& chunks, const json& compressor) {
  fs::create_directories(store + "/a");
  WriteText(store + "/.zgroup", R"({"zarr_format": 2})");
  json z = {{"zarr_format", 2}, {"dtype", "<f4"}, {"compressor", compressor}, {"filters", nullptr},
            {"order", "C"}, {"fill_value", 0}};
  z["shape"] = shape;
  z["chunks"] = chunks;
  WriteText(store + "/a/.zarray", z.dump());
}

// A format 3 store at `store` holding the float32 array "a" of `shape`, one chunk, `codecs`.
void V3(const std::string& store, const json& shape, const json& codecs) {
  fs::create_directories(store + "/a/c");
  WriteText(store + "/zarr.json", R"({"zarr_format": 3, "node_type": "group"})");
  json meta = {{"zarr_format", 3}, {"node_type", "array"}, {"data_type", "float32"},
               {"fill_value", 0}, {"shape", shape}, {"codecs", codecs}};
  meta["chunk_grid"] = {{"name", "regular"}, {"configuration", {{"chunk_shape", shape}}}};
  WriteText(store + "/a/zarr.json", meta.dump());
}

json Codec(const std::string& name) { return json{{"id", name}}; }

TEST(ZarrCodec, EachCompressorIsReadInFormat2) {
  const std::string dir = FreshDir("zc2");
  const at::Tensor value = at::arange(12, at::kFloat).view({4, 3});
  // Chunks (3, 2): edge chunks along both dims, each file holding a full (padded) chunk.
  auto chunk = [&](int64_t i, int64_t j) {
    at::Tensor c = at::zeros({3, 2}, at::kFloat);
    at::Tensor part = value.narrow(0, 3 * i, std::min<int64_t>(3, 4 - 3 * i))
                          .narrow(1, 2 * j, std::min<int64_t>(2, 3 - 2 * j));
    c.narrow(0, 0, part.size(0)).narrow(1, 0, part.size(1)).copy_(part);
    return Raw(c);
  };
  const std::vector<std::pair<std::string, std::function<Bytes(const Bytes&)>>> codecs = {
      {"zstd", Zstd},
      {"gzip", [](const Bytes& b) { return Deflate(b, 31); }},
      {"zlib", [](const Bytes& b) { return Deflate(b, 15); }},
      {"blosc", [](const Bytes& b) { return Blosc(b, 4, BLOSC_SHUFFLE); }},
  };
  for (const auto& [name, compress] : codecs) {
    SCOPED_TRACE(name);
    const std::string store = dir + "/" + name + ".zarr";
    V2(store, {4, 3}, {3, 2}, Codec(name));
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < 2; ++j) {
        WriteText(store + "/a/" + std::to_string(i) + "." + std::to_string(j),
                  compress(chunk(i, j)));
      }
    }
    EXPECT_TRUE(from_zarr(store).get("a").equal(value));
  }
}

TEST(ZarrCodec, EachCompressorIsReadInFormat3AfterBytes) {
  const std::string dir = FreshDir("zc3");
  const at::Tensor value = at::arange(6, at::kFloat).view({2, 3});
  const Bytes raw = Raw(value);
  const std::vector<std::pair<std::string, Bytes>> codecs = {
      {"zstd", Zstd(raw)},
      {"gzip", Deflate(raw, 31)},
      {"blosc", Blosc(raw, 4, BLOSC_BITSHUFFLE)},
      {"numcodecs.zlib", Deflate(raw, 15)},
  };
  for (const auto& [name, file] : codecs) {
    SCOPED_TRACE(name);
    const std::string store = dir + "/" + name + ".zarr";
    V3(store, {2, 3},
       json::array({json{{"name", "bytes"}, {"configuration", {{"endian", "little"}}}},
                    json{{"name", name}, {"configuration", json::object()}}}));
    fs::create_directories(store + "/a/c/0");
    WriteText(store + "/a/c/0/0", file);
    EXPECT_TRUE(from_zarr(store).get("a").equal(value));
  }
  // Other chains stay refused, naming the codecs.
  const std::string store = dir + "/chain.zarr";
  V3(store, {2, 3}, json::array({json{{"name", "bytes"}}, json{{"name", "crc32c"}}}));
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "codecs", "crc32c"});
  V3(store, {2, 3}, json::array({json{{"name", "bytes"}}, json{{"name", "zstd"}},
                                 json{{"name", "gzip"}}}));
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "codecs", "gzip"});
  V3(store, {2, 3}, json::array({json{{"name", "transpose"}}, json{{"name", "bytes"}}}));
  TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError, {store + "/a", "codecs", "transpose"});
  V2(dir + "/lz4.zarr", {2}, {2}, Codec("lz4"));
  TD_EXPECT_THROW_MSG(from_zarr(dir + "/lz4.zarr"), ZarrError,
                      {dir + "/lz4.zarr/a", "compressor", "lz4", "not supported"});
}

TEST(ZarrCodec, HostileChunksAreNamedNotAllocated) {
  const std::string dir = FreshDir("zcbad");
  // Every array: float32 [4], one chunk of 16 bytes.
  const Bytes want = Raw(at::arange(4, at::kFloat));
  auto store_with = [&](const std::string& name, const std::string& codec, const Bytes& file) {
    const std::string store = dir + "/" + name + ".zarr";
    V2(store, {4}, {4}, Codec(codec));
    WriteText(store + "/a/0", file);
    return store;
  };
  auto expect_named = [&](const std::string& name, const std::string& codec, const Bytes& file,
                          const std::string& why) {
    SCOPED_TRACE(name);
    const std::string store = store_with(name, codec, file);
    TD_EXPECT_THROW_MSG(from_zarr(store), ZarrError,
                        {store + "/a", store + "/a/0", "codec " + codec, why});
  };
  // 32 MiB of zeros compress to at most 32 KiB: decompression stops at the chunk's 16 bytes.
  const Bytes zeros(size_t{32} << 20, '\0');
  expect_named("zstd_bomb", "zstd", Zstd(zeros), "more than the expected 16 bytes");
  expect_named("gzip_bomb", "gzip", Deflate(zeros, 31), "more than the expected 16 bytes");
  expect_named("zlib_bomb", "zlib", Deflate(zeros, 15), "more than the expected 16 bytes");
  // blosc: its header's size is checked before anything is decompressed.
  expect_named("blosc_bomb", "blosc", Blosc(Bytes(1 << 20, '\0'), 4, BLOSC_SHUFFLE),
               "header says 1048576 decompressed bytes, expected 16");
  // Short streams: half the chunk.
  const Bytes half = want.substr(0, 8);
  expect_named("zstd_short", "zstd", Zstd(half), "decompresses to 8 bytes, expected 16");
  expect_named("gzip_short", "gzip", Deflate(half, 31), "decompresses to 8 bytes, expected 16");
  expect_named("blosc_short", "blosc", Blosc(half, 4, BLOSC_SHUFFLE), "expected 16");
  // Truncated and corrupt streams.
  const Bytes z = Zstd(want), g = Deflate(want, 31), b = Blosc(want, 4, BLOSC_SHUFFLE);
  expect_named("zstd_cut", "zstd", z.substr(0, z.size() - 3), "corrupt");
  expect_named("gzip_cut", "gzip", g.substr(0, g.size() / 2), "ends early");
  expect_named("blosc_cut", "blosc", b.substr(0, b.size() - 1), "compressed bytes");
  expect_named("blosc_tiny", "blosc", b.substr(0, 5), "shorter than a blosc header");
  expect_named("zstd_junk", "zstd", Bytes(40, 'x'), "corrupt");
  expect_named("zlib_junk", "zlib", Bytes(40, 'x'), "corrupt");
  Bytes bad_crc = g;
  bad_crc[bad_crc.size() - 6] ^= 0x5a;  // the gzip trailer's CRC-32
  expect_named("gzip_crc", "gzip", bad_crc, "corrupt");
  // Bytes after the stream.
  expect_named("gzip_tail", "gzip", g + "tail", "other bytes follow");
  // A raw (uncompressed) chunk under a compressor's name.
  expect_named("raw_as_zlib", "zlib", want, "zlib");
  // A file far larger than any compressed form of 16 bytes: refused before it is read.
  expect_named("huge", "zstd", Bytes(1 << 20, '\0'), "more than any compressed form");
  // The valid ones read.
  EXPECT_TRUE(from_zarr(store_with("ok", "zstd", z)).get("a").equal(at::arange(4, at::kFloat)));
}

}  // namespace
}  // namespace td
