#include "td/functional/vmap.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <tuple>
#include <vector>

#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/core/stack.h"
#include "td/core/testing.h"

namespace td {
namespace {

using at::indexing::Slice;

void ExpectSame(const at::Tensor& a, const at::Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_TRUE(at::allclose(a, b, 1e-5, 1e-6)) << a << "\nvs\n" << b;
}

void ExpectSame(const TensorDict& a, const TensorDict& b) {
  ASSERT_EQ(a.batch_size(), b.batch_size());
  const auto keys = a.keys(KeysOptions().include_nested(true).leaves_only(true).sort(true));
  ASSERT_EQ(keys, b.keys(KeysOptions().include_nested(true).leaves_only(true).sort(true)));
  for (const NestedKey& k : keys) {
    SCOPED_TRACE(k.repr());
    if (!a.get_value(k).is_tensor()) continue;
    ExpectSame(a.get(k), b.get(k));
  }
}

TEST(Vmap, TensorsAgainstTheLoop) {
  at::manual_seed(0);
  at::Tensor x = at::randn({6, 5});
  at::Tensor y = at::randn({6, 5});
  auto dot = [](const at::Tensor& a, const at::Tensor& b) { return at::dot(a, b); };
  at::Tensor got = vmap(dot)(x, y);
  std::vector<at::Tensor> loop;
  for (int64_t i = 0; i < 6; ++i) loop.push_back(at::dot(x[i], y[i]));
  ExpectSame(got, at::stack(loop));
  EXPECT_EQ(vmap_nesting(), 0);
}

TEST(Vmap, InDimsNoneIntAndNegative) {
  at::manual_seed(1);
  at::Tensor w = at::randn({4, 3});          // shared
  at::Tensor xs = at::randn({2, 5, 3});      // mapped along dim 1 (5 members)
  auto f = [](const at::Tensor& w, const at::Tensor& x) {
    EXPECT_EQ(x.sizes(), at::IntArrayRef({2, 3}));  // one member: dim 1 hidden
    return at::matmul(x, w.t());             // [2, 4]
  };
  at::Tensor got = vmap(f, {kNone, 1})(w, xs);
  at::Tensor got_neg = vmap(f, {kNone, -2})(w, xs);
  std::vector<at::Tensor> loop;
  for (int64_t i = 0; i < 5; ++i) loop.push_back(at::matmul(xs.select(1, i), w.t()));
  ExpectSame(got, at::stack(loop));
  ExpectSame(got_neg, at::stack(loop));
}

TEST(Vmap, OutDimsAndSeveralResults) {
  at::manual_seed(2);
  at::Tensor x = at::randn({3, 4, 2});
  auto f = [](const at::Tensor& a) { return std::make_tuple(a * 2, a.sum(0)); };
  auto [doubled, sums] = vmap(f, 0, {1, -1})(x);
  ExpectSame(doubled, (x * 2).movedim(0, 1));   // [4, 3, 2]
  ExpectSame(sums, x.sum(1).movedim(0, -1));    // [2, 3]
  auto g = [](const at::Tensor& a) { return std::vector<at::Tensor>{a + 1, a.max()}; };
  std::vector<at::Tensor> outs = vmap(g, 0, {2, 0})(x);
  ASSERT_EQ(outs.size(), 2u);
  ExpectSame(outs[0], (x + 1).movedim(0, 2));
  ExpectSame(outs[1], x.amax({1, 2}));
  TD_EXPECT_THROW_MSG(vmap(g, 0, {3, 0})(x), ValueError,
                      {"out_dim 3", "[4, 2]", "<= out_dim <= 2"});
  auto p = [](const at::Tensor& a) { return std::make_pair(a, a); };
  TD_EXPECT_THROW_MSG(vmap(p, 0, {0, 1, 2})(x), ValueError, {"out_dims has 3 entries", "2 results"});
}

TEST(Vmap, UnmappedResultIsExpanded) {
  at::Tensor x = at::randn({5, 2});
  at::Tensor c = at::arange(3, at::kFloat);
  at::Tensor got = vmap([&](const at::Tensor&) { return c; }, 0, 1)(x);
  ExpectSame(got, c.unsqueeze(1).expand({3, 5}));
}

TensorDict Sample(int64_t members) {
  // batch [E, 3]: a leaf, a nested leaf, non-tensor data
  TensorDict td({{"obs", at::randn({members, 3, 4})},
                 {"nested", TensorDict({{"w", at::randn({members, 3, 4, 2})}}, {members, 3})}},
                {members, 3});
  td.set_non_tensor("tag", "abc");
  return td;
}

TensorDict Step(const TensorDict& td) {
  TensorDict out = td.copy();
  out.set("y", at::matmul(td.get("obs").unsqueeze(-2), td.get({"nested", "w"})).squeeze(-2));
  out.set({"nested", "norm"}, td.get({"nested", "w"}).norm(2, {-1}));
  return out;
}

TEST(Vmap, TensorDictBatchSizeLeavesOutTheMappedDim) {
  at::manual_seed(3);
  TensorDict td = Sample(5);
  auto f = [](const TensorDict& member) {
    EXPECT_EQ(member.batch_size(), at::IntArrayRef({3}));
    EXPECT_EQ(member.get_tensordict("nested").batch_size(), at::IntArrayRef({3}));
    EXPECT_EQ(member.get("obs").sizes(), at::IntArrayRef({3, 4}));
    EXPECT_EQ(member.get_non_tensor("tag"), "abc");
    return Step(member);
  };
  TensorDict got = vmap(f)(td);
  EXPECT_EQ(got.batch_size(), at::IntArrayRef({5, 3}));
  std::vector<TensorDict> loop;
  for (int64_t i = 0; i < 5; ++i) loop.push_back(Step(td.index({i})));
  ExpectSame(got, stack(loop, 0));
  EXPECT_EQ(got.get_non_tensor("tag"), "abc");
  // out_dim 1: the members' dim is batch dim 1 of the result
  TensorDict got1 = vmap(f, 0, 1)(td);
  EXPECT_EQ(got1.batch_size(), at::IntArrayRef({3, 5}));
  ExpectSame(got1, stack(loop, 1));
  TD_EXPECT_THROW_MSG(vmap(f, 0, 2)(td), ValueError, {"out_dim 2", "torch.Size([3])"});
}

TEST(Vmap, TensorDictAlongASecondBatchDim) {
  at::manual_seed(4);
  TensorDict td = Sample(2).permute({1, 0}).contiguous();   // batch [3, 2]: map dim 1 (2 members)
  auto f = [](const TensorDict& member) {
    EXPECT_EQ(member.batch_size(), at::IntArrayRef({3}));
    return Step(member);
  };
  TensorDict got = vmap(f, 1)(td);
  std::vector<TensorDict> loop;
  for (int64_t i = 0; i < 2; ++i) loop.push_back(Step(td.index({Slice(), i})));
  ExpectSame(got, stack(loop, 0));
  TD_EXPECT_THROW_MSG(vmap(f, 2)(td), ValueError,
                      {"in_dim 2 of argument 0", "torch.Size([3, 2])", "per_key"});
}

TEST(Vmap, LazyStackInput) {
  at::manual_seed(5);
  std::vector<TensorDict> members;
  for (int i = 0; i < 4; ++i) {
    members.push_back(TensorDict({{"obs", at::randn({3, 4})},
                                  {"nested", TensorDict({{"w", at::randn({3, 4, 2})}}, {3})}},
                                 {3}));
  }
  LazyStackedTensorDict lazy = lazy_stack(members, 0);
  ASSERT_TRUE(LazyStackedTensorDict::from(lazy).has_value());
  TensorDict got = vmap([](const TensorDict& m) { return Step(m); })(lazy);
  std::vector<TensorDict> loop;
  for (const TensorDict& m : members) loop.push_back(Step(m));
  ExpectSame(got, stack(loop, 0));
}

TEST(Vmap, SharedTensorDictIsACopy) {
  TensorDict shared({{"a", at::ones({3})}}, {3});
  at::Tensor scale = at::arange(4, at::kFloat);
  auto f = [](TensorDict td, const at::Tensor& s) {
    td.set("b", td.get("a") * s);
    return td;
  };
  TensorDict got = vmap(f, {kNone, 0})(shared, scale);
  EXPECT_FALSE(shared.contains("b"));
  EXPECT_EQ(got.batch_size(), at::IntArrayRef({4, 3}));
  ExpectSame(got.get("a"), at::ones({4, 3}));
  ExpectSame(got.get("b"), scale.unsqueeze(1).expand({4, 3}));
}

TEST(Vmap, PerKeyDims) {
  at::manual_seed(6);
  // batch []: "x" shared, "params" mapped along its batch dim 0, "bias" along its dim 1
  TensorDict params({{"w", at::randn({5, 4, 3})}}, {5});
  TensorDict td({{"x", at::randn({2, 3})}, {"params", params}, {"bias", at::randn({4, 5})}}, {});
  auto f = [](const TensorDict& m) {
    EXPECT_EQ(m.get_tensordict("params").batch_size(), at::IntArrayRef({}));
    EXPECT_EQ(m.get({"params", "w"}).sizes(), at::IntArrayRef({4, 3}));
    EXPECT_EQ(m.get("bias").sizes(), at::IntArrayRef({4}));
    EXPECT_EQ(m.get("x").sizes(), at::IntArrayRef({2, 3}));
    return at::matmul(m.get("x"), m.get({"params", "w"}).t()) + m.get("bias");
  };
  at::Tensor got =
      vmap(f, {InDim::per_key({{"params", 0}, {"bias", 1}, {"x", kNone}})})(td);
  std::vector<at::Tensor> loop;
  for (int64_t i = 0; i < 5; ++i) {
    loop.push_back(at::matmul(td.get("x"), params.get("w")[i].t()) + td.get("bias").select(1, i));
  }
  ExpectSame(got, at::stack(loop));
  // a nested leaf named directly: its dim must come after the batch dims of "params"
  TD_EXPECT_THROW_MSG(vmap(f, {InDim::per_key({{{"params", "w"}, 0}, {"bias", -1}})})(td),
                      ValueError, {"argument 0, key ('params', 'w')", "batch dim"});
  TensorDict flat({{"x", td.get("x")},
                   {"params", TensorDict({{"w", params.get("w")}}, {})},
                   {"bias", td.get("bias")}},
                  {});
  at::Tensor got2 = vmap(f, {InDim::per_key({{{"params", "w"}, 0}, {"bias", -1}})})(flat);
  ExpectSame(got2, at::stack(loop));

  TD_EXPECT_THROW_MSG(vmap(f, {InDim::per_key({{"missing", 0}})})(td), KeyError,
                      {"'missing'", "argument 0"});
  TensorDict batched({{"a", at::zeros({5, 2})}}, {5});
  TD_EXPECT_THROW_MSG(vmap([](const TensorDict& m) { return m.get("a"); },
                           {InDim::per_key({{"a", 0}})})(batched),
                      ValueError, {"argument 0, key 'a'", "batch dim", "torch.Size([5])"});
}

TEST(Vmap, ErrorsNameTheArgumentAndKey) {
  TensorDict td({{"n", TensorDict({{"a", at::zeros({4, 2})}, {"b", at::zeros({3, 2})}}, {})}}, {});
  auto first = [](const TensorDict& m, const at::Tensor&) { return m.get({"n", "a"}); };
  TD_EXPECT_THROW_MSG(vmap(first, {InDim::per_key({{"n", 0}}), 0})(td, at::zeros({4})),
                      ValueError, {"argument 0, key ('n', 'b')", "size 3", "[3, 2]",
                                   "argument 0, key ('n', 'a')", "size 4"});
  TD_EXPECT_THROW_MSG(vmap(first, 0)(td, at::zeros({4})), ValueError,
                      {"in_dim 0 of argument 0", "batch size torch.Size([])", "per_key"});
}

TEST(Vmap, MoreErrors) {
  at::Tensor x = at::zeros({4, 2});
  auto f = [](const at::Tensor& a, const at::Tensor& b) { return a + b; };
  TD_EXPECT_THROW_MSG(vmap(f)(x, at::zeros({3, 2})), ValueError,
                      {"argument 1 has size 3", "argument 0 has size 4"});
  TD_EXPECT_THROW_MSG(vmap(f, {0, 2})(x, x), ValueError,
                      {"in_dim 2 of argument 1", "[4, 2]"});
  TD_EXPECT_THROW_MSG(vmap(f, {kNone, kNone})(x, x), ValueError, {"no argument is mapped"});
  TD_EXPECT_THROW_MSG(vmap(f, {0})(x, x), ValueError, {"1 entries", "2 arguments"});
  auto g = [](const at::Tensor& a, int k) { return a * k; };
  TD_EXPECT_THROW_MSG(vmap(g, 0)(x, 3), ValueError, {"argument 1 is neither"});
  ExpectSame(vmap(g, {0, kNone})(x, 3), x * 3);
  TD_EXPECT_THROW_MSG(vmap(f, 0, 0, VmapOptions().chunk_size(0))(x, x), ValueError,
                      {"chunk_size must be >= 1"});
  EXPECT_EQ(vmap_nesting(), 0);
}

TEST(Vmap, ExceptionInsideLeavesNoLayer) {
  at::Tensor x = at::zeros({4, 2});
  auto boom = [](const at::Tensor& a) -> at::Tensor {
    EXPECT_EQ(vmap_nesting(), 1);
    throw std::runtime_error("boom");
  };
  EXPECT_THROW(vmap(boom)(x), std::runtime_error);
  EXPECT_EQ(vmap_nesting(), 0);
  // an error raised by LibTorch inside fn, with a nested vmap open
  auto bad = [](const at::Tensor& a) {
    return vmap([](const at::Tensor& b) { return at::matmul(b, at::zeros({5, 5})); })(a);
  };
  EXPECT_THROW(vmap(bad)(at::zeros({4, 3, 2})), c10::Error);
  EXPECT_EQ(vmap_nesting(), 0);
  // the thread's stack works as before
  ExpectSame(vmap([](const at::Tensor& a) { return a + 1; })(x), x + 1);
}

TEST(Vmap, Nested) {
  at::manual_seed(7);
  at::Tensor a = at::randn({3, 4});
  at::Tensor b = at::randn({5, 4});
  // outer over a's rows, inner over b's rows: all pairwise dots [3, 5]
  auto outer = [&](const at::Tensor& ai) {
    EXPECT_EQ(vmap_nesting(), 1);
    return vmap([&](const at::Tensor& bj) {
      EXPECT_EQ(vmap_nesting(), 2);
      return at::dot(ai, bj);
    })(b);
  };
  at::Tensor got = vmap(outer)(a);
  ExpectSame(got, at::matmul(a, b.t()));
  // nested over a TensorDict: outer over dim 0, inner over (what is left of) dim 1
  TensorDict td({{"x", at::randn({3, 5, 2})}}, {3, 5});
  auto outer_td = [](const TensorDict& m) {
    EXPECT_EQ(m.batch_size(), at::IntArrayRef({5}));
    return vmap([](const TensorDict& mm) {
      EXPECT_EQ(mm.batch_size(), at::IntArrayRef({}));
      TensorDict out({}, {});
      out.set("s", mm.get("x").sum());
      return out;
    })(m);
  };
  TensorDict nested = vmap(outer_td)(td);
  EXPECT_EQ(nested.batch_size(), at::IntArrayRef({3, 5}));
  ExpectSame(nested.get("s"), td.get("x").sum(-1));
}

TEST(Vmap, ChunkSize) {
  at::manual_seed(8);
  at::Tensor x = at::randn({7, 4});
  TensorDict td = Sample(7);
  auto f = [](const at::Tensor& a, const TensorDict& m) {
    return std::make_tuple(a.softmax(0), Step(m));
  };
  auto [full_t, full_td] = vmap(f)(x, td);
  for (int64_t chunk : {1, 3, 7, 100}) {
    SCOPED_TRACE(chunk);
    auto [t, d] = vmap(f, 0, {1, 1}, VmapOptions().chunk_size(chunk))(x, td);
    ExpectSame(t, full_t.movedim(0, 1));
    ExpectSame(d, full_td.permute({1, 0}));
  }
}

// With chunk_size, every chunk's fn must return as many outputs: a first chunk's empty vector
// used to drop the later chunks' outputs silently.
TEST(Vmap, ChunksReturningDifferentNumbersOfOutputs) {
  at::Tensor x = at::randn({4, 2});
  int calls = 0;
  auto first_empty = [&calls](const at::Tensor& a) {
    return calls++ == 0 ? std::vector<at::Tensor>{} : std::vector<at::Tensor>{a + 1};
  };
  TD_EXPECT_THROW_MSG(vmap(first_empty, 0, 0, VmapOptions().chunk_size(2))(x), ValueError,
                      {"0 outputs for chunk 0", "1 for chunk 1", "same number of outputs"});
  EXPECT_EQ(calls, 2);
  calls = 0;
  auto later_empty = [&calls](const at::Tensor& a) {
    return calls++ == 0 ? std::vector<at::Tensor>{a, a} : std::vector<at::Tensor>{};
  };
  TD_EXPECT_THROW_MSG(vmap(later_empty, 0, 0, VmapOptions().chunk_size(3))(x), ValueError,
                      {"2 outputs for chunk 0", "0 for chunk 1"});
  EXPECT_EQ(vmap_nesting(), 0);
  // Every chunk empty: an empty result, as without chunks.
  auto none = [](const at::Tensor&) { return std::vector<at::Tensor>{}; };
  EXPECT_TRUE(vmap(none, 0, 0, VmapOptions().chunk_size(1))(x).empty());
}

at::Tensor Noise(const at::Tensor& a) { return a + at::rand_like(a); }

TEST(Vmap, Randomness) {
  at::Tensor x = at::zeros({6, 3});
  EXPECT_THROW(vmap(Noise)(x), c10::Error);   // kError by default
  EXPECT_EQ(vmap_nesting(), 0);
  for (std::optional<int64_t> chunk : {std::optional<int64_t>(), std::optional<int64_t>(4)}) {
    SCOPED_TRACE(chunk ? *chunk : -1);
    at::Tensor same =
        vmap(Noise, 0, 0, VmapOptions().randomness(Randomness::kSame).chunk_size(chunk))(x);
    at::Tensor different =
        vmap(Noise, 0, 0, VmapOptions().randomness(Randomness::kDifferent).chunk_size(chunk))(x);
    for (int64_t i = 1; i < 6; ++i) {
      EXPECT_TRUE(at::equal(same[i], same[0]));
      EXPECT_FALSE(at::equal(different[i], different[0]));
    }
  }
  // kSame with a seed: the members' draw is the draw of one unbatched call
  at::manual_seed(9);
  at::Tensor same = vmap(Noise, 0, 0, VmapOptions().randomness(Randomness::kSame))(x);
  at::manual_seed(9);
  ExpectSame(same[0], at::rand({3}));
}

}  // namespace
}  // namespace td
