// The lock, HDF5's error stack, dtypes, and the walk of a file's groups into a Node tree
// (NOTE [ HDF5 errors ] in h5_io.h lists what the walk refuses).
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/backends/h5/h5_io.h"
#include "td/compat/dtypes.h"
#include "td/core/dtype.h"
#include "td/core/internal/structure_check.h"
#include "td/structure/structure.h"

namespace td::h5::internal {

using structure::Rule;
using structure::RuleOf;

std::recursive_mutex& Lock() {
  static std::recursive_mutex* mu = [] {
    auto* m = new std::recursive_mutex;
    std::lock_guard<std::recursive_mutex> guard(*m);
    H5open();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors reach us through ErrorText()
    return m;
  }();
  return *mu;
}

std::string ErrorText() {
  std::vector<std::string> parts;
  const auto collect = [](unsigned, const H5E_error2_t* err, void* data) -> herr_t {
    auto* parts = static_cast<std::vector<std::string>*>(data);
    if (parts->size() < 64 && err->desc != nullptr && err->desc[0] != '\0') {
      parts->push_back(absl::StrCat(err->func_name ? err->func_name : "?", ": ", err->desc));
    }
    return 0;
  };
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &parts);
  H5Eclear2(H5E_DEFAULT);
  if (parts.empty()) return "HDF5 gave no reason";
  // The API call, then the two innermost (most specific) reasons.
  if (parts.size() > 3) parts.erase(parts.begin() + 1, parts.end() - 2);
  return absl::StrJoin(parts, "; ");
}

void Hid::reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: H5Idec_ref(id_); break;
  }
  id_ = -1;
}

Node* Node::child(std::string_view name) const {
  for (const auto& [n, c] : children) {
    if (n == name) return c.get();
  }
  return nullptr;
}

bool Node::erase(std::string_view name) {
  const size_t before = children.size();
  children.erase(std::remove_if(children.begin(), children.end(),
                                [&](const auto& c) { return c.first == name; }),
                 children.end());
  return children.size() != before;
}

std::string JoinPath(const std::string& parent, std::string_view name) {
  return absl::StrCat(parent == "/" ? "" : parent, "/",
                      absl::string_view(name.data(), name.size()));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<at::ScalarType> TensorDtypeOf(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  if (cls == H5T_INTEGER || cls == H5T_FLOAT) {
    // By name: uint16/32/64 where this LibTorch has them (NOTE [ Dtypes by LibTorch version ] in
    // td/compat/dtypes.h), refused in the shared words where it does not.
    const bool is_unsigned = cls == H5T_INTEGER && H5Tget_sign(type) != H5T_SGN_2;
    const char* kind = cls == H5T_FLOAT ? "float" : is_unsigned ? "uint" : "int";
    absl::StatusOr<at::ScalarType> t =
        ::td::internal::DtypeFromName(absl::StrCat("torch.", kind, 8 * size));
    if (t.ok()) return t;
    const std::string what = absl::StrCat(is_unsigned ? "unsigned " : "", 8 * size,
                                          cls == H5T_FLOAT ? "-bit float" : "-bit integer");
    const bool named = is_unsigned && (size == 2 || size == 4 || size == 8);
    return absl::InvalidArgumentError(absl::StrCat("the ", what, " type",
                                                   named ? ": " : " has no tensor dtype",
                                                   named ? t.status().message() : ""));
  }
  if (cls == H5T_ENUM && size == 1 && H5Tget_nmembers(type) == 2) {
    int8_t f = -1, t = -1;
    const bool names = H5Tenum_valueof(type, "FALSE", &f) >= 0 && H5Tenum_valueof(type, "TRUE", &t) >= 0;
    H5Eclear2(H5E_DEFAULT);
    if (names && f == 0 && t == 1) return at::kBool;
  }
  static constexpr std::pair<H5T_class_t, const char*> kClassNames[] = {
      {H5T_ENUM, "an enum (other than h5py's bool)"}, {H5T_COMPOUND, "a compound"},
      {H5T_VLEN, "a variable-length sequence"},       {H5T_OPAQUE, "an opaque"},
      {H5T_REFERENCE, "a reference"},                 {H5T_ARRAY, "an array"},
      {H5T_TIME, "a time"},                           {H5T_BITFIELD, "a bitfield"}};
  const char* name = "an unknown";
  for (const auto& [c, n] : kClassNames) {
    if (c == cls) name = n;
  }
  return absl::InvalidArgumentError(absl::StrCat("unsupported dtype: ", name, " HDF5 type"));
}

absl::StatusOr<Hid> MemType(at::ScalarType dtype) {
  if (const compat::NewerDtypeInfo* d = compat::FindNewerDtype(dtype)) {
    if (d->is_float8) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dtype ", std::string(d->name), " cannot be stored in an HDF5 file (numpy, hence "
          "h5py and Python tensordict's to_h5, has no float8)"));
    }
    const size_t size = c10::elementSize(dtype);
    return Hid(H5Tcopy(size == 2   ? H5T_NATIVE_UINT16
                       : size == 4 ? H5T_NATIVE_UINT32
                                   : H5T_NATIVE_UINT64));
  }
  const std::pair<at::ScalarType, hid_t> kNative[] = {
      {at::kChar, H5T_NATIVE_INT8},    {at::kByte, H5T_NATIVE_UINT8},
      {at::kShort, H5T_NATIVE_INT16},  {at::kInt, H5T_NATIVE_INT32},
      {at::kLong, H5T_NATIVE_INT64},   {at::kFloat, H5T_NATIVE_FLOAT},
      {at::kDouble, H5T_NATIVE_DOUBLE}};
  for (const auto& [d, t] : kNative) {
    if (d == dtype) return Hid(H5Tcopy(t));
  }
  if (dtype == at::kHalf) {  // h5py's float16: IEEE binary16 built from the 32-bit type
    Hid t(H5Tcopy(H5T_IEEE_F32LE));
    H5Tset_fields(t.get(), 15, 10, 5, 0, 10);
    H5Tset_size(t.get(), 2);
    H5Tset_ebias(t.get(), 15);
    return t;
  }
  if (dtype == at::kBool) {
    Hid t(H5Tenum_create(H5T_NATIVE_INT8));
    const int8_t values[] = {0, 1};
    H5Tenum_insert(t.get(), "FALSE", &values[0]);
    H5Tenum_insert(t.get(), "TRUE", &values[1]);
    return t;
  }
  return absl::InvalidArgumentError(absl::StrCat("dtype ", DtypeRepr(dtype),
                                                 " cannot be stored in an HDF5 file here "
                                                 "(bool, uint8-64, int8-64, float16/32/64 can)"));
}

namespace {

// The identity of an object in its file, to find link cycles.
std::string ObjectIdentity(hid_t obj) {
#if H5_VERSION_GE(1, 12, 0)
  H5O_info2_t info;
  if (H5Oget_info3(obj, &info, H5O_INFO_BASIC) < 0) return "";
  return std::string(reinterpret_cast<const char*>(&info.token), sizeof(info.token));
#else
  H5O_info_t info;
  if (H5Oget_info2(obj, &info, H5O_INFO_BASIC) < 0) return "";
  return std::string(reinterpret_cast<const char*>(&info.addr), sizeof(info.addr));
#endif
}

// Links may name one group from many places (a DAG of hard or soft links), which the tree
// repeats: a bound on the entries keeps a small hostile file from taking the memory.
constexpr int64_t kMaxEntries = int64_t{1} << 20;

struct Walker {
  const std::string& filename;
  std::vector<std::string> ancestors;  // object identities of the groups being walked
  int64_t entries = 0;

  absl::Status Fail(const std::string& key, const std::string& what) {
    return absl::DataLossError(absl::StrCat("HDF5 file '", filename, "', key '", key, "': ", what));
  }

  absl::StatusOr<std::vector<std::string>> LinkNames(hid_t group, const std::string& key) {
    Hid gcpl(H5Gget_create_plist(group));
    unsigned flags = 0;
    const bool tracked =
        H5Pget_link_creation_order(gcpl.get(), &flags) >= 0 && (flags & H5P_CRT_ORDER_TRACKED) != 0;
    H5Eclear2(H5E_DEFAULT);
    std::vector<std::string> names;
    if (H5Literate(group, tracked ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME, H5_ITER_INC, nullptr,
                   AppendName, &names) < 0) {
      return Fail(key, ErrorText());
    }
    return names;
  }

  // Refuses external links and dangling soft links; `key` names the link in errors.
  absl::Status CheckLink(hid_t group, const std::string& name, const std::string& key) {
    H5L_info_t info;
    if (H5Lget_info(group, name.c_str(), &info, H5P_DEFAULT) < 0) return Fail(key, ErrorText());
    if (info.type == H5L_TYPE_HARD) return absl::OkStatus();
    std::string target(info.u.val_size + 1, '\0');
    if (H5Lget_val(group, name.c_str(), target.data(), target.size(), H5P_DEFAULT) < 0) {
      return Fail(key, ErrorText());
    }
    if (info.type == H5L_TYPE_EXTERNAL) {
      const char* ext_file = nullptr;
      const char* ext_path = nullptr;
      unsigned flags = 0;
      H5Lunpack_elink_val(target.data(), target.size(), &flags, &ext_file, &ext_path);
      return Fail(key, absl::StrCat("an external link to '", ext_path ? ext_path : "?",
                                    "' in file '", ext_file ? ext_file : "?",
                                    "' leaves the file (copy the data into it)"));
    }
    if (info.type == H5L_TYPE_SOFT) {
      const htri_t exists = H5Oexists_by_name(group, name.c_str(), H5P_DEFAULT);
      H5Eclear2(H5E_DEFAULT);
      if (exists > 0) return absl::OkStatus();
      return Fail(key, absl::StrCat("the soft link to '", target.c_str(), "' dangles"));
    }
    return Fail(key, "a user-defined link type is not supported");
  }

  // The open dataset `ds` at `key`: its kind, shape and dtype.
  absl::StatusOr<std::unique_ptr<Node>> Dataset(hid_t ds, const std::string& key) {
    Hid type(H5Dget_type(ds));
    Hid space(H5Dget_space(ds));
    if (!type.ok() || !space.ok()) return Fail(key, ErrorText());
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) return Fail(key, "a null or malformed dataspace is not supported");
    std::vector<hsize_t> dims(rank);
    H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    auto node = std::make_unique<Node>();
    node->shape.assign(dims.begin(), dims.end());
    const H5T_class_t cls = H5Tget_class(type.get());
    if (cls == H5T_STRING || cls == H5T_OPAQUE) {  // non-tensor data (opaque: npy_opaque.h)
      node->kind = cls == H5T_OPAQUE              ? Node::Kind::kOpaque
                   : rank > 0                     ? Node::Kind::kStrings
                   : H5Aexists(ds, kJsonAttr) > 0 ? Node::Kind::kJson
                                                  : Node::Kind::kString;
      return node;
    }
    absl::StatusOr<at::ScalarType> dtype = TensorDtypeOf(type.get());
    if (!dtype.ok()) {
      return Fail(key, absl::StrCat(dtype.status().message(), " (shape ", ShapeText(node->shape),
                                    "): only numbers, bools, strings and opaque data are read"));
    }
    node->kind = Node::Kind::kTensor;
    node->dtype = *dtype;
    return node;
  }

  // The batch size stored in a group's kMetaAttr, or nullopt.
  absl::StatusOr<std::optional<std::vector<int64_t>>> StoredBatch(hid_t group,
                                                                 const std::string& key) {
    if (H5Aexists(group, kMetaAttr) <= 0) {
      H5Eclear2(H5E_DEFAULT);
      return std::optional<std::vector<int64_t>>();
    }
    const std::string attr = absl::StrCat("attribute ", kMetaAttr);
    absl::StatusOr<std::string> text = ReadStringAttr(group, kMetaAttr);
    absl::StatusOr<nlohmann::json> meta =
        text.ok() ? structure::ParseJson<nlohmann::json>(*text) : text.status();
    if (!meta.ok()) return Fail(key, absl::StrCat(attr, ": ", meta.status().message()));
    if (!meta->is_object() || !meta->contains("batch_size")) {
      return Fail(key, absl::StrCat(attr, " is not {\"batch_size\": [...]}: ",
                                    text->substr(0, 200)));
    }
    absl::StatusOr<std::vector<int64_t>> batch = structure::Sizes(meta->at("batch_size")).Read();
    if (!batch.ok()) {
      return Fail(key, absl::StrCat(attr, ": the batch size ", batch.status().message()));
    }
    return std::optional<std::vector<int64_t>>(*std::move(batch));
  }

  absl::StatusOr<std::unique_ptr<Node>> Group(hid_t group, const std::string& key,
                                              const std::optional<std::vector<int64_t>>& given,
                                              const std::optional<std::vector<int64_t>>& parent) {
    absl::Status deep = ::td::internal::CheckNestingDepth(static_cast<int>(ancestors.size()));
    if (!deep.ok()) return Fail(key, std::string(deep.message()));  // the walk's own recursion
    const std::string id = ObjectIdentity(group);
    if (std::find(ancestors.begin(), ancestors.end(), id) != ancestors.end()) {
      return Fail(key, "a link cycle: the group contains itself");
    }
    ancestors.push_back(id);
    auto node = std::make_unique<Node>();  // a kGroup
    absl::StatusOr<std::optional<std::vector<int64_t>>> stored = StoredBatch(group, key);
    if (!stored.ok()) return stored.status();
    // In the order of NOTE [ HDF5 layout ] in h5.h; inferred once the children are known.
    std::optional<std::vector<int64_t>> batch = given ? given : *stored;
    if (!given && parent &&
        !(*stored && ::td::internal::CheckStartsWith(**stored, *parent, "batch size").ok())) {
      batch = parent;
    }
    absl::StatusOr<std::vector<std::string>> names = LinkNames(group, key);
    if (!names.ok()) return names.status();
    for (const std::string& name : *names) {
      const std::string child_key = key.empty() ? name : absl::StrCat(key, "/", name);
      if (++entries > kMaxEntries) {
        return Fail(child_key, absl::StrCat("more than ", kMaxEntries,
                                            " entries (links repeat groups)"));
      }
      if (absl::Status s = CheckLink(group, name, child_key); !s.ok()) return s;
      Hid obj(H5Oopen(group, name.c_str(), H5P_DEFAULT));
      if (!obj.ok()) return Fail(child_key, ErrorText());
      const H5I_type_t type = H5Iget_type(obj.get());
      if (type != H5I_GROUP && type != H5I_DATASET) continue;  // a named datatype is no entry
      absl::StatusOr<std::unique_ptr<Node>> child =
          type == H5I_DATASET ? Dataset(obj.get(), child_key)
                              : Group(obj.get(), child_key, std::nullopt,
                                      given || parent ? batch : std::nullopt);
      if (!child.ok()) return child.status();
      node->children.emplace_back(name, *std::move(child));
    }
    ancestors.pop_back();
    if (!batch) batch = InferBatch(*node);
    node->batch = *batch;
    return node;
  }

  // Upstream's inference (NOTE [ HDF5 layout ] in h5.h); [] for a level without any.
  static std::vector<int64_t> InferBatch(const Node& node) {
    std::optional<std::vector<int64_t>> common;
    for (const auto& [name, child] : node.children) {
      if (child->kind != Node::Kind::kTensor && child->kind != Node::Kind::kGroup) continue;
      const std::vector<int64_t>& shape =
          child->kind == Node::Kind::kTensor ? child->shape : child->batch;
      if (!common) common = shape;
      common->erase(std::mismatch(common->begin(), common->end(), shape.begin(), shape.end()).first,
                    common->end());
    }
    return common.value_or(std::vector<int64_t>{});
  }

  // Says the walked group `node` at `key` to `b` (NOTE [ Structure codec ] in
  // td/structure/structure.h), sub-groups first so that a deeper fault is named first.
  absl::Status Describe(structure::Builder& b, structure::Level& level, const Node& node,
                        const std::string& key) {
    if (absl::Status s = b.SetBatchSize(level, node.batch); !s.ok()) return Said(s, key);
    for (const bool groups : {true, false}) {
      for (const auto& [name, child] : node.children) {
        if ((child->kind == Node::Kind::kGroup) != groups) continue;
        const std::string child_key = key.empty() ? name : absl::StrCat(key, "/", name);
        absl::Status s;
        if (groups) {
          absl::StatusOr<structure::Level*> sub =
              b.AddLevel(level, name, structure::LevelKind::kTensorDict);
          if (!sub.ok()) return Said(sub.status(), child_key);
          if (s = Describe(b, **sub, *child, child_key); !s.ok()) return s;  // said there
        } else if (child->kind == Node::Kind::kTensor) {
          s = b.AddLeaf(level, name, child->dtype, child->shape).status();
        } else {
          s = b.AddNonTensor(level, name, nullptr).status();
        }
        if (!s.ok()) return Said(s, child_key);
      }
    }
    return absl::OkStatus();
  }

  // The Builder's finding `s` about the entry `key`, in the walk's words.
  absl::Status Said(const absl::Status& s, const std::string& key) {
    const Rule rule = RuleOf(s);
    const size_t slash = key.rfind('/');
    const std::string of = rule != Rule::kStartsWith && rule != Rule::kSubBatch ? ""
                           : slash == std::string::npos ? " of the opened group"
                                                        : " of '" + key.substr(0, slash) + "'";
    const char* what = rule == Rule::kBatchSize ? "the batch size " : "";
    return Fail(key, absl::StrCat(what, s.message(), of));
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<Node>> Walk(hid_t file, const std::string& filename,
                                           const std::string& group,
                                           const std::optional<std::vector<int64_t>>& batch) {
  Guard guard(Lock());
  const std::string path = group.empty() ? "/" : group;
  if (path != "/") {
    const htri_t exists = H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0 &&
                          H5Oexists_by_name(file, path.c_str(), H5P_DEFAULT) > 0;
    H5Eclear2(H5E_DEFAULT);
    if (!exists) {
      return absl::NotFoundError(
          absl::StrCat("HDF5 file '", filename, "' has no group '", path, "'"));
    }
  }
  Hid g(H5Gopen2(file, path.c_str(), H5P_DEFAULT));
  if (!g.ok()) {
    return absl::DataLossError(absl::StrCat("HDF5 file '", filename, "': '", path,
                                            "' is not a group: ", ErrorText()));
  }
  Walker w{filename, {}, 0};
  absl::StatusOr<std::unique_ptr<Node>> tree = w.Group(g.get(), "", batch, std::nullopt);
  if (!tree.ok()) return tree.status();
  structure::Builder b;
  absl::Status s = w.Describe(b, b.Root(structure::LevelKind::kTensorDict), **tree, "");
  if (!s.ok()) return s;
  return tree;
}

}  // namespace td::h5::internal
