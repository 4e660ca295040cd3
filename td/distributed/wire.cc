#include "td/distributed/wire.h"

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "td/core/errors.h"

namespace td {
namespace distributed {
namespace internal {

Header ParseHeader(const int64_t* h, const std::string& what, int src) {
  Header out;
  out.kind = h[1];
  std::memcpy(&out.fingerprint, &h[2], sizeof(out.fingerprint));
  out.desc_bytes = h[3];
  out.data_bytes = h[4];
  out.per_leaf = (h[5] & kPerLeafFlag) != 0;
  out.agreed = (h[5] & kAgreedFlag) != 0;
  if (h[0] != kMagic || (h[1] != kKindData && h[1] != kKindInit) || h[3] < 0 ||
      h[3] > kMaxAnnouncedBytes || h[4] < 0 || h[4] > kMaxAnnouncedBytes ||
      (h[5] & ~(kPerLeafFlag | kAgreedFlag)) != 0 ||
      (out.per_leaf && h[4] % static_cast<int64_t>(sizeof(int64_t)) != 0) ||
      (out.per_leaf && h[1] != kKindData) || (out.agreed && h[1] != kKindData)) {
    TD_FAIL(ValueError, what, ": the message from rank ", src,
            " is not a td::distributed message (was it sent by plain c10d on the same tag?); "
            "nothing was written");
  }
  return out;
}

namespace {

// The dtypes the packed layout carries (every dtype a TensorDict leaf holds but the quantized
// ones, and those of LibTorch 2.x that 1.13 does not know).
bool KnownDtype(int64_t code) {
  if (code < 0 || code >= static_cast<int64_t>(c10::ScalarType::NumOptions)) return false;
  switch (static_cast<c10::ScalarType>(code)) {
    case c10::ScalarType::Bool: case c10::ScalarType::Byte: case c10::ScalarType::Char:
    case c10::ScalarType::Short: case c10::ScalarType::Int: case c10::ScalarType::Long:
    case c10::ScalarType::Half: case c10::ScalarType::Float: case c10::ScalarType::Double:
    case c10::ScalarType::BFloat16: case c10::ScalarType::ComplexHalf:
    case c10::ScalarType::ComplexFloat: case c10::ScalarType::ComplexDouble:
      return true;
    default:
      return false;
  }
}

// The value of an integer that fits int64 (nlohmann-json keeps non-negative ones unsigned).
std::optional<int64_t> Int64(const nlohmann::json& j) {
  if (j.is_number_unsigned()) {
    uint64_t u = j.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  return std::nullopt;
}

class Validator {
 public:
  Validator(int64_t max_leaf_bytes, const std::function<bool(const c10::Device&)>& device_ok,
            const std::string& what)
      : max_(max_leaf_bytes), device_ok_(device_ok), what_(what) {}

  void Level(const nlohmann::json& s, const std::vector<int64_t>* parent_batch, int depth) {
    if (!s.is_object()) Fail("a level is not a JSON object");
    std::vector<int64_t> batch = Sizes(s, "batch_size", "batch size");
    if (parent_batch != nullptr && !StartsWith(batch, *parent_batch)) {
      Fail(c10::str("the batch size ", Repr(batch), " does not start with the parent's ",
                    Repr(*parent_batch)));
    }
    auto device = s.find("device");
    if (device == s.end()) Fail("a level has no device");
    if (!device->is_null()) {
      if (!device->is_string()) Fail("the device is not a string");
      const std::string name = device->get<std::string>();
      bool ok = false;
      try {
        ok = device_ok_(c10::Device(name));
      } catch (const c10::Error&) {
        Fail(c10::str("device '", name, "' is not a device name"));
      }
      if (!ok) Fail(c10::str("device '", name, "' is not available on this rank"));
    }
    auto entries = s.find("entries");
    if (entries == s.end() || !entries->is_array()) Fail("a level has no list of entries");
    for (const nlohmann::json& e : *entries) {
      if (!e.is_object()) Fail("an entry is not a JSON object");
      auto key = e.find("key");
      if (key == e.end() || !key->is_string()) Fail("an entry has no string key");
      path_.push_back(key->get<std::string>());
      auto kind = e.find("kind");
      if (kind == e.end() || !kind->is_string()) Fail("the entry has no kind");
      const std::string k = kind->get<std::string>();
      if (k == "tensor") {
        Tensor(e, batch);
      } else if (k == "tensordict") {
        // Depth first: descending is what an adversarial depth would exhaust the stack with.
        if (depth + 1 > kMaxNestingDepth) {
          Fail(c10::str("the structure nests deeper than td::kMaxNestingDepth (",
                        kMaxNestingDepth, ") levels"));
        }
        auto value = e.find("value");
        if (value == e.end()) Fail("the nested entry has no value");
        Level(*value, &batch, depth + 1);
      } else if (k == "non_tensor") {
        if (e.find("value") == e.end()) Fail("the non-tensor entry has no value");
      } else {
        Fail(c10::str("entry kind '", k, "' is unknown"));
      }
      path_.pop_back();
    }
  }

 private:
  void Tensor(const nlohmann::json& e, const std::vector<int64_t>& batch) {
    auto dtype = e.find("dtype");
    std::optional<int64_t> code = dtype == e.end() ? std::nullopt : Int64(*dtype);
    if (!code || !KnownDtype(*code)) {
      Fail(c10::str("dtype ", dtype == e.end() ? std::string("(none)") : dtype->dump(),
                    " is not a dtype code td::distributed sends"));
    }
    std::vector<int64_t> shape = Sizes(e, "shape", "shape");
    if (!StartsWith(shape, batch)) {
      Fail(c10::str("shape ", Repr(shape), " does not start with the batch size ", Repr(batch)));
    }
    int64_t bytes = static_cast<int64_t>(c10::elementSize(static_cast<c10::ScalarType>(*code)));
    for (int64_t d : shape) {
      if (__builtin_mul_overflow(bytes, d, &bytes)) {
        Fail(c10::str("shape ", Repr(shape), " holds more bytes than an int64 counts"));
      }
    }
    if (__builtin_add_overflow(total_, bytes, &total_) || total_ > max_) {
      Fail(c10::str("shape ", Repr(shape), ": the leaves described so far take more than the ",
                    max_, " bytes of data that came with the structure"));
    }
  }

  // A list of non-negative int64 under `field` of `o`.
  std::vector<int64_t> Sizes(const nlohmann::json& o, const char* field, const char* name) {
    auto it = o.find(field);
    if (it == o.end() || !it->is_array()) Fail(c10::str("the ", name, " is not a list"));
    std::vector<int64_t> out;
    for (const nlohmann::json& d : *it) {
      std::optional<int64_t> v = Int64(d);
      if (!v || *v < 0) {
        Fail(c10::str("the ", name, " ", it->dump(), " holds a size that is not an integer in [0, ",
                      INT64_MAX, "]"));
      }
      out.push_back(*v);
    }
    return out;
  }

  static bool StartsWith(const std::vector<int64_t>& v, const std::vector<int64_t>& prefix) {
    return v.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), v.begin());
  }

  static std::string Repr(const std::vector<int64_t>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  }

  // ('a', 'b') / 'a' / the root.
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
};

}  // namespace

void ValidateStructure(const nlohmann::json& structure, int64_t max_leaf_bytes,
                       const std::function<bool(const c10::Device&)>& device_ok,
                       const std::string& what) {
  Validator(max_leaf_bytes, device_ok, what).Level(structure, nullptr, 0);
}

}  // namespace internal
}  // namespace distributed
}  // namespace td
