// The conformance suite's fixture: the reference content every backend holds, the comparison
// helpers and the typed test suite itself (TYPED_TEST_SUITE_P). The tests are in
// conformance_dict.h, conformance_ops.h and conformance_parity.h; conformance_suite.h registers
// them, and is what a backend's test includes. See NOTE [ Storage interface ] in
// td/core/storage.h for the rules the suite checks.
//
// How a backend joins
// -------------------
// 1. Write a traits type (in tests/conformance/<backend>_conformance_test.cc, or beside the
//    backend) with:
//      static constexpr const char* kBackendId;  // what TensorDict::backend() reports
//      static td::Capabilities capabilities();   // what the backend declares; must equal
//                                                // storage().capabilities() of Make()'s result
//      static td::TensorDict Make(const td::TensorDict& content);
//                                                // a NEW TensorDict on the backend holding
//                                                // exactly `content`
//    The suite calls Make with two contents, the same for every backend. ReferenceContent(),
//    which most tests use: batch size B = [4, 3, 2, 1], keys "a" float32 (*B, 5), "b" float32
//    (*B, 10), "c" int64 (*B, 3) and ("n", "inner") float32 (*B, 2) (sub-TensorDict "n" with
//    batch size B), inserted in that order. DeepContent(): levels one, two and three below the
//    root with batch dims of their own (DeepLevels()).
// 2. Instantiate the suite and add a cc_test depending on //tests/conformance:suite:
//      using MyTypes = ::testing::Types<MyTraits>;
//      INSTANTIATE_TYPED_TEST_SUITE_P(My, Conformance, MyTypes);
// 3. A test that needs a capability the backend lacks is skipped with GTEST_SKIP() naming the
//    backend and the missing capability (never silently passed): declare capabilities honestly.
//    Error paths are checked on every backend.
// Every test compares the backend's results with the same operation on the dense
// ReferenceContent(), so "conforms" means "gives the dense answer".
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_replace.h"
#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/consolidate/consolidate.h"
#include "td/core/stack.h"
#include "td/core/storage.h"
#include "td/core/tensordict.h"
#include "td/core/testing.h"

namespace td {
namespace conformance {

// The batch size of the reference content.
inline std::vector<int64_t> Batch() { return {4, 3, 2, 1}; }

// Batch() followed by `feature` dims.
inline std::vector<int64_t> Shape(std::initializer_list<int64_t> feature) {
  std::vector<int64_t> s = Batch();
  s.insert(s.end(), feature.begin(), feature.end());
  return s;
}

// Deterministic, distinct values of the given shape and dtype.
inline at::Tensor Values(at::IntArrayRef shape, double scale, double offset,
                         at::ScalarType dtype = at::kFloat) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return (at::arange(n, at::kDouble) * scale + offset).to(dtype).view(shape);
}

// The logical content every backend's traits Make() must hold for most tests (see the top of
// this file).
inline TensorDict ReferenceContent() {
  TensorDict t({}, Batch());
  t.set("a", Values(Shape({5}), 0.5, -10.0));
  t.set("b", Values(Shape({10}), -0.25, 3.0));
  t.set("c", Values(Shape({3}), 1, 7, at::kLong));
  t.set({"n", "inner"}, Values(Shape({2}), 2.0, 1000.0));
  return t;
}

// The levels below the root of DeepContent() and the batch dims each has beyond the root's.
inline const std::vector<std::pair<NestedKey, std::vector<int64_t>>>& DeepLevels() {
  static const auto* levels = new std::vector<std::pair<NestedKey, std::vector<int64_t>>>{
      {"d", {2}},
      {{"d", "e"}, {2, 3}},
      {{"d", "e", "f"}, {2, 3, 2}},
      {{"d", "g"}, {2}},  // no dims beyond its parent's
  };
  return *levels;
}

// The second content every backend's traits Make() must hold: batch size B = [4, 3, 2, 1],
// "a" float32 (*B, 5), then "d" [*B, 2] holding "x" float32 (*B, 2, 3), ("d", "e") [*B, 2, 3]
// holding "y" int64 (*B, 2, 3, 2), ("d", "e", "f") [*B, 2, 3, 2] holding "z" float32
// (*B, 2, 3, 2, 4), and ("d", "g") [*B, 2] holding "w" float32 of exactly its batch size.
inline TensorDict DeepContent() {
  TensorDict t({}, Batch());
  t.set("a", Values(Shape({5}), 0.5, -10.0));
  t.set("d", TensorDict({}, Shape({2})));
  t.set({"d", "x"}, Values(Shape({2, 3}), 0.25, 100.0));
  t.set({"d", "e"}, TensorDict({}, Shape({2, 3})));
  t.set({"d", "e", "y"}, Values(Shape({2, 3, 2}), 1, -50, at::kLong));
  t.set({"d", "e", "f"}, TensorDict({}, Shape({2, 3, 2})));
  t.set({"d", "e", "f", "z"}, Values(Shape({2, 3, 2, 4}), -0.5, 2000.0));
  t.set({"d", "g"}, TensorDict({}, Shape({2})));
  t.set({"d", "g", "w"}, Values(Shape({2}), 3.0, 7.0));
  return t;
}

// Every level of `td` (holding DeepContent() or the result of an operation on it) has the batch
// size of the root followed by its own dims (DeepLevels()), and each of its leaves starts with
// it. The dense answer alone cannot show this: a core bug gives both sides one wrong batch size.
inline void ExpectDeepLevels(const TensorDict& td) {
  for (const auto& [key, extra] : DeepLevels()) {
    std::vector<int64_t> want = td.batch_size().vec();
    want.insert(want.end(), extra.begin(), extra.end());
    const TensorDict level = td.get_tensordict(key);
    EXPECT_EQ(level.batch_size(), at::IntArrayRef(want)) << "level " << key.repr();
    level.for_each_entry([&](const std::string& k, const Value& v) {
      if (!v.is_tensor()) return;
      const at::IntArrayRef shape = v.tensor().sizes();
      EXPECT_TRUE(shape.size() >= want.size() &&
                  std::equal(want.begin(), want.end(), shape.begin()))
          << "leaf " << k << " of level " << key.repr() << " has shape " << shape
          << ", which does not start with the level's batch size " << level.batch_size();
    });
  }
}

// Throws (failing the test with the difference) unless `actual` has the same batch size, keys,
// dtypes, shapes and values as `expected`.
inline void ExpectSame(const TensorDict& actual, const TensorDict& expected) {
  EXPECT_EQ(actual.batch_size(), expected.batch_size());
  try {
    assert_allclose(actual, expected, AllCloseOptions().rtol(0).atol(0));
  } catch (const c10::Error& e) {
    ADD_FAILURE() << "TensorDicts differ: " << e.what_without_backtrace();
  }
}

// For transcendental functions (exp, sigmoid, ...): ATen's vectorised and scalar kernels may
// differ in the last bits, and which one runs depends on the memory layout (a transposed view, an
// offset into a consolidated buffer) and on the LibTorch version; values must agree to rounding.
inline void ExpectClose(const TensorDict& actual, const TensorDict& expected) {
  EXPECT_EQ(actual.batch_size(), expected.batch_size());
  try {
    assert_allclose(actual, expected, AllCloseOptions().rtol(1e-6).atol(1e-30));
  } catch (const c10::Error& e) {
    ADD_FAILURE() << "TensorDicts differ beyond rounding: " << e.what_without_backtrace();
  }
}

template <class Traits>
class Conformance : public ::testing::Test {
 protected:
  static TensorDict Make() { return Traits::Make(ReferenceContent()); }
  static TensorDict MakeDeep() { return Traits::Make(DeepContent()); }
  static bool Has(Capability c) { return Traits::capabilities().has(c); }
};

TYPED_TEST_SUITE_P(Conformance);

// Skips the rest of the test, naming the backend and the capability it lacks.
#define TD_CONFORMANCE_REQUIRE(cap)                                                        \
  do {                                                                                     \
    if (!TypeParam::capabilities().has(::td::Capability::cap)) {                           \
      GTEST_SKIP() << "the '" << TypeParam::kBackendId << "' backend lacks " #cap " ("     \
                   << ::td::CapabilityName(::td::Capability::cap) << ")";                  \
    }                                                                                      \
  } while (0)

}  // namespace conformance
}  // namespace td
