#include "td/io/utils.h"

#include <ATen/ops/isclose.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/zeros.h>

#include <sstream>
#include <stdexcept>

#include "absl/container/flat_hash_set.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"

namespace td {
namespace {

// torch.testing.assert_close's default (rtol, atol) for a dtype.
std::pair<double, double> DefaultTolerance(at::ScalarType t) {
  switch (t) {
    case at::kHalf:
      return {1e-3, 1e-5};
    case at::kBFloat16:
      return {1.6e-2, 1e-5};
    case at::kFloat:
    case at::kComplexFloat:
      return {1.3e-6, 1e-5};
    case at::kDouble:
    case at::kComplexDouble:
      return {1e-7, 1e-7};
    default:
      return {0.0, 0.0};
  }
}

std::string Shape(const at::Tensor& t) {
  std::ostringstream os;
  os << t.sizes();
  return os.str();
}

}  // namespace

bool default_is_leaf(const Value& value) { return value.is_tensor(); }

bool is_leaf_nontensor(const Value& value) { return !value.is_tensordict(); }

NestedKey unravel_key(const std::vector<NestedKey>& parts) {
  if (parts.empty()) TD_FAIL(ValueError, "unravel_key: a key needs at least one part");
  std::vector<std::string> flat;
  for (const NestedKey& p : parts) flat.insert(flat.end(), p.begin(), p.end());
  return NestedKey(flat);
}

std::vector<NestedKey> unravel_key_list(const std::vector<std::vector<NestedKey>>& keys) {
  std::vector<NestedKey> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(unravel_key(k));
  return out;
}

TensorDict merge_tensordicts(const std::vector<TensorDict>& tds, const MergeOptions& options) {
  if (tds.size() < 2) {
    TD_FAIL(ValueError, "merge_tensordicts: at least 2 TensorDicts must be given, got ", tds.size());
  }
  TensorDict out = tds.front().empty(/*recurse=*/true);
  const KeysOptions leaves = KeysOptions().include_nested(true).leaves_only(true);
  absl::flat_hash_set<NestedKey> done;
  for (const TensorDict& td : tds) {
    for (const NestedKey& key : td.keys(leaves)) {
      if (!done.insert(key).second) continue;
      auto per_key = options.callbacks().find(key);
      const MergeOptions::Callback& cb =
          per_key != options.callbacks().end() ? per_key->second : options.callback_exist();
      std::vector<at::Tensor> values;
      bool everywhere = true;
      for (const TensorDict& other : tds) {
        std::optional<Value> v = other.find(key);
        if (!v || !v->is_tensor()) {
          everywhere = false;
          break;
        }
        values.push_back(v->tensor());
      }
      if (cb && everywhere) {
        out.set(key, cb(values));
      } else {
        out.set(key, td.get_value(key));
      }
    }
  }
  return out;
}

bool assert_close(const TensorDict& actual, const TensorDict& expected,
                  const AssertCloseOptions& options) {
  const std::string msg = options.msg().empty() ? "" : options.msg() + ": ";
  if (actual.batch_size() != expected.batch_size()) {
    TD_FAIL(c10::Error, msg, "assert_close: batch sizes differ: ", actual.batch_size(), " vs ",
            expected.batch_size());
  }
  const KeysOptions leaves = KeysOptions().include_nested(true).leaves_only(true);
  const std::vector<NestedKey> ka = actual.keys(leaves), kb = expected.keys(leaves);
  const absl::flat_hash_set<NestedKey> sa(ka.begin(), ka.end()), sb(kb.begin(), kb.end());
  if (!options.intersection()) {
    for (const NestedKey& k : ka) {
      if (!sb.contains(k)) TD_FAIL(c10::Error, msg, "assert_close: key ", k.repr(), " is only in actual");
    }
    for (const NestedKey& k : kb) {
      if (!sa.contains(k)) TD_FAIL(c10::Error, msg, "assert_close: key ", k.repr(), " is only in expected");
    }
  }
  for (const NestedKey& k : ka) {
    if (!sb.contains(k)) continue;
    const Value a = actual.get_value(k), b = expected.get_value(k);
    if (a.kind() != b.kind()) {
      TD_FAIL(c10::Error, msg, "assert_close: key ", k.repr(), " is a ", a.kind(), " in actual and a ",
              b.kind(), " in expected");
    }
    if (a.is_non_tensor()) {
      if (a.non_tensor_data() != b.non_tensor_data()) {
        TD_FAIL(c10::Error, msg, "assert_close: key ", k.repr(), " differs: ", a.non_tensor().dump(),
                " vs ", b.non_tensor().dump());
      }
      continue;
    }
    const at::Tensor& x = a.tensor();
    const at::Tensor& y = b.tensor();
    if (x.scalar_type() != y.scalar_type()) {
      TD_FAIL(c10::Error, msg, "assert_close: key ", k.repr(), " has dtype ", x.scalar_type(),
              " in actual and ", y.scalar_type(), " in expected");
    }
    if (x.sizes() != y.sizes()) {
      TD_FAIL(c10::Error, msg, "assert_close: key ", k.repr(), " has shape ", Shape(x),
              " in actual and ", Shape(y), " in expected");
    }
    if (x.numel() == 0) continue;
    const auto [rtol0, atol0] = DefaultTolerance(x.scalar_type());
    const double rtol = options.rtol().value_or(rtol0), atol = options.atol().value_or(atol0);
    const at::Tensor yc = y.to(x.device());
    const bool inexact = at::isFloatingType(x.scalar_type()) || at::isComplexType(x.scalar_type());
    const at::Tensor close =
        inexact ? at::isclose(x, yc, rtol, atol, options.equal_nan()) : at::eq(x, yc);
    if (!close.all().item<bool>()) {
      const int64_t bad = close.logical_not().sum().item<int64_t>();
      std::string worst;
      if (x.scalar_type() != at::kBool) {
        const at::Tensor diff = inexact ? x.sub(yc).abs() : x.to(at::kDouble).sub(yc.to(at::kDouble)).abs();
        worst = c10::str(", largest absolute difference ", diff.masked_fill(close, 0).max().item<double>());
      }
      TD_FAIL(c10::Error, msg, "assert_close: key ", k.repr(), " (shape ", Shape(x), "): ", bad,
              " of ", x.numel(), " elements differ (rtol ", rtol, ", atol ", atol, ")", worst);
    }
  }
  return true;
}

namespace {

// A recursive-descent reader of TensorDict's repr (td/core/interop.cc prints it).
class ReprParser {
 public:
  explicit ReprParser(std::string_view s) : s_(s) {}

  TensorDict Level() {
    Expect("TensorDict(");
    Expect("fields={");
    std::vector<TensorDict::Item> items;
    while (true) {
      SkipSpace();
      if (Peek('}')) {
        ++pos_;
        break;
      }
      const size_t colon = s_.find(": ", pos_);
      if (colon == std::string_view::npos) Fail("'<key>: '");
      const std::string key(s_.substr(pos_, colon - pos_));
      pos_ = colon + 2;
      if (s_.substr(pos_, 7) == "Tensor(") {
        items.emplace_back(NestedKey(key), Leaf());
      } else if (s_.substr(pos_, 11) == "TensorDict(") {
        items.emplace_back(NestedKey(key), Level());
      } else {
        SkipEntry();  // non-tensor data, lazy stacks: not rebuilt (as upstream)
      }
      SkipSpace();
      if (Peek(',')) ++pos_;
    }
    Expect(",");
    Expect("batch_size=");
    const std::vector<int64_t> batch = Size();
    Expect(",");
    Expect("device=");
    const std::string device = Token(',');
    Expect(",");
    Expect("is_shared=");
    Token(')');
    Expect(")");
    std::optional<at::Device> dev;
    if (device != "None") dev = ParseDevice(device);
    return TensorDict(items, batch, dev);
  }

  void End() {
    SkipSpace();
    if (pos_ != s_.size()) Fail("the end of the text");
  }

 private:
  at::Tensor Leaf() {
    Expect("Tensor(");
    Expect("shape=");
    const std::vector<int64_t> shape = Size();
    Expect(",");
    Expect("device=");
    const at::Device device = ParseDevice(Token(','));
    Expect(",");
    Expect("dtype=");
    const std::string dtype = Token(',');
    std::optional<c10::ScalarType> t = ParseDtypeName(dtype);
    if (!t) Fail("a dtype such as torch.float32 (got '" + dtype + "')");
    Expect(",");
    Expect("is_shared=");
    Token(')');
    Expect(")");
    return at::zeros(shape, at::TensorOptions().dtype(*t).device(device));
  }

  std::vector<int64_t> Size() {
    Expect("torch.Size([");
    std::vector<int64_t> out;
    SkipSpace();
    while (!Peek(']')) {
      const std::string n = Token(',', ']');
      try {
        size_t used = 0;
        out.push_back(std::stoll(n, &used));
        if (used != n.size()) Fail("an integer dim (got '" + n + "')");
      } catch (const std::logic_error&) {
        Fail("an integer dim (got '" + n + "')");
      }
      SkipSpace();
      if (Peek(',')) ++pos_;
      SkipSpace();
    }
    Expect("])");
    return out;
  }

  at::Device ParseDevice(const std::string& text) {
    try {
      return at::Device(text);
    } catch (const c10::Error&) {
      Fail("a device (got '" + text + "')");
    }
  }

  // Skips "<Type>(...)" up to its matching parenthesis.
  void SkipEntry() {
    const size_t open = s_.find('(', pos_);
    if (open == std::string_view::npos) Fail("'<Type>(' of an entry");
    int depth = 0;
    for (size_t i = open; i < s_.size(); ++i) {
      if (s_[i] == '(') ++depth;
      if (s_[i] == ')' && --depth == 0) {
        pos_ = i + 1;
        return;
      }
    }
    Fail("the ')' closing the entry");
  }

  // The text up to (not including) `stop` or `stop2`, trimmed.
  std::string Token(char stop, char stop2 = '\0') {
    SkipSpace();
    size_t end = pos_;
    while (end < s_.size() && s_[end] != stop && (stop2 == '\0' || s_[end] != stop2)) ++end;
    if (end == s_.size()) Fail(std::string("'") + stop + "'");
    std::string out(s_.substr(pos_, end - pos_));
    while (!out.empty() && out.back() == ' ') out.pop_back();
    pos_ = end;
    return out;
  }

  void Expect(std::string_view lit) {
    SkipSpace();
    if (s_.substr(pos_, lit.size()) != lit) Fail("'" + std::string(lit) + "'");
    pos_ += lit.size();
  }
  bool Peek(char c) const { return pos_ < s_.size() && s_[pos_] == c; }
  void SkipSpace() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  [[noreturn]] void Fail(const std::string& expected) const {
    TD_FAIL(ValueError, "parse_tensor_dict_string: expected ", expected, " at offset ", pos_, ": '",
            s_.substr(pos_, 40), "'");
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

TensorDict parse_tensor_dict_string(std::string_view repr) {
  ReprParser p(repr);
  TensorDict out = p.Level();
  p.End();
  return out;
}

}  // namespace td
