// Batch-dim names: names, has_names, set_names, refine_names, rename, rename_.
//
// NOTE [ Dim names ]
// Each batch dim of a level may be named, as Python tensordict's `names`. A level keeps its
// names in its Storage as a shared, immutable DimNames, or nullptr when no dim is named: a
// TensorDict without names allocates nothing and every operation pays one pointer test per
// level (LeafTree sees it while flattening). Rules, as upstream:
//  * Names are unique among the named dims; "..." is not a name (refine_names' ellipsis). A list
//    of names has exactly batch_dims() entries; one whose entries are all nullopt unnames.
//  * A nested TensorDict's leading batch dims are its parent's, so they carry its parent's
//    names (set_names / rename_ / refine_names / the constructor write them into every nested
//    level, which keeps the names of its own extra dims; a TensorDict set under a named parent
//    is stored as a shallow copy named so when its names differ).
//  * Every operation building its result with LeafTree::Rebuild (td/core/internal/leaves.h)
//    carries names there, from the input dim each result dim comes from (DimOrigins): indexing
//    drops a dim taken by an integer, keeps sliced and index-tensor dims, adds unnamed dims for
//    None and for a bool mask's dims; permute / transpose / movedim permute them; unsqueeze,
//    expand's new leading dims and stack's new dim are unnamed; squeeze and unbind drop theirs;
//    flatten's merged dim and unflatten's new dims are unnamed; cat keeps them; ops keeping the
//    number of batch dims keep them (math, clone, to, split, gather, repeat, pad, ...); view and
//    reshape to another shape drop them (upstream does too).
//  * set_batch_size keeps the names of the dims that remain and leaves new dims unnamed.
//  * stack keeps the inputs' names when they all agree and drops them otherwise (upstream's
//    dense stack); a lazy stack does the same at creation.
//  * Memmap files do not record names (upstream's meta.json has none): a loaded TensorDict is
//    unnamed.
#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/core/dtype.h"
#include "td/core/internal/names.h"
#include "td/core/internal/storage_access.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"

namespace td {
namespace {

constexpr std::string_view kEllipsis = "...";

std::string NamesRepr(const DimNames& names) {
  return absl::StrCat("[", absl::StrJoin(names, ", ", [](std::string* out, const auto& n) {
                        absl::StrAppend(out, n ? absl::StrCat("'", *n, "'") : "None");
                      }),
                      "]");
}

DimNames NamesOf(const Storage& s) {
  if (const DimNames* n = s.names()) return *n;
  return DimNames(s.batch_size().size());
}

}  // namespace

namespace internal {

std::shared_ptr<const DimNames> CheckedNames(const DimNames& names, at::IntArrayRef batch_size,
                                             std::string_view op) {
  if (names.size() != batch_size.size()) {
    TD_FAIL(ValueError, op, ": got ", names.size(), " dim names ", NamesRepr(names),
            " for batch size ", SizeRepr(batch_size), " (", batch_size.size(),
            " batch dims): give one name (or nullopt) per batch dim");
  }
  std::set<std::string_view> seen;
  bool any = false;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!names[i]) continue;
    any = true;
    if (*names[i] == kEllipsis) {
      TD_FAIL(ValueError, op, ": \"...\" is not a dim name (dim ", i, " of ", NamesRepr(names),
              "); only refine_names takes it, as the dims not listed");
    }
    if (!seen.insert(*names[i]).second) {
      TD_FAIL(ValueError, op, ": the dim name '", *names[i], "' repeats in ", NamesRepr(names),
              " (batch size ", SizeRepr(batch_size), "): names must be unique");
    }
  }
  if (!any) return nullptr;
  return std::make_shared<const DimNames>(names);
}

std::shared_ptr<const DimNames> WithLeading(const DimNames* names, int64_t batch_dims,
                                            const DimNames* leading, int64_t leading_dims) {
  if (names == nullptr && leading == nullptr) return nullptr;
  DimNames out = names ? *names : DimNames(batch_dims);
  for (int64_t i = 0; i < leading_dims && i < batch_dims; ++i) {
    out[i] = leading ? (*leading)[i] : std::nullopt;
  }
  if (std::none_of(out.begin(), out.end(), [](const auto& n) { return n.has_value(); })) {
    return nullptr;
  }
  return std::make_shared<const DimNames>(std::move(out));
}

namespace {

// Each nested level of `td` with the names it gets when `td` is named `names`, checked before
// any is written: a level's own extra dims may not repeat a name its leading dims now carry.
void PlanNames(const TensorDict& td, const NestedKey* path,
               std::shared_ptr<const DimNames> names,
               std::vector<std::pair<TensorDict, std::shared_ptr<const DimNames>>>* plan) {
  const Storage& s = td.storage();
  const int64_t bd = td.batch_dims();
  const DimNames* leading = names.get();
  for (const std::string& k : s.keys()) {
    std::optional<EntryMeta> m = s.meta(k);  // never materialises a lazy entry
    if (!m || m->kind != EntryMeta::Kind::kTensorDict) continue;
    TensorDict sub = s.get(k)->tensordict();
    const NestedKey here = path ? *path + NestedKey(k) : NestedKey(k);
    std::shared_ptr<const DimNames> sub_names =
        WithLeading(sub.storage().names(), sub.batch_dims(), leading, bd);
    if (sub_names) {
      std::set<std::string_view> seen;
      for (const auto& n : *sub_names) {
        if (n && !seen.insert(*n).second) {
          TD_FAIL(ValueError, "the nested TensorDict at key ", here.repr(), " would be named ",
                  NamesRepr(*sub_names), " (its parent's names ",
                  leading ? NamesRepr(*leading) : NamesRepr(DimNames(bd)),
                  " over its own): the dim name '", *n,
                  "' repeats, and names must be unique; nothing was renamed");
        }
      }
    }
    PlanNames(sub, &here, sub_names, plan);
  }
  plan->emplace_back(td, std::move(names));
}

}  // namespace

void ApplyNames(const TensorDict& td, std::shared_ptr<const DimNames> names) {
  std::vector<std::pair<TensorDict, std::shared_ptr<const DimNames>>> plan;
  PlanNames(td, nullptr, std::move(names), &plan);
  for (auto& [level, level_names] : plan) MutableStorage(level).set_names(std::move(level_names));
}

std::shared_ptr<const DimNames> MapNames(const DimNames& src, const DimOrigins* origins,
                                         int64_t root_old_dims, int64_t extra) {
  DimNames out;
  out.reserve((origins ? origins->size() : 0) + extra);
  bool any = false;
  if (origins) {
    for (int64_t o : *origins) {
      out.push_back(o >= 0 && o < static_cast<int64_t>(src.size()) ? src[o] : std::nullopt);
      any = any || out.back().has_value();
    }
  }
  for (int64_t i = 0; i < extra; ++i) {
    out.push_back(src[root_old_dims + i]);
    any = any || out.back().has_value();
  }
  if (!any) return nullptr;
  return std::make_shared<const DimNames>(std::move(out));
}

void CopyNames(const TensorDict& src, const TensorDict& dst) {
  const Storage& from = src.storage();
  const Storage& to = dst.storage();
  for (const std::string& k : from.keys()) {
    std::optional<EntryMeta> m = from.meta(k);
    if (!m || m->kind != EntryMeta::Kind::kTensorDict) continue;
    std::optional<Value> there = to.get(k);
    if (there && there->is_tensordict()) CopyNames(from.get(k)->tensordict(), there->tensordict());
  }
  if (from.names() != nullptr && to.batch_size().size() == from.batch_size().size()) {
    MutableStorage(dst).set_names(from.shared_names());
  }
}

void ResizeNames(Storage& s) {
  const DimNames* names = s.names();
  if (names == nullptr || names->size() == s.batch_size().size()) return;
  DimNames out = *names;
  out.resize(s.batch_size().size());
  if (std::none_of(out.begin(), out.end(), [](const auto& n) { return n.has_value(); })) {
    s.set_names(nullptr);
    return;
  }
  s.set_names(std::make_shared<const DimNames>(std::move(out)));
}

}  // namespace internal

// ---- batch-dim names ----------------------------------------------------------------------

DimNames TensorDict::names() const { return NamesOf(*storage_); }

bool TensorDict::has_names() const { return storage_->names() != nullptr; }

TensorDict& TensorDict::set_names(const DimNames& names) {
  internal::ApplyNames(*this, internal::CheckedNames(names, batch_size(), "set_names"));
  return *this;
}

TensorDict& TensorDict::refine_names(const DimNames& names) {
  const int64_t bd = batch_dims();
  const DimNames current = this->names();
  const auto is_ellipsis = [](const std::optional<std::string>& n) {
    return n && *n == kEllipsis;
  };
  const int64_t ellipses = std::count_if(names.begin(), names.end(), is_ellipsis);
  const int64_t listed = static_cast<int64_t>(names.size()) - ellipses;
  if (ellipses > 1 || (ellipses == 0 && listed != bd) || (ellipses == 1 && listed > bd)) {
    TD_FAIL(ValueError, "refine_names: ", NamesRepr(names), " does not fit batch size ",
            SizeRepr(batch_size()), " (", bd, " batch dims; at most one \"...\" stands for the "
            "dims not listed)");
  }
  DimNames out;
  out.reserve(bd);
  for (const auto& n : names) {
    if (is_ellipsis(n)) {
      for (int64_t i = 0; i < bd - listed; ++i) out.push_back(current[out.size()]);
      continue;
    }
    const auto& cur = current[out.size()];
    if (n && cur && *n != *cur) {
      TD_FAIL(ValueError, "refine_names: cannot refine dim ", out.size(), " named '", *cur,
              "' to '", *n, "' (names ", NamesRepr(current), ", asked ", NamesRepr(names),
              "): only unnamed dims can be given a name");
    }
    out.push_back(n ? n : cur);
  }
  internal::ApplyNames(*this, internal::CheckedNames(out, batch_size(), "refine_names"));
  return *this;
}

namespace {
// The names with every pair applied at once, each `from` looked up among the current names (so
// {"env" -> "time", "time" -> "env"} swaps them, as upstream's rename(env="time", time="env")).
DimNames Renamed(const TensorDict& td, const DimRenames& renames) {
  const DimNames current = td.names();
  DimNames out = current;
  std::vector<std::string> unknown;
  std::set<std::string_view> renamed;
  for (const auto& [from, to] : renames.pairs) {
    auto it = std::find(current.begin(), current.end(), std::optional<std::string>(from));
    if (it == current.end()) {
      unknown.push_back(absl::StrCat("'", from, "'"));
      continue;
    }
    if (!renamed.insert(from).second) {
      TD_FAIL(ValueError, "rename: the dim named '", from, "' is renamed twice (the names are ",
              NamesRepr(current), ")");
    }
    out[it - current.begin()] = to;
  }
  if (!unknown.empty()) {
    TD_FAIL(ValueError, "rename: no batch dim is named ", absl::StrJoin(unknown, ", "),
            " (the names are ", NamesRepr(td.names()), ")");
  }
  return out;
}
}  // namespace

TensorDict TensorDict::rename(const DimNames& names) const {
  auto checked = internal::CheckedNames(names, batch_size(), "rename");
  TensorDict out = copy();
  internal::ApplyNames(out, std::move(checked));
  return out;
}

TensorDict TensorDict::rename(const DimRenames& renames) const {
  auto checked = internal::CheckedNames(Renamed(*this, renames), batch_size(), "rename");
  TensorDict out = copy();
  internal::ApplyNames(out, std::move(checked));
  return out;
}

TensorDict& TensorDict::rename_(const DimNames& names) {
  internal::ApplyNames(*this, internal::CheckedNames(names, batch_size(), "rename_"));
  return *this;
}

TensorDict& TensorDict::rename_(const DimRenames& renames) {
  internal::ApplyNames(*this,
                       internal::CheckedNames(Renamed(*this, renames), batch_size(), "rename_"));
  return *this;
}

}  // namespace td
