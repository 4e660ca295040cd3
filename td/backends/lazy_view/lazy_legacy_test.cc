// lazy_legacy() with the lazy backends linked (NOTE [ Lazy legacy ] in td/core/lazy_legacy.h):
// the shape ops return views that write through to their source, td::stack a lazy stack, and
// the switch is scoped and per thread. Built twice: as lazy_legacy_test, and as
// lazy_legacy_env_test with LAZY_LEGACY_OP=1 in the environment, which flips the default.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <thread>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/lazy_view/lazy_view.h"
#include "td/core/lazy_legacy.h"
#include "td/core/stack.h"
#include "td/core/testing.h"

namespace td {
namespace {

bool EnvSaysLazy() {
  const char* v = std::getenv("LAZY_LEGACY_OP");
  return v != nullptr && std::string(v) == "1";
}

TensorDict Source() {
  return TensorDict({{"a", at::arange(24.0).view({2, 3, 4})},
                     {"n", {{"x", at::arange(6.0).view({2, 3})}}}},
                    {2, 3});
}

TEST(LazyLegacyTest, DefaultComesFromTheEnvironment) {
  ASSERT_EQ(EnvSaysLazy(), TD_TEST_ENV_LAZY == 1) << "LAZY_LEGACY_OP is not what BUILD.bazel sets";
  EXPECT_EQ(lazy_legacy(), EnvSaysLazy());
  TensorDict src = Source();
  EXPECT_EQ(src.permute({1, 0}).backend(), EnvSaysLazy() ? "permute_view" : "dense");
  {
    SetLazyLegacy off(false);
    EXPECT_FALSE(lazy_legacy());
    EXPECT_EQ(src.permute({1, 0}).backend(), "dense");
    {
      SetLazyLegacy on(true);
      EXPECT_TRUE(lazy_legacy());
    }
    EXPECT_FALSE(lazy_legacy());
  }
  EXPECT_EQ(lazy_legacy(), EnvSaysLazy());
}

TEST(LazyLegacyTest, ShapeOpsReturnViewsThatWriteThrough) {
  SetLazyLegacy lazy(true);
  TensorDict src = Source();

  TensorDict p = src.permute({1, 0});
  ASSERT_TRUE(LazyViewTensorDict::from(p).has_value());
  EXPECT_TRUE(LazyViewTensorDict::from(p)->source().is_same(src));
  EXPECT_EQ(p.batch_size(), at::IntArrayRef({3, 2}));
  EXPECT_TRUE(p.get("a").equal(src.get("a").permute({1, 0, 2})));
  // A new key set through the view lands in the source, in the source's layout.
  p.set("b", at::ones({3, 2, 5}));
  ASSERT_TRUE(src.contains("b"));
  EXPECT_EQ(src.get("b").sizes(), at::IntArrayRef({2, 3, 5}));

  TensorDict t = src.transpose(0, 1);
  EXPECT_EQ(t.backend(), "permute_view");
  t.set_("a", at::zeros({3, 2, 4}));
  EXPECT_TRUE(src.get("a").equal(at::zeros({2, 3, 4})));

  TensorDict u = src.unsqueeze(-1);
  EXPECT_EQ(u.backend(), "unsqueeze_view");
  EXPECT_EQ(u.batch_size(), at::IntArrayRef({2, 3, 1}));
  EXPECT_EQ(u.get({"n", "x"}).sizes(), at::IntArrayRef({2, 3, 1}));

  // squeeze() without a dim squeezes every size-1 batch dim: two views, last dim first.
  TensorDict ones = TensorDict({{"a", at::arange(3.0).view({1, 3, 1})}}, {1, 3, 1});
  TensorDict s = ones.squeeze();
  EXPECT_EQ(s.backend(), "squeeze_view");
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({3}));
  s.set_("a", at::full({3}, 2.0));
  EXPECT_TRUE(ones.get("a").equal(at::full({1, 3, 1}, 2.0)));
  EXPECT_EQ(ones.squeeze(0).backend(), "squeeze_view");

  TensorDict v = src.view({-1});
  EXPECT_EQ(v.backend(), "reshape_view");
  EXPECT_EQ(v.batch_size(), at::IntArrayRef({6}));
  EXPECT_TRUE(v.get("a").equal(src.get("a").view({6, 4})));
  EXPECT_TRUE(src.view({2, 3}).is_same(src));  // the same batch size: the TensorDict itself

  // reshape is not one of upstream's legacy-lazy ops.
  EXPECT_EQ(src.reshape({6}).backend(), "dense");
  // Bad arguments fail in the core's words before any view is made.
  TD_EXPECT_THROW_MSG(src.permute({0, 0}), c10::ValueError, {"permute", "repeats"});
  EXPECT_THROW(src.unsqueeze(5), c10::IndexError);
}

TEST(LazyLegacyTest, StackIsALazyStack) {
  SetLazyLegacy lazy(true);
  TensorDict a = Source();
  TensorDict b = Source() * 2;
  TensorDict s = stack({a, b}, 1);
  ASSERT_TRUE(LazyStackedTensorDict::from(s).has_value());
  EXPECT_EQ(s.batch_size(), at::IntArrayRef({2, 2, 3}));
  EXPECT_TRUE(s.get("a").equal(at::stack({a.get("a"), b.get("a")}, 1)));
  // The members are the inputs themselves: writes through the stack reach them.
  s.set_("a", at::zeros({2, 2, 3, 4}));
  EXPECT_TRUE(a.get("a").equal(at::zeros({2, 3, 4})));
  SetLazyLegacy dense(false);
  EXPECT_EQ(stack({a, b}, 1).backend(), "dense");
}

TEST(LazyLegacyTest, TheSwitchIsPerThread) {
  SetLazyLegacy lazy(!EnvSaysLazy());
  bool other = !EnvSaysLazy();
  std::thread([&other] { other = lazy_legacy(); }).join();
  EXPECT_EQ(other, EnvSaysLazy());
  EXPECT_EQ(lazy_legacy(), !EnvSaysLazy());
}

}  // namespace
}  // namespace td
