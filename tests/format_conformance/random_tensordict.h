// The TensorDicts of the format conformance suite (format_conformance_test.cc): seeded random
// ones within what a driver holds (format::Traits), one it must refuse, one nested to a depth,
// and the comparison of what came back with what was written.
#pragma once

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "td/core/dtype.h"
#include "td/core/tensordict.h"
#include "td/format/format.h"

namespace td {
namespace test {

inline bool Holds(const format::Traits& traits, c10::ScalarType dtype) {
  return std::find(traits.dtypes.begin(), traits.dtypes.end(), dtype) != traits.dtypes.end();
}

// The dtype as an error message names it: Python's name without "torch." ("bfloat16").
inline std::string DtypeWord(c10::ScalarType dtype) { return DtypeRepr(dtype).substr(6); }

// Values of `dtype` and `shape`, seeded: small integers (every dtype holds them exactly) scaled
// by 1/4 for floating dtypes, so no format's conversion rounds them; bools alternate.
inline at::Tensor RandomValues(c10::ScalarType dtype, at::IntArrayRef shape, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  at::Tensor ints = at::randint(0, 8, shape, gen, at::TensorOptions().dtype(at::kLong));
  if (dtype == at::kBool) return ints.remainder(2).to(at::kBool);
  if (at::isFloatingType(dtype) || at::isComplexType(dtype)) {
    at::Tensor f = ints.to(at::kFloat).div(4).sub(0.5);
    if (at::isComplexType(dtype)) f = at::complex(f, f.neg().add(0.25));
    return f.to(dtype);
  }
  return ints.to(dtype);
}

// A JSON value of one of the shapes non-tensor data takes: a string, an integer, a number with
// an exact binary form, a bool, null, a list of integers, a dict.
inline nlohmann::json RandomJson(std::mt19937_64& rng) {
  switch (rng() % 7) {
    case 0: return "s" + std::to_string(rng() % 100);
    case 1: return static_cast<int64_t>(rng() % 1000) - 500;
    case 2: return static_cast<double>(rng() % 64) / 8.0 + 0.5;
    case 3: return rng() % 2 == 0;
    case 4: return nullptr;
    case 5: return nlohmann::json::array({rng() % 9, rng() % 9, rng() % 9});
    default: return nlohmann::json{{"k", rng() % 9}, {"v", "x"}};
  }
}

// One value per element of `batch`, as nested lists (a NonTensorStack's data).
inline nlohmann::json RandomStackValues(std::mt19937_64& rng, at::IntArrayRef batch) {
  if (batch.empty()) return "v" + std::to_string(rng() % 10);
  nlohmann::json out = nlohmann::json::array();
  for (int64_t i = 0; i < batch[0]; ++i) out.push_back(RandomStackValues(rng, batch.slice(1)));
  return out;
}

namespace detail {

inline void Fill(TensorDict& level, std::mt19937_64& rng, const format::Traits& traits, int depth,
                 int min_leaves, int* counter) {
  const std::vector<int64_t> batch = level.batch_size().vec();
  const int entries = min_leaves + static_cast<int>(rng() % 4);
  for (int i = 0; i < entries; ++i) {
    const std::string key = "k" + std::to_string((*counter)++);
    const uint64_t pick = rng() % 10;
    if (pick < 6 || i < min_leaves) {
      std::vector<int64_t> shape = batch;
      for (uint64_t extra = rng() % 3; extra > 0; --extra) shape.push_back(1 + rng() % 3);
      const c10::ScalarType dtype = traits.dtypes[rng() % traits.dtypes.size()];
      level.set(key, RandomValues(dtype, shape, rng()));
    } else if (pick < 8 && depth < 3) {
      std::vector<int64_t> sub = batch;
      if (rng() % 2 == 0) sub.push_back(1 + rng() % 3);
      TensorDict child({}, sub);
      Fill(child, rng, traits, depth + 1, 1, counter);
      level.set(key, child);
    } else if (traits.non_tensor) {
      const uint64_t kind = rng() % 3;
      if (kind == 0 && traits.non_tensor_stack && !batch.empty()) {
        level.set(key, NonTensorData::stack(RandomStackValues(rng, batch)));
      } else if (kind == 1) {
        level.set(key, NonTensorData::meta(RandomJson(rng)));
      } else {
        level.set(key, NonTensorData(RandomJson(rng)));
      }
    }
  }
}

}  // namespace detail

// A seeded random TensorDict within `traits`: batch size of 0-2 dims (sizes 0-3), at least
// `min_leaves` leaves at the root, nested levels to depth 3 (each may add a batch dim), leaves
// of the dtypes it holds with 0-2 dims past the batch, non-tensor data of the kinds it holds,
// dim names where it keeps them.
inline TensorDict RandomTensorDict(std::mt19937_64& rng, const format::Traits& traits,
                                   int min_leaves = 1) {
  std::vector<int64_t> batch;
  for (uint64_t dims = rng() % 3; dims > 0; --dims) batch.push_back(rng() % 4);
  TensorDict td({}, batch);
  int counter = 0;
  detail::Fill(td, rng, traits, 0, min_leaves, &counter);
  if (traits.names && !batch.empty() && rng() % 2 == 0) {
    DimNames names;
    for (size_t i = 0; i < batch.size(); ++i) names.push_back("dim" + std::to_string(i));
    td.set_names(names);
  }
  return td;
}

// A TensorDict the driver must refuse: a leaf of the first dtype it does not hold, else a
// NonTensorStack where it holds none; nullopt when it holds both.
inline std::optional<TensorDict> RefusedTensorDict(const format::Traits& traits) {
  for (c10::ScalarType dtype : format::EveryDtype()) {
    if (!Holds(traits, dtype)) {
      return TensorDict({{"fine", at::zeros({2})}, {"odd_leaf", RandomValues(dtype, {2}, 1)}},
                        {2});
    }
  }
  if (!traits.non_tensor_stack) {
    return TensorDict({{"fine", at::zeros({2})},
                       {"odd_leaf", NonTensorData::stack(nlohmann::json::array({"a", "b"}))}},
                      {2});
  }
  return std::nullopt;
}

// `depth` levels below the root ({"n": {"n": ...}}), each holding a leaf "x" of its depth.
inline TensorDict Nested(int depth) {
  TensorDict root({{"x", at::zeros({1})}}, {1});
  TensorDict level = root;
  for (int i = 1; i <= depth; ++i) {
    TensorDict child({{"x", at::full({1}, static_cast<double>(i))}}, {1});
    level.set("n", child);
    level = level.get_tensordict("n");
  }
  return root;
}

namespace detail {

inline std::string KindOf(const NonTensorData& d, const format::Traits& traits) {
  if (d.kind == NonTensorData::Kind::kStack) return "NonTensorStack";
  if (d.kind == NonTensorData::Kind::kMetaData && traits.meta_data) return "MetaData";
  return "NonTensorData";
}

inline void Diff(const TensorDict& want, const TensorDict& got, const format::Traits& traits,
                 const std::string& where, std::ostringstream& out) {
  if (want.batch_size() != got.batch_size()) {
    out << where << ": batch size " << SizeRepr(got.batch_size()) << ", wrote "
        << SizeRepr(want.batch_size()) << "\n";
    return;
  }
  if (traits.names && want.names() != got.names()) out << where << ": other dim names\n";
  std::vector<TensorDict::Item> w = want.items(), g = got.items();
  if (!traits.keeps_key_order) {
    auto by_key = [](const TensorDict::Item& a, const TensorDict::Item& b) {
      return a.first.repr() < b.first.repr();
    };
    std::sort(w.begin(), w.end(), by_key);
    std::sort(g.begin(), g.end(), by_key);
  }
  std::vector<std::string> wk, gk;
  for (const auto& [k, v] : w) wk.push_back(k.repr());
  for (const auto& [k, v] : g) gk.push_back(k.repr());
  if (wk != gk) {
    out << where << ": keys [";
    for (const std::string& k : gk) out << k << " ";
    out << "], wrote [";
    for (const std::string& k : wk) out << k << " ";
    out << "]\n";
    return;
  }
  for (size_t i = 0; i < w.size(); ++i) {
    const std::string at = where + "/" + wk[i];
    const Value& a = w[i].second;
    const Value& b = g[i].second;
    if (a.is_tensor() != b.is_tensor() || a.is_tensordict() != b.is_tensordict()) {
      out << at << ": read back a " << b.kind() << ", wrote a " << a.kind() << "\n";
    } else if (a.is_tensor()) {
      const at::Tensor& x = a.tensor();
      const at::Tensor& y = b.tensor();
      if (x.scalar_type() != y.scalar_type() || x.sizes() != y.sizes()) {
        out << at << ": " << DtypeRepr(y.scalar_type()) << " " << SizeRepr(y.sizes())
            << ", wrote " << DtypeRepr(x.scalar_type()) << " " << SizeRepr(x.sizes()) << "\n";
      } else if (!y.is_cpu()) {
        out << at << ": read back on " << y.device() << "\n";
      } else {
        // Compared as float64 (complex: its real view): float8 has no equality kernel.
        auto wide = [](const at::Tensor& t) {
          return at::isComplexType(t.scalar_type()) ? at::view_as_real(t.to(at::kComplexDouble))
                                                    : t.to(at::kDouble);
        };
        if (!at::equal(wide(x), wide(y))) out << at << ": other values\n";
      }
    } else if (a.is_tensordict()) {
      Diff(a.tensordict(), b.tensordict(), traits, at, out);
    } else {
      const std::string ka = KindOf(a.non_tensor_data(), traits);
      const std::string kb = KindOf(b.non_tensor_data(), format::Traits{});
      if (ka != kb || a.non_tensor() != b.non_tensor()) {
        out << at << ": " << kb << " " << b.non_tensor().dump() << ", wrote " << ka << " "
            << a.non_tensor().dump() << "\n";
      }
    }
  }
}

}  // namespace detail

// "" when `got` holds what `want` holds within `traits` (batch sizes, keys, dtypes, shapes,
// values, non-tensor kinds and values, dim names where kept); else one line per difference.
inline std::string Difference(const TensorDict& want, const TensorDict& got,
                              const format::Traits& traits) {
  std::ostringstream out;
  detail::Diff(want, got, traits, "", out);
  return out.str();
}

}  // namespace test
}  // namespace td
