#include "td/io/zarr.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/zeros.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/format/format.h"
#include "td/io/dict.h"
#include "td/io/zarr_format.h"
#include "td/os/files.h"
#include "td/structure/structure.h"

namespace td {
namespace {

namespace fs = std::filesystem;
using internal::os::JoinPath;
using internal::zarr::ArrayMeta;
using internal::zarr::ChunkKey;
using internal::zarr::ElemType;
using internal::zarr::json;
using internal::zarr::ListStoreDir;
using internal::zarr::Node;
using internal::zarr::NumpyDtype;
using internal::zarr::ReadNode;
using internal::zarr::ReadRaw;
using internal::zarr::Strings;

constexpr const char* kMetadataAttr = "__tensordict__";
constexpr const char* kNonTensorAttr = "__tensordict_non_tensor__";

// ---- reading groups ------------------------------------------------------------------------

// Says each node to a structure::Builder before reading it (NOTE [ Structure codec ]).
struct Reader {
  std::optional<at::Device> device;
  structure::Builder b;

  // The builder's finding `s` about the node at `where`, in the rule's words.
  static void Check(const absl::Status& s, const std::string& where) {
    const bool sub = structure::RuleOf(s) == structure::Rule::kSubBatch;
    if (!s.ok()) TD_FAIL(ZarrError, where, ": ", s.message(), sub ? " of its parent" : "");
  }

  // The array `name` of the group `level`, at `where`.
  Value ReadArray(structure::Level& level, const std::string& name, const Node& n,
                  const std::string& where) {
    const ArrayMeta& a = n.array;
    const json marker = n.attrs.value(kNonTensorAttr, json());
    if (!marker.is_null()) {
      const json encoding = marker.is_object() ? marker.value("encoding", json()) : json();
      if (encoding != "json") {
        TD_FAIL(ZarrError, where, ": non-tensor data encoded as ",
                encoding.is_string() ? "'" + encoding.get<std::string>() + "'" : encoding.dump(),
                " (upstream pickles values JSON cannot hold); only \"json\" can be read here");
      }
      if (a.type.kind != ElemType::kTensor || a.type.dtype != at::kByte || a.shape.size() != 1) {
        TD_FAIL(ZarrError, where, ": non-tensor data must be a 1-D uint8 array");
      }
    }
    // Non-tensor data is said without its value (which stays here).
    const bool tensor = marker.is_null() && a.type.kind == ElemType::kTensor;
    Check(tensor ? b.AddLeaf(level, name, a.type.dtype, a.shape).status()
                 : b.AddNonTensor(level, name, nullptr).status(),
          where);
    const at::Tensor raw = ReadRaw(a, where, where).contiguous();
    if (!marker.is_null()) {
      const auto* p = static_cast<const char*>(raw.data_ptr());
      return Value(NonTensorData(internal::zarr::ParseJson(
          std::string_view(p, static_cast<size_t>(raw.numel())), where + " (non-tensor payload)")));
    }
    if (!tensor) return Value(NonTensorData(Strings(a, raw.data_ptr<uint8_t>(), 0)));
    if (raw.numel() == 0) return Value(at::empty(a.shape, a.type.dtype));
    return Value(a.type.dtype == at::kBool ? raw.reshape(a.shape).ne(0)
                                           : raw.view(a.type.dtype).reshape(a.shape));
  }

  // Names `out` by the root's `__tensordict__` attribute (as upstream: nested levels get them
  // through set_names), unless absent, null or empty.
  static void SetStoredNames(TensorDict& out, const Node& n, const std::string& where) {
    const json meta = n.attrs.value(kMetadataAttr, json());
    if (!meta.is_object()) return;
    const json names = meta.value("names", json());
    if (names.is_null() || (names.is_array() && names.empty())) return;
    DimNames dim_names;
    for (const json& v : names.is_array() ? names : json::array({names})) {
      if (!names.is_array() || !(v.is_string() || v.is_null())) {
        TD_FAIL(ZarrError, where, " (attribute __tensordict__): names ", names.dump(),
                " must be a list of strings or nulls");
      }
      dim_names.push_back(v.is_string() ? std::make_optional(v.get<std::string>()) : std::nullopt);
    }
    try {
      out.set_names(dim_names);
    } catch (const ValueError& e) {
      TD_FAIL(ZarrError, where, " (attribute __tensordict__): ", e.what_without_backtrace());
    }
  }

  // `level`'s batch size: the one in the `__tensordict__` attribute of `n` (at `where`), else
  // `otherwise` (which cannot fail). Whether `n` had one.
  bool SetBatchSize(structure::Level& level, const Node& n, const std::string& where,
                    std::vector<int64_t> otherwise) {
    const json meta = n.attrs.value(kMetadataAttr, json());
    const json stored = meta.is_object() ? meta.value("batch_size", json()) : json();
    Check(stored.is_null() ? b.SetBatchSize(level, std::move(otherwise))
                           : b.SetBatchSize(level, stored),
          where + " (attribute __tensordict__, batch_size)");
    return !stored.is_null();
  }

  // The group in directory `dir`, which the builder knows as `level` (its batch size set).
  TensorDict ReadGroup(structure::Level& level, const std::string& dir) {
    std::vector<TensorDict::Item> items;
    for (const internal::os::DirEntry& e : ListStoreDir(dir, /*refuse_dir_links=*/true)) {
      if (e.type != internal::os::EntryType::kDirectory) continue;  // metadata and chunks
      const std::string where = dir + "/" + e.name;
      const Node child = ReadNode(where, where);
      if (child.kind == Node::kArray) {
        items.emplace_back(e.name, ReadArray(level, e.name, child, where));
      } else if (child.kind == Node::kGroup) {
        // Its depth, then its stored batch size, else its parent's (upstream's _make_nested).
        absl::StatusOr<structure::Level*> sub =
            b.AddLevel(level, e.name, structure::LevelKind::kTensorDict);
        Check(sub.status(), where);
        SetBatchSize(**sub, child, where, level.batch_size());
        items.emplace_back(e.name, ReadGroup(**sub, where));
      }
      // A directory that is neither (no metadata) is not a Zarr node: zarr skips it too.
    }
    return TensorDict(items, level.batch_size(), device);
  }
};

// ---- writing -------------------------------------------------------------------------------

void WriteFile(const std::string& path, std::string_view bytes) {
  ThrowIfError<ZarrError>(internal::os::CreateFileAt(AT_FDCWD, path, bytes, /*sync=*/true, path));
}

// fsync(2) of a directory, best effort (new names inside it durable).
void SyncDir(const std::string& path) { internal::os::SyncDirPath(path).IgnoreError(); }

struct Writer {
  std::string root;  // the temporary directory
  std::vector<int64_t> chunks;
  json consolidated = json::object();

  void CheckName(const std::string& name, const NestedKey& key) const {
    try {
      (void)json(name).dump();  // node names are JSON strings (.zmetadata's keys): UTF-8
    } catch (const json::exception&) {
      TD_FAIL(ValueError, "to_zarr: key ", key.repr(),
              " is not valid UTF-8, which a Zarr node name (a JSON string) must be");
    }
    static const std::set<std::string> kReserved = {
        "", ".", "..", ".zarray", ".zgroup", ".zattrs", ".zmetadata", "zarr.json"};
    if (kReserved.count(name) > 0 || name.find('/') != std::string::npos ||
        name.find('\0') != std::string::npos) {
      TD_FAIL(ValueError, "to_zarr: key ", key.repr(),
              " cannot be a Zarr node name (empty, '.', '..', a '/' inside, or a name Zarr's "
              "metadata uses)");
    }
  }

  // The metadata file `file` of `rel`, indented as zarr-python writes it.
  void Meta(const std::string& rel, const char* file, const json& j) {
    WriteFile(JoinPath(root, JoinPath(rel, file)), j.dump(4));
    consolidated[JoinPath(rel, file)] = j;
  }

  static json FillValue(at::ScalarType dtype) {
    if (dtype == at::kBool) return false;
    if (at::isComplexType(dtype)) return json::array({0.0, 0.0});
    if (at::isFloatingType(dtype)) return 0.0;
    return 0;
  }

  // One array (`t` contiguous, on the CPU) in directory `rel`.
  void WriteArray(const std::string& rel, const at::Tensor& t, const json& attrs,
                  const std::vector<int64_t>& chunk_spec) {
    const std::string dir = JoinPath(root, rel);
    fs::create_directory(dir);
    const std::vector<int64_t> shape = t.sizes().vec();
    std::vector<int64_t> cs;
    for (size_t d = 0; d < shape.size(); ++d) {
      cs.push_back(std::max<int64_t>(1, d < chunk_spec.size() ? chunk_spec[d] : shape[d]));
    }
    Meta(rel, ".zarray",
         json{{"chunks", cs},
              {"compressor", nullptr},
              {"dtype", NumpyDtype(t.scalar_type())},
              {"fill_value", FillValue(t.scalar_type())},
              {"filters", nullptr},
              {"order", "C"},
              {"shape", shape},
              {"zarr_format", 2}});
    if (!attrs.empty()) Meta(rel, ".zattrs", attrs);
    if (t.numel() == 0) return SyncDir(dir);  // no chunk: zarr writes none either
    const int64_t nd = static_cast<int64_t>(shape.size());
    std::vector<int64_t> grid(nd), coords(nd, 0);
    for (int64_t d = 0; d < nd; ++d) grid[d] = (shape[d] + cs[d] - 1) / cs[d];
    const at::Tensor buffer = cs == shape ? t : at::zeros(cs, t.options());
    while (true) {
      at::Tensor src = t, dst = buffer;
      bool edge = false;
      for (int64_t d = 0; d < nd; ++d) {
        const int64_t start = coords[d] * cs[d], n = std::min(cs[d], shape[d] - start);
        src = src.narrow(d, start, n);
        dst = dst.narrow(d, 0, n);
        edge = edge || n != cs[d];
      }
      if (edge) buffer.zero_();  // the padding of an edge chunk holds the fill value
      if (!buffer.is_same(t)) dst.copy_(src);
      WriteFile(dir + "/" + ChunkKey({}, coords),
                {static_cast<const char*>(buffer.data_ptr()), buffer.nbytes()});
      int64_t d = nd - 1;
      while (d >= 0 && ++coords[d] == grid[d]) coords[d--] = 0;
      if (d < 0) break;
    }
    SyncDir(dir);
  }

  // The group `td` at the key `at` (nullptr: the root).
  void WriteGroup(const TensorDict& td, const NestedKey* at) {
    const std::string rel = at != nullptr ? at->join("/") : "";
    if (!rel.empty()) fs::create_directory(JoinPath(root, rel));
    Meta(rel, ".zgroup", json{{"zarr_format", 2}});
    // Upstream's _write_attrs_metadata: "names" only for a named level (NOTE [ Zarr layout ]).
    json meta = {{"batch_size", td.batch_size().vec()}, {"version", 1}};
    if (td.has_names()) {
      json& names = meta["names"] = json::array();
      for (const std::optional<std::string>& n : td.names()) names.push_back(n ? json(*n) : json());
    }
    Meta(rel, ".zattrs", json{{kMetadataAttr, std::move(meta)}});
    td.for_each_entry([&](const std::string& name, const Value& v) {
      const NestedKey key = at != nullptr ? *at + name : NestedKey(name);
      CheckName(name, key);
      const std::string child = key.join("/");
      if (v.is_tensordict()) {
        WriteGroup(v.tensordict(), &key);
      } else if (v.is_tensor()) {
        const at::Tensor& t = v.tensor();
        if (NumpyDtype(t.scalar_type()).empty()) {
          TD_FAIL(TypeError, "to_zarr: key ", key.repr(), " has dtype ",
                  DtypeRepr(t.scalar_type()), ", which Zarr (numpy) cannot hold (bool, "
                  "int8/16/32/64, uint8/16/32/64, float16/32/64, complex64/128 can; numpy has no "
                  "bfloat16 or float8, and Python tensordict's to_zarr refuses them too)");
        }
        WriteArray(child, t.detach().to(at::kCPU).contiguous(), json::object(), chunks);
      } else if (v.non_tensor_data().is_stack()) {
        TD_FAIL(TypeError, "to_zarr: key ", key.repr(), " is a NonTensorStack, which a Zarr store "
                "cannot hold (upstream's to_zarr has no form for one value per batch element); "
                "save the TensorDict with memmap() or save_consolidated()");
      } else {
        const std::string text =
            v.non_tensor().dump(-1, ' ', false, json::error_handler_t::replace);
        at::Tensor bytes = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
        std::memcpy(bytes.data_ptr(), text.data(), text.size());
        WriteArray(child, bytes, json{{kNonTensorAttr, json{{"encoding", "json"}}}}, {});
      }
    });
    if (!rel.empty()) SyncDir(JoinPath(root, rel));
  }
};

bool IsZarrStore(const std::string& path) {
  std::error_code ec;
  for (const char* f : {"/.zgroup", "/.zarray", "/zarr.json"}) {
    if (fs::exists(path + f, ec)) return true;
  }
  return fs::is_empty(path, ec) && !ec;
}

std::atomic<uint64_t> temp_counter{0};

// The "zarr" format driver (NOTE [ Format drivers ] in td/format/format.h).
format::Driver ZarrDriver() {
  format::Driver d;
  d.id = "zarr";
  d.summary = "a Zarr group store, format 2 written, 2 and 3 read (Python tensordict's to_zarr / "
              "from_zarr, zarr-python)";
  d.suffixes = {".zarr"};
  // numpy has neither bfloat16 nor float8 (upstream's to_zarr refuses them too).
  d.traits.dtypes = format::DtypesExcept({c10::kBFloat16}, /*float8=*/false);
  d.traits.meta_data = false;
  d.traits.non_tensor_stack = false;
  d.traits.names = true;
  d.traits.keeps_key_order = false;
  d.detect = [](const std::string& path) {
    return format::DirectoryHolds(path, ".zgroup") || format::DirectoryHolds(path, "zarr.json");
  };
  d.save = [](const TensorDict& td, const std::string& path) { to_zarr(td, path); };
  d.load = [](const std::string& path) { return from_zarr(path); };
  return d;
}

TD_REGISTER_FORMAT_DRIVER(ZarrDriver());

}  // namespace

void to_zarr(const TensorDict& td, const std::string& path_in, const ToZarrOptions& options) {
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  if (path.empty()) TD_FAIL(ValueError, "to_zarr: the path is empty");
  std::error_code ec;
  if (fs::exists(fs::symlink_status(path, ec))) {
    if (!options.overwrite()) {
      TD_FAIL(ValueError, "to_zarr: ", path, " exists (ToZarrOptions().overwrite(true) replaces it)");
    }
    if (!fs::is_directory(fs::symlink_status(path, ec)) || !IsZarrStore(path)) {
      TD_FAIL(ValueError, "to_zarr: ", path,
              " exists and is not a Zarr store or an empty directory; refusing to replace it");
    }
  }
  const fs::path p(path);
  const std::string parent = p.has_parent_path() ? p.parent_path().string() : std::string(".");
  if (!fs::is_directory(parent, ec)) {
    TD_FAIL(ZarrError, "to_zarr: the parent directory of ", path, " does not exist");
  }
  const std::string tmp = parent + "/." + p.filename().string() + ".tmp-" +
                          std::to_string(::getpid()) + "-" + std::to_string(temp_counter++);
  try {
    if (!fs::create_directory(tmp, ec) || ec) {
      TD_FAIL(ZarrError, "to_zarr: cannot create ", tmp, ": ", ec.message());
    }
    Writer w{tmp, options.chunks(), /*consolidated=*/json::object()};
    w.WriteGroup(td, /*at=*/nullptr);
    WriteFile(tmp + "/.zmetadata",
              json{{"metadata", w.consolidated}, {"zarr_consolidated_format", 1}}.dump(4));
    SyncDir(tmp);
    // The new store replaces the old one in one step (Linux renameat2 RENAME_EXCHANGE); where
    // the file system cannot, the old one is moved aside first.
    const std::optional<std::string> previous = ValueOrThrow<ZarrError>(
        internal::os::ReplaceDirAt(AT_FDCWD, tmp, path, tmp + ".old", path), "to_zarr");
    if (previous) fs::remove_all(*previous, ec);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    TD_FAIL(ZarrError, "to_zarr: writing ", path, ": ", e.what());
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
  SyncDir(parent);
}

TensorDict from_zarr(const std::string& path_in, const FromZarrOptions& options) {
  internal::CheckBatchOptions("from_zarr", options.batch_size(), options.auto_batch_size(),
                              options.batch_dims());
  std::string path = path_in;
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  std::error_code ec;
  if (!fs::exists(path, ec)) TD_FAIL(ZarrError, "from_zarr: ", path, " does not exist");
  if (!fs::is_directory(path, ec)) {
    TD_FAIL(ZarrError, "from_zarr: ", path, " is not a directory store");
  }
  Reader r{options.device(), /*b=*/{}};
  const Node root = ReadNode(path, path);
  if (root.kind != Node::kGroup) {
    TD_FAIL(ZarrError, "from_zarr: ", path,
            root.kind == Node::kArray ? " is a Zarr array, not a group"
                                      : " is not a Zarr store (no .zgroup or zarr.json)");
  }
  structure::Level& level = r.b.Root(structure::LevelKind::kTensorDict);
  const std::optional<std::vector<int64_t>>& given = options.batch_size();
  // No batch size at the root (a store of another tool): upstream's _set_max_batch_size.
  const bool infer = !given && !r.SetBatchSize(level, root, path, {});
  if (absl::Status s = given ? r.b.SetBatchSize(level, *given) : absl::OkStatus(); !s.ok()) {
    TD_FAIL(ValueError, "from_zarr: the batch_size ", s.message());
  }
  TensorDict out = r.ReadGroup(level, path);
  if (infer || options.auto_batch_size() || options.batch_dims()) {
    out.auto_batch_size_(options.batch_dims());
  } else if (!given) {
    Reader::SetStoredNames(out, root, path);  // with the stored batch size, as upstream
  }
  return out;
}

}  // namespace td
