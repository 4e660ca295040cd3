#include "td/backends/lazy_stack/lazy_stack.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/compat/borrowed_tensors.h"
#include "td/core/dtype.h"
#include "td/core/internal/backend_hooks.h"
#include "td/core/internal/batch_index.h"
#include "td/core/internal/entry_list.h"
#include "td/core/internal/non_tensor_stack.h"
#include "td/core/internal/storage_access.h"

namespace td {
namespace {

using at::indexing::TensorIndex;
using internal::BatchIndex;
using internal::ExpandBatchIndex;
using internal::IsFullSlice;
using internal::Positions;

constexpr std::string_view kBackendId = "lazy_stack";

std::vector<int64_t> InsertDim(at::IntArrayRef shape, int64_t dim, int64_t size) {
  std::vector<int64_t> out = shape.vec();
  out.insert(out.begin() + dim, size);
  return out;
}

std::string MembersRepr(const std::vector<int64_t>& idx) {
  return absl::StrCat(idx.size() == 1 ? "member " : "members ", absl::StrJoin(idx, ", "));
}

// The entry `key` of a member's storage `m`, or nullptr; without copying
// it when the member's backend holds Values (the pointer is valid until the member is written), else kept alive in `*holder`.
// Members built alike hold their keys in the same order: `hint` is where the key was found in
// the first member, tried before the backend's own lookup.
const Value* PeekEntry(const Storage& m, std::string_view key, size_t hint,
                       std::optional<Value>* holder) {
  const EntryList* held = m.held_entries();
  if (held != nullptr && hint < held->size()) {
    const auto& [k, v] = (*held)[hint];
    if (k.size() == key.size() && SameBytes(k.data(), key.data(), key.size())) return &v;
  }
  return FindEntry(m, key, holder);
}

// IntArrayRef's operator== calls memcmp; shapes are a few dims, compared inline here.
bool SameShape(at::IntArrayRef a, at::IntArrayRef b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

size_t PositionHint(const TensorDict& m, std::string_view key) {
  const EntryList* held = m.storage().held_entries();
  if (held == nullptr) return 0;
  const int64_t i = held->position(key);
  return i < 0 ? 0 : static_cast<size_t>(i);
}

// The tensors to stack are borrowed from the members (td/compat/borrowed_tensors.h): a lazy
// stack's get() is one at::stack over tensors that stay alive in the members for the whole call.
using compat::BorrowedTensors;

std::optional<Value> MemberEntry(const TensorDict& m, std::string_view key) {
  return m.storage().get(key);
}

// Splits a TensorDict value of the stack's batch size into one TensorDict per member.
std::vector<TensorDict> Unstack(const TensorDict& value, int64_t dim, int64_t n);

class LazyStackStorage final : public LazyStorage {
 public:
  LazyStackStorage(std::vector<TensorDict> members, int64_t dim)
      : LazyStorage({}, std::nullopt), members_(std::move(members)), dim_(dim) {
    TORCH_INTERNAL_ASSERT(!members_.empty());
    // One pass over the members: batch sizes, nesting depth, lock, shared device.
    bool all_locked = true;
    const Storage& first = members_[0].storage();
    std::optional<at::Device> device = first.device();
    for (size_t i = 0; i < members_.size(); ++i) {
      const TensorDict& m = members_[i];
      const Storage& s = m.storage();
      if (!SameShape(s.batch_size(), first.batch_size())) {
        TD_FAIL(BatchSizeError, "lazy_stack: TensorDict ", i, " has batch size ",
                             SizeRepr(s.batch_size()), " but TensorDict 0 has ",
                             SizeRepr(first.batch_size()), "; stacked TensorDicts share one "
                             "batch size");
      }
      add_lazy_source(m, "lazy_stack");
      all_locked = all_locked && s.locked();
      if (s.device() != device) device = std::nullopt;
    }
    assign_locked(all_locked);
    assign_batch_size(InsertDim(first.batch_size(), dim_, static_cast<int64_t>(members_.size())));
    set_device(device);
    refresh_names(std::nullopt);
  }

  std::string_view backend_id() const override { return kBackendId; }
  Capabilities capabilities() const override {
    return Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kLazy |
           Capability::kReplaceEntries | Capability::kBatchResize;
  }

  size_t size() const override { return keys().size(); }

  std::vector<std::string> keys() const override {
    std::vector<std::string> out;
    for (std::string& k : members_[0].storage().keys()) {
      if (held_by_all(k)) out.push_back(std::move(k));
    }
    return out;
  }

  std::vector<std::string> exclusive_keys() const override {
    std::vector<std::string> out;
    absl::flat_hash_set<std::string> seen;
    for (const TensorDict& m : members_) {
      for (std::string& k : m.storage().keys()) {
        if (seen.insert(k).second && !held_by_all(k)) out.push_back(std::move(k));
      }
    }
    return out;
  }

  bool contains(std::string_view key) const override { return held_by_all(key); }

  std::optional<Value> get(std::string_view key) const override {
    const size_t n = members_.size();
    std::optional<Value> first = MemberEntry(members_[0], key);
    if (!first) return std::nullopt;
    if (first->is_tensor()) {
      // The hot path: one pass collecting the tensors, then one at::stack (which checks the
      // shapes: only when it throws are they compared here, for the error naming the members).
      BorrowedTensors parts(n);
      parts.borrow(first->tensor());
      const size_t hint = PositionHint(members_[0], key);
      std::optional<Value> holder;
      for (size_t i = 1; i < n; ++i) {
        const Value* v = PeekEntry(members_[i].storage(), key, hint, &holder);
        if (v == nullptr) return std::nullopt;
        if (!v->is_tensor()) fail_kinds(key);
        if (holder) {  // computed by the member's backend: keep it alive here
          parts.own(v->tensor());
          holder.reset();
        } else {
          parts.borrow(v->tensor());
        }
      }
      try {
        return at::stack(parts.parts(), dim_);
      } catch (const c10::Error&) {
        const std::vector<at::Tensor>& p = parts.parts();
        for (const at::Tensor& t : p) {
          if (!SameShape(t.sizes(), p[0].sizes())) fail_ragged(key, p);
        }
        throw;
      }
    }
    if (first->is_tensordict()) {
      std::vector<TensorDict> subs;
      subs.reserve(n);
      subs.push_back(first->tensordict());
      for (size_t i = 1; i < n; ++i) {
        std::optional<Value> v = MemberEntry(members_[i], key);
        if (!v) return std::nullopt;
        if (!v->is_tensordict()) fail_kinds(key);
        if (v->tensordict().batch_size() != subs[0].batch_size()) {
          TD_FAIL(BatchSizeError, "key '", key, "' cannot be read as a lazy stack: the members' "
                               "sub-TensorDicts have batch sizes ",
                               SizeRepr(subs[0].batch_size()), " (member 0) and ",
                               SizeRepr(v->tensordict().batch_size()), " (member ", i, ")");
        }
        subs.push_back(v->tensordict());
      }
      auto sub = std::make_shared<LazyStackStorage>(std::move(subs), dim_);
      sub->assign_locked(locked());
      return TensorDict(std::move(sub));
    }
    // NOTE [ Non-tensor stacks ] in td/core/internal/non_tensor_stack.h: equal values stay one,
    // others become a NonTensorStack over the members' batch.
    internal::StackTable table;
    std::vector<at::Tensor> parts;
    parts.reserve(n);
    parts.push_back(table.Add(first->non_tensor_data(), members_[0].batch_size(), at::kCPU));
    for (size_t i = 1; i < n; ++i) {
      std::optional<Value> v = MemberEntry(members_[i], key);
      if (!v) return std::nullopt;
      if (!v->is_non_tensor()) fail_kinds(key);
      parts.push_back(table.Add(v->non_tensor_data(), members_[i].batch_size(), at::kCPU));
    }
    return Value(table.Gather(at::stack(parts, dim_)));
  }

  std::optional<EntryMeta> meta(std::string_view key) const override {
    std::optional<EntryMeta> out;
    for (size_t i = 0; i < members_.size(); ++i) {
      std::optional<EntryMeta> m = members_[i].storage().meta(key);
      if (!m) return std::nullopt;
      if (!out) {
        out = std::move(m);
        continue;
      }
      if (m->kind != out->kind) fail_kinds(key);
      if (m->kind != EntryMeta::Kind::kTensor) continue;
      if (m->shape.size() != out->shape.size()) {
        std::fill(out->shape.begin(), out->shape.end(), -1);
      } else {
        for (size_t d = 0; d < m->shape.size(); ++d) {
          if (m->shape[d] != out->shape[d]) out->shape[d] = -1;
        }
      }
      out->dtype = c10::promoteTypes(out->dtype, m->dtype);
    }
    if (out && out->kind != EntryMeta::Kind::kNonTensor) {
      out->shape.insert(out->shape.begin() + dim_, static_cast<int64_t>(members_.size()));
    }
    return out;
  }

  void set(std::string_view key, Value value) override {
    const int64_t n = static_cast<int64_t>(members_.size());
    check_members_writable(key, value.is_tensor() ? &value.tensor() : nullptr);
    const NestedKey k{std::string(key)};
    if (value.is_tensor()) {
      std::vector<at::Tensor> parts = value.tensor().unbind(dim_);
      for (int64_t i = 0; i < n; ++i) members_[i].set(k, parts[i]);
    } else if (value.is_tensordict()) {
      std::vector<TensorDict> parts = Unstack(value.tensordict(), dim_, n);
      for (int64_t i = 0; i < n; ++i) members_[i].set(k, parts[i]);
    } else {
      // A NonTensorStack's values go to the members they belong to (NOTE [ Non-tensor stacks ]).
      internal::StackTable table;
      std::vector<at::Tensor> parts =
          table.Add(value.non_tensor_data(), batch_size(), at::kCPU).unbind(dim_);
      for (int64_t i = 0; i < n; ++i) members_[i].set(k, table.Gather(parts[i]));
    }
  }

  void set_(std::string_view key, const at::Tensor& value) override {
    std::vector<at::Tensor> parts = value.unbind(dim_);
    const NestedKey k{std::string(key)};
    for (size_t i = 0; i < members_.size(); ++i) members_[i].set_(k, parts[i]);
  }

  bool erase(std::string_view key) override {
    const NestedKey k{std::string(key)};
    std::vector<size_t> holders;
    for (size_t i = 0; i < members_.size(); ++i) {
      if (!members_[i].contains(k)) continue;
      if (members_[i].is_locked()) {
        TD_FAIL(LockedError, "cannot delete key ", k.repr(), " from the lazy stack: member ", i,
                          " is locked (call unlock_() on it first)");
      }
      holders.push_back(i);
    }
    for (size_t i : holders) members_[i].del_(k);
    return !holders.empty();
  }

  bool rename_key(std::string_view old_key, std::string_view new_key) override {
    const NestedKey from{std::string(old_key)};
    const NestedKey to{std::string(new_key)};
    for (size_t i = 0; i < members_.size(); ++i) {
      if (members_[i].is_locked()) {
        TD_FAIL(LockedError, "cannot rename key ", from.repr(), " to ", to.repr(),
                          " in the lazy stack: member ", i, " is locked (call unlock_() first)");
      }
    }
    for (TensorDict& m : members_) m.rename_key_(from, to, /*safe=*/false);
    return true;
  }

  void set_batch_size(std::vector<int64_t> batch_size) override {
    const int64_t n = static_cast<int64_t>(members_.size());
    if (static_cast<int64_t>(batch_size.size()) <= dim_ || batch_size[dim_] != n) {
      TD_FAIL(BatchSizeError, "batch size ", SizeRepr(batch_size), " does not keep the stack dim ",
                           dim_, " of size ", n, " of this lazy stack (batch size ",
                           SizeRepr(Storage::batch_size()),
                           "); call to_dense() first to change it freely");
    }
    std::vector<int64_t> member_batch = batch_size;
    member_batch.erase(member_batch.begin() + dim_);
    for (TensorDict& m : members_) m.set_batch_size(member_batch);
    refresh();
  }

  // NOTE [ Dim names ] (td/core/names.cc): the members get the names without the stack dim's;
  // this storage keeps the stack dim's name.
  void set_names(std::shared_ptr<const DimNames> names) override {
    const size_t member_dims = members_[0].batch_size().size();
    DimNames member_names(member_dims);
    std::optional<std::string> stack_name;
    if (names) {
      member_names = *names;
      stack_name = member_names[dim_];
      member_names.erase(member_names.begin() + dim_);
    }
    for (TensorDict& m : members_) m.set_names(member_names);
    refresh_names(stack_name);
  }

  void set_locked(bool locked) override {
    assign_locked(locked);
    for (TensorDict& m : members_) {
      if (locked) {
        m.lock_();
      } else {
        m.unlock_();
      }
    }
  }

  std::optional<TensorDict> index(at::ArrayRef<TensorIndex> indices) const override {
    std::optional<Selection> sel = select(indices);
    if (!sel) return std::nullopt;
    auto pick = [&](int64_t p) {
      return sel->rest_whole ? members_[p] : members_[p].index(sel->rest);
    };
    if (sel->single) return pick(sel->positions[0]);
    if (sel->positions.empty()) return std::nullopt;  // an empty selection: the core builds it
    std::vector<TensorDict> picked;
    picked.reserve(sel->positions.size());
    for (int64_t p : sel->positions) picked.push_back(pick(p));
    return TensorDict(std::make_shared<LazyStackStorage>(std::move(picked), sel->out_dim));
  }

  bool index_put_(at::ArrayRef<TensorIndex> indices, const TensorDict& value) override {
    std::optional<Selection> sel = select(indices);
    if (!sel) return false;
    if (sel->single) {
      // The member's own index_put_ checks everything before writing anything.
      TensorDict member = members_[sel->positions[0]];
      member.index_put_(sel->rest, value);
      return true;
    }
    // Several members: written natively only when every member can take its part as it is
    // (no broadcasting, other dims whole); otherwise the core writes through a dense copy.
    const int64_t n = static_cast<int64_t>(sel->positions.size());
    if (!sel->rest_whole || n == 0 || value.batch_dims() <= sel->out_dim ||
        value.batch_size()[sel->out_dim] != n) {
      return false;
    }
    std::vector<TensorDict> parts = Unstack(value, sel->out_dim, n);
    for (int64_t i = 0; i < n; ++i) {
      if (!CanWriteInto(members_[sel->positions[i]], parts[i])) return false;
    }
    for (int64_t i = 0; i < n; ++i) WriteInto(members_[sel->positions[i]], parts[i]);
    return true;
  }

  // ---- for LazyStackedTensorDict -----------------------------------------------------------
  const std::vector<TensorDict>& members() const { return members_; }
  int64_t dim() const { return dim_; }

  void check_new_member(const TensorDict& td) const {
    if (locked()) {
      TD_FAIL(LockedError, "cannot add a TensorDict to a locked lazy stack (call unlock_() first)");
    }
    if (td.batch_size() != members_[0].batch_size()) {
      TD_FAIL(BatchSizeError, "cannot add a TensorDict of batch size ", SizeRepr(td.batch_size()),
                           " to a lazy stack of TensorDicts of batch size ",
                           SizeRepr(members_[0].batch_size()));
    }
  }

  void insert_member(int64_t pos, TensorDict td) {
    add_lazy_source(td, "lazy_stack");
    members_.insert(members_.begin() + pos, std::move(td));
    refresh();
  }

 private:
  // What an index list selects along the stack dim.
  struct Selection {
    std::vector<int64_t> positions;
    bool single = false;   // an integer: the member (indexed by `rest`) is the result
    int64_t out_dim = 0;   // otherwise, the stack dim of the result
    std::vector<TensorIndex> rest;  // the index without its stack-dim entry, for the members
    bool rest_whole = true;         // `rest` leaves every member dim whole
  };

  // nullopt when the index cannot be split into "which members" and "what of each member":
  // index tensors anywhere but at the stack dim, or a multi-dim mask over the stack dim.
  std::optional<Selection> select(at::ArrayRef<TensorIndex> indices) const {
    const int64_t n = static_cast<int64_t>(members_.size());
    // A bool scalar adds a dim of its own: left to the core.
    const BatchIndex ex = ExpandBatchIndex(indices, batch_size(), "index");
    if (ex.has_boolean) return std::nullopt;
    const BatchIndex::Item* at_stack = nullptr;
    Selection sel;
    for (const auto& item : ex.items) {
      if (item.dim == dim_ && !item.index.is_none()) {
        at_stack = &item;
        continue;
      }
      if (item.index.is_tensor()) return std::nullopt;
      if (item.index.is_none() || !IsFullSlice(item.index, batch_size()[item.dim])) {
        sel.rest_whole = false;
      }
      sel.rest.push_back(item.index);
    }
    if (at_stack == nullptr) return std::nullopt;
    const TensorIndex& index = at_stack->index;
    if (index.is_tensor()) {
      const at::Tensor& t = index.tensor();
      if (t.dim() != 1 || t.is_floating_point() || t.scalar_type() == at::kByte) {
        return std::nullopt;
      }
    }
    sel.positions = Positions(index, n, &sel.single);
    sel.out_dim = at_stack->out_dim;
    return sel;
  }

  // True when WriteInto(dst, src) succeeds: existing tensors of the same shape, new keys whose
  // shape starts with dst's batch size, and dst unlocked if it needs new keys.
  static bool CanWriteInto(const TensorDict& dst, const TensorDict& src) {
    if (src.batch_size() != dst.batch_size()) return false;
    for (const auto& [k, v] : src.items(KeysOptions().include_nested(true).leaves_only(true))) {
      std::optional<Value> mine = dst.find(k);
      if (!v.is_tensor()) {
        if (mine && !(mine->is_non_tensor() && mine->non_tensor_data() == v.non_tensor_data())) {
          return false;
        }
        if (!mine && dst.is_locked()) return false;
        continue;
      }
      if (!mine) {
        if (dst.is_locked()) return false;
        at::IntArrayRef shape = v.tensor().sizes();
        if (shape.size() < dst.batch_size().size() ||
            shape.slice(0, dst.batch_size().size()) != dst.batch_size()) {
          return false;
        }
        continue;
      }
      if (!mine->is_tensor() || mine->tensor().sizes() != v.tensor().sizes()) return false;
    }
    return true;
  }

  // dst[...] = src: existing tensors are written in place, missing keys are added as copies.
  // Call CanWriteInto first.
  static void WriteInto(TensorDict dst, const TensorDict& src) {
    for (const auto& [k, v] : src.items(KeysOptions().include_nested(true).leaves_only(true))) {
      if (v.is_tensor()) {
        if (dst.contains(k)) {
          dst.set_(k, v.tensor());
        } else {
          dst.set(k, v.tensor().clone());
        }
      } else {
        dst.set(k, v);
      }
    }
  }

  bool held_by_all(std::string_view key) const {
    for (const TensorDict& m : members_) {
      if (!m.storage().contains(key)) return false;
    }
    return true;
  }

  void refresh() {
    assign_batch_size(
        InsertDim(members_[0].batch_size(), dim_, static_cast<int64_t>(members_.size())));
    std::optional<at::Device> device = members_[0].device();
    for (const TensorDict& m : members_) {
      if (m.device() != device) device = std::nullopt;
    }
    set_device(device);
    refresh_names(std::nullopt);
  }

  // The names of the members (when they all agree; none otherwise, as upstream's stack) with
  // `stack_name` for the stack dim.
  void refresh_names(const std::optional<std::string>& stack_name) {
    const DimNames* first = members_[0].storage().names();
    bool agree = true;
    for (size_t i = 1; agree && i < members_.size(); ++i) {
      const DimNames* other = members_[i].storage().names();
      agree = (first == nullptr && other == nullptr) ||
              (first != nullptr && other != nullptr && *first == *other);
    }
    if ((first == nullptr || !agree) && !stack_name) {
      assign_names(nullptr);
      return;
    }
    DimNames names = agree && first != nullptr ? *first : DimNames(members_[0].batch_dims());
    names.insert(names.begin() + dim_, stack_name);
    assign_names(std::make_shared<const DimNames>(std::move(names)));
  }

  // Refuses a write that a locked member would reject, before any member is written.
  void check_members_writable(std::string_view key, const at::Tensor* value) const {
    for (size_t i = 0; i < members_.size(); ++i) {
      const TensorDict& m = members_[i];
      if (!m.is_locked()) continue;
      std::optional<EntryMeta> mine = m.storage().meta(key);
      bool in_place = mine && value != nullptr && mine->kind == EntryMeta::Kind::kTensor;
      if (in_place) {
        std::vector<int64_t> expected = value->sizes().vec();
        expected.erase(expected.begin() + dim_);
        in_place = at::IntArrayRef(mine->shape) == at::IntArrayRef(expected);
      }
      if (!in_place) {
        TD_FAIL(LockedError, "cannot set key '", key, "' on the lazy stack: member ", i,
                          " is locked (call unlock_() first)");
      }
    }
  }

  [[noreturn]] void fail_kinds(std::string_view key) const {
    std::vector<std::string> kinds;
    for (size_t i = 0; i < members_.size(); ++i) {
      std::optional<Value> v = MemberEntry(members_[i], key);
      kinds.push_back(absl::StrCat(i, ": ", v ? std::string(v->kind()) : "missing"));
    }
    TD_FAIL(c10::TypeError, "key '", key, "' holds entries of different kinds in the stacked "
                         "TensorDicts (", absl::StrJoin(kinds, ", "), ")");
  }

  [[noreturn]] void fail_ragged(std::string_view key, const std::vector<at::Tensor>& parts) const {
    // Group members by shape, in order of first appearance.
    std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> groups;
    for (size_t i = 0; i < parts.size(); ++i) {
      std::vector<int64_t> s = parts[i].sizes().vec();
      auto it = std::find_if(groups.begin(), groups.end(),
                             [&](const auto& g) { return g.first == s; });
      if (it == groups.end()) {
        groups.push_back({s, {static_cast<int64_t>(i)}});
      } else {
        it->second.push_back(static_cast<int64_t>(i));
      }
    }
    std::vector<std::string> shown;
    for (size_t g = 0; g < groups.size() && g < 4; ++g) {
      shown.push_back(absl::StrCat(SizeRepr(groups[g].first), " (",
                                   MembersRepr(groups[g].second), ")"));
    }
    if (groups.size() > 4) shown.push_back(absl::StrCat("and ", groups.size() - 4, " more"));
    TD_FAIL(c10::ValueError, 
        "key '", key, "' cannot be stacked into one tensor: the stacked TensorDicts hold shapes ",
        absl::StrJoin(shown, ", "), ". Read it with td::LazyStackedTensorDict: get_list(\"", key,
        "\") for the tensors as a list, get_padded(\"", key,
        "\", td::PadOptions().padding_value(0).padding_side(\"right\")) for a padded tensor, or "
        "get_nestedtensor(\"", key, "\") for a nested tensor");
  }

  std::vector<TensorDict> members_;
  int64_t dim_;
};

std::vector<TensorDict> Unstack(const TensorDict& value, int64_t dim, int64_t n) {
  if (auto* s = dynamic_cast<const LazyStackStorage*>(&value.storage())) {
    if (s->dim() == dim && static_cast<int64_t>(s->members().size()) == n) return s->members();
  }
  std::vector<int64_t> batch = value.batch_size().vec();
  batch.erase(batch.begin() + dim);
  std::vector<TensorDict> out;
  out.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    out.push_back(value.apply([dim, i](const at::Tensor& t) { return t.select(dim, i); }, batch));
  }
  return out;
}

LazyStackStorage& StackStorage(const TensorDict& td) {
  auto* s = dynamic_cast<LazyStackStorage*>(&internal::MutableStorage(td));
  if (s == nullptr) {
    TD_FAIL(c10::TypeError, "expected a TensorDict on the lazy_stack backend, got one on the '",
                         td.backend(), "' backend (build one with td::lazy_stack)");
  }
  return *s;
}

}  // namespace

// ---- LazyStackedTensorDict ------------------------------------------------------------------

LazyStackedTensorDict::LazyStackedTensorDict(const TensorDict& td) : TensorDict(td) {
  StackStorage(td);  // throws for another backend
}

std::optional<LazyStackedTensorDict> LazyStackedTensorDict::from(const TensorDict& td) {
  if (dynamic_cast<const LazyStackStorage*>(&td.storage()) == nullptr) return std::nullopt;
  return LazyStackedTensorDict(td);
}

const std::vector<TensorDict>& LazyStackedTensorDict::tensordicts() const {
  return StackStorage(*this).members();
}

int64_t LazyStackedTensorDict::stack_dim() const { return StackStorage(*this).dim(); }

LazyStackedTensorDict& LazyStackedTensorDict::append(const TensorDict& td) {
  return insert(static_cast<int64_t>(tensordicts().size()), td);
}

LazyStackedTensorDict& LazyStackedTensorDict::insert(int64_t index, const TensorDict& td) {
  LazyStackStorage& s = StackStorage(*this);
  const int64_t n = static_cast<int64_t>(s.members().size());
  const int64_t pos = index < 0 ? index + n : index;
  if (pos < 0 || pos > n) {
    TD_FAIL(c10::IndexError, "insert: index ", index, " is out of range for a lazy stack of ", n,
                          " TensorDicts");
  }
  s.check_new_member(td);
  s.insert_member(pos, td);
  return *this;
}

LazyStackedTensorDict& LazyStackedTensorDict::extend(const std::vector<TensorDict>& tds) {
  LazyStackStorage& s = StackStorage(*this);
  for (const TensorDict& td : tds) s.check_new_member(td);
  for (const TensorDict& td : tds) s.insert_member(static_cast<int64_t>(s.members().size()), td);
  return *this;
}

std::vector<at::Tensor> LazyStackedTensorDict::get_list(const NestedKey& key) const {
  const std::vector<TensorDict>& members = tensordicts();
  std::vector<int64_t> lacking;
  for (size_t i = 0; i < members.size(); ++i) {
    if (!members[i].contains(key)) lacking.push_back(static_cast<int64_t>(i));
  }
  if (!lacking.empty()) {
    TD_FAIL(KeyError, "key ", key.repr(), " is missing from ", MembersRepr(lacking), " of the ",
                   members.size(), " stacked TensorDicts");
  }
  std::vector<at::Tensor> out;
  out.reserve(members.size());
  for (const TensorDict& m : members) out.push_back(m.get(key));
  return out;
}

at::Tensor LazyStackedTensorDict::get_padded(const NestedKey& key,
                                             const PadOptions& options) const {
  const bool right = options.padding_side() == "right";
  if (!right && options.padding_side() != "left") {
    TD_FAIL(c10::ValueError, "get_padded: padding_side must be \"left\" or \"right\", got \"",
                          options.padding_side(), "\"");
  }
  std::vector<at::Tensor> parts = get_list(key);
  std::vector<int64_t> max = parts[0].sizes().vec();
  for (size_t i = 1; i < parts.size(); ++i) {
    if (parts[i].dim() != parts[0].dim()) {
      TD_FAIL(c10::ValueError, "get_padded: key ", key.repr(), " has ", parts[0].dim(),
                            " dims in member 0 (shape ", SizeRepr(parts[0].sizes()), ") but ",
                            parts[i].dim(), " in member ", i, " (shape ",
                            SizeRepr(parts[i].sizes()), "); only sizes can be padded");
    }
    for (int64_t d = 0; d < parts[i].dim(); ++d) max[d] = std::max(max[d], parts[i].size(d));
  }
  for (at::Tensor& p : parts) {
    if (p.sizes() == at::IntArrayRef(max)) continue;
    std::vector<int64_t> pad;  // constant_pad_nd wants (before, after) pairs from the last dim
    for (int64_t d = p.dim() - 1; d >= 0; --d) {
      const int64_t extra = max[d] - p.size(d);
      pad.push_back(right ? 0 : extra);
      pad.push_back(right ? extra : 0);
    }
    p = at::constant_pad_nd(p, pad, options.padding_value());
  }
  return at::stack(parts, stack_dim());
}

namespace {

void CheckNestable(const LazyStackedTensorDict& s, const NestedKey& key) {
  if (s.stack_dim() != 0) {
    TD_FAIL(c10::ValueError, "get_nestedtensor: a nested tensor is ragged along its first dim, "
                          "but this lazy stack is along dim ", s.stack_dim(),
                          "; use get_list() or get_padded() for key ", key.repr());
  }
}

}  // namespace

at::Tensor LazyStackedTensorDict::get_nestedtensor(const NestedKey& key) const {
  CheckNestable(*this, key);
  return at::_nested_tensor_from_tensor_list(get_list(key));
}

at::Tensor LazyStackedTensorDict::get_nestedtensor(const NestedKey& key,
                                                   const at::Tensor& default_value) const {
  CheckNestable(*this, key);
  if (!default_value.defined()) {
    TD_FAIL(c10::ValueError, "get_nestedtensor: the default for key ", key.repr(),
                          " is an undefined tensor");
  }
  std::vector<at::Tensor> parts;
  for (const TensorDict& m : tensordicts()) parts.push_back(m.get(key, default_value));
  return at::_nested_tensor_from_tensor_list(parts);
}

LazyStackedTensorDict LazyStackedTensorDict::get_lazy_stack(const NestedKey& key) const {
  return LazyStackedTensorDict(get_tensordict(key));
}

LazyStackedTensorDict lazy_stack(const std::vector<TensorDict>& tds, int64_t dim) {
  if (tds.empty()) TD_FAIL(c10::ValueError, "lazy_stack needs at least one TensorDict");
  const int64_t out_dims = tds[0].batch_dims() + 1;
  const int64_t d = dim < 0 ? dim + out_dims : dim;
  if (d < 0 || d >= out_dims) {
    TD_FAIL(c10::IndexError, "lazy_stack: dim ", dim, " is out of range for TensorDicts of batch size ",
                          SizeRepr(tds[0].batch_size()), " (expected a dim in [", -out_dims, ", ",
                          out_dims - 1, "])");
  }
  // The constructor checks the batch sizes, in its one pass over the members.
  return LazyStackedTensorDict(TensorDict(std::make_shared<LazyStackStorage>(tds, d)));
}

LazyStackedTensorDict to_lazystack(const TensorDict& td, int64_t dim) {
  const int64_t n = td.batch_dims();
  const int64_t d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) {
    TD_FAIL(c10::IndexError, "to_lazystack: dim ", dim, " is out of range for batch size ",
            SizeRepr(td.batch_size()), " (expected a dim in [", -n, ", ", n - 1, "])");
  }
  if (std::optional<LazyStackedTensorDict> s = LazyStackedTensorDict::from(td)) {
    if (s->stack_dim() == d) return *s;
  }
  if (td.batch_size()[d] == 0) {
    TD_FAIL(c10::ValueError, "to_lazystack: batch size ", SizeRepr(td.batch_size()),
            " has no element along dim ", dim, "; a lazy stack needs at least one member");
  }
  return lazy_stack(td.unbind(d), d);
}

namespace {

// td::stack under lazy_legacy() (NOTE [ Lazy legacy ] in td/core/lazy_legacy.h).
TensorDict StackHook(const std::vector<TensorDict>& tds, int64_t dim) {
  return lazy_stack(tds, dim);
}

const bool kLazyStackHooksRegistered = internal::hooks::lazy_stack.Register(&StackHook);

}  // namespace

}  // namespace td
