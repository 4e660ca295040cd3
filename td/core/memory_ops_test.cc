// Tests of the dtype verbs, data and backward of td/core/memory_ops.cc: every leaf against the
// same ATen call, nested leaves and non-tensor data included, and the errors.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "td/compat/torch.h"
#include "td/core/dtype.h"
#include "td/core/testing.h"

namespace td {
namespace {

using test::kLeaves;

// Batch [3, 2]: "pixels" uint8, "x" float32, nested "n/steps" int64 (batch [3, 2, 4]), "done"
// bool, and non-tensor "s". Small non-negative values: exact in every dtype below.
TensorDict Mixed() {
  TensorDict n({{"steps", at::arange(24).view({3, 2, 4})}}, {3, 2, 4});
  return TensorDict({{"pixels", (at::arange(6 * 3) * 7 % 251).view({3, 2, 3}).to(at::kByte)},
                     {"x", at::arange(6.0).view({3, 2}) / 4},
                     {"n", n},
                     {"done", at::arange(6).view({3, 2}) % 2 == 0},
                     {"s", "a string!"}},
                    {3, 2});
}

// Values compared in a dtype with kernels on every LibTorch (complex32 and uint16+ have few).
at::Tensor Wide(const at::Tensor& t) {
  return t.to(t.is_complex() ? at::kComplexDouble : at::kDouble);
}

// Every leaf of `r` is leaf.to(dtype) of `src` (same values, dtype `dtype`); "s" carried.
void ExpectCast(const TensorDict& src, const TensorDict& r, at::ScalarType dtype) {
  EXPECT_EQ(r.batch_size(), src.batch_size());
  EXPECT_EQ(r.get_tensordict("n").batch_size(), src.get_tensordict("n").batch_size());
  EXPECT_EQ(r.get_non_tensor("s"), "a string!");
  for (const NestedKey& k : src.keys(kLeaves)) {
    if (!src.get_value(k).is_tensor()) continue;
    const at::Tensor want = src.get(k).to(dtype);
    const at::Tensor got = r.get(k);
    ASSERT_EQ(got.scalar_type(), dtype) << k;
    ASSERT_EQ(got.sizes(), want.sizes()) << k;
    EXPECT_TRUE(at::equal(Wide(got), Wide(want))) << k;
  }
}

TEST(MemoryOpsTest, DtypeVerbsCastEveryLeaf) {
  const TensorDict t = Mixed();
  const std::vector<std::pair<std::function<TensorDict(const TensorDict&)>, at::ScalarType>> verbs =
      {{[](const TensorDict& x) { return x.half(); }, at::kHalf},
       {[](const TensorDict& x) { return x.bfloat16(); }, at::kBFloat16},
       {[](const TensorDict& x) { return x.float16(); }, at::kHalf},
       {[](const TensorDict& x) { return x.float32(); }, at::kFloat},
       {[](const TensorDict& x) { return x.float64(); }, at::kDouble},
       {[](const TensorDict& x) { return x.int8(); }, at::kChar},
       {[](const TensorDict& x) { return x.int16(); }, at::kShort},
       {[](const TensorDict& x) { return x.int32(); }, at::kInt},
       {[](const TensorDict& x) { return x.int64(); }, at::kLong},
       {[](const TensorDict& x) { return x.uint8(); }, at::kByte},
       {[](const TensorDict& x) { return x.complex32(); }, at::kComplexHalf},
       {[](const TensorDict& x) { return x.complex64(); }, at::kComplexFloat},
       {[](const TensorDict& x) { return x.complex128(); }, at::kComplexDouble},
       {[](const TensorDict& x) { return x.type(at::kShort); }, at::kShort},
       {[](const TensorDict& x) { return x.to(at::kBool); }, at::kBool}};
  for (const auto& [verb, dtype] : verbs) {
    SCOPED_TRACE(c10::toString(dtype));
    ExpectCast(t, verb(t), dtype);
  }
  // uint8 pixels become floats (Python's td.float()), and a leaf already of the dtype is shared.
  const TensorDict f = t.float32();
  EXPECT_TRUE(f.get("x").is_same(t.get("x")));
  EXPECT_TRUE(at::equal(f.get("pixels"), t.get("pixels").to(at::kFloat)));
}

TEST(MemoryOpsTest, WideUnsignedVerbsNeedTheirDtype) {
  const TensorDict t = Mixed();
  const std::vector<std::pair<int, std::function<TensorDict(const TensorDict&)>>> verbs = {
      {16, [](const TensorDict& x) { return x.uint16(); }},
      {32, [](const TensorDict& x) { return x.uint32(); }},
      {64, [](const TensorDict& x) { return x.uint64(); }}};
  for (const auto& [bits, verb] : verbs) {
    SCOPED_TRACE(bits);
    if (std::optional<at::ScalarType> dtype = compat::UnsignedDtype(bits)) {
      ExpectCast(t, verb(t), *dtype);
    } else {
      TD_EXPECT_THROW_MSG(verb(t), TypeError,
                          {"uint" + std::to_string(bits), "LibTorch 2.3", "this is LibTorch"});
    }
  }
}

TEST(MemoryOpsTest, ToDeviceAndDtypeCastsEveryLeaf) {
  const TensorDict t = Mixed();
  const TensorDict r = t.to(at::Device("cpu"), at::kInt);
  EXPECT_EQ(r.device(), at::Device("cpu"));
  ExpectCast(t, r, at::kInt);
  // A cast LibTorch refuses (to a quantized dtype) names the key.
  TensorDict two({{"x", at::ones({3, 2}, at::kDouble)}, {"y", at::ones({3, 2})}}, {3, 2});
  TD_EXPECT_THROW_MSG(two.to(at::kQInt8), c10::Error, {"'x'"});
}

// A quantized leaf holds the same values, dtype and quantizer as `want`.
void ExpectSameQuantized(const at::Tensor& got, const at::Tensor& want) {
  ASSERT_TRUE(got.is_quantized());
  EXPECT_EQ(got.scalar_type(), want.scalar_type());
  EXPECT_EQ(got.q_scale(), want.q_scale());
  EXPECT_EQ(got.q_zero_point(), want.q_zero_point());
  EXPECT_TRUE(at::equal(got.int_repr(), want.int_repr()));
}

TEST(MemoryOpsTest, QuantizedLeavesInDenseStorage) {
  using at::indexing::Slice;
  const at::Tensor qa = at::quantize_per_tensor(at::arange(6.0).view({3, 2}) / 4, 0.25, 0,
                                                at::kQInt8);
  const at::Tensor qb = at::quantize_per_tensor(at::arange(12.0).view({3, 2, 2}), 0.5, 1,
                                                at::kQInt8);
  TensorDict q({{"a", qa}, {"n", {{"b", qb}}}, {"s", "note"}}, {3, 2});
  EXPECT_TRUE(q.get("a").is_same(qa));
  EXPECT_TRUE(q.get({"n", "b"}).is_same(qb));
  // Indexing keeps the quantizer.
  ExpectSameQuantized(q.index({1}).get({"n", "b"}), qb[1]);
  ExpectSameQuantized(q.index({Slice(0, 2)}).get("a"), qa.slice(0, 0, 2));
  // clone: new memory, same quantized values; also for leaves that are views of one quantized
  // buffer (which the one-buffer copy of clone and to() leaves to the per-leaf path).
  const TensorDict c = q.clone();
  ExpectSameQuantized(c.get("a"), qa);
  EXPECT_NE(c.get("a").data_ptr(), qa.data_ptr());
  ExpectSameQuantized(c.get({"n", "b"}), qb);
  const at::Tensor whole = at::quantize_per_tensor(at::arange(12.0), 0.5, 0, at::kQUInt8);
  const TensorDict views({{"u", whole.slice(0, 0, 6).view({3, 2})},
                          {"v", whole.slice(0, 6, 12).view({3, 2})}},
                         {3, 2});
  const TensorDict vc = views.clone();
  ExpectSameQuantized(vc.get("u"), whole.slice(0, 0, 6).view({3, 2}));
  ExpectSameQuantized(vc.get("v"), whole.slice(0, 6, 12).view({3, 2}));
  EXPECT_NE(vc.get("v").data_ptr(), whole.data_ptr());
  // Printing names the dtype as Python does.
  EXPECT_NE(c10::str(q).find("dtype=torch.qint8"), std::string::npos) << q;
}

TEST(MemoryOpsTest, QuantizedVerbsPassOnlyLeavesOfTheirDtype) {
  const at::Tensor x = at::arange(6.0).view({3, 2}) / 4;
  const at::Tensor qa = at::quantize_per_tensor(x, 0.25, 0, at::kQInt8);
  const at::Tensor qb = at::quantize_per_tensor(x * 4, 0.5, 1, at::kQInt8);
  const TensorDict q({{"a", qa}, {"n", {{"b", qb}}}, {"s", "note"}}, {3, 2});
  // Already quantized: the same tensors, nested ones included; non-tensor data carried.
  const TensorDict r = q.qint8();
  EXPECT_EQ(r.batch_size(), q.batch_size());
  EXPECT_TRUE(r.get("a").is_same(qa));
  EXPECT_TRUE(r.get({"n", "b"}).is_same(qb));
  EXPECT_EQ(r.get_non_tensor("s"), "note");
  // Each verb on its own dtype.
  const std::vector<std::pair<at::ScalarType, std::function<TensorDict(const TensorDict&)>>>
      verbs = {{at::kQInt8, [](const TensorDict& t) { return t.qint8(); }},
               {at::kQInt32, [](const TensorDict& t) { return t.qint32(); }},
               {at::kQUInt8, [](const TensorDict& t) { return t.quint8(); }},
               {at::kQUInt4x2, [](const TensorDict& t) { return t.quint4x2(); }}};
  for (const auto& [dtype, verb] : verbs) {
    SCOPED_TRACE(c10::toString(dtype));
    const at::Tensor w = at::quantize_per_tensor(x, 0.25, 0, dtype);
    const TensorDict one({{"w", w}}, {3, 2});
    EXPECT_TRUE(verb(one).get("w").is_same(w));
    // A float leaf is refused by name (torch cannot cast to a quantized dtype)...
    const TensorDict mixed({{"w", w}, {"n", {{"x", x}}}}, {3, 2});
    const std::string name = DtypeRepr(dtype).substr(6);  // "qint8"
    TD_EXPECT_THROW_MSG(verb(mixed), TypeError,
                        {name + "()", "('n', 'x')", "torch.float32", "at::quantize_per_tensor"});
    // ... and nothing changed.
    EXPECT_TRUE(mixed.get("w").is_same(w));
    EXPECT_TRUE(mixed.get({"n", "x"}).is_same(x));
  }
  // So is a leaf of another quantized dtype.
  TD_EXPECT_THROW_MSG(q.quint8(), TypeError, {"quint8()", "'a'", "torch.qint8", "torch.quint8"});
}

TEST(MemoryOpsTest, DataSharesMemoryWithoutHistory) {
  at::Tensor w = at::ones({3, 2}).requires_grad_(true);
  TensorDict t({{"w", w}, {"n", {{"v", at::arange(6.0).view({3, 2})}}}, {"s", "hi"}}, {3, 2});
  const TensorDict d = t.data();
  EXPECT_FALSE(d.get("w").requires_grad());
  EXPECT_EQ(d.get("w").data_ptr(), w.data_ptr());
  EXPECT_EQ(d.get({"n", "v"}).data_ptr(), t.get({"n", "v"}).data_ptr());
  EXPECT_EQ(d.get_non_tensor("s"), "hi");
  // Like Python's .data, and unlike detach(): an in-place write through it is not seen by
  // autograd's version counter.
  const int64_t version = w._version();
  d.get("w").mul_(2);
  EXPECT_EQ(w._version(), version);
  EXPECT_TRUE(at::equal(w.detach(), at::full({3, 2}, 2.0)));
}

TEST(MemoryOpsTest, BackwardOverTheLeavesThatRequireGrad) {
  at::Tensor x = at::arange(3.0).requires_grad_(true);
  TensorDict losses({{"actor", x.sum()},
                     {"n", {{"critic", x.pow(2).sum()}}},
                     {"count", at::full({}, 3, at::kLong)},
                     {"s", "ignored"}},
                    {});
  losses.backward();
  // d/dx (sum x + sum x^2) = 1 + 2x
  EXPECT_TRUE(at::allclose(x.grad(), 1 + 2 * x.detach()));

  // A gradient TensorDict weighs the leaves, matched by key.
  x.mutable_grad() = at::Tensor();
  TensorDict again({{"actor", x.sum()}, {"n", {{"critic", x.pow(2).sum()}}}}, {});
  again.backward(
      TensorDict({{"actor", at::full({}, 0.5)}, {"n", {{"critic", at::full({}, 2.0)}}}}, {}));
  EXPECT_TRUE(at::allclose(x.grad(), 0.5 + 4 * x.detach()));

  // Errors: nothing requires grad; a leaf of several elements without a gradient; a gradient
  // that lacks a key or has another shape. Autograd has not run (the graphs are intact).
  x.mutable_grad() = at::Tensor();
  TD_EXPECT_THROW_MSG(TensorDict({{"a", at::ones({2})}}, {}).backward(), ValueError,
                      {"no leaf", "requires grad"});
  TensorDict wide({{"y", x * 2}, {"n", {{"z", x.sum()}}}}, {});
  TD_EXPECT_THROW_MSG(wide.backward(), ValueError, {"'y'", "[3]", "gradient"});
  TD_EXPECT_THROW_MSG(wide.backward(TensorDict({{"y", at::ones({3})}}, {})), KeyError,
                      {"('n', 'z')"});
  TD_EXPECT_THROW_MSG(
      wide.backward(TensorDict({{"y", at::ones({2})}, {"n", {{"z", at::full({}, 1.0)}}}}, {})),
      ValueError, {"'y'", "[2]", "[3]"});
  EXPECT_FALSE(x.grad().defined());
  wide.backward(TensorDict({{"y", at::ones({3})}, {"n", {{"z", at::full({}, 1.0)}}}}, {}));
  EXPECT_TRUE(at::allclose(x.grad(), at::full({3}, 3.0)));
}

TEST(MemoryOpsTest, ClearAndAutoDevice) {
  TensorDict t({{"a", at::ones({3})}, {"n", {{"x", at::zeros({3, 2})}}}}, {3}, at::Device("cpu"));
  EXPECT_EQ(t.get_tensordict("n").device(), at::Device("cpu"));
  t.clear_device_();
  EXPECT_EQ(t.device(), std::nullopt);
  EXPECT_EQ(t.get_tensordict("n").device(), std::nullopt);
  // Without a device, leaves may live on different devices (meta stands in for an accelerator).
  t.set("m", at::empty({3}, at::Device(at::kMeta)));
  t.auto_device_();
  EXPECT_EQ(t.device(), std::nullopt);
  t.del_("m");
  t.auto_device_();
  EXPECT_EQ(t.device(), at::Device("cpu"));
  EXPECT_EQ(t.get_tensordict("n").device(), at::Device("cpu"));
  TensorDict meta({{"a", at::empty({2}, at::Device(at::kMeta))}}, {2});
  meta.auto_device_();
  EXPECT_TRUE(meta.is_meta());
  // No leaf: no device.
  TensorDict none({}, {}, at::Device("cpu"));
  none.auto_device_();
  EXPECT_EQ(none.device(), std::nullopt);
}

// pin_memory_ replaces every leaf by its pinned copy in place, or changes nothing: without an
// accelerator LibTorch cannot pin, and the error names the key.
TEST(MemoryOpsTest, PinMemoryInPlace) {
  TensorDict t = Mixed();
  const TensorDict before = t.copy();  // the same tensors, in other dicts
  TensorDict handle = t;
  if (at::hasCUDA()) {
    EXPECT_EQ(&t.pin_memory_(), &t);
    for (const NestedKey& k : before.keys(kLeaves)) {
      if (!before.get_value(k).is_tensor()) continue;
      EXPECT_TRUE(handle.get(k).is_pinned()) << k;
      EXPECT_TRUE(handle.get(k).equal(before.get(k))) << k;
    }
  } else {
    TD_EXPECT_THROW_MSG(t.pin_memory_(), c10::Error, {"pinning key 'pixels'"});
    for (const NestedKey& k : before.keys(kLeaves)) {
      if (before.get_value(k).is_tensor()) {
        EXPECT_TRUE(t.get(k).is_same(before.get(k))) << k;
      }
    }
    EXPECT_EQ(t.get_non_tensor("s"), "a string!");
  }
  // Without a tensor leaf there is nothing to pin, on any build.
  TensorDict levels({{"n", TensorDict({}, {3})}, {"s", "x"}}, {3});
  EXPECT_EQ(&levels.pin_memory_(), &levels);
}

// record_stream checks the leaves' devices first, rethrows LibTorch's error with the key, and
// keeps the one stream it recorded, as upstream.
TEST(MemoryOpsTest, RecordStream) {
  TensorDict t = Mixed();
  const c10::Stream cpu(c10::Stream::DEFAULT, at::Device(at::kCPU));
  // A CPU tensor has no streams to record: LibTorch's error, with the key.
  TD_EXPECT_THROW_MSG(t.record_stream(cpu), c10::Error, {"recording a stream on key 'pixels'"});
  // The failed call associated nothing: a stream of another device type is refused for the
  // leaves' device, naming the first leaf.
  const c10::Stream cuda(c10::Stream::DEFAULT, at::Device(at::kCUDA, 0));
  TD_EXPECT_THROW_MSG(t.record_stream(cuda), c10::ValueError,
                      {"key 'pixels'", "is on cpu", "stream is on cuda:0"});
  TD_EXPECT_THROW_MSG(TensorDict({{"n", TensorDict({{"x", at::zeros({2})}}, {2})}}, {2})
                          .record_stream(cuda),
                      c10::ValueError, {"key ('n', 'x')"});
  // Without tensor leaves the call succeeds and associates the stream with every handle.
  TensorDict levels({{"n", TensorDict({}, {2})}}, {2});
  TensorDict handle = levels;
  EXPECT_EQ(&levels.record_stream(cpu), &levels);
  levels.record_stream(cpu);  // the same stream again
  const c10::Stream other(c10::Stream::UNSAFE, at::Device(at::kCPU), 1);
  TD_EXPECT_THROW_MSG(handle.record_stream(other), c10::ValueError,
                      {"already associated", "cannot record"});
}

// as_tensor: the same leaves, dense at every level, locked like the source.
TEST(MemoryOpsTest, AsTensor) {
  TensorDict t = Mixed();
  t.lock_();
  const TensorDict a = t.as_tensor();
  EXPECT_FALSE(a.is_same(t));
  EXPECT_TRUE(a.is_locked());
  EXPECT_EQ(a.backend(), "dense");
  EXPECT_FALSE(a.get_tensordict("n").is_same(t.get_tensordict("n")));
  EXPECT_EQ(a.keys(kLeaves), t.keys(kLeaves));
  for (const NestedKey& k : t.keys(kLeaves)) {
    if (t.get_value(k).is_tensor()) {
      EXPECT_TRUE(a.get(k).is_same(t.get(k))) << k;
    }
  }
  EXPECT_EQ(a.get_non_tensor("s"), "a string!");
  t.unlock_();
  EXPECT_FALSE(t.as_tensor().is_locked());
}

// Nested tensors (LibTorch's ragged tensors) as leaves: set() checks their regular batch dims,
// printing and get_item_shape show a ragged dim as -1, to_padded_tensor pads them.
TEST(MemoryOpsTest, ToPaddedTensor) {
  const at::Tensor nested =
      at::_nested_tensor_from_tensor_list({at::ones({2, 3}), at::full({4, 3}, 2.0)});
  TensorDict t({{"ragged", nested},
                {"x", at::arange(2.0)},
                {"n", TensorDict({{"r", nested}}, {2})}},
               {2});
  EXPECT_EQ(t.get_item_shape("ragged"), (std::vector<int64_t>{2, -1, 3}));
  EXPECT_NE(t.repr().find("ragged: Tensor(shape=torch.Size([2, -1, 3]), device=cpu, "
                          "dtype=torch.float32"),
            std::string::npos)
      << t.repr();
  const TensorDict p = t.to_padded_tensor(-1.0);
  const at::Tensor r = p.get("ragged");
  EXPECT_FALSE(r.is_nested());
  EXPECT_EQ(r.sizes(), at::IntArrayRef({2, 4, 3}));
  EXPECT_TRUE(r[0].narrow(0, 0, 2).equal(at::ones({2, 3})));
  EXPECT_TRUE(r[0].narrow(0, 2, 2).equal(at::full({2, 3}, -1.0)));
  EXPECT_TRUE(r[1].equal(at::full({4, 3}, 2.0)));
  EXPECT_TRUE(p.get({"n", "r"}).equal(r));
  EXPECT_TRUE(p.get("x").is_same(t.get("x")));  // other leaves are shared
  EXPECT_TRUE(t.get("ragged").is_nested());     // the source is unchanged
  EXPECT_TRUE(t.to_padded_tensor().get("ragged")[0][3].equal(at::zeros({3})));
  // A batch dim over the ragged dim does not fit.
  TD_EXPECT_THROW_MSG(TensorDict({{"ragged", nested}}, {2, 2}), BatchSizeError,
                      {"'ragged'", "torch.Size([2, -1, 3])", "torch.Size([2, 2])", "ragged dim"});
  TD_EXPECT_THROW_MSG(TensorDict({{"ragged", nested}}, {3}), BatchSizeError,
                      {"'ragged'", "torch.Size([3])"});
}

}  // namespace
}  // namespace td
