// The "h5" storage: one level of an open HDF5 file, through a selection of its rows. See
// NOTE [ HDF5 layout ] in h5.h and NOTE [ One HDF5 lock ] in h5_io.h.
#include "td/backends/h5/h5_storage.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/backends/h5/h5.h"
#include "td/backends/h5/npy_opaque.h"
#include "td/core/dtype.h"
#include "td/core/internal/batch_index.h"
#include "td/core/internal/leaves.h"

namespace td::h5::internal {

using at::indexing::TensorIndex;

H5File::~H5File() {
  Guard guard(Lock());
  if (fid.ok() && writable) H5Fflush(fid.get(), H5F_SCOPE_GLOBAL);
  root.reset();  // its open datasets first, under the lock
  fid.reset();
  H5Eclear2(H5E_DEFAULT);
}

std::string H5File::Path(const std::vector<std::string>& level, std::string_view key) const {
  std::string p = root_path;
  for (const std::string& part : level) p = JoinPath(p, part);
  return key.empty() ? p : JoinPath(p, key);
}

Node* H5File::Level(const std::vector<std::string>& level) const {
  Node* n = root.get();
  for (const std::string& part : level) {
    n = n->child(part);
    if (n == nullptr || n->kind != Node::Kind::kGroup) return nullptr;
  }
  return n;
}

namespace {

std::string KeyText(const std::vector<std::string>& level, std::string_view key) {
  std::vector<std::string> parts = level;
  if (!key.empty()) parts.emplace_back(key);
  return absl::StrJoin(parts, "/");
}

// The context of the errors about `key` of the group `level`.
std::string Context(const H5File& file, const std::vector<std::string>& level,
                    std::string_view key) {
  return absl::StrCat("HDF5 file '", file.filename, "', key '", KeyText(level, key), "'");
}

// Throws H5Error with HDF5's reason when the result `rc` of an HDF5 call is a failure.
void Check(int64_t rc, const std::string& context) {
  if (rc < 0) ThrowIfError<H5Error>(absl::DataLossError(ErrorText()), context);
}

const char* KindText(Node::Kind kind) {
  return kind == Node::Kind::kGroup    ? "a group"
         : kind == Node::Kind::kTensor ? "a tensor"
                                       : "non-tensor data";
}

// ValueError naming `key` when it cannot be one HDF5 link name ("a/y" would be "y" in a group
// "a", "." the group itself): refused rather than changed, so no structure changes silently.
void CheckLinkName(const std::string& filename, const std::vector<std::string>& level,
                   std::string_view key) {
  if (!key.empty() && key != "." && key.find('/') == std::string_view::npos) return;
  std::vector<std::string> parts = level;
  parts.emplace_back(key);
  TD_FAIL(ValueError, "HDF5 file '", filename, "': key ", NestedKey(parts).repr(),
          " cannot be an HDF5 name (empty, '.', or a '/' inside, which HDF5 reads as a group "
          "path); rename it, or nest it as a sub-TensorDict");
}

}  // namespace

H5Storage::H5Storage(std::shared_ptr<H5File> file, std::vector<std::string> level, Selection sel,
                     std::vector<int64_t> batch)
    : LazyStorage(std::move(batch), at::Device(at::kCPU)),
      file_(std::move(file)),
      level_(std::move(level)),
      sel_(std::move(sel)) {}

Capabilities H5Storage::capabilities() const {
  Capabilities c = Capability::kLazy;
  if (!file_->writable) return c;
  c = c | Capability::kInPlaceWrite | Capability::kNewKeys;
  return sel_.empty() ? c | Capability::kReplaceEntries | Capability::kBatchResize : c;
}

Node* H5Storage::level_node() const {
  Node* n = file_->Level(level_);
  if (n == nullptr) {
    TD_FAIL(KeyError, "HDF5 file '", file_->filename, "': the group '", KeyText(level_, ""),
            "' this TensorDict reads was deleted");
  }
  return n;
}

std::vector<int64_t> H5Storage::file_batch() const {
  Guard guard(Lock());
  return level_node()->batch;
}

size_t H5Storage::size() const {
  Guard guard(Lock());
  return level_node()->children.size();
}

std::vector<std::string> H5Storage::keys() const {
  Guard guard(Lock());
  std::vector<std::string> out;
  for (const auto& [k, v] : level_node()->children) out.push_back(k);
  return out;
}

bool H5Storage::contains(std::string_view key) const {
  Guard guard(Lock());
  return level_node()->child(key) != nullptr;
}

std::shared_ptr<H5Storage> H5Storage::Sub(std::string_view key, const Node& group) const {
  std::vector<std::string> level = level_;
  level.emplace_back(key);
  auto out =
      std::make_shared<H5Storage>(file_, std::move(level), sel_, SelectedShape(sel_, group.batch));
  out->assign_locked(locked());
  return out;
}

std::optional<Value> H5Storage::get(std::string_view key) const {
  const std::string path = file_->Path(level_, key);
  at::ScalarType dtype;
  std::vector<int64_t> shape;
  hid_t dataset;
  {
    Guard guard(Lock());
    Node* c = level_node()->child(key);
    if (c == nullptr) return std::nullopt;
    if (c->kind == Node::Kind::kGroup) return Value(TensorDict(Sub(key, *c)));
    if (c->kind != Node::Kind::kTensor) {
      absl::StatusOr<nlohmann::json> v = ReadNonTensor(file_->fid.get(), path, c->kind);
      if (!v.ok()) ThrowIfError<H5Error>(v.status(), Context(*file_, level_, key));
      return Value(NonTensorData(*std::move(v)));
    }
    if (!c->dataset.ok()) {
      c->dataset = Hid(H5Dopen2(file_->fid.get(), path.c_str(), H5P_DEFAULT));
      Check(c->dataset.get(), Context(*file_, level_, key));
    }
    dtype = c->dtype;
    shape = c->shape;
    dataset = c->dataset.get();
  }
  // Outside the lock but for the HDF5 calls, so reordering rows runs in parallel with other
  // readers. The error's context is built only on failure: get() is every leaf's read.
  absl::StatusOr<at::Tensor> t = ReadTensor(file_->fid.get(), path, dtype, shape, sel_, dataset);
  if (!t.ok()) ThrowIfError<H5Error>(t.status(), Context(*file_, level_, key));
  return Value(*std::move(t));
}

std::optional<EntryMeta> H5Storage::meta(std::string_view key) const {
  Guard guard(Lock());
  const Node* c = level_node()->child(key);
  if (c == nullptr) return std::nullopt;
  EntryMeta m;  // on the CPU
  m.kind = c->kind == Node::Kind::kTensor  ? EntryMeta::Kind::kTensor
           : c->kind == Node::Kind::kGroup ? EntryMeta::Kind::kTensorDict
                                           : EntryMeta::Kind::kNonTensor;
  if (m.kind != EntryMeta::Kind::kNonTensor) {
    const std::vector<int64_t> s =
        SelectedShape(sel_, c->kind == Node::Kind::kTensor ? c->shape : c->batch);
    m.shape.assign(s.begin(), s.end());
    m.dtype = c->dtype;
  }
  return m;
}

void H5Storage::RequireWritable(std::string_view what, std::string_view key) const {
  if (!file_->writable) {
    TD_FAIL(ValueError, "cannot ", what, " key '", KeyText(level_, key), "': the HDF5 file '",
            file_->filename, "' is open read-only (td::h5::OpenOptions().mode(td::h5::Mode::kReadWrite))");
  }
}

void H5Storage::Put(const std::vector<std::string>& level, Node* lvl, std::string_view key,
                    const Value& value) const {
  CheckLinkName(file_->filename, level, key);
  const std::string path = file_->Path(level, key);
  const std::string context = Context(*file_, level, key);
  hid_t fid = file_->fid.get();
  Node* existing = lvl->child(key);
  auto remove_existing = [&] {
    if (existing == nullptr) return;
    Check(H5Ldelete(fid, path.c_str(), H5P_DEFAULT), context);
    lvl->erase(key);
  };
  auto add = [&](Node::Kind kind) {  // the node of what was written, appended
    Node* n = lvl->children.emplace_back(key, std::make_unique<Node>()).second.get();
    n->kind = kind;
    return n;
  };
  if (value.is_non_tensor()) {
    if (value.non_tensor_data().is_stack()) {
      TD_FAIL(TypeError, context, ": a NonTensorStack cannot be stored in HDF5 (upstream's "
              "PersistentTensorDict has no form for one value per batch element); store the "
              "values as a tensor, or save this TensorDict with memmap() or save_consolidated()");
    }
    // A malformed {"hdf5_opaque": ...} description fails before the old entry goes.
    ThrowIfError<H5Error>(EncodeOpaque(value.non_tensor()).status(), context);
    remove_existing();
    add(ValueOrThrow<H5Error>(WriteNonTensor(fid, path, value.non_tensor()), context));
    return;
  }
  // A tensor is a dataset of its shape, a TensorDict a group of its batch size, both with this
  // level's batch dims in the file in place of the selection's.
  const bool tensor = value.is_tensor();
  std::optional<TensorDict> sub;
  if (!tensor) sub = value.tensordict();
  if (const auto* from = sub ? dynamic_cast<const H5Storage*>(&sub->storage()) : nullptr;
      from != nullptr && from->file_ == file_) {
    sub = sub->to_dense();  // read before the group it may come from is replaced
  }
  const at::IntArrayRef dims = tensor ? value.tensor().sizes() : sub->batch_size();
  std::vector<int64_t> shape = lvl->batch;
  shape.insert(shape.end(), dims.begin() + SelectedShape(sel_, lvl->batch).size(), dims.end());
  const Node::Kind kind = tensor ? Node::Kind::kTensor : Node::Kind::kGroup;
  const at::ScalarType dtype = tensor ? value.tensor().scalar_type() : Node().dtype;
  // Written into through a selection when the shape is the file's; without one, only a dataset of
  // the same dtype is (a group is replaced).
  Node* node = existing;
  if (existing == nullptr || existing->kind != kind ||
      (tensor ? existing->shape : existing->batch) != shape ||
      (sel_.empty() && (!tensor || existing->dtype != dtype))) {
    if (existing != nullptr && !sel_.empty()) {
      TD_FAIL(ValueError, "cannot replace key '", KeyText(level, key), "' of the HDF5 file '",
              file_->filename, "' through a selection of its rows: ",
              existing->kind != kind
                  ? absl::StrCat("it is ", KindText(existing->kind), " in the file, the value ",
                                 KindText(kind))
                  : absl::StrCat("its shape in the file is ",
                                 ShapeText(tensor ? existing->shape : existing->batch),
                                 ", the value needs ", ShapeText(shape)),
              " (write through the opened TensorDict)");
    }
    if (absl::Status s = tensor ? MemType(dtype).status() : absl::OkStatus(); !s.ok()) {
      TD_FAIL(TypeError, "key '", KeyText(level, key), "': ", s.message());
    }
    remove_existing();
    ThrowIfError<H5Error>(tensor ? CreateDataset(fid, path, dtype, shape, file_->layout)
                                 : CreateGroup(fid, path, shape),
                          context);
    node = add(kind);
    node->dtype = dtype;
    (tensor ? node->shape : node->batch) = shape;
  }
  if (tensor) {
    ThrowIfError<H5Error>(WriteTensor(fid, path, node->dtype, shape, sel_, value.tensor()),
                          context);
    return;
  }
  std::vector<std::string> sub_level = level;
  sub_level.emplace_back(key);
  sub->for_each_entry([&](const std::string& k, const Value& v) { Put(sub_level, node, k, v); });
}

void H5Storage::set(std::string_view key, Value value) {
  RequireWritable("set", key);
  Guard guard(Lock());
  Put(level_, level_node(), key, value);
}

void H5Storage::set_(std::string_view key, const at::Tensor& value) {
  RequireWritable("write", key);
  Guard guard(Lock());
  const Node* c = level_node()->child(key);
  TORCH_INTERNAL_ASSERT(c != nullptr && c->kind == Node::Kind::kTensor);
  ThrowIfError<H5Error>(
      WriteTensor(file_->fid.get(), file_->Path(level_, key), c->dtype, c->shape, sel_, value),
      Context(*file_, level_, key));
}

bool H5Storage::erase(std::string_view key) {
  RequireWritable("delete", key);
  Guard guard(Lock());
  if (level_node()->child(key) == nullptr) return false;
  Check(H5Ldelete(file_->fid.get(), file_->Path(level_, key).c_str(), H5P_DEFAULT),
        Context(*file_, level_, key));
  return level_node()->erase(key);
}

bool H5Storage::rename_key(std::string_view old_key, std::string_view new_key) {
  RequireWritable("rename", old_key);
  CheckLinkName(file_->filename, level_, new_key);
  Guard guard(Lock());
  Node* lvl = level_node();
  const std::string from = file_->Path(level_, old_key);
  const std::string to = file_->Path(level_, new_key);
  hid_t fid = file_->fid.get();
  if (lvl->erase(new_key)) H5Ldelete(fid, to.c_str(), H5P_DEFAULT);
  Check(H5Lmove(fid, from.c_str(), fid, to.c_str(), H5P_DEFAULT, H5P_DEFAULT),
        absl::StrCat("HDF5 file '", file_->filename, "', renaming '", from, "' to '", to, "'"));
  for (auto& [k, v] : lvl->children) {
    if (k == old_key) k = std::string(new_key);
  }
  return true;
}

void H5Storage::set_batch_size(std::vector<int64_t> batch_size) {
  if (at::IntArrayRef(batch_size) == Storage::batch_size()) return;
  if (!sel_.empty()) {
    TD_FAIL(BatchSizeError, "cannot set the batch size of a selection of the HDF5 file '",
            file_->filename, "' to ", SizeRepr(batch_size), ": it follows the file (batch size ",
            SizeRepr(Storage::batch_size()), "); call to_dense() for a free-standing TensorDict");
  }
  RequireWritable("set the batch size of", "");
  Guard guard(Lock());
  Node* lvl = level_node();
  ThrowIfError<H5Error>(WriteBatchAttr(file_->fid.get(), file_->Path(level_, ""), batch_size),
                        absl::StrCat("HDF5 file '", file_->filename, "'"));
  lvl->batch = batch_size;
  Storage::set_batch_size(std::move(batch_size));
}

std::optional<Selection> H5Storage::Compose(at::ArrayRef<TensorIndex> indices) const {
  const ::td::internal::BatchIndex ex =
      ::td::internal::ExpandBatchIndex(indices, Storage::batch_size(), "index");
  if (ex.has_boolean) return std::nullopt;
  int tensors = 0;
  for (const auto& item : ex.items) {
    const bool tensor = item.index.is_tensor();
    if (item.dim < 0 || (tensor && item.index.tensor().dim() != 1)) return std::nullopt;  // None
    tensors += tensor;
  }
  if (tensors > 1) return std::nullopt;  // several index tensors zip: computed in memory
  Selection sel = sel_;
  const std::vector<int64_t> file_batch = this->file_batch();
  for (size_t d = sel.size(); d < file_batch.size(); ++d) sel.push_back(DimSel::All(file_batch[d]));
  std::vector<size_t> file_dim;  // view dim -> file dim
  for (size_t d = 0; d < sel.size(); ++d) {
    if (sel[d].kind != DimSel::Kind::kInt) file_dim.push_back(d);
  }
  Selection out = sel;
  for (const auto& item : ex.items) {
    const size_t d = file_dim[item.dim];
    const DimSel& old = sel[d];
    const int64_t n = old.size();
    const TensorIndex& idx = item.index;
    if (idx.is_slice() && ::td::internal::IsFullSlice(idx, n)) continue;
    if (idx.is_slice() && old.kind == DimSel::Kind::kRange) {
      // A range stays a range: start, step and count without listing the positions.
      const auto& s = idx.slice();
      const int64_t step = ::td::internal::AsInt(s.step());
      auto clamp = [n](int64_t v) { return std::min(std::max<int64_t>(v < 0 ? v + n : v, 0), n); };
      const int64_t start = clamp(::td::internal::AsInt(s.start()));
      const int64_t stop = clamp(::td::internal::AsInt(s.stop()));
      const int64_t count = stop > start ? (stop - start + step - 1) / step : 0;
      out[d] =
          DimSel{DimSel::Kind::kRange, old.start + start * old.step, old.step * step, count, {}};
      continue;
    }
    // An index tensor is read as is: Positions would build the whole dim's positions.
    bool single = false;
    std::vector<int64_t> pos;
    if (idx.is_tensor() && !::td::internal::IsMask(idx.tensor())) {
      const at::Tensor t = idx.tensor().to(at::kCPU, at::kLong).contiguous();
      pos.assign(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
      for (int64_t& p : pos) {
        const int64_t i = p;
        if (p < 0) p += n;
        if (p < 0 || p >= n) {
          TD_FAIL(IndexError, "index ", i, " is out of bounds for batch dim ", item.dim,
                  " of size ", n);
        }
      }
    } else {
      pos = ::td::internal::Positions(
          idx.is_tensor() ? TensorIndex(idx.tensor().to(at::kCPU, at::kBool)) : idx, n, &single);
    }
    for (int64_t& p : pos) p = old.at(p);  // positions in the file
    out[d] = single ? DimSel{DimSel::Kind::kInt, pos[0], 1, 1, {}}
                    : DimSel{DimSel::Kind::kList, 0, 1, 0, std::move(pos)};
  }
  return out;
}

std::optional<TensorDict> H5Storage::index(at::ArrayRef<TensorIndex> indices) const {
  std::optional<Selection> sel = Compose(indices);
  if (!sel) return std::nullopt;
  std::vector<int64_t> batch = SelectedShape(*sel, file_batch());
  auto out = std::make_shared<H5Storage>(file_, level_, std::move(*sel), std::move(batch));
  out->assign_locked(locked());
  return TensorDict(std::move(out));
}

bool H5Storage::index_put_(at::ArrayRef<TensorIndex> indices, const TensorDict& value) {
  std::optional<Selection> sel = Compose(indices);
  if (!sel || !file_->writable) return false;
  // Every leaf must exist with the value's feature shape and broadcast to the selection; else
  // the core validates (and names what is wrong), creates and writes leaf by leaf. An empty
  // sub-TensorDict is a leaf here: nothing to write where its group exists.
  struct Write {
    std::vector<std::string> level;
    std::string key;
    const Node* node;
    at::Tensor value;
  };
  std::vector<Write> writes;
  Guard guard(Lock());
  level_node();  // KeyError when this level's group was deleted
  const KeysOptions leaves = KeysOptions().include_nested(true).leaves_only(true).is_leaf(
      [](const Value& e) { return !e.is_tensordict() || e.tensordict().storage().size() == 0; });
  for (const auto& [key, v] : value.items(leaves)) {
    std::vector<std::string> level = level_;
    level.insert(level.end(), key.begin(), key.end() - 1);
    const Node* lvl = file_->Level(level);
    const Node* c = lvl != nullptr ? lvl->child(key.back()) : nullptr;
    if (c != nullptr && v.is_tensordict() && c->kind == Node::Kind::kGroup) continue;
    if (c == nullptr || !v.is_tensor() || c->kind != Node::Kind::kTensor) return false;
    const at::Tensor& t = v.tensor();
    const std::vector<int64_t> target = SelectedShape(*sel, c->shape);
    const size_t feature = c->shape.size() - lvl->batch.size();
    if (t.dim() < static_cast<int64_t>(feature) || t.dim() > static_cast<int64_t>(target.size()) ||
        !std::equal(target.end() - feature, target.end(), t.sizes().end() - feature)) {
      return false;
    }
    try {
      writes.push_back({level, key.back(), c, t.expand(target)});
    } catch (const c10::Error&) {
      return false;
    }
  }
  for (const Write& w : writes) {
    ThrowIfError<H5Error>(WriteTensor(file_->fid.get(), file_->Path(w.level, w.key), w.node->dtype,
                                      w.node->shape, *sel, w.value),
                          Context(*file_, w.level, w.key));
  }
  return true;
}

}  // namespace td::h5::internal
