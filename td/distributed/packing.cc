#include "td/distributed/internal/packing.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "td/consolidate/internal/layout.h"
#include "td/core/errors.h"
#include "td/core/storage.h"

namespace td {
namespace distributed {
namespace internal {

namespace {

struct ScratchPool {
  std::mutex mu;
  std::vector<at::Tensor> slots;  // uint8, 1-D, CPU
};

ScratchPool& Pool() {
  static ScratchPool* pool = new ScratchPool();  // never destroyed: used from static destructors
  return *pool;
}

// Free when the pool's tensor is the only holder of the storage (views handed out share it).
bool IsFree(const at::Tensor& t) { return t.use_count() == 1 && t.storage().use_count() == 1; }

// Small CPU leaves move with memcpy: ATen's copy_ or cat costs microseconds of dispatch per leaf,
// more than copying a few KiB. Larger ones keep ATen's copy, which runs on several threads.
constexpr int64_t kMemcpyMaxBytes = int64_t{256} << 10;

bool Memcpyable(const at::Tensor& t) {
  return t.is_cpu() && t.is_contiguous() && t.nbytes() <= static_cast<size_t>(kMemcpyMaxBytes);
}

// The lines of a signature: {key (repr), dtype, shape}.
std::vector<std::array<std::string, 3>> ParseSignature(const std::string& s) {
  std::vector<std::array<std::string, 3>> out;
  for (absl::string_view line : absl::StrSplit(s, '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, absl::MaxSplits('\t', 2));
    if (fields.size() < 3) continue;
    const std::vector<std::string> parts = absl::StrSplit(fields[0], '\x1f');
    out.push_back({NestedKey(parts).repr(), fields[1], "[" + fields[2] + "]"});
  }
  return out;
}

}  // namespace

bool LeavesWriteThrough(const TensorDict& td) {
  const Storage& s = td.storage();
  const Capabilities caps = s.capabilities();
  if (caps.has(Capability::kLazy) || !caps.has(Capability::kInPlaceWrite)) return false;
  for (const std::string& k : s.keys()) {
    const std::optional<EntryMeta> m = s.meta(k);
    if (!m || m->kind != EntryMeta::Kind::kTensorDict) continue;
    const std::optional<Value> sub = s.get(k);
    if (sub && !LeavesWriteThrough(sub->tensordict())) return false;
  }
  return true;
}

PackedLayout::PackedLayout(const TensorDict& td) {
  for (auto& [key, value] : td.items(KeysOptions().include_nested(true).leaves_only(true))) {
    if (value.is_tensor()) leaves_.push_back({key, value.tensor()});
  }
  std::sort(leaves_.begin(), leaves_.end(),
            [](const Leaf& a, const Leaf& b) { return a.key < b.key; });
  // Small groups first, then large ones (NOTE [ Packed layout ]), each laid out once made.
  for (const bool large : {false, true}) {
    const auto first = static_cast<std::ptrdiff_t>(groups_.size());
    for (size_t i = 0; i < leaves_.size(); ++i) {
      const Leaf& leaf = leaves_[i];
      if ((static_cast<int64_t>(leaf.tensor.nbytes()) >= kAloneMinBytes) != large) continue;
      const at::ScalarType dtype = leaf.tensor.scalar_type();
      auto g = std::find_if(groups_.begin() + first, groups_.end(),
                            [&](const Group& group) { return group.dtype == dtype; });
      if (g == groups_.end()) g = groups_.insert(g, Group{dtype, large, 0, 0, {}});
      g->leaves.push_back(i);
      g->numel += leaf.tensor.numel();
    }
    for (auto g = groups_.begin() + first; g != groups_.end(); ++g) {
      g->offset = nbytes_;
      for (size_t i : g->leaves) {
        leaves_[i].offset = nbytes_;
        nbytes_ += static_cast<int64_t>(leaves_[i].tensor.nbytes());
      }
      nbytes_ = AlignUp(nbytes_);
    }
    if (!large) inline_nbytes_ = nbytes_;
  }
  for (const Leaf& leaf : leaves_) {
    absl::StrAppend(&signature_, leaf.key.join("\x1f"), "\t",
                    c10::toString(leaf.tensor.scalar_type()), "\t",
                    absl::StrJoin(leaf.tensor.sizes(), ","), "\n");
  }
  // 64-bit FNV-1a.
  fingerprint_ = 1469598103934665603ull;
  for (const char c : signature_) {
    fingerprint_ ^= static_cast<unsigned char>(c);
    fingerprint_ *= 1099511628211ull;
  }
}

at::Tensor ScratchBytes(int64_t nbytes, at::Device device) {
  if (!device.is_cpu()) return at::empty({nbytes}, at::TensorOptions(at::kByte).device(device));
  if (nbytes > kScratchMaxBytes) return ::td::internal::AllocateHost(nbytes, at::kByte);
  ScratchPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  // The smallest free buffer that fits; else replace the smallest free one, or add a slot.
  at::Tensor* best = nullptr;
  at::Tensor* smallest_free = nullptr;
  for (at::Tensor& slot : pool.slots) {
    if (!IsFree(slot)) continue;
    if (slot.numel() >= nbytes && (best == nullptr || slot.numel() < best->numel())) best = &slot;
    if (smallest_free == nullptr || slot.numel() < smallest_free->numel()) smallest_free = &slot;
  }
  if (best != nullptr) return best->narrow(0, 0, nbytes);
  at::Tensor fresh = ::td::internal::AllocateHost(nbytes, at::kByte);
  if (smallest_free != nullptr) {
    *smallest_free = fresh;
  } else if (static_cast<int>(pool.slots.size()) < kScratchSlots) {
    pool.slots.push_back(fresh);
  } else {
    return fresh;  // every slot is in use (concurrent messages): not pooled
  }
  return fresh.narrow(0, 0, nbytes);
}

int64_t ScratchPoolBytes() {
  ScratchPool& pool = Pool();
  std::lock_guard<std::mutex> lock(pool.mu);
  int64_t total = 0;
  for (const at::Tensor& slot : pool.slots) total += slot.numel();
  return total;
}

at::Tensor PackedLayout::Allocate(int64_t prefix) const {
  return ScratchBytes(prefix + nbytes_,
                      leaves_.empty() ? at::Device(at::kCPU) : leaves_[0].tensor.device());
}

std::vector<size_t> PackedLayout::OwnMessages(bool every_leaf) const {
  std::vector<size_t> out;
  for (const Group& group : groups_) {
    if (!every_leaf && !group.large) continue;
    for (size_t i : group.leaves) {
      if (leaves_[i].tensor.numel() > 0) out.push_back(i);
    }
  }
  return out;
}

std::vector<PackedLayout::Piece> PackedLayout::Pieces() const {
  std::vector<Piece> out;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const Group& group = groups_[g];
    if (group.numel == 0) continue;
    const int64_t elem = static_cast<int64_t>(c10::elementSize(group.dtype));
    if (!group.large) {
      out.push_back({g, 0, group.leaves.size(), group.offset, group.numel * elem});
      continue;
    }
    for (size_t k = 0; k < group.leaves.size(); ++k) {
      const Leaf& leaf = leaves_[group.leaves[k]];
      out.push_back({g, k, 1, leaf.offset, static_cast<int64_t>(leaf.tensor.nbytes())});
    }
  }
  return out;
}

at::Tensor PackedLayout::PieceView(const at::Tensor& data, const Piece& piece) const {
  return data.narrow(0, piece.offset, piece.nbytes).view(groups_[piece.group].dtype);
}

void PackedLayout::PackPiece(const at::Tensor& data, const Piece& piece) const {
  at::NoGradGuard no_grad;  // leaves that require grad pack as plain data (cat_out refuses them)
  const Group& group = groups_[piece.group];
  const auto first = group.leaves.begin() + static_cast<std::ptrdiff_t>(piece.first);
  const auto last = first + static_cast<std::ptrdiff_t>(piece.count);
  if (data.is_cpu() &&
      std::all_of(first, last, [&](size_t i) { return Memcpyable(leaves_[i].tensor); })) {
    auto* out = data.data_ptr<uint8_t>() + piece.offset;
    for (auto it = first; it != last; ++it) {
      const at::Tensor& t = leaves_[*it].tensor;
      if (t.numel() == 0) continue;
      std::memcpy(out, t.data_ptr(), t.nbytes());
      out += t.nbytes();
    }
    return;
  }
  at::Tensor out = PieceView(data, piece);
  std::vector<at::Tensor> flat;
  for (auto it = first; it != last; ++it) {
    const at::Tensor& t = leaves_[*it].tensor;
    if (t.numel() > 0) flat.push_back(t.reshape({-1}));
  }
  if (flat.size() == 1) {
    out.copy_(flat[0]);
  } else {
    at::cat_out(out, flat, 0);
  }
}

at::Tensor PackedLayout::Pack(int64_t prefix, bool inline_only) const {
  const int64_t bytes = inline_only ? inline_nbytes_ : nbytes_;
  at::Tensor buffer = ScratchBytes(
      prefix + bytes, leaves_.empty() ? at::Device(at::kCPU) : leaves_[0].tensor.device());
  at::Tensor data = buffer.narrow(0, prefix, bytes);
  for (const Piece& piece : Pieces()) {
    if (!(inline_only && groups_[piece.group].large)) PackPiece(data, piece);
  }
  // Zero the padding: no byte of an earlier message in a reused scratch buffer may travel.
  for (const Group& g : groups_) {
    const int64_t end = g.offset + g.numel * static_cast<int64_t>(c10::elementSize(g.dtype));
    if (end < bytes && AlignUp(end) > end) data.narrow(0, end, AlignUp(end) - end).zero_();
  }
  return buffer;
}

void PackedLayout::CheckWritable(const std::string& what) const {
  for (const Leaf& leaf : leaves_) {
    const at::Tensor& t = leaf.tensor;
    if (t.numel() == 0) continue;
    if (at::has_internal_overlap(t) == at::MemOverlap::Yes) {
      TD_FAIL(ValueError, what, ": key ", leaf.key.repr(), " of the receiving TensorDict (shape ",
              t.sizes(), ", strides ", t.strides(),
              ") is a view whose elements share memory (expand, broadcast_to) and cannot be "
              "written in place; give it its own memory (clone or contiguous); nothing was "
              "written");
    }
    if (t.is_inference() && !c10::InferenceMode::is_enabled()) {
      TD_FAIL(ValueError, what, ": key ", leaf.key.repr(),
              " of the receiving TensorDict is an inference tensor, which can only be written "
              "inside c10::InferenceMode; nothing was written");
    }
  }
}

void PackedLayout::Unpack(const at::Tensor& data, TensorDict& td) const {
  Unpack(data.narrow(0, 0, inline_nbytes_),
         data.narrow(0, inline_nbytes_, data.numel() - inline_nbytes_), td);
}

void PackedLayout::Unpack(const at::Tensor& inline_data, const at::Tensor& large_data,
                          TensorDict& td) const {
  at::NoGradGuard no_grad;  // as load_state_dict: parameters are written as plain data
  // Write-through storages hand out their own tensors: writing them writes the TensorDict.
  const bool dense = LeavesWriteThrough(td);
  TensorDict incoming;
  for (const Leaf& leaf : leaves_) {
    const at::Tensor& t = leaf.tensor;
    if (dense && t.numel() == 0) continue;
    const bool small = leaf.offset < inline_nbytes_;
    const at::Tensor& src = small ? inline_data : large_data;
    const int64_t pos = small ? leaf.offset : leaf.offset - inline_nbytes_;
    if (dense && src.is_cpu() && Memcpyable(t) && !t.requires_grad()) {
      std::memcpy(t.data_ptr(), src.data_ptr<uint8_t>() + pos, t.nbytes());
      continue;
    }
    const at::Tensor value =
        src.narrow(0, pos, static_cast<int64_t>(t.nbytes())).view(t.scalar_type()).view(t.sizes());
    if (!dense) {
      incoming.set(leaf.key, value);
    } else {
      at::Tensor target = t;
      target.copy_(value);
    }
  }
  if (!dense) td.update_(incoming);
}

std::string DescribeMismatch(const std::string& a, const std::string& a_name, const std::string& b,
                             const std::string& b_name) {
  const std::vector<std::array<std::string, 3>> la = ParseSignature(a), lb = ParseSignature(b);
  auto missing = [&](const std::string& key, bool on_a) {
    return c10::str("key ", key, " is present on the ", on_a ? a_name : b_name,
                    " side but not on the ", on_a ? b_name : a_name, " side");
  };
  const size_t n = std::min(la.size(), lb.size());
  for (size_t i = 0; i < n; ++i) {
    // Sorted keys: the smaller one is the key the other side lacks.
    if (la[i][0] != lb[i][0]) return missing(std::min(la[i][0], lb[i][0]), la[i][0] < lb[i][0]);
    for (size_t f : {1, 2}) {
      if (la[i][f] != lb[i][f]) {
        return c10::str("key ", la[i][0], ": ", f == 1 ? "dtype " : "shape ", la[i][f], " (",
                        a_name, ") vs ", lb[i][f], " (", b_name, ")");
      }
    }
  }
  if (la.size() != lb.size()) {
    return missing(la.size() > lb.size() ? la[n][0] : lb[n][0], la.size() > lb.size());
  }
  return "the structures are equal";
}

nlohmann::json StructureToJson(const TensorDict& td) {
  const std::optional<at::Device> device = td.device();
  nlohmann::json level = {{"batch_size", td.batch_size().vec()},
                          {"device", device ? nlohmann::json(device->str()) : nlohmann::json()},
                          {"entries", nlohmann::json::array()}};
  for (const auto& [key, value] : td.items()) {
    nlohmann::json e = {{"key", key.front()}};
    if (value.is_tensor()) {
      e["kind"] = "tensor";
      e["dtype"] = static_cast<int>(value.tensor().scalar_type());
      e["shape"] = value.tensor().sizes().vec();
    } else if (value.is_tensordict()) {
      e["kind"] = "tensordict";
      e["value"] = StructureToJson(value.tensordict());
    } else {
      e["kind"] = "non_tensor";
      e["value"] = value.non_tensor();
      // The class, unless NonTensorData (NOTE [ Non-tensor stacks ] in
      // td/core/internal/non_tensor_stack.h).
      if (value.non_tensor_data().kind != NonTensorData::Kind::kData) {
        e["cls"] = value.non_tensor_data().is_stack() ? "NonTensorStack" : "MetaData";
      }
    }
    level["entries"].push_back(std::move(e));
  }
  return level;
}

TensorDict EmptyFrom(const structure::Level& level) {
  std::optional<at::Device> device;
  if (level.info.device) device = at::Device(*level.info.device);
  TensorDict td({}, level.batch_size(), device);
  for (const structure::Entry& e : level.entries()) {
    switch (e.kind) {
      case structure::EntryKind::kLeaf:
        td.set(e.key, at::empty(e.shape, at::TensorOptions().dtype(e.dtype).device(
                                             device.value_or(at::Device(at::kCPU)))));
        break;
      case structure::EntryKind::kLevel: td.set(e.key, EmptyFrom(*e.level)); break;
      case structure::EntryKind::kNonTensor:
        // A NonTensorStack's values are checked against the level's batch size by set().
        td.set(e.key, NonTensorData(e.data, e.non_tensor == structure::NonTensorKind::kStack
                                                ? NonTensorData::Kind::kStack
                                            : e.non_tensor == structure::NonTensorKind::kMetaData
                                                ? NonTensorData::Kind::kMetaData
                                                : NonTensorData::Kind::kData));
        break;
    }
  }
  return td;
}

TensorDict EmptyFromJson(const nlohmann::json& s) {
  return EmptyFrom(ValidateStructure(s, std::numeric_limits<int64_t>::max(),
                                     [](const c10::Device&) { return true; },
                                     "td::distributed: malformed TensorDict structure")
                       .root());
}

}  // namespace internal
}  // namespace distributed
}  // namespace td
