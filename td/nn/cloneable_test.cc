// td::nn::Cloneable: a TensorDict module written by a user clones as torch::nn::Cloneable does,
// alone and as the child of another module, on every LibTorch version.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include "td/core/testing.h"
#include "td/nn/common.h"

namespace {

// The example of docs/nn.md ("Writing your own TensorDict module"), with a buffer.
struct ScaledLinearImpl : td::nn::Cloneable<ScaledLinearImpl> {
  ScaledLinearImpl() {
    in_keys_ = {"obs"};
    out_keys_ = out_keys_source_ = {"action"};
    reset();
  }
  void reset() override {
    scale = register_parameter("scale", at::ones({2}));
    offset = register_buffer("offset", at::zeros({2}));
    lin = register_module("lin", torch::nn::Linear(4, 2));
  }
  td::TensorDict forward(const td::TensorDict& td) override {
    td::TensorDict out = td;  // a handle: writes go to the caller's TensorDict
    out.set("action", lin(td.get("obs")) * scale + offset);
    return out;
  }
  at::Tensor scale, offset;
  torch::nn::Linear lin{nullptr};
};
TORCH_MODULE(ScaledLinear);

// A TensorDict module holding another one as a registered child.
struct TwiceImpl : td::nn::Cloneable<TwiceImpl> {
  TwiceImpl() {
    in_keys_ = {"obs"};
    out_keys_ = out_keys_source_ = {"action"};
    reset();
  }
  void reset() override { inner = register_module("inner", ScaledLinear()); }
  td::TensorDict forward(const td::TensorDict& td) override {
    td::TensorDict out = inner->forward(td);
    out.set("action", out.get("action") * 2);
    return out;
  }
  ScaledLinear inner{nullptr};
};
TORCH_MODULE(Twice);

td::TensorDict Obs() { return td::TensorDict({{"obs", at::randn({3, 4})}}, {3}); }

TEST(CloneableTest, CloneCopiesParametersBuffersAndChildren) {
  ScaledLinear m;
  {
    torch::NoGradGuard no_grad;
    m->scale.fill_(3.0);
    m->offset.fill_(0.5);
  }
  auto copy = std::dynamic_pointer_cast<ScaledLinearImpl>(m->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(at::equal(copy->scale, m->scale));
  EXPECT_TRUE(at::equal(copy->offset, m->offset));
  EXPECT_TRUE(at::equal(copy->lin->weight, m->lin->weight));
  EXPECT_NE(copy->scale.data_ptr(), m->scale.data_ptr());
  EXPECT_NE(copy->lin->weight.data_ptr(), m->lin->weight.data_ptr());
  // The copy's members are its registered tensors and child.
  EXPECT_TRUE(copy->named_parameters(false)["scale"].is_same(copy->scale));
  EXPECT_EQ(copy->named_children()["lin"].get(), copy->lin.ptr().get());
  EXPECT_TRUE(copy->scale.requires_grad());

  const td::TensorDict obs = Obs();
  EXPECT_TRUE(at::allclose(copy->forward(obs.clone()).get("action"),
                           m->forward(obs.clone()).get("action")));
  // Independent: changing the copy leaves the original alone.
  {
    torch::NoGradGuard no_grad;
    copy->lin->weight.zero_();
  }
  EXPECT_FALSE(at::equal(copy->lin->weight, m->lin->weight));
}

TEST(CloneableTest, AParentDeepCopiesATensorDictModuleChild) {
  Twice m;
  auto copy = std::dynamic_pointer_cast<TwiceImpl>(m->clone());
  ASSERT_NE(copy, nullptr);
  ASSERT_NE(copy->inner.ptr(), nullptr);
  EXPECT_NE(copy->inner.ptr().get(), m->inner.ptr().get());
  EXPECT_EQ(copy->named_children()["inner"].get(), copy->inner.ptr().get());
  EXPECT_TRUE(at::equal(copy->inner->lin->weight, m->inner->lin->weight));
  EXPECT_NE(copy->inner->lin->weight.data_ptr(), m->inner->lin->weight.data_ptr());
  const td::TensorDict obs = Obs();
  EXPECT_TRUE(at::allclose(copy->forward(obs.clone()).get("action"),
                           m->forward(obs.clone()).get("action")));
}

TEST(CloneableTest, TensorDictModuleClonesItsWrappedModule) {
  td::nn::TensorDictModule m(torch::nn::Linear(4, 2), {"obs"}, {"action"});
  auto copy = std::dynamic_pointer_cast<td::nn::TensorDictModuleImpl>(m->clone());
  ASSERT_NE(copy, nullptr);
  const auto p = m->named_parameters(), q = copy->named_parameters();
  ASSERT_EQ(p.size(), q.size());
  for (const auto& item : p) {
    EXPECT_TRUE(at::equal(item.value(), q[item.key()]));
    EXPECT_NE(item.value().data_ptr(), q[item.key()].data_ptr());
  }
}

}  // namespace
