// Reads and writes of datasets through selections, dataset and group creation, non-tensor
// entries and attributes. Every function takes Lock() (NOTE [ One HDF5 lock ] in h5_io.h).
#include <ATen/ATen.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/backends/h5/h5_io.h"
#include "td/backends/h5/npy_opaque.h"
#include "td/core/internal/structure_check.h"

namespace td::h5::internal {
namespace {

absl::Status Io(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(what, " '", path, "': ", ErrorText()));
}

Hid SpaceOf(const std::vector<int64_t>& shape) {
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  return Hid(dims.empty() ? H5Screate(H5S_SCALAR)
                          : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
}

std::vector<hsize_t> DimsOf(hid_t space) {
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::max(rank, 0));
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  return dims;
}

// OK when `dims` elements of `item` bytes fit in memory: a file's shape is refused before a read
// allocates (HDF5's own count wraps past 2^64).
absl::Status FitsMemory(const std::vector<hsize_t>& dims, size_t item) {
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return absl::OkStatus();
  uint64_t bytes = item;
  bool wraps = false;
  for (hsize_t d : dims) wraps |= __builtin_mul_overflow(bytes, d, &bytes);
  const uint64_t mem = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  if (!wraps && bytes <= mem) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "reading [", absl::StrJoin(dims, ", "), "] x ", item, " bytes needs more than the memory"));
}

// One block list per dim, crossed over the dims, is the selection (lists sorted and deduplicated).
using Piece = std::array<hsize_t, 4>;  // start, stride, count, block

std::vector<int64_t> SortedUnique(const std::vector<int64_t>& list) {
  std::vector<int64_t> u = list;
  std::sort(u.begin(), u.end());
  u.erase(std::unique(u.begin(), u.end()), u.end());
  return u;
}

std::vector<Piece> PiecesOf(const DimSel& d) {
  if (d.kind != DimSel::Kind::kList) {  // a range; an int is a range of one
    if (d.size() == 0) return {};
    return {{static_cast<hsize_t>(d.start), static_cast<hsize_t>(d.size() > 1 ? d.step : 1),
             static_cast<hsize_t>(d.size()), 1}};
  }
  std::vector<Piece> out;
  for (int64_t v : SortedUnique(d.list)) {  // runs of consecutive positions: one block each
    if (!out.empty() && static_cast<hsize_t>(v) == out.back()[0] + out.back()[3]) {
      ++out.back()[3];
    } else {
      out.push_back({static_cast<hsize_t>(v), 1, 1, 1});
    }
  }
  return out;
}

// Selects `sel` (then every element of the remaining dims) in `space` of `shape`; returns the
// number of elements selected.
absl::StatusOr<hsize_t> SelectIn(hid_t space, const Selection& sel,
                                 const std::vector<int64_t>& shape) {
  if (sel.empty()) {
    H5Sselect_all(space);
    return static_cast<hsize_t>(H5Sget_select_npoints(space));
  }
  const size_t rank = shape.size();
  std::vector<std::vector<Piece>> pieces(rank);
  for (size_t d = 0; d < rank; ++d) {
    pieces[d] = d < sel.size() ? PiecesOf(sel[d])
                               : std::vector<Piece>{{0, 1, 1, static_cast<hsize_t>(shape[d])}};
    if (pieces[d].empty() || (d >= sel.size() && shape[d] == 0)) {
      H5Sselect_none(space);
      return 0;
    }
  }
  // The cross product of the dims' pieces, OR-ed together (one piece per dim: one hyperslab).
  std::vector<size_t> at(rank, 0);
  std::vector<std::vector<hsize_t>> p(4, std::vector<hsize_t>(rank));  // as Piece, one per dim
  for (bool first = true;; first = false) {
    for (size_t d = 0; d < rank; ++d) {
      for (size_t k = 0; k < 4; ++k) p[k][d] = pieces[d][at[d]][k];
    }
    if (H5Sselect_hyperslab(space, first ? H5S_SELECT_SET : H5S_SELECT_OR, p[0].data(), p[1].data(),
                            p[2].data(), p[3].data()) < 0) {
      return absl::DataLossError(ErrorText());
    }
    size_t d = rank;
    while (d > 0 && ++at[d - 1] == pieces[d - 1].size()) at[--d] = 0;
    if (d == 0) break;
  }
  return static_cast<hsize_t>(H5Sget_select_npoints(space));
}

// The shape HDF5 fills for `sel` (int dims kept as 1, lists sorted and deduplicated).
std::vector<int64_t> BlockShape(const Selection& sel, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out = shape;
  for (size_t d = 0; d < sel.size(); ++d) {
    out[d] = sel[d].kind == DimSel::Kind::kList ? SortedUnique(sel[d].list).size() : sel[d].size();
  }
  return out;
}

// `t` between the block HDF5 fills (list dims sorted and deduplicated) and the selection's order:
// each list position from its block index, or (`to_block`) each block index from the last list
// position naming it (the last write wins, as in index_put_).
at::Tensor Reorder(at::Tensor t, const Selection& sel, bool to_block) {
  for (size_t d = 0; d < sel.size(); ++d) {
    const std::vector<int64_t>& list = sel[d].list;
    const std::vector<int64_t> u = SortedUnique(list);
    if (sel[d].kind != DimSel::Kind::kList || u == list) continue;
    std::vector<int64_t> pos(to_block ? u.size() : list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const int64_t j = std::lower_bound(u.begin(), u.end(), list[i]) - u.begin();
      pos[to_block ? j : i] = to_block ? static_cast<int64_t>(i) : j;
    }
    t = t.index_select(static_cast<int64_t>(d), at::tensor(pos, at::kLong));
  }
  return t;
}

// Reads (`write`: writes) `buf`, `numel` elements of `dtype` (bools: their stored bytes), through
// `sel` of the dataset at `path` of `shape` (`ds`, when open, is used instead).
absl::Status Transfer(hid_t file, const std::string& path, hid_t ds, at::ScalarType dtype,
                      const Selection& sel, const std::vector<int64_t>& shape, int64_t numel,
                      void* buf, bool write) {
  Guard guard(Lock());
  Hid opened;
  if (ds < 0) {
    opened = Hid(H5Dopen2(file, path.c_str(), H5P_DEFAULT));
    if (!opened.ok()) return Io(path, "cannot open dataset");
    ds = opened.get();
  }
  absl::StatusOr<Hid> mem_type =
      !write && dtype == at::kBool ? Hid(H5Dget_type(ds)) : MemType(dtype);
  if (!mem_type.ok()) return mem_type.status();
  const hid_t mem = mem_type->get();
  Hid fspace(H5Dget_space(ds));
  absl::StatusOr<hsize_t> n = SelectIn(fspace.get(), sel, shape);
  if (!n.ok()) return n.status();
  const hsize_t total = static_cast<hsize_t>(numel);
  Hid mspace(H5Screate_simple(1, &total, nullptr));
  if (*n != total || (write ? H5Dwrite(ds, mem, mspace.get(), fspace.get(), H5P_DEFAULT, buf)
                            : H5Dread(ds, mem, mspace.get(), fspace.get(), H5P_DEFAULT, buf)) < 0) {
    return Io(path, write ? "cannot write dataset" : "cannot read dataset");
  }
  return absl::OkStatus();
}

Hid VlenString() {
  Hid t(H5Tcopy(H5T_C_S1));
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

// Every string of a string dataset or attribute (`obj` read with `read`), in row-major order.
template <class ReadFn>
absl::StatusOr<std::vector<std::string>> ReadStrings(hid_t type, hid_t space, ReadFn read) {
  const bool vlen = H5Tis_variable_str(type) > 0;
  const size_t size = vlen ? sizeof(char*) : H5Tget_size(type);
  if (absl::Status s = FitsMemory(DimsOf(space), size); !s.ok()) return s;  // so n is all of it
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  std::vector<std::string> out;
  if (n <= 0) return out;
  if (vlen) {
    Hid mem = VlenString();
    H5Tset_cset(mem.get(), H5Tget_cset(type));
    std::vector<char*> buf(n, nullptr);
    if (read(mem.get(), buf.data()) < 0) return absl::DataLossError(ErrorText());
    for (char* s : buf) out.emplace_back(s != nullptr ? s : "");
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(mem.get(), space, H5P_DEFAULT, buf.data());
#else
    H5Dvlen_reclaim(mem.get(), space, H5P_DEFAULT, buf.data());
#endif
    return out;
  }
  std::vector<char> buf(size * n + 1, '\0');
  if (read(type, buf.data()) < 0) return absl::DataLossError(ErrorText());
  for (hssize_t i = 0; i < n; ++i) {
    const char* s = buf.data() + i * size;
    out.emplace_back(s, strnlen(s, size));
  }
  return out;
}

// The opaque dataset `ds` (NOTE [ HDF5 opaque data ] in npy_opaque.h) as JSON.
absl::StatusOr<nlohmann::json> ReadOpaque(hid_t ds, hid_t type, hid_t space,
                                          const std::string& path) {
  if (H5Tget_class(type) != H5T_OPAQUE) {
    return absl::DataLossError(absl::StrCat("dataset '", path, "' is no longer opaque data"));
  }
  OpaqueData data;
  char* tag = H5Tget_tag(type);
  H5Eclear2(H5E_DEFAULT);  // an opaque type without a tag has none
  if (tag != nullptr) {
    data.tag = tag;
    H5free_memory(tag);
  }
  data.item_size = static_cast<int64_t>(H5Tget_size(type));
  const std::vector<hsize_t> dims = DimsOf(space);
  data.shape.assign(dims.begin(), dims.end());
  const hssize_t n = H5Sget_simple_extent_npoints(space);
  int64_t bytes = 0;
  if (n < 0 || data.item_size < 1 || __builtin_mul_overflow(int64_t{n}, data.item_size, &bytes) ||
      bytes > kMaxOpaqueBytes) {
    return absl::DataLossError(absl::StrCat(
        "opaque dataset '", path, "' (tag '", data.tag, "', shape ", ShapeText(data.shape),
        ", item size ", data.item_size, ") holds more than the ", kMaxOpaqueBytes >> 20,
        " MiB read as a non-tensor value"));
  }
  data.bytes.assign(static_cast<size_t>(bytes), '\0');
  if (bytes > 0) {
    // The file's own type: the bytes as stored.
    if (H5Dread(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.bytes.data()) < 0) {
      return Io(path, "cannot read opaque dataset");
    }
  }
  absl::StatusOr<nlohmann::json> out = DecodeOpaque(data);
  if (!out.ok()) {
    return absl::DataLossError(absl::StrCat("dataset '", path, "': ", out.status().message()));
  }
  return out;
}

}  // namespace

std::vector<int64_t> SelectedShape(const Selection& sel, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d >= sel.size()) {
      out.push_back(shape[d]);
    } else if (sel[d].kind != DimSel::Kind::kInt) {
      out.push_back(sel[d].size());
    }
  }
  return out;
}

absl::StatusOr<at::Tensor> ReadTensor(hid_t file, const std::string& path, at::ScalarType dtype,
                                      const std::vector<int64_t>& shape, const Selection& sel,
                                      hid_t dataset) {
  std::vector<int64_t> block = BlockShape(sel, shape);
  absl::Status fits = FitsMemory({block.begin(), block.end()}, c10::elementSize(dtype));
  if (!fits.ok()) return fits;
  // Bools as their stored bytes (NOTE [ HDF5 bools ]), then != 0.
  const bool bytes = dtype == at::kBool;
  at::Tensor out;
  try {
    out = at::empty(block, at::TensorOptions().dtype(bytes ? at::kByte : dtype));
  } catch (const c10::Error& e) {  // a shape no memory holds (a damaged or hostile file)
    return absl::ResourceExhaustedError(
        absl::StrCat("dataset '", path, "' of shape ", ShapeText(shape),
                     " does not fit in memory: ", e.what_without_backtrace()));
  }
  if (out.numel() > 0) {
    absl::Status s = Transfer(file, path, dataset, dtype, sel, shape, out.numel(), out.data_ptr(),
                              /*write=*/false);
    if (!s.ok()) return s;
  }
  if (bytes) out = out.ne(0);
  out = Reorder(out, sel, /*to_block=*/false);  // lists back in their order, then int dims dropped
  for (size_t d = sel.size(); d-- > 0;) {
    if (sel[d].kind == DimSel::Kind::kInt) out = out.select(static_cast<int64_t>(d), 0);
  }
  return out;
}

absl::Status WriteTensor(hid_t file, const std::string& path, at::ScalarType dtype,
                         const std::vector<int64_t>& shape, const Selection& sel,
                         const at::Tensor& value) {
  at::Tensor v = value.to(at::kCPU).to(dtype);
  // Back to the block HDF5 walks (BlockShape, Reorder).
  for (size_t d = 0; d < sel.size(); ++d) {
    if (sel[d].kind == DimSel::Kind::kInt) v = v.unsqueeze(static_cast<int64_t>(d));
  }
  v = Reorder(v, sel, /*to_block=*/true).contiguous();
  if (v.sizes() != at::IntArrayRef(BlockShape(sel, shape))) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of shape ", ShapeText(value.sizes().vec()), " for the selection of ",
                     path, " of shape ", ShapeText(SelectedShape(sel, shape))));
  }
  if (v.numel() == 0) return absl::OkStatus();
  return Transfer(file, path, -1, dtype, sel, shape, v.numel(), v.data_ptr(), /*write=*/true);
}

absl::Status CreateDataset(hid_t file, const std::string& path, at::ScalarType dtype,
                           const std::vector<int64_t>& shape, const CreateLayout& layout) {
  Guard guard(Lock());
  absl::StatusOr<Hid> type = MemType(dtype);
  if (!type.ok()) return type.status();
  Hid space = SpaceOf(shape);
  Hid dcpl(H5Pcreate(H5P_DATASET_CREATE));
  int64_t numel = 1;
  for (int64_t d : shape) numel *= d;
  if ((layout.gzip || layout.chunk_rows > 0) && !shape.empty() && numel > 0) {
    std::vector<hsize_t> chunk(shape.begin(), shape.end());
    const int64_t row_bytes =
        std::max<int64_t>(1, numel / shape[0] * static_cast<int64_t>(c10::elementSize(dtype)));
    const int64_t rows = layout.chunk_rows > 0 ? layout.chunk_rows
                                               : std::max<int64_t>(1, (int64_t{1} << 20) / row_bytes);
    chunk[0] = static_cast<hsize_t>(std::min<int64_t>(rows, shape[0]));
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
    if (layout.gzip) H5Pset_deflate(dcpl.get(), static_cast<unsigned>(layout.level));
  }
  Hid ds(H5Dcreate2(file, path.c_str(), type->get(), space.get(), H5P_DEFAULT, dcpl.get(),
                    H5P_DEFAULT));
  if (!ds.ok()) return Io(path, "cannot create dataset");
  return absl::OkStatus();
}

absl::Status WriteBatchAttr(hid_t file, const std::string& path, const std::vector<int64_t>& batch) {
  nlohmann::json meta = {{"batch_size", batch}, {"version", 1}};
  return WriteAttr(file, path, kMetaAttr, meta.dump());
}

absl::Status CreateGroup(hid_t file, const std::string& path, const std::vector<int64_t>& batch) {
  Guard guard(Lock());
  Hid gcpl(H5Pcreate(H5P_GROUP_CREATE));
  H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED);
  Hid g(H5Gcreate2(file, path.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT));
  if (!g.ok()) return Io(path, "cannot create group");
  return WriteBatchAttr(file, path, batch);
}

absl::StatusOr<std::string> ReadStringAttr(hid_t obj, const char* name) {
  Hid attr(H5Aopen(obj, name, H5P_DEFAULT));
  if (!attr.ok()) return absl::DataLossError(ErrorText());
  Hid type(H5Aget_type(attr.get()));
  if (H5Tget_class(type.get()) != H5T_STRING) return absl::DataLossError("not a string attribute");
  Hid space(H5Aget_space(attr.get()));
  if (H5Sget_simple_extent_npoints(space.get()) != 1) {
    return absl::DataLossError("not a scalar string attribute");
  }
  absl::StatusOr<std::vector<std::string>> s = ReadStrings(
      type.get(), space.get(), [&](hid_t mem, void* buf) { return H5Aread(attr.get(), mem, buf); });
  if (!s.ok()) return s.status();
  return s->front();
}

absl::StatusOr<nlohmann::json> ReadNonTensor(hid_t file, const std::string& path, Node::Kind kind) {
  Guard guard(Lock());
  Hid ds(H5Dopen2(file, path.c_str(), H5P_DEFAULT));
  if (!ds.ok()) return Io(path, "cannot open dataset");
  Hid type(H5Dget_type(ds.get()));
  Hid space(H5Dget_space(ds.get()));
  if (kind == Node::Kind::kOpaque) return ReadOpaque(ds.get(), type.get(), space.get(), path);
  absl::StatusOr<std::vector<std::string>> strings =
      ReadStrings(type.get(), space.get(), [&](hid_t mem, void* buf) {
        return H5Dread(ds.get(), mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
      });
  if (!strings.ok()) return strings.status();
  if (kind == Node::Kind::kStrings) {
    const std::vector<hsize_t> dims = DimsOf(space.get());
    return NestFlat({strings->begin(), strings->end()}, {dims.begin(), dims.end()});
  }
  const std::string text = strings->empty() ? "" : strings->front();
  if (kind == Node::Kind::kJson) {
    // NOTE [ Untrusted JSON ] in td/core/internal/structure_check.h.
    absl::StatusOr<nlohmann::json> v = ::td::internal::ParseUntrustedJson<nlohmann::json>(text);
    if (!v.ok()) {
      return absl::DataLossError(absl::StrCat("dataset '", path, "' has the attribute ", kJsonAttr,
                                              " but does not hold valid JSON (",
                                              v.status().message(), "): ", text.substr(0, 200)));
    }
    return *std::move(v);
  }
  return nlohmann::json(text);
}

absl::StatusOr<Node::Kind> WriteNonTensor(hid_t file, const std::string& path,
                                          const nlohmann::json& value) {
  // Encoded before the old entry goes: a malformed description leaves it in place.
  absl::StatusOr<std::optional<OpaqueData>> opaque = EncodeOpaque(value);
  if (!opaque.ok()) return opaque.status();
  Guard guard(Lock());
  if (H5Lexists(file, path.c_str(), H5P_DEFAULT) > 0) H5Ldelete(file, path.c_str(), H5P_DEFAULT);
  H5Eclear2(H5E_DEFAULT);
  const OpaqueData* data = opaque->has_value() ? &**opaque : nullptr;
  const std::string text = data ? "" : value.is_string() ? value.get<std::string>() : value.dump();
  const char* chars = text.c_str();
  Hid type = data ? Hid(H5Tcreate(H5T_OPAQUE, static_cast<size_t>(data->item_size))) : VlenString();
  if (data != nullptr &&
      (!type.ok() || (!data->tag.empty() && H5Tset_tag(type.get(), data->tag.c_str()) < 0))) {
    return Io(path, "cannot make the opaque type of");
  }
  Hid space = SpaceOf(data ? data->shape : std::vector<int64_t>{});
  const void* buf = data == nullptr       ? static_cast<const void*>(&chars)
                    : data->bytes.empty() ? nullptr
                                          : data->bytes.data();
  Hid ds(H5Dcreate2(file, path.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT,
                    H5P_DEFAULT));
  if (!ds.ok() ||
      (buf != nullptr && H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0)) {
    return Io(path, data ? "cannot write opaque dataset" : "cannot write string dataset");
  }
  if (data || value.is_string()) return data ? Node::Kind::kOpaque : Node::Kind::kString;
  if (absl::Status s = WriteAttr(file, path, kJsonAttr, 1); !s.ok()) return s;
  return Node::Kind::kJson;
}

absl::StatusOr<nlohmann::json> ReadAttrs(hid_t file, const std::string& path) {
  Guard guard(Lock());
  Hid obj(H5Oopen(file, path.c_str(), H5P_DEFAULT));
  if (!obj.ok()) return Io(path, "cannot open");
  nlohmann::json out = nlohmann::json::object();
  std::vector<std::string> names;
  H5Aiterate2(obj.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, AppendName, &names);
  for (const std::string& name : names) {
    if (name == kMetaAttr || name == kJsonAttr) continue;  // the layout's own (h5.h)
    Hid attr(H5Aopen(obj.get(), name.c_str(), H5P_DEFAULT));
    if (!attr.ok()) return Io(path, absl::StrCat("cannot open attribute ", name, " of"));
    Hid type(H5Aget_type(attr.get()));
    Hid space(H5Aget_space(attr.get()));
    if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) {
      out[name] = nullptr;  // an empty attribute (h5py.Empty): no value, of any type
      continue;
    }
    const auto bad = [&](absl::string_view why) {
      return absl::DataLossError(absl::StrCat("attribute '", name, "' of '", path, "': ", why));
    };
    const std::vector<hsize_t> dims = DimsOf(space.get());
    if (absl::Status ok = FitsMemory(dims, H5Tget_size(type.get())); !ok.ok()) {
      return bad(ok.message());
    }
    std::vector<nlohmann::json> flat;
    auto read = [&](hid_t mem, void* buf) { return H5Aread(attr.get(), mem, buf); };
    if (H5Tget_class(type.get()) == H5T_STRING) {
      absl::StatusOr<std::vector<std::string>> s = ReadStrings(type.get(), space.get(), read);
      if (!s.ok()) return Io(path, absl::StrCat("cannot read attribute ", name, " of"));
      flat.assign(s->begin(), s->end());
    } else {
      absl::StatusOr<at::ScalarType> dtype = TensorDtypeOf(type.get());
      if (!dtype.ok()) return bad(dtype.status().message());
      const hssize_t count = H5Sget_simple_extent_npoints(space.get());
      const bool bytes = *dtype == at::kBool;  // NOTE [ HDF5 bools ]
      at::Tensor t = at::empty({count}, at::TensorOptions().dtype(bytes ? at::kByte : *dtype));
      absl::StatusOr<Hid> mem = MemType(*dtype);  // bools: read with the file's type instead
      if (!mem.ok()) return mem.status();
      if (count > 0 && read(bytes ? type.get() : mem->get(), t.data_ptr()) < 0) {
        return Io(path, absl::StrCat("cannot read attribute ", name, " of"));
      }
      if (bytes) t = t.ne(0);
      for (int64_t j = 0; j < count; ++j) {
        const at::Scalar v = t[j].item();
        flat.push_back(v.isBoolean()         ? nlohmann::json(v.toBool())
                       : v.isFloatingPoint() ? nlohmann::json(v.toDouble())
                                             : nlohmann::json(v.toLong()));
      }
    }
    if (!flat.empty() || !dims.empty()) {
      out[name] = NestFlat(std::move(flat), {dims.begin(), dims.end()});
    }
  }
  return out;
}

absl::Status WriteAttr(hid_t file, const std::string& path, const std::string& name,
                       const nlohmann::json& value) {
  Guard guard(Lock());
  const bool array = value.is_array();
  std::vector<nlohmann::json> items = array ? std::vector<nlohmann::json>(value.begin(), value.end())
                                            : std::vector<nlohmann::json>{value};
  const auto same_kind = [&](auto pred) { return std::all_of(items.begin(), items.end(), pred); };
  Hid type;
  std::string bytes;
  const auto append = [&](auto v) { bytes.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  std::vector<const char*> ptrs;  // into `items`
  if (value.is_null()) {
    // An empty attribute (a null dataspace), as ReadAttrs reads it back; h5py: h5py.Empty("i1").
    type = Hid(H5Tcopy(H5T_NATIVE_INT8));
  } else if (same_kind([](const nlohmann::json& j) { return j.is_string(); })) {
    type = VlenString();
    for (const auto& j : items) ptrs.push_back(j.get_ref<const std::string&>().c_str());
  } else if (same_kind([](const nlohmann::json& j) { return j.is_boolean(); })) {
    type = *MemType(at::kBool);
    for (const auto& j : items) append(static_cast<int8_t>(j.get<bool>() ? 1 : 0));
  } else if (same_kind([](const nlohmann::json& j) { return j.is_number_integer(); })) {
    type = Hid(H5Tcopy(H5T_NATIVE_INT64));
    for (const auto& j : items) append(j.get<int64_t>());
  } else if (same_kind([](const nlohmann::json& j) { return j.is_number(); })) {
    type = Hid(H5Tcopy(H5T_NATIVE_DOUBLE));
    for (const auto& j : items) append(j.get<double>());
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "attribute '", name, "': ", value.dump().substr(0, 100),
        " is not a number, bool or string, or a flat array of one kind of them"));
  }
  if (items.empty()) return absl::InvalidArgumentError(absl::StrCat("attribute '", name, "': an empty array"));
  const hsize_t n = items.size();
  Hid space(value.is_null() ? H5Screate(H5S_NULL)
            : array         ? H5Screate_simple(1, &n, nullptr)
                            : H5Screate(H5S_SCALAR));
  if (H5Aexists_by_name(file, path.c_str(), name.c_str(), H5P_DEFAULT) > 0) {
    H5Adelete_by_name(file, path.c_str(), name.c_str(), H5P_DEFAULT);
  }
  Hid attr(H5Acreate_by_name(file, path.c_str(), name.c_str(), type.get(), space.get(),
                             H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
  const void* data = ptrs.empty() ? static_cast<const void*>(bytes.data()) : ptrs.data();
  if (!attr.ok() || (!value.is_null() && H5Awrite(attr.get(), type.get(), data) < 0)) {
    return Io(path, absl::StrCat("cannot write attribute ", name, " of"));
  }
  return absl::OkStatus();
}

}  // namespace td::h5::internal
