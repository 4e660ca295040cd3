// h5py's tagged opaque data <-> JSON (NOTE [ HDF5 opaque data ] in npy_opaque.h).
#include "td/backends/h5/npy_opaque.h"

#include <c10/util/Half.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

#include "absl/base/casts.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace td::h5::internal {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxRank = 32;  // HDF5's H5S_MAX_RANK
constexpr size_t kMaxTag = 255;  // HDF5's H5T_OPAQUE_TAG_MAX, less its NUL
constexpr const char* kPrefix = "NUMPY:";
constexpr size_t kPrefixSize = 6;
constexpr const char* kDescription = "hdf5_opaque";

// A numpy dtype str ("<i8", "|b1", "<U2"): byte order, kind, count (bytes; code points for "U").
struct Dtype {
  char order = '<';
  char kind = 'i';
  int64_t n = 0;
  int64_t item_size() const { return kind == 'U' ? 4 * n : n; }
};

std::optional<Dtype> ParseTag(std::string_view tag) {
  if (tag.substr(0, kPrefixSize) != std::string_view(kPrefix)) return std::nullopt;
  std::string_view d = tag.substr(kPrefixSize);
  if (d.size() < 3 || d.size() > 11) return std::nullopt;  // at most 9 digits: no overflow
  Dtype out{d[0], d[1], 0};
  if (std::string_view("<>|=").find(out.order) == std::string_view::npos) return std::nullopt;
  for (char c : d.substr(2)) {
    if (c < '0' || c > '9') return std::nullopt;
    out.n = out.n * 10 + (c - '0');
  }
  const int64_t n = out.n;
  const bool pow2 = n == 1 || n == 2 || n == 4 || n == 8;
  const char k = out.kind;
  const bool ok = k == 'b'               ? n == 1
                  : k == 'i' || k == 'u' ? pow2
                  : k == 'f'             ? pow2 && n >= 2
                                         : (k == 'U' || k == 'S') && n >= 1;
  return ok ? std::optional<Dtype>(out) : std::nullopt;
}

bool BigEndian(char order) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  return order != '<';
#else
  return order == '>';
#endif
}

// `n` (1-8) bytes at `p` as an unsigned integer in the byte order `order`.
uint64_t Load(const unsigned char* p, int64_t n, char order) {
  uint64_t v = 0;
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t byte = p[BigEndian(order) ? i : n - 1 - i];
    v = (v << 8) | byte;
  }
  return v;
}

void StoreLe(std::string& out, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

void AppendUtf8(std::string& out, uint32_t cp) {
  const int n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  static constexpr uint32_t kLead[] = {0, 0, 0xc0, 0xe0, 0xf0};
  out.push_back(static_cast<char>(kLead[n] | (cp >> (6 * (n - 1)))));
  for (int i = n - 2; i >= 0; --i) {
    out.push_back(static_cast<char>(0x80 | ((cp >> (6 * i)) & 0x3f)));
  }
}

bool ValidCodePoint(uint32_t cp) { return cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff); }

// The code points of UTF-8 text, or nullopt when it is not valid UTF-8.
std::optional<std::vector<uint32_t>> CodePoints(std::string_view s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const int len = c < 0x80             ? 1
                    : (c >> 5) == 0x6    ? 2
                    : (c >> 4) == 0xe    ? 3
                    : (c >> 3) == 0x1e   ? 4
                                         : 0;
    if (len == 0 || i + len > s.size()) return std::nullopt;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (int k = 1; k < len; ++k) {
      const unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80) return std::nullopt;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || !ValidCodePoint(cp)) return std::nullopt;  // overlong, surrogate
    out.push_back(cp);
    i += len;
  }
  return out;
}

// One element at `p`, or nullopt when it has no JSON value (bad code points, bytes not UTF-8).
std::optional<Json> Element(const Dtype& d, const unsigned char* p) {
  switch (d.kind) {
    case 'b': return Json(p[0] != 0);  // any nonzero byte is true (NOTE [ HDF5 bools ])
    case 'i': {
      uint64_t v = Load(p, d.n, d.order);
      if (d.n < 8 && (v >> (8 * d.n - 1)) != 0) v |= ~uint64_t{0} << (8 * d.n);  // sign
      return Json(absl::bit_cast<int64_t>(v));
    }
    case 'u': {  // an int64 where it fits
      const uint64_t v = Load(p, d.n, d.order);
      return (v >> 63) != 0 ? Json(v) : Json(static_cast<int64_t>(v));
    }
    case 'f': {
      const uint64_t v = Load(p, d.n, d.order);
      if (d.n == 2)
        return Json(double{c10::Half(static_cast<uint16_t>(v), c10::Half::from_bits())});
      if (d.n == 4) return Json(double{absl::bit_cast<float>(static_cast<uint32_t>(v))});
      return Json(absl::bit_cast<double>(v));
    }
    case 'U': {
      int64_t len = d.n;  // numpy drops trailing NULs
      while (len > 0 && Load(p + 4 * (len - 1), 4, d.order) == 0) --len;
      std::string out;
      for (int64_t i = 0; i < len; ++i) {
        const uint64_t cp = Load(p + 4 * i, 4, d.order);
        if (!ValidCodePoint(static_cast<uint32_t>(cp)) || cp > 0x10ffff) return std::nullopt;
        AppendUtf8(out, static_cast<uint32_t>(cp));
      }
      return Json(std::move(out));
    }
    default: {  // 'S'
      std::string_view s(reinterpret_cast<const char*>(p), d.n);
      while (!s.empty() && s.back() == '\0') s.remove_suffix(1);
      if (!CodePoints(s)) return std::nullopt;
      return Json(std::string(s));
    }
  }
}

// flat[*pos...] nested by shape[dim:].
Json Nest(std::vector<Json>& flat, const std::vector<int64_t>& shape, size_t dim, size_t* pos) {
  if (dim == shape.size()) return std::move(flat[(*pos)++]);
  Json out = Json::array();
  for (int64_t i = 0; i < shape[dim]; ++i) out.push_back(Nest(flat, shape, dim + 1, pos));
  return out;
}

// numel x item_size of `shape`, or nullopt for a negative dim, numel past 2^62 or bytes past int64.
std::optional<int64_t> Bytes(const std::vector<int64_t>& shape, int64_t item_size) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0 || __builtin_mul_overflow(n, s, &n) || n > (int64_t{1} << 62)) return std::nullopt;
  }
  if (__builtin_mul_overflow(n, item_size, &n)) return std::nullopt;
  return n;
}

Json Describe(const OpaqueData& data) {
  return {{kDescription,
           {{"tag", data.tag},
            {"shape", data.shape},
            {"item_size", data.item_size},
            {"base64", absl::Base64Escape(data.bytes)}}}};
}

absl::StatusOr<std::optional<OpaqueData>> FromDescription(const Json& d) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a {\"", kDescription, "\": {\"tag\", \"shape\", \"item_size\", \"base64\"}} value ",
        what));
  };
  for (const char* k : {"tag", "shape", "item_size", "base64"}) {
    if (!d.contains(k)) return bad(absl::StrCat("lacks \"", k, "\""));
  }
  if (d.size() != 4) return bad("has other members");
  OpaqueData out;
  if (!d["tag"].is_string() || d["tag"].get_ref<const std::string&>().size() > kMaxTag) {
    return bad(absl::StrCat("needs a \"tag\" string of at most ", kMaxTag, " bytes"));
  }
  out.tag = d["tag"].get<std::string>();
  if (!d["item_size"].is_number_integer() || d["item_size"].get<int64_t>() < 1 ||
      d["item_size"].get<int64_t>() > (int64_t{1} << 31)) {
    return bad("needs an \"item_size\" in [1, 2^31]");
  }
  out.item_size = d["item_size"].get<int64_t>();
  if (!d["shape"].is_array() || d["shape"].size() > kMaxRank) {
    return bad(absl::StrCat("needs a \"shape\" of at most ", kMaxRank, " dims"));
  }
  for (const Json& s : d["shape"]) {
    if (!s.is_number_integer() || s.get<int64_t>() < 0) return bad("has a bad \"shape\"");
    out.shape.push_back(s.get<int64_t>());
  }
  const std::optional<int64_t> bytes = Bytes(out.shape, out.item_size);
  if (!bytes) return bad("has a \"shape\" too large");
  if (!d["base64"].is_string() ||
      !absl::Base64Unescape(d["base64"].get_ref<const std::string&>(), &out.bytes)) {
    return bad("needs \"base64\" text");
  }
  if (static_cast<int64_t>(out.bytes.size()) != *bytes) {
    return bad(
        absl::StrCat("holds ", out.bytes.size(), " bytes, not shape x item_size = ", *bytes));
  }
  return std::optional<OpaqueData>(std::move(out));
}

// Whether `v` is nested as shape[dim:] with scalar leaves (added to `leaves` in order).
bool Collect(const Json& v, const std::vector<int64_t>& shape, size_t dim,
             std::vector<const Json*>* leaves) {
  if (dim == shape.size()) {
    leaves->push_back(&v);
    return !v.is_array() && !v.is_object() && !v.is_null();
  }
  if (!v.is_array() || static_cast<int64_t>(v.size()) != shape[dim]) return false;
  return std::all_of(v.begin(), v.end(),
                     [&](const Json& c) { return Collect(c, shape, dim + 1, leaves); });
}

// The shape of a rectangular nested array with scalar leaves (its leaves in `leaves`), or
// nullopt (ragged, null or object leaves, more than kMaxRank dims).
std::optional<std::vector<int64_t>> Rectangular(const Json& value,
                                                std::vector<const Json*>* leaves) {
  std::vector<int64_t> shape;
  for (const Json* cur = &value; cur->is_array(); cur = &cur->front()) {
    if (shape.size() == kMaxRank) return std::nullopt;
    shape.push_back(static_cast<int64_t>(cur->size()));
    if (cur->empty()) break;
  }
  if (!Collect(value, shape, 0, leaves)) return std::nullopt;  // bounded by kMaxRank
  return shape;
}

bool FitsInt64(const Json& j) {
  return j.is_number_integer() &&
         (!j.is_number_unsigned() ||
          j.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

}  // namespace

Json NestFlat(std::vector<Json> flat, const std::vector<int64_t>& shape) {
  size_t pos = 0;
  return Nest(flat, shape, 0, &pos);
}

absl::StatusOr<Json> DecodeOpaque(const OpaqueData& data) {
  if (data.shape.size() > kMaxRank) {
    return absl::InvalidArgumentError(absl::StrCat("opaque data of ", data.shape.size(),
                                                   " dims; HDF5 has at most ", kMaxRank));
  }
  const std::optional<int64_t> bytes = Bytes(data.shape, data.item_size);
  if (data.item_size < 1 || !bytes || *bytes != static_cast<int64_t>(data.bytes.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "opaque data of shape [", absl::StrJoin(data.shape, ", "), "] and item size ",
        data.item_size, " with ", data.bytes.size(), " bytes"));
  }
  std::optional<Dtype> d = ParseTag(data.tag);
  if (!d || d->item_size() != data.item_size) return Describe(data);
  std::vector<Json> flat;
  flat.reserve(static_cast<size_t>(*bytes / data.item_size));
  const auto* p = reinterpret_cast<const unsigned char*>(data.bytes.data());
  for (int64_t at = 0; at < *bytes; at += data.item_size) {
    std::optional<Json> e = Element(*d, p + at);
    if (!e) return Describe(data);
    flat.push_back(*std::move(e));
  }
  return NestFlat(std::move(flat), data.shape);
}

absl::StatusOr<std::optional<OpaqueData>> EncodeOpaque(const Json& value) {
  if (value.is_object() && value.size() == 1 && value.contains(kDescription) &&
      value[kDescription].is_object()) {
    return FromDescription(value[kDescription]);
  }
  // A string stays a string dataset; null and other objects are no rectangular array.
  if (value.is_string()) return std::optional<OpaqueData>();
  std::vector<const Json*> leaves;
  std::optional<std::vector<int64_t>> shape = Rectangular(value, &leaves);
  if (!shape) return std::optional<OpaqueData>();
  OpaqueData out;
  out.shape = *shape;
  size_t bools = 0, strings = 0, ints = 0;
  bool exact_in_double = true;  // every integer within 2^53
  for (const Json* j : leaves) {
    bools += j->is_boolean();
    strings += j->is_string();
    if (j->is_number_integer()) {
      ++ints;
      exact_in_double = exact_in_double && std::fabs(j->get<double>()) <= 9007199254740992.0;
    }
  }
  const size_t n = leaves.size();
  out.item_size = 8;  // all but "|b1" and "<U"
  if (n == 0) {  // numpy: an empty list is float64
    out.tag = "NUMPY:<f8";
  } else if (strings == n) {
    std::vector<std::vector<uint32_t>> texts;
    size_t longest = 1;  // numpy: at least <U1
    for (const Json* j : leaves) {
      std::optional<std::vector<uint32_t>> cps = CodePoints(j->get_ref<const std::string&>());
      if (!cps) return std::optional<OpaqueData>();
      longest = std::max(longest, cps->size());
      texts.push_back(*std::move(cps));
    }
    out.tag = absl::StrCat(kPrefix, "<U", longest);
    out.item_size = static_cast<int64_t>(4 * longest);
    for (const auto& t : texts) {
      for (size_t i = 0; i < longest; ++i) StoreLe(out.bytes, i < t.size() ? t[i] : 0, 4);
    }
  } else if (bools == n) {
    out.tag = absl::StrCat(kPrefix, "|b1");
    out.item_size = 1;
    for (const Json* j : leaves) out.bytes.push_back(j->get<bool>() ? 1 : 0);
  } else if (strings > 0 || bools > 0) {
    return std::optional<OpaqueData>();  // numpy would turn them into strings or numbers
  } else if (ints == n && std::all_of(leaves.begin(), leaves.end(),
                                      [](const Json* j) { return FitsInt64(*j); })) {
    out.tag = absl::StrCat(kPrefix, "<i8");
    for (const Json* j : leaves) StoreLe(out.bytes, static_cast<uint64_t>(j->get<int64_t>()), 8);
  } else if (ints == n && out.shape.empty()) {  // a scalar in (2^63, 2^64): numpy's uint64
    out.tag = absl::StrCat(kPrefix, "<u8");
    StoreLe(out.bytes, leaves[0]->get<uint64_t>(), 8);
  } else if (exact_in_double) {  // numbers with a float, or a large integer: float64
    out.tag = absl::StrCat(kPrefix, "<f8");
    for (const Json* j : leaves) StoreLe(out.bytes, absl::bit_cast<uint64_t>(j->get<double>()), 8);
  } else {
    return std::optional<OpaqueData>();  // float64 would change an integer past 2^53
  }
  return std::optional<OpaqueData>(std::move(out));
}

}  // namespace td::h5::internal
