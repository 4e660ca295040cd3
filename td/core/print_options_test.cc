// The print options (td/core/print_options.h): upstream's defaults and layout, each option in
// TensorDict's repr, the global setter and the scoped guard.
#include "td/core/print_options.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "td/core/testing.h"

namespace td {
namespace {

// Batch [3]: "b" float32 [3, 4] inserted before "a" int64 [3].
TensorDict Sample() {
  return TensorDict({{"b", at::zeros({3, 4})}, {"a", at::arange(3)}}, {3});
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(PrintOptionsTest, DefaultsAreUpstreams) {
  const PrintOptions o = get_printoptions();
  EXPECT_TRUE(o.show_batch_size() && o.show_device() && o.show_is_shared());
  EXPECT_TRUE(o.show_shape() && o.show_field_device() && o.show_dtype() &&
              o.show_field_is_shared());
  EXPECT_FALSE(o.show_grad() || o.show_is_contiguous() || o.show_is_view() ||
               o.show_storage_size() || o.plain());
  EXPECT_EQ(o.sort_keys(), KeyOrder::kAlphabetical);
  EXPECT_FALSE(o.sort_key());
  std::ostringstream os;
  os << Sample();
  EXPECT_EQ(os.str(),
            "TensorDict(\n"
            "    fields={\n"
            "        a: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.int64, "
            "is_shared=False),\n"
            "        b: Tensor(shape=torch.Size([3, 4]), device=cpu, dtype=torch.float32, "
            "is_shared=False)},\n"
            "    batch_size=torch.Size([3]),\n"
            "    device=None,\n"
            "    is_shared=False)");
}

TEST(PrintOptionsTest, VerboseFalseShowsShapesOnly) {
  {
    PrintOptionsGuard scoped(PrintOptions().verbose(false));
    EXPECT_EQ(Sample().repr(),
              "TensorDict(\n"
              "    fields={\n"
              "        a: Tensor(shape=torch.Size([3])),\n"
              "        b: Tensor(shape=torch.Size([3, 4]))},\n"
              "    batch_size=torch.Size([3]))");
  }
  // Options set after verbose(false) win, as upstream's explicit keywords.
  PrintOptionsGuard scoped(PrintOptions().verbose(false).show_dtype(true));
  const std::string text = Sample().repr();
  EXPECT_TRUE(Has(text, "a: Tensor(shape=torch.Size([3]), dtype=torch.int64)")) << text;
  EXPECT_FALSE(Has(text, "device=")) << text;
}

TEST(PrintOptionsTest, EachLineAndField) {
  const TensorDict td = Sample();
  {
    PrintOptionsGuard g(PrintOptions().show_device(false));
    const std::string t = td.repr();
    EXPECT_FALSE(Has(t, "\n    device=")) << t;
    EXPECT_TRUE(Has(t, "device=cpu") && Has(t, "batch_size=") && Has(t, "\n    is_shared=")) << t;
  }
  {
    PrintOptionsGuard g(PrintOptions().show_is_shared(false));
    const std::string t = td.repr();
    EXPECT_FALSE(Has(t, "\n    is_shared=")) << t;
    EXPECT_TRUE(Has(t, "\n    device=None)")) << t;
  }
  {
    PrintOptionsGuard g(PrintOptions().show_batch_size(false));
    EXPECT_FALSE(Has(td.repr(), "batch_size=")) << td.repr();
  }
  {
    PrintOptionsGuard g(
        PrintOptions().show_batch_size(false).show_device(false).show_is_shared(false));
    const std::string t = td.repr();
    const std::string end = "dtype=torch.float32, is_shared=False)})";
    ASSERT_GT(t.size(), end.size());
    EXPECT_EQ(t.substr(t.size() - end.size()), end) << t;
  }
  {
    PrintOptionsGuard g(PrintOptions().show_shape(false).show_field_device(false));
    EXPECT_TRUE(Has(td.repr(), "a: Tensor(dtype=torch.int64, is_shared=False)")) << td.repr();
  }
  {
    PrintOptionsGuard g(PrintOptions().show_field_is_shared(false));
    const std::string t = td.repr();
    EXPECT_TRUE(Has(t, "a: Tensor(shape=torch.Size([3]), device=cpu, dtype=torch.int64)")) << t;
    EXPECT_TRUE(Has(t, "\n    is_shared=False)")) << t;  // the TensorDict's line stays
  }
}

TEST(PrintOptionsTest, OptInFields) {
  const at::Tensor base = at::arange(12.0).view({3, 4});
  TensorDict td({{"g", at::ones({3}).requires_grad_()},
                 {"t", at::empty_strided({3, 4}, {1, 3}).copy_(base)},  // not contiguous, no view
                 {"v", base.narrow(1, 0, 2)},
                 {"i", at::tensor({4, -2, 7})},
                 {"m", at::tensor({1, 0, 1}).to(at::kBool)},
                 {"e", at::zeros({3, 0})}},
                {3});
  PrintOptionsGuard g(PrintOptions().verbose(false).show_shape(false).show_grad(true)
                          .show_is_contiguous(true).show_is_view(true).show_storage_size(true)
                          .plain(true));
  const std::string t = td.repr();
  EXPECT_TRUE(Has(t, "g: Tensor(requires_grad=True, is_contiguous=True, is_view=False, "
                     "storage_size=12, mean=1, std=0)")) << t;
  EXPECT_TRUE(Has(t, "t: Tensor(requires_grad=False, is_contiguous=False, is_view=False, "
                     "storage_size=48, mean=5.5, std=3.606)")) << t;
  EXPECT_TRUE(Has(t, "v: Tensor(requires_grad=False, is_contiguous=False, is_view=True, "
                     "storage_size=48, ")) << t;
  EXPECT_TRUE(Has(t, "min=-2, max=7)")) << t;
  EXPECT_TRUE(Has(t, "min=False, max=True)")) << t;
  EXPECT_TRUE(Has(t, "e: Tensor(requires_grad=False, is_contiguous=True, is_view=False, "
                     "storage_size=0, [])")) << t;
}

// Upstream's key orders: alphabetical (the default), insertion, or by a sort key.
TEST(PrintOptionsTest, KeyOrder) {
  TensorDict td({{"xb", at::zeros({2})}, {"ya", at::zeros({2})}, {"za", at::zeros({2})},
                 {"c", at::zeros({2})}},
                {2});
  auto order = [&] {
    const std::string t = td.repr();
    std::vector<std::pair<size_t, std::string>> at;
    for (const char* k : {"xb", "ya", "za", "c"}) at.emplace_back(t.find(std::string(k) + ":"), k);
    std::sort(at.begin(), at.end());
    std::string out;
    for (const auto& p : at) out += p.second + " ";
    return out;
  };
  EXPECT_EQ(order(), "c xb ya za ");
  {
    PrintOptionsGuard g(PrintOptions().sort_keys(KeyOrder::kInsertion));
    EXPECT_EQ(order(), "xb ya za c ");
  }
  PrintOptionsGuard g(PrintOptions().sort_key(
      [](const std::string& k) { return std::string(k.rbegin(), k.rend()); }));
  EXPECT_EQ(order(), "ya za xb c ");  // "ay" < "az" < "bx" < "c"
}

TEST(PrintOptionsTest, NestedLevelsFollowTheOptions) {
  TensorDict td({{"n", TensorDict({{"x", at::zeros({2, 5})}}, {2})}, {"s", "hi"}}, {2});
  PrintOptionsGuard g(PrintOptions().verbose(false));
  EXPECT_EQ(td.repr(),
            "TensorDict(\n"
            "    fields={\n"
            "        n: TensorDict(\n"
            "            fields={\n"
            "                x: Tensor(shape=torch.Size([2, 5]))},\n"
            "            batch_size=torch.Size([2])),\n"
            "        s: NonTensorData(data=hi, batch_size=torch.Size([2]), device=None)},\n"
            "    batch_size=torch.Size([2]))");
}

// The global setter stays until replaced; guards restore what they replaced, innermost first.
TEST(PrintOptionsTest, GlobalAndScoped) {
  const PrintOptions saved = get_printoptions();
  set_printoptions(get_printoptions().show_is_shared(false));
  EXPECT_FALSE(get_printoptions().show_is_shared());
  EXPECT_FALSE(Has(Sample().repr(), "\n    is_shared=")) << Sample().repr();
  {
    PrintOptionsGuard outer(get_printoptions().show_device(false));
    {
      PrintOptionsGuard inner{PrintOptions()};
      EXPECT_TRUE(get_printoptions().show_device() && get_printoptions().show_is_shared());
    }
    EXPECT_FALSE(get_printoptions().show_device());
    EXPECT_FALSE(get_printoptions().show_is_shared());
  }
  EXPECT_TRUE(get_printoptions().show_device());
  EXPECT_FALSE(get_printoptions().show_is_shared());
  // A copy changes nothing until it is set.
  PrintOptions copy = get_printoptions();
  copy.show_batch_size(false);
  EXPECT_TRUE(get_printoptions().show_batch_size());
  set_printoptions(saved);
  EXPECT_TRUE(get_printoptions().show_is_shared());
  EXPECT_TRUE(Has(Sample().repr(), "\n    is_shared=False)"));
}

}  // namespace
}  // namespace td
