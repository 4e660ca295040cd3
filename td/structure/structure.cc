#include "td/structure/structure.h"

#include <set>
#include <utility>

#include "absl/strings/cord.h"

namespace td {
namespace structure {
namespace {

constexpr absl::string_view kRuleUrl = "td.structure.Rule";

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::Status Precondition(std::string_view what) {
  return absl::FailedPreconditionError(absl::StrCat("structure::Builder: ", AV(what)));
}

// `status` tagged with `rule` (read back by RuleOf).
absl::Status Tagged(absl::Status status, Rule rule) {
  status.SetPayload(kRuleUrl, absl::Cord(std::string(1, static_cast<char>(rule))));
  return status;
}

}  // namespace

Rule RuleOf(const absl::Status& status) {
  const auto p = status.GetPayload(kRuleUrl);  // absl::optional (std:: in newer Abseil)
  if (!p || p->size() != 1) return Rule::kNone;
  return static_cast<Rule>(static_cast<unsigned char>(std::string(*p)[0]));
}

template <class Json>
absl::StatusOr<Json> ParseJson(std::string_view text, bool unique_keys) {
  if (absl::Status depth = internal::CheckJsonDepth(text); !depth.ok()) {
    return Tagged(depth, Rule::kJsonDepth);
  }
  struct Repeated {
    std::string key;
  };
  std::vector<std::set<std::string>> open;  // the keys seen in each enclosing object
  auto callback = [&](int /*depth*/, typename Json::parse_event_t event, Json& parsed) {
    if (!unique_keys) return true;
    if (event == Json::parse_event_t::object_start) {
      open.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      if (!open.empty()) open.pop_back();
    } else if (event == Json::parse_event_t::key && !open.empty()) {
      const std::string& k = parsed.template get_ref<const std::string&>();
      if (!open.back().insert(k).second) throw Repeated{k};
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const typename Json::exception& e) {
    return Tagged(absl::InvalidArgumentError(e.what()), Rule::kJsonSyntax);
  } catch (const Repeated& r) {
    return Tagged(absl::InvalidArgumentError(
                      absl::StrCat("names the key ", NestedKey(r.key).repr(),
                                   " twice in one JSON object; every key must be unique")),
                  Rule::kJsonKey);
  }
}
template absl::StatusOr<nlohmann::json> ParseJson<nlohmann::json>(std::string_view, bool);
template absl::StatusOr<nlohmann::ordered_json> ParseJson<nlohmann::ordered_json>(
    std::string_view, bool);

absl::StatusOr<std::vector<int64_t>> Sizes::Read() const {
  if (auto* j = std::get_if<const nlohmann::json*>(&v_)) return internal::ShapeFromJson(**j);
  if (auto* j = std::get_if<const nlohmann::ordered_json*>(&v_)) {
    return internal::ShapeFromJson(**j);
  }
  const std::vector<int64_t>& v = std::get<std::vector<int64_t>>(v_);
  bool ok = v.size() <= internal::kMaxStructureDims;
  for (size_t i = 0; ok && i < v.size(); ++i) ok = v[i] >= 0;
  if (ok) return v;
  return internal::ShapeFromJson(nlohmann::json(v));  // its words for what is wrong
}

absl::StatusOr<c10::ScalarType> Dtype::Read() const {
  if (auto* name = std::get_if<std::string>(&v_)) return internal::DtypeFromName(*name);
  if (auto* code = std::get_if<int64_t>(&v_)) return internal::DtypeFromCode(*code);
  return std::get<c10::ScalarType>(v_);
}

absl::StatusOr<NonTensorKind> NonTensorKindOf(const nlohmann::json* cls) {
  if (cls == nullptr) return NonTensorKind::kData;
  if (*cls == "MetaData") return NonTensorKind::kMetaData;
  if (*cls == "NonTensorStack") return NonTensorKind::kStack;
  return absl::InvalidArgumentError(absl::StrCat("the non-tensor class ", cls->dump(-1, ' ', true),
                                                 " is unknown (expected \"MetaData\" or "
                                                 "\"NonTensorStack\")"));
}

const Entry* Level::Find(std::string_view key) const {
  auto it = index_.find(AV(key));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

Level& Builder::Root(LevelKind kind) {
  root_.reset(new Level(kind, std::string(), nullptr, 0));
  unset_ = 1;
  return *root_;
}

absl::Status Builder::CheckKey(const Level& level, std::string_view key) const {
  if (level.kind_ == LevelKind::kTensorDict || level.kind_ == LevelKind::kTensorClass) {
    if (!level.batch_set_) return Precondition("an entry added before its level's batch size");
  }
  if (!level.index_.contains(AV(key))) return absl::OkStatus();
  return Tagged(absl::InvalidArgumentError("the key appears twice in its level"), Rule::kKey);
}

Entry& Builder::NewEntry(Level& level, std::string_view key, EntryKind kind) {
  level.index_.emplace(std::string(key), level.entries_.size());
  Entry& e = level.entries_.emplace_back();
  e.key = std::string(key);
  e.kind = kind;
  return e;
}

absl::StatusOr<Level*> Builder::AddLevel(Level& parent, std::string_view key, LevelKind kind) {
  const int depth = parent.depth_ + 1;
  if (absl::Status ok = internal::CheckNestingDepth(depth); !ok.ok()) {
    return Tagged(ok, Rule::kNestingDepth);
  }
  if (absl::Status ok = CheckKey(parent, key); !ok.ok()) return ok;
  Entry& e = NewEntry(parent, key, EntryKind::kLevel);
  e.level.reset(new Level(kind, std::string(key), &parent, depth));
  ++unset_;
  return e.level.get();
}

absl::Status Builder::SetBatchSize(Level& level, const Sizes& batch) {
  if (level.batch_set_) return Precondition("a batch size set twice");
  absl::StatusOr<std::vector<int64_t>> b = batch.Read();
  if (!b.ok()) return Tagged(b.status(), Rule::kBatchSize);
  const Level* parent = level.parent_;
  if (parent != nullptr &&
      (parent->kind_ == LevelKind::kTensorDict || parent->kind_ == LevelKind::kTensorClass)) {
    absl::Status ok = internal::CheckStartsWith(*b, parent->batch_, "batch size");
    if (!ok.ok()) return Tagged(ok, Rule::kSubBatch);
  }
  level.batch_ = *std::move(b);
  level.batch_set_ = true;
  --unset_;
  return absl::OkStatus();
}

absl::StatusOr<const Entry*> Builder::AddLeaf(Level& level, std::string_view key,
                                              const Dtype& dtype, const Sizes& shape,
                                              Location location) {
  if (level.kind_ != LevelKind::kTensorDict && level.kind_ != LevelKind::kTensorClass) {
    return Precondition("a leaf in a stack level");
  }
  if (absl::Status ok = CheckKey(level, key); !ok.ok()) return ok;
  absl::StatusOr<c10::ScalarType> type = dtype.Read();
  if (!type.ok()) return Tagged(type.status(), Rule::kDtype);
  absl::StatusOr<std::vector<int64_t>> s = shape.Read();
  if (!s.ok()) return Tagged(s.status(), Rule::kShape);
  if (absl::Status ok = internal::CheckStartsWith(*s, level.batch_, "shape"); !ok.ok()) {
    return Tagged(ok, Rule::kStartsWith);
  }
  absl::StatusOr<int64_t> nbytes = internal::TensorBytes(*s, *type);
  if (!nbytes.ok()) return Tagged(nbytes.status(), Rule::kBytes);
  Entry& leaf = NewEntry(level, key, EntryKind::kLeaf);
  leaf.dtype = *type;
  leaf.shape = *std::move(s);
  leaf.nbytes = *nbytes;
  leaf.location = std::move(location);
  return &leaf;
}

void Builder::SetLocation(const Entry& leaf, Location location) {
  const_cast<Entry&>(leaf).location = std::move(location);  // the entry is this builder's
}

absl::StatusOr<const Entry*> Builder::AddNonTensor(Level& level, std::string_view key,
                                                   nlohmann::json data, NonTensorKind kind) {
  if (absl::Status ok = CheckKey(level, key); !ok.ok()) return ok;
  Entry& e = NewEntry(level, key, EntryKind::kNonTensor);
  e.data = std::move(data);
  e.non_tensor = kind;
  return &e;
}

absl::StatusOr<Description> Builder::Finish() && {
  if (!root_) return Precondition("no root level");
  if (unset_ != 0) return Precondition("a level without a batch size");
  return Description(std::move(root_));
}

}  // namespace structure
}  // namespace td
