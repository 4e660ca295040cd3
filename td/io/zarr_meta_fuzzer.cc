// libFuzzer target for Zarr's metadata (td::internal::zarr::ParseNode, NOTE [ Zarr layout ] in
// td/io/zarr.h): any texts as a node's .zarray, .zgroup, .zattrs and zarr.json must give a
// ZarrError or a node, never a crash, a hang or an uncaught exception (nlohmann/json's own
// type_error included); and what is accepted must keep the reader's promises:
//   * an array's shape and chunks have as many dims, at most 64 (the shape is read by
//     structure::Sizes), sizes >= 0 and chunks >= 1, and a known element size; its dimension
//     separator is "." or "/";
//   * its fill value is bytes of the element size, or a ZarrError (never LibTorch's overflow
//     error, never a NaN cast to an integer);
//   * chunk keys and grid coordinates convert both ways (ChunkKey / ChunkCoords), and a key
//     ChunkCoords accepts is the one ChunkKey writes.
// The input is the four texts separated by NUL bytes, then a chunk key to look up; an empty text
// is a missing file.
// Built with clang by tests/fuzz/run.sh (`-fsanitize=fuzzer,address,undefined`), and replayed
// over the seed corpus by //tests/fuzz:zarr_meta_replay_test in every normal test run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "td/core/internal/structure_check.h"
#include "td/io/zarr_format.h"

namespace {

namespace z = td::internal::zarr;

void Require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "zarr_meta_fuzzer: invariant broken: %s\n", what);
    std::abort();
  }
}

void CheckArray(const z::ArrayMeta& a, const std::string& key) {
  Require(a.shape.size() == a.chunks.size(), "shape and chunks of different lengths");
  Require(a.shape.size() <= td::internal::kMaxStructureDims, "a shape of more than 64 dims");
  for (size_t d = 0; d < a.shape.size(); ++d) {
    Require(a.shape[d] >= 0 && a.chunks[d] >= 1, "a negative size or a chunk below 1");
  }
  Require(a.type.itemsize >= 1, "an element of no bytes");
  Require(a.separator == "." || a.separator == "/", "an unknown dimension separator");
  if (a.type.kind == z::ElemType::kTensor) {
    try {
      const at::Tensor fill = z::FillBytes(a, "store/arr");
      Require(fill.numel() == a.type.itemsize, "fill value bytes of another size");
    } catch (const td::ZarrError&) {
    }
  }
  std::vector<int64_t> grid, last;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    grid.push_back((a.shape[d] + a.chunks[d] - 1) / a.chunks[d]);
    if (grid.back() == 0) return;  // an empty array has no chunks
    last.push_back(grid.back() - 1);
  }
  for (const std::vector<int64_t>& coords : {std::vector<int64_t>(grid.size(), 0), last}) {
    const std::optional<std::vector<int64_t>> back = z::ChunkCoords(a, z::ChunkKey(a, coords), grid);
    Require(back && *back == coords, "ChunkCoords does not invert ChunkKey");
  }
  if (std::optional<std::vector<int64_t>> coords = z::ChunkCoords(a, key, grid)) {
    Require(coords->size() == grid.size(), "coordinates of another rank");
    for (size_t d = 0; d < grid.size(); ++d) {
      Require((*coords)[d] >= 0 && (*coords)[d] < grid[d], "coordinates outside the grid");
    }
    Require(z::ChunkKey(a, *coords) == key, "an accepted chunk key that ChunkKey does not write");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0 && parts.size() < 5) {
      parts.emplace_back();
    } else {
      parts.back() += static_cast<char>(data[i]);
    }
  }
  parts.resize(5);
  auto text = [&](size_t i) {
    return parts[i].empty() ? std::nullopt : std::make_optional(parts[i]);
  };
  z::NodeTexts texts;
  texts.zarray = text(0);
  texts.zgroup = text(1);
  texts.zattrs = text(2);
  texts.zarr_json = text(3);
  z::Node node;
  try {
    node = z::ParseNode(texts, "store");
  } catch (const td::ZarrError&) {
    return 0;
  }
  Require(node.attrs.is_object(), "attributes that are not an object");
  if (node.kind == z::Node::kArray) CheckArray(node.array, parts[4]);
  return 0;
}
