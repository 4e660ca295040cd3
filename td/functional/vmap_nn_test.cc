// td::vmap over LibTorch modules: a stacked parameter TensorDict swapped into a module with
// to_module inside fn (each member's tensors are batched tensors), against the member loop.
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/nn.h>

#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "td/compat/functorch.h"
#include "td/core/stack.h"
#include "td/core/testing.h"
#include "td/functional/vmap.h"
#include "td/nn/common.h"
#include "td/nn/ensemble.h"
#include "td/nn/functional.h"

namespace {

namespace tnn = torch::nn;

void ExpectClose(const at::Tensor& a, const at::Tensor& b) {
  ASSERT_EQ(a.sizes(), b.sizes());
  EXPECT_TRUE(at::allclose(a, b, 1e-5, 1e-5)) << (a - b).abs().max();
}

std::vector<at::Tensor> Leaves(const td::TensorDict& td) {
  std::vector<at::Tensor> out;
  for (const td::NestedKey& k :
       td.keys(td::KeysOptions().include_nested(true).leaves_only(true).sort(true))) {
    out.push_back(td.get(k));
  }
  return out;
}

// While alive, an operation without a batching rule throws inside vmap instead of running
// member by member (LibTorch's fallback), so a test can tell which layers are batched natively.
class NoFallback {
 public:
  NoFallback() { td::compat::functorch::SetFallbackEnabled(false); }
  ~NoFallback() { td::compat::functorch::SetFallbackEnabled(true); }
};

TEST(VmapNn, MlpEnsembleAgainstTheLoopWithGradients) {
  torch::manual_seed(0);
  std::vector<tnn::Sequential> mlps;
  std::vector<std::shared_ptr<tnn::Module>> ptrs;
  for (int i = 0; i < 5; ++i) {
    mlps.emplace_back(tnn::Linear(16, 32), tnn::Tanh(), tnn::Linear(32, 32), tnn::ReLU(),
                      tnn::Linear(32, 4));
    ptrs.push_back(mlps.back().ptr());
  }
  tnn::Sequential model = mlps[0];
  td::TensorDict stacked = td::nn::from_modules(ptrs).detach();
  stacked.requires_grad_();
  const at::Tensor x = torch::randn({8, 16});

  auto run = [&](const at::Tensor& input, const td::TensorDict& p) {
    auto guard = td::nn::to_module(p, *model);
    return model->forward(input);
  };
  at::Tensor y = td::vmap(run, {td::kNone, 0})(x, stacked);
  EXPECT_EQ(y.sizes(), at::IntArrayRef({5, 8, 4}));
  at::Tensor loop = td::nn::ensemble_map(stacked, *model, [&] { return model->forward(x); });
  ExpectClose(y, loop);
  ExpectClose(y[3], mlps[3]->forward(x));
  // the module has its own tensors back
  EXPECT_TRUE(model[0]->as<tnn::Linear>()->weight.is_same(mlps[0][0]->as<tnn::Linear>()->weight));

  // gradients reach the stacked parameters, as the loop's do
  const at::Tensor w = at::randn({5, 8, 4});
  std::vector<at::Tensor> leaves = Leaves(stacked);
  std::vector<at::Tensor> g_vmap = torch::autograd::grad({(y * w).sum()}, leaves);
  std::vector<at::Tensor> g_loop = torch::autograd::grad({(loop * w).sum()}, leaves);
  ASSERT_EQ(g_vmap.size(), 6u);
  for (size_t i = 0; i < g_vmap.size(); ++i) ExpectClose(g_vmap[i], g_loop[i]);

  // per-member inputs: x mapped too
  const at::Tensor xs = torch::randn({5, 8, 16});
  at::Tensor per_member = td::vmap(run)(xs, stacked);
  for (int64_t i = 0; i < 5; ++i) ExpectClose(per_member[i], mlps[i]->forward(xs[i]));
}

TEST(VmapNn, GruCellTensorDictModuleOverExpandedParams) {
  torch::manual_seed(1);
  tnn::GRUCell module(4, 8);
  td::nn::TensorDictModule td_module(module, {"input", "hidden"}, {"output"});
  td::TensorDict data({{"input", torch::randn({3, 4})}, {"hidden", torch::randn({3, 8})}}, {3});
  td::TensorDict params = td::nn::from_module(*td_module);
  td::TensorDict params_repeat = params.expand({4});
  EXPECT_EQ(params_repeat.get({"module", "weight_hh"}).sizes(), at::IntArrayRef({4, 24, 8}));
  auto func = [&](const td::TensorDict& td, const td::TensorDict& p) {
    auto guard = td::nn::to_module(p, *td_module);
    return td_module(td);
  };
  td::TensorDict td_vmap = td::vmap(func, {td::kNone, 0})(data.clone(), params_repeat);
  EXPECT_EQ(td_vmap.batch_size(), at::IntArrayRef({4, 3}));
  EXPECT_EQ(td_vmap.get("output").sizes(), at::IntArrayRef({4, 3, 8}));
  EXPECT_EQ(td_vmap.get("hidden").sizes(), at::IntArrayRef({4, 3, 8}));
  const at::Tensor expected = module->forward(data.get("input"), data.get("hidden"));
  for (int64_t i = 0; i < 4; ++i) ExpectClose(td_vmap.get("output")[i], expected);
  EXPECT_FALSE(data.contains("output"));

  // four different cells: vmap == the loop
  std::vector<std::shared_ptr<tnn::Module>> cells;
  std::vector<td::nn::TensorDictModule> members;
  for (int i = 0; i < 4; ++i) {
    members.emplace_back(tnn::GRUCell(4, 8), std::vector<td::NestedKey>{"input", "hidden"},
                         std::vector<td::NestedKey>{"output"});
    cells.push_back(members.back().ptr());
  }
  td::TensorDict stacked = td::nn::from_modules(cells);
  td::TensorDict got = td::vmap(func, {td::kNone, 0})(data, stacked);
  for (int64_t i = 0; i < 4; ++i) {
    td::TensorDict one = members[i](data.clone());
    ExpectClose(got.get("output")[i], one.get("output"));
  }
}

// Layers run inside vmap with their parameters stacked, against the member loop; prints which
// of them LibTorch runs through its per-member fallback (the table in docs/nn.md).
TEST(VmapNn, CommonLayersAgainstTheLoop) {
  struct Case {
    std::string name;
    std::function<tnn::AnyModule()> make;
    std::function<at::Tensor()> input;
    std::function<at::Tensor(tnn::AnyModule&, const at::Tensor&)> call;
  };
  auto forward = [](tnn::AnyModule& m, const at::Tensor& x) { return m.forward(x); };
  std::vector<Case> cases = {
      {"Linear", [] { return tnn::AnyModule(tnn::Linear(6, 5)); },
       [] { return torch::randn({3, 6}); }, forward},
      {"Conv1d", [] { return tnn::AnyModule(tnn::Conv1d(2, 4, 3)); },
       [] { return torch::randn({3, 2, 9}); }, forward},
      {"Conv2d", [] { return tnn::AnyModule(tnn::Conv2d(2, 4, 3)); },
       [] { return torch::randn({3, 2, 7, 7}); }, forward},
      {"LayerNorm", [] { return tnn::AnyModule(tnn::LayerNorm(tnn::LayerNormOptions({6}))); },
       [] { return torch::randn({3, 6}); }, forward},
      {"Embedding", [] { return tnn::AnyModule(tnn::Embedding(10, 4)); },
       [] { return torch::randint(10, {3, 5}); }, forward},
      {"GRUCell", [] { return tnn::AnyModule(tnn::GRUCell(6, 5)); },
       [] { return torch::randn({3, 6}); }, forward},
      {"LSTMCell", [] { return tnn::AnyModule(tnn::LSTMCell(6, 5)); },
       [] { return torch::randn({3, 6}); },
       [](tnn::AnyModule& m, const at::Tensor& x) {
         return std::get<0>(m.forward<std::tuple<at::Tensor, at::Tensor>>(x));
       }},
      {"MultiheadAttention", [] { return tnn::AnyModule(tnn::MultiheadAttention(8, 2)); },
       [] { return torch::randn({4, 3, 8}); },
       [](tnn::AnyModule& m, const at::Tensor& x) {
         return std::get<0>(m.forward<std::tuple<at::Tensor, at::Tensor>>(x, x, x));
       }},
  };
  torch::manual_seed(2);
  for (Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<tnn::AnyModule> members;
    std::vector<std::shared_ptr<tnn::Module>> ptrs;
    for (int i = 0; i < 3; ++i) {
      members.push_back(c.make());
      ptrs.push_back(members.back().ptr());
    }
    td::TensorDict stacked = td::nn::from_modules(ptrs);
    const at::Tensor x = c.input();
    tnn::AnyModule& model = members[0];
    auto run = [&] {
      return td::vmap(
          [&](const at::Tensor& input, const td::TensorDict& p) {
            auto guard = td::nn::to_module(p, *model.ptr());
            return c.call(model, input);
          },
          {td::kNone, 0})(x, stacked);
    };
    at::Tensor y;
    try {
      y = run();
    } catch (const c10::Error& e) {
      // LSTMCell's op takes its state as a tensor list, which LibTorch 1.13's fallback cannot
      // slice: the error names the op. Every other layer here must run.
      const std::string msg = e.what_without_backtrace();
      EXPECT_EQ(c.name, "LSTMCell") << msg;
      EXPECT_NE(msg.find("lstm_cell"), std::string::npos) << msg;
      EXPECT_EQ(td::vmap_nesting(), 0);
      std::cout << "[vmap] " << c.name << ": not supported: " << msg.substr(0, msg.find('\n'))
                << "\n";
      continue;
    }
    for (int64_t i = 0; i < 3; ++i) ExpectClose(y[i], c.call(members[i], x));
    std::string native = "batched natively";
    {
      NoFallback strict;
      try {
        ExpectClose(run(), y);
      } catch (const c10::Error& e) {
        native = std::string("per-member fallback: ") + e.what_without_backtrace();
        native = native.substr(0, native.find('\n'));
      }
    }
    EXPECT_EQ(td::vmap_nesting(), 0);
    std::cout << "[vmap] " << c.name << ": " << native << "\n";
  }
}

TEST(VmapNn, ExceptionInsideRestoresTheModuleAndTheLayerStack) {
  tnn::Linear layer(3, 2);
  const at::Tensor own = layer->weight;
  td::TensorDict stacked = td::stack({td::nn::from_module(layer), td::nn::from_module(layer)}, 0);
  auto bad = [&](const at::Tensor& x, const td::TensorDict& p) {
    auto guard = td::nn::to_module(p, layer);
    return layer->forward(x);   // x has 4 features, the layer wants 3
  };
  EXPECT_THROW(td::vmap(bad, {td::kNone, 0})(torch::randn({5, 4}), stacked), c10::Error);
  EXPECT_EQ(td::vmap_nesting(), 0);
  EXPECT_TRUE(layer->weight.is_same(own));
}

}  // namespace
