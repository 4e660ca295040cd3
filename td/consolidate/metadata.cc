#include "td/consolidate/metadata.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <optional>
#include <set>
#include <utility>

#include "td/core/dtype.h"
#include "td/core/nested_key.h"

namespace td {
namespace internal {

void BadConsolidatedFile(const std::string& file, const std::string& what) {
  TD_FAIL(MemmapError, "consolidated file ", file, ": ", what);
}

namespace {

using Json = nlohmann::ordered_json;
using structure::LevelKind;
using structure::Rule;

constexpr auto Bad = BadConsolidatedFile;

std::string Short(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 200) s = s.substr(0, 200) + "...";
  return s;
}

// An integer that fits int64 (JSON numbers above 2^63-1 parse as unsigned).
int64_t GetInt(const Json& v, const std::string& file, const std::string& what) {
  if (v.is_number_unsigned() &&
      v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    Bad(file, c10::str(what, " is out of range: ", v.get<uint64_t>(), " is larger than ",
                       std::numeric_limits<int64_t>::max(), " (int64)"));
  }
  if (!v.is_number_integer()) Bad(file, what + " is not an integer: " + Short(v));
  return v.get<int64_t>();
}

// Maps the metadata to a structure::Builder (NOTE [ Structure codec ] in td/structure/structure.h);
// this format's own rules (byte ranges, dim names, stacks as upstream writes them) are here.
struct Parser {
  using Names = std::vector<std::optional<std::string>>;
  const std::string& file;
  int64_t data_bytes;
  structure::Builder& b;

  template <typename... Args>
  [[noreturn]] void Fail(const Args&... args) const {
    Bad(file, c10::str(args...));
  }

  std::string Repr(const std::vector<std::string>& parts) const {
    return parts.empty() ? std::string("(root)") : NestedKey(parts).repr();
  }

  static std::vector<std::string> Sub(std::vector<std::string> parts, std::string key) {
    parts.push_back(std::move(key));
    return parts;
  }

  // The builder's finding `s` about `what` ("leaf 'a'", "level 'n'"), in this format's words;
  // a key the level already has names both entries (`parts` is the level's, `kind` the new one's).
  void Check(const absl::Status& s, const std::string& what,
             const structure::Level* level = nullptr, const std::vector<std::string>& parts = {},
             const std::string& key = {}, const char* kind = nullptr) const {
    if (s.ok()) return;
    const std::string m(s.message());
    // An entry's words, in structure::EntryKind's order.
    const char* const entries[] = {"a leaf", "a sub-TensorDict", "a non-tensor entry"};
    switch (structure::RuleOf(s)) {
      case Rule::kKey:
        Fail("the key ", Repr(Sub(parts, key)), " is both ",
             entries[static_cast<int>(level->Find(key)->kind)], " and ", kind, " of level ",
             Repr(parts), "; each name of a level is one entry");
      case Rule::kShape: Fail(what, ": the shape ", m);
      case Rule::kBatchSize: Fail(what, ": the batch_size ", m);
      case Rule::kStartsWith:
      case Rule::kSubBatch: Fail(what, ": ", m, " of its level");
      default: Fail(what, ": ", m);
    }
  }

  void NonEmpty(const std::string& k, const char* kind, const std::string& where) const {
    if (k.empty()) Fail("level ", where, " has ", kind, " with an empty key ''");
  }

  // The leaf `key` of `level` (at `parts`) that `m` describes.
  void Leaf(structure::Level& level, const std::vector<std::string>& parts, const std::string& key,
            const Json& m) {
    const std::string where = Repr(Sub(parts, key));
    if (key.rfind("<NJT", 0) == 0 || (m.is_array() && m.size() == 6)) {
      Fail("leaf ", where, " is part of a nested tensor (unsupported)");
    }
    if (!m.is_array() || m.size() != 5) {
      Fail("leaf ", where, ": expected [dtype, shape, start, stop, pad], got ", Short(m));
    }
    if (!m[0].is_string()) Fail("leaf ", where, ": dtype is not a string");
    absl::StatusOr<const structure::Entry*> leaf =
        b.AddLeaf(level, key, structure::Dtype::Name(m[0].get<std::string>()), m[1]);
    Check(leaf.status(), "leaf " + where, &level, parts, key, "a leaf");
    const int64_t start = GetInt(m[2], file, "leaf " + where + ": start");
    const int64_t stop = GetInt(m[3], file, "leaf " + where + ": stop");
    const int64_t pad = GetInt(m[4], file, "leaf " + where + ": pad"), nbytes = (*leaf)->nbytes;
    b.SetLocation(**leaf, {"", 0, start, stop, pad, {}});
    auto range = [&] {  // built only for an error: this runs once per leaf
      return c10::str("leaf ", where, ": byte range [", start, ", ", stop, ") pad ", pad);
    };
    if (start < 0 || stop < start || stop > data_bytes || pad < 0 || pad > stop - start) {
      Fail(range(), " is outside the data (", data_bytes, " bytes)");
    }
    if ((stop - start) % static_cast<int64_t>(c10::elementSize((*leaf)->dtype)) != 0 ||
        (pad == 0 ? nbytes != stop - start : nbytes > stop - start)) {
      Fail(range(), " does not hold ", SizeRepr((*leaf)->shape), " ", DtypeName((*leaf)->dtype));
    }
  }

  // The level `m` at `parts` (the root: none), made in `parent` (the root: nullptr) once its class
  // is known, whose parent's names are `parent_names` (nullptr: the root or an unnamed parent).
  structure::Level& Fill(const Json& m, const std::vector<std::string>& parts,
                         structure::Level* parent, const Names* parent_names) {
    const std::string where = Repr(parts);
    const Json* cls = m.is_object() && m.contains("cls") ? &m["cls"] : nullptr;
    const std::string name = cls && cls->is_string() ? cls->get<std::string>() : std::string();
    if (name == "NonTensorStack" && parts.empty()) {
      Fail("the root is a NonTensorStack: non-tensor data, not a TensorDict (load it as the entry "
           "of a TensorDict)");
    }
    const LevelKind kind = name == "LazyStackedTensorDict" ? LevelKind::kLazyStack
                           : name == "NonTensorStack"      ? LevelKind::kNonTensorStack
                                                           : LevelKind::kTensorDict;
    // Its depth, then its key.
    absl::StatusOr<structure::Level*> made =
        parent ? b.AddLevel(*parent, parts.back(), kind) : &b.Root(kind);
    if (structure::RuleOf(made.status()) == Rule::kNestingDepth) {
      TooDeep(parts, parent->depth() + 1, made.status());
    }
    if (parent) {
      const std::vector<std::string> up(parts.begin(), parts.end() - 1);
      Check(made.status(), "", parent, up, parts.back(), "a sub-TensorDict");
    }
    structure::Level& level = **made;
    if (!m.is_object()) Fail("level ", where, " is not an object");
    if (cls == nullptr) Need(m, "cls", where);
    if (level.kind() != LevelKind::kTensorDict) {
      Stack(m, parts, &level, level.depth(), parent_names);
      return level;
    }
    if (name != "TensorDict") {
      Fail("level ", where, " is a ", Short(*cls),
           "; only TensorDict, LazyStackedTensorDict and NonTensorStack levels are supported");
    }
    const Json& meta = ClsMetadata(m, where, &level.info.locked);
    auto bs = meta.find("batch_size");
    if (bs == meta.end() || !bs->is_array()) {
      Fail("level ", where, ": cls_metadata has no batch_size list");
    }
    absl::Status batch = b.SetBatchSize(level, *bs);
    Check(batch, c10::str(structure::RuleOf(batch) == Rule::kSubBatch ? "sub-TensorDict" : "level",
                          " ", where));
    auto dev = meta.find("device");
    if (dev != meta.end() && dev->is_string()) level.info.device = dev->get<std::string>();
    level.info.names = ParseNames(meta, where, level.batch_size().size());
    const Names names =
        Effective(level.info.names, level.batch_size().size(), parent_names, where);
    const bool named = std::any_of(names.begin(), names.end(), [](const auto& n) { return n; });

    // Every name of the level is one entry: a non-tensor, a leaf or a sub-level, in this order.
    for (const auto& [k, v] : Need(m, "non_tensors", where).items()) {
      NonEmpty(k, "a non-tensor entry", where);
      const Json data = v.is_array() && !v.empty() ? v[0] : Json();  // checked once claimed
      Check(b.AddNonTensor(level, k, data).status(), "", &level, parts, k, "a non-tensor entry");
      CheckNonTensor(v, Repr(Sub(parts, k)));
    }
    for (const auto& [k, v] : Need(m, "leaves", where).items()) {
      NonEmpty(k, "a leaf", where);
      Leaf(level, parts, k, v);
    }
    for (const auto& [k, v] : m.items()) {
      if (IsReservedLevelKey(k)) continue;
      NonEmpty(k, "a sub-TensorDict", where);
      Fill(v, Sub(parts, k), &level, named ? &names : nullptr);
    }
    return level;
  }

  // The object `field` of the level `m` at `where`.
  const Json& Need(const Json& m, const char* field, const std::string& where) const {
    auto it = m.find(field);
    if (it == m.end()) Fail("level ", where, " has no \"", field, "\"");
    if (!it->is_object()) Fail("level ", where, ": ", field, " is not an object");
    return *it;
  }

  // A field a stack level (`what` at `where`) has empty: its entries are its members'.
  void NeedEmpty(const Json& m, const char* field, const std::string& where,
                 const char* what) const {
    const Json& f = Need(m, field, where);
    if (!f.empty()) {
      Fail(what, " ", where, ": its ", field, " must be an empty object (a stack's ",
           "entries are its members'), got ", Short(f));
    }
  }

  // cls_metadata, an object; sets *locked from its is_locked.
  const Json& ClsMetadata(const Json& m, const std::string& where, bool* locked) const {
    const Json& meta = Need(m, "cls_metadata", where);
    auto it = meta.find("is_locked");
    *locked = it != meta.end() && it->is_boolean() && it->get<bool>();
    return meta;
  }

  [[noreturn]] void TooDeep(const std::vector<std::string>& parts, int depth,
                            const absl::Status& why) const {
    Fail("level ", Repr(parts), " is nested ", depth, " levels deep: ", why.message());
  }

  // [data, batch_size(, device)], as Python writes a NonTensorData.
  void CheckNonTensor(const Json& v, const std::string& where) const {
    if (!v.is_array() || v.size() < 2 || v.size() > 3) {
      Fail("non-tensor ", where, ": expected [data, batch_size(, device)], got ", Short(v));
    }
  }

  // cls_metadata's "names": absent, or one string or null per batch dim, unique
  // (NOTE [ Dim names ] in td/core/names.cc). Empty when absent or all null.
  Names ParseNames(const Json& meta, const std::string& where, size_t batch_dims) const {
    auto it = meta.find("names");
    if (it == meta.end()) return {};
    const Json& j = *it;
    if (!j.is_array() || j.size() != batch_dims) {
      Fail("level ", where, ": cls_metadata's names ", Short(j), " are not a list of ", batch_dims,
           " names (one string or null per batch dim)");
    }
    Names names;
    for (size_t i = 0; i < j.size(); ++i) {
      if (!j[i].is_null() && !j[i].is_string()) {
        Fail("level ", where, ": dim name ", i, " is ", Short(j[i]),
             ", not a string or null (names ", Short(j), ")");
      }
      if (j[i] == "...") {
        Fail("level ", where, ": \"...\" is not a dim name (names ", Short(j), ")");
      }
      names.push_back(j[i].is_null() ? std::nullopt : std::optional(j[i].get<std::string>()));
    }
    CheckUnique(names, where, "names " + Short(j));
    if (std::none_of(names.begin(), names.end(), [](const auto& n) { return n.has_value(); })) {
      names.clear();
    }
    return names;
  }

  void CheckUnique(const Names& names, const std::string& where, const std::string& what) const {
    std::set<std::string> seen;
    for (const auto& n : names) {
      if (n && !seen.insert(*n).second) {
        Fail("level ", where, ": the dim name '", *n, "' repeats in its ", what,
             "; names must be unique");
      }
    }
  }

  // The names a level of `own` names gets under `parent` (NOTE [ Dim names ]: a named parent's
  // names on its leading dims, its own on the rest), checked for repeats.
  Names Effective(const Names& own, size_t dims, const Names* parent,
                  const std::string& where) const {
    Names out = own.empty() ? Names(dims) : own;
    if (parent == nullptr) return out;
    for (size_t i = 0; i < parent->size() && i < dims; ++i) out[i] = (*parent)[i];
    std::string shown = "names under its parent's [";
    for (size_t i = 0; i < out.size(); ++i) {
      shown += (i ? ", " : "") + (out[i] ? "'" + *out[i] + "'" : std::string("None"));
    }
    CheckUnique(out, where, shown + "]");
    return out;
  }

  // The member keys of a stack level (every key but the format's own, plus `extra`'s): exactly
  // "0".."n-1", n >= 1; entry i of the result is member i's JSON and whether it is from `extra`.
  std::vector<std::pair<const Json*, bool>> Members(const Json& m, const Json* extra,
                                                    const std::string& where,
                                                    const char* what) const {
    std::vector<std::pair<std::string, std::pair<const Json*, bool>>> found;
    if (extra != nullptr) {
      for (const auto& [k, v] : extra->items()) found.push_back({k, {&v, true}});
    }
    for (const auto& [k, v] : m.items()) {
      if (!IsReservedLevelKey(k)) found.push_back({k, {&v, false}});
    }
    if (found.empty()) Fail(what, " ", where, " has no members");
    std::vector<std::pair<const Json*, bool>> out(found.size(), {nullptr, false});
    for (const auto& [k, v] : found) {
      // "0", "1", ...: digits, without a sign or a leading zero.
      const bool digits = k.find_first_not_of("0123456789") == k.npos && k.size() <= 18;
      const int64_t i = digits && !k.empty() ? std::stoll(k) : -1;
      if (i < 0 || std::to_string(i) != k || i >= static_cast<int64_t>(found.size()) ||
          out[i].first != nullptr) {
        Fail(what, " ", where, " has the member key ", NestedKey(k).repr(), "; its ", found.size(),
             " members must be keyed '0' to '", found.size() - 1, "', once each");
      }
      out[i] = v;
    }
    return out;
  }

  // The values of a NonTensorStack, before they are laid out: a member NonTensorData (`value`,
  // covering every element of `batch`) or a stack of members along `stack_dim`.
  struct NtsNode {
    const Json* value = nullptr;
    int64_t value_bytes = 0;  // of its JSON text
    std::vector<int64_t> batch;
    int64_t stack_dim = 0;
    std::vector<NtsNode> members;
  };

  // A stack level as upstream writes it (NOTE [ Consolidated file format ] in file.h), `depth`
  // levels down: members "0", "1", ... of one batch size, stacked along stack_dim. `level`: the
  // stack's (nullptr for a NonTensorStack's member, whose values its outermost stack lays out).
  NtsNode Stack(const Json& m, const std::vector<std::string>& parts, structure::Level* level,
                int depth, const Names* parent_names) {
    const std::string where = Repr(parts);
    structure::Level* lazy = level && level->kind() == LevelKind::kLazyStack ? level : nullptr;
    const char* what = lazy ? "lazy stack" : "NonTensorStack";
    bool locked = false;
    const Json& meta = ClsMetadata(m, where, lazy ? &lazy->info.locked : &locked);
    auto sn = meta.find("stack_dim_name");
    if (lazy && sn != meta.end() && !sn->is_null()) {
      if (!sn->is_string()) {
        Fail(what, " ", where, ": stack_dim_name ", Short(*sn), " is not a string or null");
      }
      if (*sn == "...") Fail(what, " ", where, ": \"...\" is not a dim name");
      lazy->info.stack_dim_name = sn->get<std::string>();
    }
    if (lazy) NeedEmpty(m, "non_tensors", where, what);
    NeedEmpty(m, "leaves", where, what);
    auto members = Members(m, lazy ? nullptr : &Need(m, "non_tensors", where), where, what);
    NtsNode node;
    for (size_t i = 0; i < members.size(); ++i) {
      const std::vector<std::string> sp = Sub(parts, std::to_string(i));
      const Json& v = *members[i].first;
      NtsNode member;
      if (lazy) {
        const structure::Level& sub = Fill(v, sp, lazy, nullptr);
        if (sub.kind() == LevelKind::kNonTensorStack) {
          Fail(what, " ", where, ": member ", i,
               " is a NonTensorStack; a lazy stack's members are TensorDicts");
        }
        member.batch = sub.batch_size();
      } else if (members[i].second) {
        CheckNonTensor(v, Repr(sp));
        absl::StatusOr<std::vector<int64_t>> batch = internal::ShapeFromJson(v[1]);
        if (!batch.ok()) {
          Fail("non-tensor ", Repr(sp), ": the batch_size ", batch.status().message());
        }
        member.value = &v[0];
        member.value_bytes = static_cast<int64_t>(v[0].dump().size());
        member.batch = *std::move(batch);
      } else {
        if (absl::Status ok = internal::CheckNestingDepth(depth + 1); !ok.ok()) {
          TooDeep(sp, depth + 1, ok);
        }
        const Json* cls = v.is_object() && v.contains("cls") ? &v["cls"] : nullptr;
        if (cls == nullptr || !cls->is_string() || cls->get<std::string>() != what) {
          Fail(what, " ", where, ": member ", i, " is a ",
               cls ? Short(*cls) : std::string("level without \"cls\""),
               "; its members are NonTensorData or NonTensorStacks");
        }
        member = Stack(v, sp, nullptr, depth + 1, nullptr);
      }
      if (i > 0 && member.batch != node.members[0].batch) {
        Fail(what, " ", where, ": member ", i, " has batch size ", SizeRepr(member.batch),
             ", member 0 ", SizeRepr(node.members[0].batch), "; members share one batch size");
      }
      node.members.push_back(std::move(member));
    }
    auto it = meta.find("stack_dim");
    if (it == meta.end()) Fail(what, " ", where, ": cls_metadata has no stack_dim");
    const int64_t dim = GetInt(*it, file, c10::str(what, " ", where, ": stack_dim"));
    node.batch = node.members[0].batch;
    if (dim < 0 || dim > static_cast<int64_t>(node.batch.size())) {
      Fail(what, " ", where, ": stack_dim ", dim, " is out of range for members of ",
           node.batch.size(), " batch dims");
    }
    node.batch.insert(node.batch.begin() + dim, static_cast<int64_t>(members.size()));
    node.stack_dim = dim;
    if (level == nullptr) return node;
    level->info.stack_dim = dim;
    // A NonTensorStack's dims only grow toward the outermost: its batch size bounds every member's.
    Check(b.SetBatchSize(*level, node.batch), c10::str(what, " ", where));
    if (lazy == nullptr) {
      level->info.data = Expand(node, where);
      return node;
    }
    // Its names (the members', when they agree, with the stack dim's) under its parent's.
    const Names& first = lazy->entries()[0].level->info.names;
    const bool agree =
        std::all_of(lazy->entries().begin(), lazy->entries().end(),
                    [&](const structure::Entry& e) { return e.level->info.names == first; });
    Names names = agree && !first.empty() ? first : Names(node.batch.size() - 1);
    names.insert(names.begin() + dim, lazy->info.stack_dim_name);
    CheckUnique(names, where, "names");
    Effective(names, names.size(), parent_names, where);
    return node;
  }

  // The values of `root` as nested lists of its batch size (upstream's tolist()), within the
  // file's budget (kMaxNonTensorStackValues, kMaxNonTensorStackBytes).
  Json Expand(const NtsNode& root, const std::string& where) const {
    auto over_budget = [&] {
      Fail("NonTensorStack ", where, " of batch size ", SizeRepr(root.batch),
           " takes the file's NonTensorStacks past ", kMaxNonTensorStackValues, " values or ",
           kMaxNonTensorStackBytes, " bytes of JSON (td::internal::kMaxNonTensorStack*)");
    };
    int64_t count = 1;
    for (int64_t d : root.batch) {
      if (__builtin_mul_overflow(count, d, &count) || count > kMaxNonTensorStackValues) {
        over_budget();
      }
    }
    nts_values_ += count;
    if (nts_values_ > kMaxNonTensorStackValues) over_budget();
    std::vector<int64_t> idx(root.batch.size());
    std::function<Json(size_t)> fill = [&](size_t dim) -> Json {
      if (dim == idx.size()) {
        const NtsNode* n = &root;
        std::vector<int64_t> at = idx;
        while (n->value == nullptr) {
          const int64_t i = at[static_cast<size_t>(n->stack_dim)];
          at.erase(at.begin() + n->stack_dim);
          n = &n->members[static_cast<size_t>(i)];
        }
        nts_bytes_ += n->value_bytes;
        if (nts_bytes_ > kMaxNonTensorStackBytes) over_budget();
        return *n->value;
      }
      Json list = Json::array();
      for (int64_t j = 0; j < root.batch[dim]; ++j) {
        idx[dim] = j;
        list.push_back(fill(dim + 1));
      }
      return list;
    };
    return fill(0);
  }

  mutable int64_t nts_values_ = 0;
  mutable int64_t nts_bytes_ = 0;
};

}  // namespace

structure::Description ParseFileMetadata(std::string_view text, const std::string& file,
                                         int64_t data_bytes) {
  absl::StatusOr<Json> meta = structure::ParseJson<Json>(text, /*unique_keys=*/true);
  if (!meta.ok()) {
    const std::string m(meta.status().message());
    switch (structure::RuleOf(meta.status())) {
      case Rule::kJsonDepth:
        Bad(file, c10::str("the metadata ", m, " (TensorDicts nest at most ", kMaxNestingDepth,
                           " levels, td::kMaxNestingDepth)"));
      case Rule::kJsonKey: Bad(file, "the metadata " + m);
      default: Bad(file, "malformed metadata JSON: " + m);
    }
  }
  structure::Builder b;
  Parser{file, data_bytes, b}.Fill(*meta, {}, nullptr, nullptr);
  absl::StatusOr<structure::Description> out = std::move(b).Finish();
  if (!out.ok()) Bad(file, std::string(out.status().message()));  // Fill made every batch size
  return *std::move(out);
}

}  // namespace internal
}  // namespace td
