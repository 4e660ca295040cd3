// td::attrs, td::to(td, attrs) and td::TensorAttrs on dense, lazy-stacked and memory-mapped
// TensorDicts: what the records hold, the per-leaf casts, the result's device, and every error.
#include "td/attrs/attrs.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/memmap/test_util.h"
#include "td/core/dtype.h"
#include "td/core/testing.h"

namespace td {
namespace {

using nlohmann::json;

// Batch [3]: "a" float32 [3, 4], "b" int32 [3], "n" (batch [3]) holding "x" float64 [3, 2], and
// non-tensor "s".
TensorDict Mixed() {
  return TensorDict({{"a", at::arange(12.0).view({3, 4}).to(at::kFloat)},
                     {"b", at::arange(3).to(at::kInt)},
                     {"n", {{"x", at::arange(6.0).view({3, 2}).to(at::kDouble)}}},
                     {"s", "a string!"}},
                    {3});
}

TensorAttrs Rec(std::optional<at::Device> device, std::optional<at::ScalarType> dtype) {
  TensorAttrs a;
  a.tgt_device = device;
  a.tgt_dtype = dtype;
  return a;
}

TensorAttrs Rec(std::optional<at::Device> device, std::optional<at::ScalarType> dtype,
                std::vector<int64_t> shape) {
  TensorAttrs a = Rec(device, dtype);
  a.tgt_shape = std::move(shape);
  return a;
}

TEST(AttrsTest, OneRecordPerTensorLeaf) {
  const TensorDict t = Mixed();
  const TensorDict spec = attrs(t);
  EXPECT_TRUE(spec.batch_size().empty());
  EXPECT_FALSE(spec.device().has_value());
  // The source's levels, tensor keys only (non-tensor data has no record).
  EXPECT_EQ(spec.keys(KeysOptions().include_nested(true).leaves_only(true)),
            (std::vector<NestedKey>{"a", "b", {"n", "x"}}));
  EXPECT_EQ(TensorAttrs::get(spec, "a"), Rec(at::Device("cpu"), at::kFloat, {3, 4}));
  EXPECT_EQ(TensorAttrs::get(spec, "b"), Rec(at::Device("cpu"), at::kInt, {3}));
  EXPECT_EQ(TensorAttrs::get(spec, {"n", "x"}), Rec(at::Device("cpu"), at::kDouble, {3, 2}));
  EXPECT_EQ(TensorAttrs::get(spec, "a"), TensorAttrs::from_tensor(t.get("a")));
  // The record as stored: plain JSON (so it prints, saves and indexes like any entry).
  EXPECT_EQ(spec.get_non_tensor({"n", "x"}),
            json::parse(R"({"_type": "TensorAttrs", "tgt_device": "cpu",
                            "tgt_dtype": "torch.float64", "tgt_shape": [3, 2]})"));
  EXPECT_NE(c10::str(spec).find("\"tgt_dtype\":\"torch.int32\""), std::string::npos) << spec;
  EXPECT_EQ(c10::str(TensorAttrs::get(spec, "a")),
            "TensorAttrs(tgt_device=cpu, tgt_dtype=torch.float32, tgt_shape=torch.Size([3, 4]))");

  // Fields left out stay unset (null in the record).
  const TensorDict dtypes = attrs(t, AttrsFields().device(false).shape(false));
  EXPECT_EQ(TensorAttrs::get(dtypes, "b"), Rec(std::nullopt, at::kInt));
  EXPECT_TRUE(dtypes.get_non_tensor("b")["tgt_shape"].is_null());
  EXPECT_EQ(c10::str(TensorAttrs::get(dtypes, "b")),
            "TensorAttrs(tgt_device=None, tgt_dtype=torch.int32, tgt_shape=None)");
}

TEST(AttrsTest, RecordsRoundTripEveryDtype) {
  // Every dtype of this LibTorch, the ones the memmap format cannot name included.
  for (int i = 0; i < static_cast<int>(at::ScalarType::Undefined); ++i) {
    const auto dtype = static_cast<at::ScalarType>(i);
    SCOPED_TRACE(c10::toString(dtype));
    EXPECT_EQ(ParseDtypeRepr(DtypeRepr(dtype)), dtype);
    const TensorAttrs a = Rec(at::Device("meta"), dtype, {-1, 2});
    EXPECT_EQ(TensorAttrs::from_json(a.to_json()), a);
  }
  EXPECT_EQ(DtypeRepr(at::kQInt8), "torch.qint8");
  EXPECT_EQ(DtypeRepr(at::kQUInt4x2), "torch.quint4x2");
  EXPECT_EQ(DtypeRepr(at::kComplexHalf), "torch.complex32");
  EXPECT_EQ(DtypeRepr(at::kFloat), "torch.float32");
  EXPECT_EQ(ParseDtypeRepr("torch.long"), at::kLong);  // ParseDtypeName's aliases
  EXPECT_EQ(ParseDtypeRepr("torch.float33"), std::nullopt);
  EXPECT_EQ(TensorAttrs::from_json(Rec(std::nullopt, std::nullopt).to_json()),
            Rec(std::nullopt, std::nullopt));
}

TEST(AttrsTest, ToCastsEachLeafToItsRecord) {
  // Upstream's example: the spec of a TensorDict with an int32 leaf casts another one's.
  const TensorDict src({{"a", at::zeros({3})}, {"b", at::zeros({3}, at::kInt)}}, {3});
  const TensorDict spec = attrs(src, AttrsFields().shape(false));
  const TensorDict target({{"a", at::zeros({3})}, {"b", at::ones({3})}}, {3});
  const TensorDict out = to(target, spec);
  EXPECT_EQ(out.get("b").scalar_type(), at::kInt);
  EXPECT_TRUE(at::equal(out.get("b"), at::ones({3}, at::kInt)));
  EXPECT_TRUE(out.get("a").is_same(target.get("a")));  // already float32 on the CPU: shared

  // A round trip through one dtype restores each leaf's own, nested leaves included; non-tensor
  // data is carried, the batch size and device kept.
  const TensorDict t = Mixed();
  const TensorDict back = to(t.to(at::kDouble), attrs(t));
  EXPECT_EQ(back.batch_size(), t.batch_size());
  EXPECT_EQ(back.get_non_tensor("s"), "a string!");
  EXPECT_EQ(back.get_tensordict("n").batch_size(), t.get_tensordict("n").batch_size());
  for (const NestedKey& k : {NestedKey("a"), NestedKey("b"), NestedKey({"n", "x"})}) {
    EXPECT_EQ(back.get(k).scalar_type(), t.get(k).scalar_type()) << k;
    EXPECT_TRUE(at::equal(back.get(k), t.get(k))) << k;
  }
  EXPECT_EQ(back.device(), t.device());

  // Leaves without a record, or with a record that sets neither device nor dtype, pass as they
  // are; records for keys the TensorDict lacks are ignored.
  TensorDict partial;
  partial.set("b", Rec(std::nullopt, at::kLong).to_non_tensor());
  partial.set({"n", "x"}, Rec(std::nullopt, std::nullopt, {3, 2}).to_non_tensor());
  partial.set({"gone", "y"}, Rec(std::nullopt, at::kHalf).to_non_tensor());
  partial.set("z", Rec(std::nullopt, at::kHalf).to_non_tensor());
  const TensorDict p = to(t, partial);
  EXPECT_EQ(p.get("b").scalar_type(), at::kLong);
  EXPECT_TRUE(p.get("a").is_same(t.get("a")));
  EXPECT_TRUE(p.get({"n", "x"}).is_same(t.get({"n", "x"})));
  EXPECT_FALSE(p.contains("z"));
  EXPECT_FALSE(p.contains("gone"));
}

TEST(AttrsTest, DeviceOfTheResult) {
  const TensorDict t({{"a", at::ones({3})}, {"n", {{"x", at::ones({3, 2})}}}}, {3},
                     at::Device("cpu"));
  // Records on the TensorDict's own device keep it.
  EXPECT_EQ(to(t, attrs(t)).device(), at::Device("cpu"));
  // A record that moves a leaf elsewhere: the result has no device at any level, as upstream.
  TensorDict spec;
  spec.set({"n", "x"}, Rec(at::Device("meta"), at::kHalf).to_non_tensor());
  const TensorDict moved = to(t, spec);
  EXPECT_TRUE(moved.get({"n", "x"}).is_meta());
  EXPECT_EQ(moved.get({"n", "x"}).scalar_type(), at::kHalf);
  EXPECT_TRUE(moved.get("a").is_same(t.get("a")));
  EXPECT_FALSE(moved.device().has_value());
  EXPECT_FALSE(moved.get_tensordict("n").device().has_value());
  EXPECT_EQ(t.device(), at::Device("cpu"));  // the source is untouched
}

TEST(AttrsTest, Errors) {
  const TensorDict t = Mixed();
  const TensorDict good = attrs(t);
  auto with = [&](const NestedKey& key, const Value& v) {
    TensorDict spec = good.clone();
    spec.set(key, v);
    return spec;
  };
  // An attrs entry that is not a record.
  TD_EXPECT_THROW_MSG(to(t, with("a", at::zeros({}))), TypeError,
                      {"to(attrs)", "'a'", "is a Tensor", "TensorAttrs record"});
  TD_EXPECT_THROW_MSG(to(t, with({"n", "x"}, "float")), TypeError,
                      {"('n', 'x')", "\"float\"", "TensorAttrs record"});
  TD_EXPECT_THROW_MSG(to(t, with("b", NonTensorData(json{{"tgt_dtype", "torch.int64"}}))),
                      TypeError, {"'b'", "TensorAttrs record", "\"_type\""});
  // Malformed records name the key and the field.
  auto record = [](const char* field, json value) {
    json j = Rec(std::nullopt, std::nullopt).to_json();
    j[field] = std::move(value);
    return NonTensorData(j);
  };
  TD_EXPECT_THROW_MSG(to(t, with("a", record("tgt_device", "cpux"))), ValueError,
                      {"'a'", "tgt_device", "\"cpux\"", "not a device"});
  TD_EXPECT_THROW_MSG(to(t, with("a", record("tgt_device", 3))), ValueError,
                      {"'a'", "tgt_device", "device string"});
  TD_EXPECT_THROW_MSG(to(t, with("a", record("tgt_dtype", "torch.float33"))), ValueError,
                      {"'a'", "tgt_dtype", "torch.float33"});
  TD_EXPECT_THROW_MSG(to(t, with("a", record("tgt_shape", json::array({3, -2})))), ValueError,
                      {"'a'", "tgt_shape", "[3,-2]"});
  // 2^64 - 1 (an unsigned JSON integer) is no size, and not the -1 wildcard either; nor is 2^63.
  TD_EXPECT_THROW_MSG(
      to(t, with("a", record("tgt_shape", json::parse("[3, 18446744073709551615]")))),
      ValueError, {"'a'", "tgt_shape", "[3,18446744073709551615]"});
  TD_EXPECT_THROW_MSG(
      to(t, with("a", record("tgt_shape", json::parse("[9223372036854775808, 4]")))),
      ValueError, {"'a'", "tgt_shape", "[9223372036854775808,4]"});
  TD_EXPECT_THROW_MSG(to(t, with("a", record("tgt_size", json::array({3})))), ValueError,
                      {"'a'", "unknown field", "tgt_size"});
  // A record whose shape is not the leaf's (upstream ignores shapes; here they are checked).
  TD_EXPECT_THROW_MSG(to(t.index({at::indexing::Slice(0, 2)}), good), ValueError,
                      {"'a'", "torch.Size([3, 4])", "torch.Size([2, 4])", "shape(false)"});
  // Structure: a record where the TensorDict has a level or non-tensor data; a level where it
  // has a tensor.
  TD_EXPECT_THROW_MSG(to(t, with("n", Rec(std::nullopt, at::kHalf).to_non_tensor())), TypeError,
                      {"'n'", "TensorAttrs record", "sub-TensorDict"});
  TD_EXPECT_THROW_MSG(to(t, with("s", Rec(std::nullopt, at::kHalf).to_non_tensor())), TypeError,
                      {"'s'", "TensorAttrs record", "non-tensor data"});
  TD_EXPECT_THROW_MSG(
      to(t, with("b", TensorDict({{"y", Rec(std::nullopt, at::kHalf).to_non_tensor()}}, {}))),
      TypeError, {"'b'", "sub-TensorDict", "a Tensor"});
  // Everything is checked first: a bad record after a good one casts nothing (the result is
  // new in any case; the source is untouched).
  TensorDict late = good.clone();
  late.set("b", Rec(std::nullopt, at::kDouble).to_non_tensor());
  late.set("zz", "not a record");
  EXPECT_THROW(to(t, late), TypeError);
  EXPECT_EQ(t.get("b").scalar_type(), at::kInt);
  // Reading records.
  TD_EXPECT_THROW_MSG(TensorAttrs::get(good, "nope"), KeyError, {"'nope'"});
  TD_EXPECT_THROW_MSG(TensorAttrs::get(good, "n"), TypeError, {"'n'", "TensorDict"});
  TD_EXPECT_THROW_MSG(TensorAttrs::from_json(json::array({1})), TypeError,
                      {"the record", "[1]"});
}

TEST(AttrsTest, LazyStack) {
  TensorDict m0({{"obs", at::ones({2, 3})}, {"id", at::arange(2)}}, {2});
  TensorDict m1({{"obs", at::zeros({2, 3})}, {"id", at::arange(2, 4)}}, {2});
  const TensorDict s = lazy_stack({m0, m1}, 0);
  const TensorDict spec = attrs(s);
  EXPECT_EQ(TensorAttrs::get(spec, "obs"), Rec(at::Device("cpu"), at::kFloat, {2, 2, 3}));
  EXPECT_EQ(TensorAttrs::get(spec, "id"), Rec(at::Device("cpu"), at::kLong, {2, 2}));
  // A ragged key is recorded from the members' metadata, the varying dim as -1 (stacking it
  // would throw: nothing is computed).
  TensorDict r1({{"obs", at::zeros({2, 5})}, {"id", at::arange(2)}}, {2});
  const TensorDict ragged = attrs(lazy_stack({m0, r1}, 0));
  EXPECT_EQ(TensorAttrs::get(ragged, "obs"), Rec(at::Device("cpu"), at::kFloat, {2, 2, -1}));
  // to() on a lazy stack casts the stacked leaves (a dense result, as TensorDict::to), and a
  // recorded -1 matches any size.
  TensorDict cast;
  cast.set("obs", Rec(std::nullopt, at::kHalf, {2, -1, 3}).to_non_tensor());
  cast.set("id", Rec(std::nullopt, at::kInt).to_non_tensor());
  const TensorDict out = to(s, cast);
  EXPECT_EQ(out.backend(), "dense");
  EXPECT_EQ(out.batch_size(), s.batch_size());
  EXPECT_EQ(out.get("obs").scalar_type(), at::kHalf);
  EXPECT_TRUE(at::equal(out.get("obs").to(at::kFloat), at::stack({m0.get("obs"), m1.get("obs")})));
  EXPECT_TRUE(at::equal(out.get("id"), at::arange(4).view({2, 2}).to(at::kInt)));
  TD_EXPECT_THROW_MSG(to(s, attrs(m0)), ValueError,
                      {"'obs'", "torch.Size([2, 3])", "torch.Size([2, 2, 3])"});
}

TEST(AttrsTest, MemmapSourceAndSavedSpec) {
  const TensorDict t = Mixed();
  const std::string dir = testing_util::FreshDir("attrs");
  const TensorDict mapped = t.memmap(dir + "/data");
  // The records of a memory-mapped TensorDict are those of its source.
  const TensorDict spec = attrs(mapped);
  for (const NestedKey& k : {NestedKey("a"), NestedKey("b"), NestedKey({"n", "x"})}) {
    EXPECT_EQ(spec.get_non_tensor(k), attrs(t).get_non_tensor(k)) << k;
  }
  // Casting a memory-mapped TensorDict gives a dense one; the files are untouched.
  TensorDict halves;
  halves.set("a", Rec(std::nullopt, at::kHalf).to_non_tensor());
  const TensorDict out = to(mapped, halves);
  EXPECT_EQ(out.backend(), "dense");
  EXPECT_EQ(out.get("a").scalar_type(), at::kHalf);
  EXPECT_EQ(out.get("b").data_ptr(), mapped.get("b").data_ptr());  // passed as it is
  EXPECT_EQ(mapped.get("a").scalar_type(), at::kFloat);
  // A spec saves and loads like any TensorDict and drives to() the same way.
  spec.memmap(dir + "/spec");
  const TensorDict loaded = TensorDict::load_memmap(dir + "/spec");
  EXPECT_EQ(TensorAttrs::get(loaded, {"n", "x"}), TensorAttrs::get(spec, {"n", "x"}));
  const TensorDict back = to(t.to(at::kDouble), loaded);
  EXPECT_EQ(back.get("b").scalar_type(), at::kInt);
  EXPECT_EQ(back.get("a").scalar_type(), at::kFloat);
}

}  // namespace
}  // namespace td
