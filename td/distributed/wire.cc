#include "td/distributed/internal/wire.h"

#include <c10/core/ScalarType.h>

#include <optional>
#include <string>
#include <vector>

#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/internal/structure_check.h"
#include "td/structure/structure.h"

namespace td {
namespace distributed {
namespace internal {

Header ParseHeader(const int64_t* h, const std::string& what, const std::string& message) {
  const Header out{h[1], static_cast<uint64_t>(h[2]), h[3],
                   h[4], (h[5] & kPerLeafFlag) != 0,  (h[5] & kAgreedFlag) != 0};
  if (h[0] != kMagic || (h[1] != kKindData && h[1] != kKindInit) || h[3] < 0 ||
      h[3] > kMaxAnnouncedBytes || h[4] < 0 || h[4] > kMaxAnnouncedBytes ||
      (h[5] & ~(kPerLeafFlag | kAgreedFlag)) != 0 ||
      (out.per_leaf && h[4] % static_cast<int64_t>(sizeof(int64_t)) != 0) ||
      (out.per_leaf && h[1] != kKindData) || (out.agreed && h[1] != kKindData)) {
    TD_FAIL(ValueError, what, ": ", message,
            " is not a td::distributed message (was it sent by plain c10d on the same tag?); "
            "nothing was written");
  }
  return out;
}

std::array<int64_t, kHeaderWords> HeaderWords(const Header& header) {
  const int64_t flags = (header.per_leaf ? kPerLeafFlag : 0) | (header.agreed ? kAgreedFlag : 0);
  const auto fingerprint = static_cast<int64_t>(header.fingerprint);
  return {kMagic, header.kind, fingerprint, header.desc_bytes, header.data_bytes, flags};
}

namespace {

// ValidateStructure's reader: the fields mapped to a structure::Builder (see wire.h).
class Validator {
 public:
  Validator(int64_t max_leaf_bytes, const std::function<bool(const c10::Device&)>& device_ok,
            const std::string& what)
      : max_(max_leaf_bytes), device_ok_(device_ok), what_(what) {}

  structure::Description Root(const nlohmann::json& s) && {
    Level(s, b_.Root(structure::LevelKind::kTensorDict));
    absl::StatusOr<structure::Description> d = std::move(b_).Finish();
    Check(d.status());  // Level() set every batch size
    return *std::move(d);
  }

 private:
  void Level(const nlohmann::json& s, structure::Level& level) {
    if (!s.is_object()) Fail("a level is not a JSON object");
    Check(b_.SetBatchSize(level, Field(s, "batch_size", "the batch size is missing")));
    const nlohmann::json& device = Field(s, "device", "a level has no device");
    if (!device.is_null()) {
      if (!device.is_string()) Fail("the device is not a string");
      const std::string name = device.get<std::string>();
      bool ok = false;
      try {
        ok = device_ok_(c10::Device(name));
      } catch (const c10::Error&) {
        Fail(c10::str("device '", name, "' is not a device name"));
      }
      if (!ok) Fail(c10::str("device '", name, "' is not available on this rank"));
      level.info.device = name;
    }
    const auto is_array = &nlohmann::json::is_array, is_string = &nlohmann::json::is_string;
    for (const nlohmann::json& e :
         Field(s, "entries", "a level has no list of entries", is_array)) {
      if (!e.is_object()) Fail("an entry is not a JSON object");
      path_.push_back(Field(e, "key", "an entry has no string key", is_string).get<std::string>());
      const auto k = Field(e, "kind", "the entry has no kind", is_string).get<std::string>();
      if (k == "tensor") {
        Tensor(e, level);
      } else if (k == "tensordict") {
        // Depth first (AddLevel): descending is what would exhaust the stack on deep input.
        absl::StatusOr<structure::Level*> sub =
            b_.AddLevel(level, path_.back(), structure::LevelKind::kTensorDict);
        Check(sub.status());
        Level(Field(e, "value", "the nested entry has no value"), **sub);
      } else if (k == "non_tensor") {
        const nlohmann::json& value = Field(e, "value", "the non-tensor entry has no value");
        auto c = e.find("cls");
        absl::StatusOr<structure::NonTensorKind> cls =
            structure::NonTensorKindOf(c == e.end() ? nullptr : &*c);
        if (!cls.ok()) Fail(std::string(cls.status().message()));
        Check(b_.AddNonTensor(level, path_.back(), value, *cls).status());
      } else {
        Fail(c10::str("entry kind '", k, "' is unknown"));
      }
      path_.pop_back();
    }
  }

  void Tensor(const nlohmann::json& e, structure::Level& level) {
    const nlohmann::json& dtype = Field(e, "dtype", "the tensor entry has no dtype");
    const nlohmann::json& shape = Field(e, "shape", "the shape is missing");
    const std::optional<int64_t> code = ::td::internal::SizeFromJson(dtype);
    absl::StatusOr<const structure::Entry*> leaf =
        b_.AddLeaf(level, path_.back(), structure::Dtype::Code(code.value_or(-1)), shape);
    if (structure::RuleOf(leaf.status()) == structure::Rule::kDtype) {
      Fail(c10::str(leaf.status().message(), " (", dtype.dump(),
                    "): not a dtype td::distributed sends"));
    }
    Check(leaf.status());
    if (__builtin_add_overflow(total_, (*leaf)->nbytes, &total_) || total_ > max_) {
      Fail(c10::str("shape ", SizeRepr((*leaf)->shape), ": the leaves described so far take more ",
                    "than the ", max_, " bytes of data that came with the structure"));
    }
  }

  // o[name], which must be there (and pass `is`), else Fail(problem).
  const nlohmann::json& Field(const nlohmann::json& o, const char* name, const char* problem,
                              bool (nlohmann::json::*is)() const noexcept = nullptr) const {
    auto it = o.find(name);
    if (it == o.end() || (is != nullptr && !((*it).*is)())) Fail(problem);
    return *it;
  }

  // The builder's finding `s`, in this format's words.
  void Check(const absl::Status& s) const {
    if (s.ok()) return;
    const std::string m(s.message());
    switch (structure::RuleOf(s)) {
      case structure::Rule::kBatchSize: Fail("the batch size " + m);
      case structure::Rule::kShape: Fail("the shape " + m);
      case structure::Rule::kSubBatch: Fail(m + " of the parent");
      default: Fail(m);
    }
  }

  // key ('a', 'b') / key 'a' / the top level.
  std::string Where() const {
    if (path_.empty()) return "the top level";
    // The first parts only, for keys nested thousands of levels deep.
    constexpr size_t kShown = 8;
    std::string s = path_.size() == 1 ? "key " : "key (";
    for (size_t i = 0; i < path_.size() && i < kShown; ++i) {
      s += (i ? ", '" : "'") + path_[i] + "'";
    }
    if (path_.size() > kShown) s += c10::str(", ... ", path_.size() - kShown, " more");
    return path_.size() == 1 ? s : s + ")";
  }

  [[noreturn]] void Fail(const std::string& problem) const {
    TD_FAIL(ValueError, what_, ": the TensorDict structure received is invalid at ", Where(), ": ",
            problem, "; nothing was allocated");
  }

  int64_t max_;
  const std::function<bool(const c10::Device&)>& device_ok_;
  const std::string& what_;
  std::vector<std::string> path_;
  int64_t total_ = 0;
  structure::Builder b_;
};

}  // namespace

structure::Description ValidateStructure(const nlohmann::json& structure, int64_t max_leaf_bytes,
                                         const std::function<bool(const c10::Device&)>& device_ok,
                                         const std::string& what) {
  return Validator(max_leaf_bytes, device_ok, what).Root(structure);
}

}  // namespace internal
}  // namespace distributed
}  // namespace td
