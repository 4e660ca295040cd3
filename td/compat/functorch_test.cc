#include "td/compat/functorch.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace td::compat::functorch {
namespace {

TEST(Functorch, PushWrapUnwrapPop) {
  ASSERT_EQ(LayerDepth(), 0);
  at::Tensor x = at::arange(12, at::kFloat).view({3, 4});
  const int64_t level = PushVmapLayer(4, Randomness::kError);
  EXPECT_EQ(LayerDepth(), 1);
  at::Tensor b = AddBatchDim(x, 1, level);
  EXPECT_EQ(b.sizes(), at::IntArrayRef({3}));
  at::Tensor y = b * 2;  // runs through the batching rule of mul
  std::optional<Unwrapped> u = Unwrap(y);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->level, level);
  at::Tensor full = u->value.movedim(u->bdim, 0);
  PopVmapLayer(level);
  EXPECT_EQ(LayerDepth(), 0);
  EXPECT_TRUE(at::equal(full, x.t() * 2));
  EXPECT_FALSE(Unwrap(x).has_value());
}

TEST(Functorch, UnwrapAllLevels) {
  at::Tensor x = at::arange(24, at::kFloat).view({2, 3, 4});
  const int64_t outer = PushVmapLayer(2, Randomness::kError);
  at::Tensor a = AddBatchDim(x, 0, outer);
  const int64_t inner = PushVmapLayer(3, Randomness::kError);
  at::Tensor b = AddBatchDim(a, 0, inner);
  EXPECT_EQ(b.sizes(), at::IntArrayRef({4}));
  at::Tensor plain = UnwrapAll(b);
  EXPECT_FALSE(Unwrap(plain).has_value());
  EXPECT_TRUE(plain.is_same(x));
  EXPECT_EQ(plain.min().item<float>(), 0.0f);   // readable although b's data is not
  PopVmapLayer(inner);
  PopVmapLayer(outer);
  EXPECT_TRUE(UnwrapAll(x).is_same(x));
}

TEST(Functorch, PopOutOfOrderThrowsAndKeepsTheLayer) {
  const int64_t level = PushVmapLayer(2, Randomness::kSame);
  EXPECT_THROW(PopVmapLayer(level + 1), c10::Error);
  EXPECT_EQ(LayerDepth(), 1);
  PopVmapLayer(level);
  EXPECT_EQ(LayerDepth(), 0);
}

TEST(Functorch, RandomnessModes) {
  at::Tensor x = at::zeros({4, 3});
  {
    const int64_t level = PushVmapLayer(4, Randomness::kError);
    at::Tensor b = AddBatchDim(x, 0, level);
    EXPECT_THROW(at::rand_like(b), c10::Error);
    PopVmapLayer(level);
  }
  for (Randomness r : {Randomness::kSame, Randomness::kDifferent}) {
    const int64_t level = PushVmapLayer(4, r);
    at::Tensor b = AddBatchDim(x, 0, level);
    at::Tensor noise = at::rand_like(b);
    std::optional<Unwrapped> u = Unwrap(noise);
    at::Tensor full = u ? u->value.movedim(u->bdim, 0) : noise.expand({4, 3});
    PopVmapLayer(level);
    const bool rows_equal = at::equal(full[0], full[1]);
    EXPECT_EQ(rows_equal, r == Randomness::kSame);
  }
}

TEST(Functorch, FallbackWarningSwitch) {
  const bool before = FallbackWarningEnabled();
  SetFallbackWarningEnabled(!before);
  EXPECT_EQ(FallbackWarningEnabled(), !before);
  SetFallbackWarningEnabled(before);
  EXPECT_TRUE(FallbackEnabled());
  SetFallbackEnabled(false);
  EXPECT_FALSE(FallbackEnabled());
  SetFallbackEnabled(true);
}

}  // namespace
}  // namespace td::compat::functorch
