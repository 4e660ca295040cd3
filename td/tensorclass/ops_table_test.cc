// Every row of the op table (td/core/ops.def, NOTE [ The op table ]) called on a TensorDict and
// on a TensorClass holding the same fields, with the row's SAMPLE arguments: the class must
// return the class (in-place ops: the same object), hold the TensorDict's result, and throw the
// same error type where the TensorDict throws. Rows marked DICT are TensorDict only.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "td/compat/torch.h"
#include "td/core/tensordict.h"
#include "td/tensorclass/tensorclass.h"

namespace td {
namespace {

class Fields : public TensorClass<Fields> {
 public:
  TD_TENSORCLASS(Fields, (at::Tensor, obs), (at::Tensor, reward), (TensorDict, extra),
                 (std::string, note))
};

Fields Make(double base) {
  return Fields(at::arange(12.0).view({4, 3}) / 10 + base, at::arange(4.0) / 4 + base,
                TensorDict({{"z", at::full({4, 2}, base)}}, {4}), "hi", {4});
}

// Equal values (NaN equal to NaN). complex32 and the wide unsigned dtypes (uint16 ...) have few
// LibTorch kernels: they are compared after a cast to a wider dtype (exact for these values).
bool SameValues(const at::Tensor& x, const at::Tensor& y) {
  if (x.is_floating_point()) return at::allclose(x, y, 0, 0, /*equal_nan=*/true);
  if (x.scalar_type() == at::kComplexHalf) {
    return at::allclose(x.to(at::kComplexFloat), y.to(at::kComplexFloat), 0, 0, true);
  }
  for (int bits : {16, 32, 64}) {
    if (compat::UnsignedDtype(bits) == x.scalar_type()) {
      return at::equal(x.to(at::kDouble), y.to(at::kDouble));
    }
  }
  return at::equal(x, y);
}

// Same structure and values (NaN equal to NaN), batch sizes included.
void ExpectSame(const TensorDict& a, const TensorDict& b, const std::string& what) {
  EXPECT_EQ(a.batch_size(), b.batch_size()) << what;
  const KeysOptions all = KeysOptions().include_nested(true).leaves_only(true).sort(true);
  ASSERT_EQ(a.keys(all), b.keys(all)) << what;
  for (const NestedKey& k : a.keys(all)) {
    const Value va = a.get_value(k);
    const Value vb = b.get_value(k);
    ASSERT_EQ(va.kind(), vb.kind()) << what << " " << k;
    if (va.is_tensor()) {
      const at::Tensor& x = va.tensor();
      const at::Tensor& y = vb.tensor();
      ASSERT_EQ(x.sizes(), y.sizes()) << what << " " << k;
      ASSERT_EQ(x.dtype(), y.dtype()) << what << " " << k;
      EXPECT_TRUE(SameValues(x, y)) << what << " " << k;
    } else if (va.is_non_tensor()) {
      EXPECT_EQ(va.non_tensor(), vb.non_tensor()) << what << " " << k;
    }
  }
}
void ExpectSame(const at::Tensor& a, const at::Tensor& b, const std::string& what) {
  ASSERT_EQ(a.defined(), b.defined()) << what;
  if (a.defined()) {
    EXPECT_TRUE(at::allclose(a, b, 0, 0, true)) << what;
  }
}
void ExpectSame(const Value& a, const Value& b, const std::string& what) {
  ASSERT_EQ(a.kind(), b.kind()) << what;
  if (a.is_tensor()) ExpectSame(a.tensor(), b.tensor(), what);
  if (a.is_tensordict()) ExpectSame(a.tensordict(), b.tensordict(), what);
  if (a.is_non_tensor()) {
    EXPECT_EQ(a.non_tensor(), b.non_tensor()) << what;
  }
}
void ExpectSame(const std::optional<Value>& a, const std::optional<Value>& b,
                const std::string& what) {
  ASSERT_EQ(a.has_value(), b.has_value()) << what;
  if (a) {
    ExpectSame(*a, *b, what);
  }
}
void ExpectSame(const TensorDict::Item& a, const TensorDict::Item& b, const std::string& what) {
  EXPECT_EQ(a.first, b.first) << what;
  ExpectSame(a.second, b.second, what);
}
void ExpectSame(const c10::IValue& a, const c10::IValue& b, const std::string& what) {
  if (a.isList()) {  // tolist: lists of dicts
    ASSERT_TRUE(b.isList()) << what;
    ASSERT_EQ(a.toListRef().size(), b.toListRef().size()) << what;
    for (size_t i = 0; i < a.toListRef().size(); ++i) {
      ExpectSame(a.toListRef()[i], b.toListRef()[i], what);
    }
    return;
  }
  ExpectSame(TensorDict::from_ivalue(a), TensorDict::from_ivalue(b), what);
}
void ExpectSame(const TensorMap& a, const TensorMap& b, const std::string& what) {
  ASSERT_EQ(a.keys(), b.keys()) << what;
  for (const auto& item : a) ExpectSame(item.value(), b[item.key()], what);
}
void ExpectSame(const StateDict& a, const StateDict& b, const std::string& what) {
  ExpectSame(a.tensors, b.tensors, what);
}
template <class T>
void ExpectSame(const T& a, const T& b, const std::string& what) {
  EXPECT_EQ(a, b) << what;
}
template <class T>
void ExpectSame(const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ExpectSame(a[i], b[i], what);
}
// A TensorClass result against the TensorDict one.
void ExpectSame(const TensorDict& a, const Fields& b, const std::string& what) {
  ExpectSame(a, b.tensordict(), what);
}
void ExpectSame(const std::vector<TensorDict>& a, const std::vector<Fields>& b,
                const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) ExpectSame(a[i], b[i].tensordict(), what);
}
void ExpectSame(const ValuesIndices& a, const internal::tensorclass::ValuesIndicesOf<Fields>& b,
                const std::string& what) {
  ExpectSame(a.values, b.values.tensordict(), what);
  ExpectSame(a.indices, b.indices.tensordict(), what);
}

// The TensorDict of either.
const TensorDict& plain(const TensorDict& t) { return t; }
const TensorDict& plain(const Fields& t) { return t.tensordict(); }

class OpsTableTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = std::filesystem::temp_directory_path() / ("td_ops_" + std::to_string(::getpid())); }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  // A fresh directory name for each memmap call.
  std::string dir() { return (dir_ / std::to_string(next_++)).string(); }

  // Runs `call(self, operand)` on a TensorDict and on a Fields built from the same values and
  // compares the two outcomes.
  template <class Call>
  void Check(const char* kind, const char* name, Call call) {
    SCOPED_TRACE(std::string(kind) + " " + name);
    ++rows_;
    TensorDict td = Make(0.5).tensordict().clone();
    const TensorDict td_o = Make(1.5).tensordict().clone();
    Fields tc = Fields::wrap(Make(0.5).tensordict().clone());
    const Fields tc_o = Fields::wrap(Make(1.5).tensordict().clone());
    using R = decltype(call(tc, tc_o));
    const std::string k = kind;
    if (k == "OUT" || k == "CHECKED") static_assert_kind<R, Fields>(name);
    if (k == "LIST") static_assert_kind<R, std::vector<Fields>>(name);
    if (k == "PAIR") static_assert_kind<R, internal::tensorclass::ValuesIndicesOf<Fields>>(name);
    std::string td_error, tc_error;
    try {
      if constexpr (std::is_void_v<R>) {
        call(td, td_o);
        call(tc, tc_o);
      } else if constexpr (std::is_lvalue_reference_v<R>) {
        call(td, td_o);
        auto& r = call(tc, tc_o);
        EXPECT_EQ(static_cast<const void*>(&r), static_cast<const void*>(&tc))
            << name << " in place must return the object it was called on";
      } else {
        auto a = call(td, td_o);
        auto b = call(tc, tc_o);
        if constexpr (std::is_same_v<decltype(b), Fields>) {
          // Uninitialised memory: compare the structure and shapes only.
          if (std::string(name) == "new_empty") {
            a.zero_();
            b.zero_();
          }
        }
        // repr is text; data_ptr gives the addresses of two different objects' leaves.
        if (std::string(name) != "repr" && std::string(name) != "data_ptr") {
          ExpectSame(a, b, name);
        }
      }
    } catch (const c10::Error& e) {
      td_error = typeid(e).name();
    }
    if (!td_error.empty()) {
      // The TensorDict threw (first call): the class must throw the same type.
      try {
        call(tc, tc_o);
      } catch (const c10::Error& e) {
        tc_error = typeid(e).name();
      }
      EXPECT_EQ(td_error, tc_error) << name;
      threw_.insert(name);
      return;
    }
    ExpectSame(td, tc.tensordict(), std::string(name) + " (the objects after the call)");
  }

  template <class R, class Want>
  static void static_assert_kind(const char* name) {
    EXPECT_TRUE((std::is_same_v<R, Want>)) << name << " returns the wrong type on a TensorClass";
  }

  std::filesystem::path dir_;
  int next_ = 0;
  int rows_ = 0;
  std::set<std::string> threw_;
};

TEST_F(OpsTableTest, EveryRowOnTensorDictAndTensorClass) {
  using at::indexing::Slice;
  const at::Tensor m = at::tensor({1, 0, 1, 1}).to(at::kBool);
  const at::Tensor ix = at::tensor({3, 1, 0, 2}, at::kLong);
  const at::Tensor x = at::full({4, 3}, 0.25);
  const std::vector<at::indexing::TensorIndex> slice{Slice(1, 3)};
  const TensorDict::LeafFn unary_fn = [](const at::Tensor& t) { return t * 2; };
  const TensorDict::BinaryLeafFn binary_fn = [](const at::Tensor& a, const at::Tensor& b) {
    return a + b;
  };
  const TensorDict::NaryLeafFn nary_fn = [](const std::vector<at::Tensor>& v) {
    return v[0] - v[1];
  };
  const TensorDict::NamedLeafFn named_fn = [](const NestedKey&, const at::Tensor& t) {
    return t + 1;
  };
  const TensorDict::NamedNaryLeafFn named_nary_fn = [](const NestedKey&,
                                                       const std::vector<at::Tensor>& v) {
    return v[0] * v[1];
  };
  int skipped = 0;
#define TD_RUN_(kind, name, sample)                                         \
  Check(#kind, #name, [&](auto& self, const auto& o) -> decltype(auto) {   \
    (void)o;                                                               \
    return self.name sample;                                               \
  });
#define TD_RUN_OUT(name, sample) TD_RUN_(OUT, name, sample)
#define TD_RUN_CHECKED(name, sample) TD_RUN_(CHECKED, name, sample)
#define TD_RUN_IN(name, sample) TD_RUN_(IN, name, sample)
#define TD_RUN_IN_FIELDS(name, sample) TD_RUN_(IN_FIELDS, name, sample)
#define TD_RUN_LIST(name, sample) TD_RUN_(LIST, name, sample)
#define TD_RUN_PAIR(name, sample) TD_RUN_(PAIR, name, sample)
#define TD_RUN_QUERY(name, sample) TD_RUN_(QUERY, name, sample)
#define TD_RUN_CUSTOM_CONST(name, sample) TD_RUN_(CUSTOM_CONST, name, sample)
#define TD_RUN_CUSTOM(name, sample) TD_RUN_(CUSTOM, name, sample)
#define TD_RUN_DICT(name, sample) ++skipped;
#define TD_RUN_DICT_CONST(name, sample) ++skipped;
#define TD_OP(kind, ret, name, params, args, sample) TD_RUN_##kind(name, sample)
#define TD_UNARY(name, kernel)                                                                \
  Check("OUT", #name, [&](auto& self, const auto&) { return self.name(); });                 \
  Check("IN", #name "_", [&](auto& self, const auto&) -> decltype(auto) { return self.name##_(); });
#include "td/core/ops.def"
  EXPECT_GT(rows_, 250);
  EXPECT_GT(skipped, 10);
  // The rows whose sample cannot run here, on either class: no accelerator (no pinned memory;
  // CPU tensors have no streams to record); bitwise ops on floating-point leaves; fliplr / rot90
  // need two batch dims (the fixture has one); backward needs a leaf that requires grad; the
  // fixture's leaves have different ranks, so they cannot be joined into one tensor; the
  // quantized dtype verbs pass only leaves already of their dtype (the fixture's are float);
  // uint16 / uint32 / uint64 need LibTorch 2.3.
  std::set<std::string> expected{"pin_memory", "pin_memory_", "record_stream", "cuda",
                                 "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
                                 "bitwise_and_", "bitwise_or_", "bitwise_xor_", "bitwise_not_",
                                 "fliplr", "rot90", "backward", "cat_from_tensordict",
                                 "stack_from_tensordict", "qint8", "qint32", "quint8",
                                 "quint4x2"};
  if (!compat::kHasWideUnsignedDtypes) expected.insert({"uint16", "uint32", "uint64"});
  EXPECT_EQ(threw_, expected);
}

// update (IN_FIELDS) refuses keys that are not fields before writing anything.
TEST_F(OpsTableTest, UpdateChecksFields) {
  Fields f = Make(0.5);
  const at::Tensor before = f.obs().clone();
  TensorDict other({{"obs", at::zeros({4, 3})}, {"stray", at::zeros({4})}}, {4});
  EXPECT_THROW(f.update(other), KeyError);
  EXPECT_TRUE(f.obs().equal(before));
  EXPECT_FALSE(f.tensordict().contains("stray"));
  TensorDict wrong_kind({{"note", at::zeros({4})}}, {4});
  EXPECT_THROW(f.update(wrong_kind), c10::TypeError);
  f.update(TensorDict({{"obs", at::zeros({4, 3})}}, {4}));
  EXPECT_TRUE(f.obs().equal(at::zeros({4, 3})));
}

}  // namespace
}  // namespace td
