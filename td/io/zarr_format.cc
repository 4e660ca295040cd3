#include "td/io/zarr_format.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/zeros.h>
#include <c10/util/accumulate.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/structure_check.h"
#include "td/os/files.h"
#include "td/structure/structure.h"

namespace td {
namespace internal {
namespace zarr {

// ---- files ---------------------------------------------------------------------------------

namespace {

// Metadata files larger than this are refused rather than parsed.
constexpr int64_t kMaxJsonBytes = int64_t{64} << 20;

// The file `path` open for reading, and its size; nullopt for ENOENT (or ENOTDIR with `notdir`).
// O_NONBLOCK: never waits on a FIFO. Follows file symlinks (git-annex and DVC stores use them);
// ZarrError naming `path` unless it is regular.
std::optional<std::pair<os::UniqueFd, int64_t>> OpenRegular(const std::string& path, bool notdir) {
  os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid() && (errno == ENOENT || (notdir && errno == ENOTDIR))) return std::nullopt;
  if (!fd.valid()) ThrowIfError<ZarrError>(os::ErrnoError(errno, "cannot open", path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    ThrowIfError<ZarrError>(os::ErrnoError(errno, "cannot stat", path));
  }
  if (!S_ISREG(st.st_mode)) {
    TD_FAIL(ZarrError, path, " is not a regular file (",
            S_ISFIFO(st.st_mode)  ? "a FIFO"
            : S_ISDIR(st.st_mode) ? "a directory"
            : S_ISSOCK(st.st_mode) ? "a socket"
                                   : "a device",
            "); a Zarr store holds only files and directories");
  }
  return std::make_pair(std::move(fd), static_cast<int64_t>(st.st_size));
}

// The bytes of the metadata file `path` (OpenRegular), at most kMaxJsonBytes.
std::optional<std::string> ReadMetaFile(const std::string& path) {
  const std::optional<std::pair<os::UniqueFd, int64_t>> file = OpenRegular(path, true);
  if (!file) return std::nullopt;
  const auto& [fd, size] = *file;
  if (size > kMaxJsonBytes) {
    TD_FAIL(ZarrError, path, " holds ", size, " bytes of metadata (at most ", kMaxJsonBytes,
            " read)");
  }
  std::string text(static_cast<size_t>(size), '\0');
  ReadExactly(fd.get(), text.data(), size, path);
  return text;
}

}  // namespace

std::vector<os::DirEntry> ListStoreDir(const std::string& path, bool refuse_dir_links) {
  const os::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::vector<os::DirEntry> entries = ValueOrThrow<ZarrError>(
      fd.valid() ? os::ListDir(fd.get(), path) : os::ErrnoError(errno, "cannot list", path));
  for (os::DirEntry& e : entries) {
    struct stat st {};
    if (e.type == os::EntryType::kSymlink && ::fstatat(fd.get(), e.name.c_str(), &st, 0) == 0 &&
        S_ISDIR(st.st_mode)) {
      if (refuse_dir_links) {
        // Not followed: two links to "." would make the walk exponential.
        TD_FAIL(ZarrError, path, "/", e.name,
                " is a symlink to a directory; symlinked directories in a store are not "
                "followed (copy the data into the store)");
      }
      e.type = os::EntryType::kDirectory;
    } else if (e.type != os::EntryType::kDirectory) {
      e.type = os::EntryType::kFile;
    }
  }
  return entries;
}

json ParseJson(std::string_view text, const std::string& path) {
  absl::StatusOr<json> j = structure::ParseJson<json>(text);
  if (!j.ok()) TD_FAIL(ZarrError, path, " is not valid JSON: ", j.status().message());
  return *std::move(j);
}

// ---- dtypes --------------------------------------------------------------------------------

namespace {

// numpy's dtypes with a LibTorch counterpart ("torch." + name, also format 3's name), numpy's
// kind letter and element size. RowType refuses uint16/32/64 where LibTorch lacks them
// (NOTE [ Dtypes by LibTorch version ] in td/compat/dtypes.h). No float8: upstream cannot write it.
struct DtypeRow {
  const char* name;
  char kind;
  int64_t size;
};
constexpr DtypeRow kDtypes[] = {
    {"bool", 'b', 1},    {"int8", 'i', 1},      {"uint8", 'u', 1},       {"int16", 'i', 2},
    {"int32", 'i', 4},   {"int64", 'i', 8},     {"float16", 'f', 2},     {"float32", 'f', 4},
    {"float64", 'f', 8}, {"complex64", 'c', 8}, {"complex128", 'c', 16}, {"uint16", 'u', 2},
    {"uint32", 'u', 4},  {"uint64", 'u', 8},
};

// The element type of the first row `pred` accepts, or nullopt; a ZarrError (structure::Dtype's
// words) naming `where` and `name` (else the row's) where this LibTorch lacks its dtype.
template <class Pred>
std::optional<ElemType> RowType(Pred pred, const std::string& where, const std::string& name) {
  const DtypeRow* r = std::find_if(std::begin(kDtypes), std::end(kDtypes), pred);
  if (r == std::end(kDtypes)) return std::nullopt;
  absl::StatusOr<at::ScalarType> t = structure::Dtype::Name(std::string("torch.") + r->name).Read();
  if (!t.ok()) {
    TD_FAIL(ZarrError, where, ": dtype '", name.empty() ? r->name : name,
            "': ", t.status().message());
  }
  return ElemType{ElemType::kTensor, *t, r->size};
}

ElemType ParseV2Dtype(const json& j, const std::string& where) {
  if (!j.is_string()) {
    TD_FAIL(ZarrError, where, ": dtype ", j.dump(),
            " is not supported (structured dtypes have no TensorDict counterpart)");
  }
  const std::string s = j.get<std::string>();
  if (s.size() < 3 || (s[0] != '<' && s[0] != '>' && s[0] != '|')) {
    TD_FAIL(ZarrError, where, ": dtype '", s, "' is not a numpy dtype string such as \"<f4\"");
  }
  uint64_t digits = 0;
  const auto [end, ec] = std::from_chars(s.data() + 2, s.data() + s.size(), digits);
  if (ec != std::errc() || end != s.data() + s.size() || digits / 10 > (uint64_t{1} << 40)) {
    TD_FAIL(ZarrError, where, ": dtype '", s, "' is not supported");
  }
  const auto size = static_cast<int64_t>(digits);
  const bool big_endian = s[0] == '>';
  const char kind = s[1];
  if ((kind == 'S' || kind == 'U') && size > 0) {
    return {kind == 'S' ? ElemType::kBytes : ElemType::kUnicode, at::kByte,
            kind == 'S' ? size : size * 4, big_endian};
  }
  const std::optional<ElemType> row =
      RowType([&](const DtypeRow& r) { return r.kind == kind && r.size == size; }, where, s);
  if (row && (size == 1 || s[0] != '|')) return {row->kind, row->dtype, size, big_endian};
  TD_FAIL(ZarrError, where, ": dtype '", s,
          "' is not supported (bool, int8/16/32/64, uint8/16/32/64, float16/32/64, "
          "complex64/128 and fixed-size strings are)");
}

// An array's metadata: format 2's .zarray, or format 3's zarr.json (`v3`). The shape is read by
// structure::Sizes, as every reader's; the chunks are Zarr's own (a positive size per dim).
void ParseArray(const json& z, bool v3, const std::string& where, ArrayMeta& a) {
  const json grid = z.value("chunk_grid", json());
  if (v3 && (!grid.is_object() || grid.value("name", std::string()) != "regular")) {
    TD_FAIL(ZarrError, where, ": chunk_grid ", grid.dump(), " is not supported (regular only)");
  }
  absl::StatusOr<std::vector<int64_t>> shape = structure::Sizes(z.value("shape", json())).Read();
  if (!shape.ok()) TD_FAIL(ZarrError, where, ": the shape ", shape.status().message());
  a.shape = *std::move(shape);
  const char* field = v3 ? "chunk_shape" : "chunks";
  const json config = v3 ? grid.value("configuration", json::object()) : json();
  const json chunks = (v3 ? config : z).value(field, json());
  absl::StatusOr<std::vector<int64_t>> sizes = structure::Sizes(chunks).Read();
  if (!sizes.ok() || std::count(sizes->begin(), sizes->end(), 0) > 0) {
    TD_FAIL(ZarrError, where, ": '", field, "' must be a list of positive integers, got ",
            chunks.dump());
  }
  a.chunks = *std::move(sizes);
  if (a.chunks.size() != a.shape.size()) {
    TD_FAIL(ZarrError, where, ": ", field, " ", c10::IntArrayRef(a.chunks), " and shape ",
            c10::IntArrayRef(a.shape), " have different lengths");
  }
  a.fill = z.value("fill_value", json());
  // Format 3's storage transformers, format 2's filters: none (format 2 also says so with null).
  const char* extras = v3 ? "storage_transformers" : "filters";
  const json ex = z.value(extras, json::array());
  if (!(ex.is_array() && ex.empty()) && !(ex.is_null() && !v3)) {
    TD_FAIL(ZarrError, where, ": ", extras, " ", ex.dump(), " are not supported");
  }
  if (v3) {
    const json dt = z.value("data_type", json());
    const std::optional<ElemType> type =
        RowType([&](const DtypeRow& r) { return dt == r.name; }, where, "");
    if (!type) TD_FAIL(ZarrError, where, ": data_type ", dt.dump(), " is not supported");
    a.type = *type;
    a.codec = ParseV3Codecs(z.value("codecs", json()), where, &a.type.big_endian);
    const json keys = z.value("chunk_key_encoding", json::object());
    const std::string enc = keys.value("name", std::string("default"));
    if (enc != "default" && enc != "v2") {
      TD_FAIL(ZarrError, where, ": chunk_key_encoding '", enc, "' is unknown");
    }
    a.v3_default_keys = enc == "default";
    a.separator = keys.value("configuration", json::object())
                      .value("separator", std::string(a.v3_default_keys ? "/" : "."));
  } else {
    a.type = ParseV2Dtype(z.value("dtype", json()), where);
    a.codec = ParseV2Compressor(z.value("compressor", json()), where);
    const std::string order = z.value("order", std::string("C"));
    if (order != "C" && order != "F") TD_FAIL(ZarrError, where, ": order '", order, "' is unknown");
    a.fortran = order == "F";
    a.separator = z.value("dimension_separator", std::string("."));
  }
  if (a.separator != "." && a.separator != "/") {
    TD_FAIL(ZarrError, where, ": ", v3 ? "chunk key separator" : "dimension_separator", " '",
            a.separator, "' is unknown");
  }
}

}  // namespace

std::string NumpyDtype(at::ScalarType dtype) {
  const std::string name = DtypeRepr(dtype);  // "torch.float32"
  for (const DtypeRow& r : kDtypes) {
    if (name == std::string("torch.") + r.name) {
      return std::string(r.size == 1 ? "|" : "<") + r.kind + std::to_string(r.size);
    }
  }
  return "";
}

// ---- metadata of one node ------------------------------------------------------------------

Node ParseNode(const NodeTexts& texts, const std::string& where) {
  const bool v3 = !texts.zarray && !texts.zgroup;
  const char* file = texts.zarray ? ".zarray" : v3 ? "zarr.json" : ".zgroup";
  const std::optional<std::string>& text = texts.zarray ? texts.zarray
                                           : v3         ? texts.zarr_json
                                                        : texts.zgroup;
  Node n;
  if (!text) return n;
  try {
    const json z = ParseJson(*text, where + "/" + file);
    if (!z.is_object() || z.value("zarr_format", json()) != (v3 ? 3 : 2)) {
      TD_FAIL(ZarrError, where, "/", file, " is not Zarr format ",
              v3 ? "3" : texts.zarray ? "2 array" : "2 group", " metadata");
    }
    n.attrs = v3             ? z.value("attributes", json::object())
              : texts.zattrs ? ParseJson(*texts.zattrs, where + "/.zattrs")
                             : json::object();
    if (!n.attrs.is_object()) {
      TD_FAIL(ZarrError, where, v3 ? ": attributes must be" : "/.zattrs is not", " a JSON object");
    }
    const json type = v3 ? z.value("node_type", json()) : json(texts.zarray ? "array" : "group");
    if (type != "array" && type != "group") {
      TD_FAIL(ZarrError, where, ": node_type ", type.dump(), " is unknown");
    }
    n.kind = type == "array" ? Node::kArray : Node::kGroup;
    if (n.kind == Node::kArray) ParseArray(z, v3, where, n.array);
  } catch (const json::exception& e) {
    // A field of the wrong JSON type ("order": 1, "configuration": []): nlohmann's type_error.
    TD_FAIL(ZarrError, where, ": malformed Zarr metadata: ", e.what());
  }
  return n;
}

Node ReadNode(const std::string& dir, const std::string& where) {
  NodeTexts texts;
  texts.zarray = ReadMetaFile(dir + "/.zarray");
  if (!texts.zarray) texts.zgroup = ReadMetaFile(dir + "/.zgroup");
  if (texts.zarray || texts.zgroup) {
    texts.zattrs = ReadMetaFile(dir + "/.zattrs");
  } else {
    texts.zarr_json = ReadMetaFile(dir + "/zarr.json");
  }
  return ParseNode(texts, where);
}

// ---- reading arrays ------------------------------------------------------------------------

namespace {

// `bytes` ([..., itemsize]) with each element's bytes reversed when `t` is big-endian (a complex
// number's two halves each): stored order to LibTorch's, and back.
at::Tensor SwapBytes(const at::Tensor& bytes, const ElemType& t) {
  const int64_t unit = t.kind == ElemType::kUnicode ? 4
                       : t.kind == ElemType::kBytes ? 1
                       : at::isComplexType(t.dtype) ? t.itemsize / 2
                                                    : t.itemsize;
  if (!t.big_endian || unit == 1) return bytes;
  return bytes.reshape({-1, unit}).flip({1}).reshape(bytes.sizes());
}

// The chunk files of the array in `dir` under its sub-directory `rel` (`depth` deep) into `out`,
// by grid coordinates, from one listing of each directory (sub-directories only with the "/"
// separator, at most nd + 1 deep): the work follows the files there, not the grid, which a few
// bytes of metadata can make 2^40 chunks large.
void ListChunks(const ArrayMeta& a, const std::string& dir, const std::string& rel, size_t depth,
                const std::vector<int64_t>& grid,
                std::map<std::vector<int64_t>, std::string>& out) {
  const std::string path = rel.empty() ? dir : dir + "/" + rel;
  const bool descend = a.separator == "/" && depth + 1 < grid.size() + (a.v3_default_keys ? 1 : 0);
  for (const os::DirEntry& e : ListStoreDir(path, /*refuse_dir_links=*/descend)) {
    const std::string key = rel.empty() ? e.name : rel + "/" + e.name;
    if (e.type == os::EntryType::kFile) {
      if (std::optional<std::vector<int64_t>> coords = ChunkCoords(a, key, grid)) {
        out.emplace(std::move(*coords), path + "/" + e.name);
      }
    } else if (descend) {
      ListChunks(a, dir, key, depth + 1, grid, out);
    }
  }
}

// Bytes shaped `sizes`; a ZarrError naming `where` when they cannot be allocated.
at::Tensor Allocate(c10::IntArrayRef sizes, const std::string& where) {
  try {
    return at::empty(sizes, at::kByte);
  } catch (const c10::Error& e) {
    TD_FAIL(ZarrError, where, ": ", e.what_without_backtrace());
  }
}

std::string Utf8(const uint8_t* p, int64_t n_chars) {
  std::string out;
  for (int64_t i = 0; i < n_chars; ++i) {
    uint32_t c = uint32_t{p[4 * i]} | uint32_t{p[4 * i + 1]} << 8 | uint32_t{p[4 * i + 2]} << 16 |
                 uint32_t{p[4 * i + 3]} << 24;
    if (c == 0) break;
    if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
    const int n = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;  // UTF-8 bytes
    constexpr uint8_t kLead[] = {0, 0x00, 0xC0, 0xE0, 0xF0};
    out += static_cast<char>(kLead[n] | (c >> (6 * (n - 1))));
    for (int k = n - 2; k >= 0; --k) out += static_cast<char>(0x80 | ((c >> (6 * k)) & 0x3F));
  }
  return out;
}

}  // namespace

at::Tensor FillBytes(const ArrayMeta& a, const std::string& where) {
  const json& f = a.fill;
  if (f.is_null() || a.type.kind != ElemType::kTensor) {
    return at::zeros({a.type.itemsize}, at::kByte);
  }
  auto number = [&](const json& v) -> double {
    if (v.is_number()) return v.get<double>();
    if (v.is_boolean()) return v.get<bool>() ? 1.0 : 0.0;
    if (v == "NaN") return std::numeric_limits<double>::quiet_NaN();
    if (v == "Infinity") return std::numeric_limits<double>::infinity();
    if (v == "-Infinity") return -std::numeric_limits<double>::infinity();
    TD_FAIL(ZarrError, where, ": fill_value ", f.dump(), " is not supported for this dtype");
  };
  const at::ScalarType dtype = a.type.dtype;
  auto does_not_fit = [&](const std::string& why) {
    TD_FAIL(ZarrError, where, ": fill_value ", f.dump(), " does not fit the array's dtype ",
            NumpyDtype(dtype), why);
  };
  at::Tensor value;
  try {
    if (at::isComplexType(dtype)) {
      if (!f.is_array() || f.size() != 2) {
        TD_FAIL(ZarrError, where, ": fill_value ", f.dump(), " of a complex array must be [re, im]");
      }
      value = at::scalar_tensor(c10::complex<double>(number(f[0]), number(f[1])),
                                at::TensorOptions().dtype(dtype));
    } else if (at::isFloatingType(dtype)) {
      const double v = number(f);
      value = at::scalar_tensor(v, at::TensorOptions().dtype(dtype));
      // A finite value past the dtype's range (1e300 for float16): LibTorch 1.13's conversion
      // throws, 2.x's rounds it to infinity; refused alike.
      if (std::isfinite(v) && !std::isfinite(value.item<double>())) {
        does_not_fit(" (past its largest finite value)");
      }
    } else {
      // Integers and bool: an integer in the dtype's range (or true / false), never a float (a
      // NaN or 1e300 cast to an integer is undefined).
      if (!f.is_boolean() && !f.is_number_integer()) {
        does_not_fit(" (an integer dtype needs an integer)");
      }
      if (f.is_number_unsigned() &&
          f.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        does_not_fit("");
      }
      const int64_t v = f.is_boolean() ? int64_t{f.get<bool>()} : f.get<int64_t>();
      if (dtype == at::kBool && v != 0 && v != 1) does_not_fit(" (bool: 0, 1, true or false)");
      value = at::scalar_tensor(v, at::TensorOptions().dtype(dtype));
    }
  } catch (const ZarrError&) {
    throw;
  } catch (const std::exception& e) {
    // LibTorch's range check (c10::checked_convert) throws std::runtime_error.
    does_not_fit(std::string(": ") + e.what());
  }
  return SwapBytes(value.reshape({1}).view(at::kByte).clone(), a.type);
}

std::string ChunkKey(const ArrayMeta& a, const std::vector<int64_t>& coords) {
  const std::string key = absl::StrJoin(coords, a.separator);
  if (a.v3_default_keys) return coords.empty() ? "c" : "c" + a.separator + key;
  return coords.empty() ? "0" : key;
}

std::optional<std::vector<int64_t>> ChunkCoords(const ArrayMeta& a, const std::string& key,
                                                const std::vector<int64_t>& grid) {
  // A number below the grid's size per dim, then the name ChunkKey writes for them: canonical
  // decimals only (zarr writes no sign and no leading zeros), the separator and prefix it writes.
  std::vector<int64_t> coords;
  size_t start = a.v3_default_keys ? 1 + a.separator.size() : 0;  // past "c/"
  while (coords.size() < grid.size() && start <= key.size()) {
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(key.data() + start, key.data() + key.size(), v);
    if (ec != std::errc() || v >= static_cast<uint64_t>(grid[coords.size()])) return std::nullopt;
    coords.push_back(static_cast<int64_t>(v));
    start = static_cast<size_t>(end - key.data()) + a.separator.size();
  }
  if (coords.size() != grid.size() || ChunkKey(a, coords) != key) return std::nullopt;
  return coords;
}

at::Tensor ReadRaw(const ArrayMeta& a, const std::string& dir, const std::string& where) {
  const int64_t nd = static_cast<int64_t>(a.shape.size());
  // Elements of the array and of a chunk; their bytes at most 2^62 (the grid's arithmetic).
  const absl::StatusOr<int64_t> numel = internal::TensorBytes(a.shape, at::kByte),
                                chunk_numel = internal::TensorBytes(a.chunks, at::kByte);
  const int64_t limit = std::numeric_limits<int64_t>::max() / 2 / a.type.itemsize;
  if (!numel.ok() || !chunk_numel.ok() || *numel > limit || *chunk_numel > limit) {
    TD_FAIL(ZarrError, where, ": shape ", c10::IntArrayRef(a.shape), " in chunks ",
            c10::IntArrayRef(a.chunks), " of ", a.type.itemsize, " bytes is too large");
  }
  std::vector<int64_t> raw_shape = a.shape;
  raw_shape.push_back(a.type.itemsize);
  at::Tensor raw = Allocate(raw_shape, where);
  if (*numel == 0) return raw;
  const int64_t chunk_bytes = *chunk_numel * a.type.itemsize;
  const bool whole = a.shape == a.chunks && (!a.fortran || nd <= 1);
  std::vector<int64_t> grid(nd);  // chunks per dim; all of them at most numel
  for (int64_t d = 0; d < nd; ++d) grid[d] = (a.shape[d] + a.chunks[d] - 1) / a.chunks[d];
  std::map<std::vector<int64_t>, std::string> files;
  ListChunks(a, dir, /*rel=*/"", /*depth=*/0, grid, files);
  // Chunks never written hold the fill value: all of it first, when some are missing.
  at::Tensor fill;
  auto fill_region = [&](at::Tensor region) {
    if (!fill.defined()) fill = FillBytes(a, where);
    region.copy_(fill);
  };
  if (static_cast<int64_t>(files.size()) < c10::multiply_integers(grid)) fill_region(raw);
  at::Tensor buffer;
  for (const auto& [coords, file] : files) {
    at::Tensor region = raw;
    for (int64_t d = 0; d < nd; ++d) {
      const int64_t start = coords[d] * a.chunks[d];
      region = region.narrow(d, start, std::min(a.chunks[d], a.shape[d] - start));
    }
    const std::optional<std::pair<os::UniqueFd, int64_t>> opened = OpenRegular(file, false);
    if (!opened) {
      fill_region(region);  // removed since the listing
      continue;
    }
    if (!whole && !buffer.defined()) buffer = Allocate({chunk_bytes}, where);
    ReadChunkFile(a.codec, opened->first.get(), opened->second,
                  (whole ? raw : buffer).data_ptr<uint8_t>(), chunk_bytes, file, where);
    if (whole) continue;
    // The chunk's bytes in C order, or in Fortran order: its dims reversed.
    std::vector<int64_t> cs = a.chunks, perm(nd + 1);
    std::iota(perm.begin(), perm.end(), 0);
    if (a.fortran) {
      std::reverse(cs.begin(), cs.end());
      std::reverse(perm.begin(), perm.end() - 1);
    }
    cs.push_back(a.type.itemsize);
    at::Tensor chunk = buffer.view(cs).permute(perm);
    for (int64_t d = 0; d < nd; ++d) chunk = chunk.narrow(d, 0, region.size(d));
    region.copy_(chunk);
  }
  return SwapBytes(raw, a.type);
}

json Strings(const ArrayMeta& a, const uint8_t* p, size_t dim) {
  if (dim == a.shape.size()) {
    if (a.type.kind == ElemType::kUnicode) return Utf8(p, a.type.itemsize / 4);
    const auto* c = reinterpret_cast<const char*>(p);
    return std::string(c, strnlen(c, static_cast<size_t>(a.type.itemsize)));
  }
  const int64_t stride =
      a.type.itemsize * c10::multiply_integers(a.shape.begin() + dim + 1, a.shape.end());
  json out = json::array();
  for (int64_t i = 0; i < a.shape[dim]; ++i) out.push_back(Strings(a, p + i * stride, dim + 1));
  return out;
}

}  // namespace zarr
}  // namespace internal
}  // namespace td
