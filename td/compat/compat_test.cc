// Checks, on the LibTorch this is built against, that what td/compat assumes about it holds:
// errors carry their location, the private members module_access reaches are the ones the
// public API sees, the OpenMP runtime is found where LibTorch uses one, and the version-dependent
// kernels agree with the per-tensor ones. A LibTorch whose layout changed fails here first.
#include <ATen/ATen.h>
#include <ATen/Config.h>
#include <gtest/gtest.h>
#include <torch/csrc/api/include/torch/version.h>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <cctype>
#include <string>
#include <type_traits>

#include "td/compat/borrowed_tensors.h"
#include "td/compat/c10d.h"
#include "td/compat/dtypes.h"
#include "td/compat/foreach.h"
#include "td/compat/module_access.h"
#include "td/compat/omp.h"
#include "td/compat/torch.h"

namespace {

using td::compat::SourceLoc;

TEST(CompatTest, VersionMatchesTheHeaders) {
  const std::string version = TORCH_VERSION;
  EXPECT_EQ(version.rfind(std::to_string(td::compat::kTorchVersionMajor) + "." +
                              std::to_string(td::compat::kTorchVersionMinor) + ".",
                          0),
            0u)
      << version;
  EXPECT_EQ(td::compat::kHasForeachLerp, td::compat::kTorchVersionMajor >= 2);
}

SourceLoc Here(SourceLoc loc = SourceLoc::current()) { return loc; }

TEST(CompatTest, ErrorsCarryTheirLocation) {
  const SourceLoc loc = Here();
  EXPECT_EQ(loc.line, static_cast<uint32_t>(__LINE__ - 1));
  EXPECT_NE(std::string(loc.file).find("td/compat/compat_test.cc"), std::string::npos);
  try {
    throw td::compat::MakeError<c10::ValueError>(loc, "bad value for key 'a'");
  } catch (const c10::Error& e) {
    EXPECT_NE(dynamic_cast<const c10::ValueError*>(&e), nullptr);
    EXPECT_EQ(std::string(e.what_without_backtrace()), "bad value for key 'a'");
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("bad value for key 'a'", 0), 0u) << what;
    EXPECT_NE(what.find("Exception raised from " + std::string(loc.function) + " at " +
                        loc.file + ":" + std::to_string(loc.line)),
              std::string::npos)
        << what;
  }
}

TEST(CompatTest, RegistriesAreTheOnesThePublicApiSees) {
  torch::nn::Linear lin(3, 2);
  lin->register_buffer("running", at::zeros({2}));
  auto& params = td::compat::ParametersOf(*lin);
  ASSERT_EQ(params.size(), 2u);
  EXPECT_TRUE(params["weight"].is_same(lin->named_parameters(false)["weight"]));
  EXPECT_TRUE(td::compat::BuffersOf(*lin)["running"].is_same(lin->named_buffers(false)["running"]));
  // Replacing a slot is seen by the public API.
  const at::Tensor w = at::ones({2, 3});
  params["weight"] = w;
  EXPECT_TRUE(lin->named_parameters(false)["weight"].is_same(w));

  torch::nn::Sequential seq(torch::nn::Linear(2, 2));
  const auto& children = td::compat::ChildrenOf(*seq.ptr());
  ASSERT_EQ(children.size(), 1u);
  EXPECT_EQ(children.begin()->value().get(), seq->children()[0].get());
}

TEST(CompatTest, CloneIntoMakesADeepCopy) {
  torch::nn::Linear original(3, 2), fresh(3, 2);
  td::compat::CloneInto(*fresh, *original, td::compat::OptionalDevice());
  EXPECT_TRUE(at::equal(fresh->weight, original->weight));
  EXPECT_NE(fresh->weight.data_ptr(), original->weight.data_ptr());
  EXPECT_TRUE(at::equal(fresh->bias, original->bias));
}

TEST(CompatTest, RnnFlatWeightsAreWhatForwardReads) {
  torch::nn::GRU gru(torch::nn::GRUOptions(2, 3));
  const at::Tensor x = at::randn({4, 1, 2});
  ASSERT_GT(std::get<0>(gru->forward(x)).abs().sum().item<double>(), 0.0);
  for (const auto& p : gru->named_parameters(false)) {
    ASSERT_TRUE(td::compat::SetRnnFlatWeight(*gru, p.key(), at::zeros_like(p.value())))
        << p.key();
  }
  // Zero weights and biases: every gate is 0.5, the candidate is 0, so h stays at h0 = 0.
  EXPECT_EQ(std::get<0>(gru->forward(x)).abs().sum().item<double>(), 0.0);
  EXPECT_FALSE(td::compat::SetRnnFlatWeight(*gru, "no_such_weight", at::zeros({1})));
  torch::nn::Linear lin(2, 2);
  EXPECT_FALSE(td::compat::SetRnnFlatWeight(*lin, "weight", at::zeros({2, 2})));
}

TEST(CompatTest, BorrowsDoNotCount) {
  const at::Tensor t = at::ones({3});
  const auto before = t.use_count();
  {
    td::compat::BorrowedTensors list(2);
    list.borrow(t);
    list.own(at::zeros({3}));
    EXPECT_EQ(t.use_count(), before);
    ASSERT_EQ(list.parts().size(), 2u);
    EXPECT_TRUE(list.parts()[0].is_same(t));
    EXPECT_TRUE(at::equal(at::stack(list.parts()), at::stack({t, at::zeros({3})})));
  }
  EXPECT_EQ(t.use_count(), before);
}

TEST(CompatTest, OpenMpIsFoundWhereLibTorchUsesIt) {
  const td::compat::OpenMpApi& omp = td::compat::OpenMp();
  EXPECT_EQ(static_cast<bool>(omp), AT_PARALLEL_OPENMP == 1);
  if (!omp) return;
  const int before = omp.get_max_threads();
  omp.set_num_threads(1);
  EXPECT_EQ(omp.get_max_threads(), 1);
  omp.set_num_threads(before);
  EXPECT_EQ(omp.get_max_threads(), before);
}

TEST(CompatTest, ForeachLerpMatchesLerpWhereItExists) {
  const std::vector<at::Tensor> a = {at::zeros({3}), at::ones({2})};
  const std::vector<at::Tensor> b = {at::ones({3}), at::full({2}, 3.0)};
  const auto out = td::compat::ForeachLerp(a, b, 0.25);
  ASSERT_EQ(out.has_value(), td::compat::kHasForeachLerp);
  if (!out) return;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(at::allclose((*out)[i], at::lerp(a[i], b[i], 0.25)));
  }
  std::vector<at::Tensor> c = {a[0].clone(), a[1].clone()};
  ASSERT_TRUE(td::compat::ForeachLerp_(c, b, 0.25));
  EXPECT_TRUE(at::allclose(c[1], (*out)[1]));
}

TEST(CompatTest, TcpStoreStartsWithTheClassicServer) {
  c10d::TCPStoreOptions options;
  options.port = 0;  // any free port
  options.isServer = true;
  options.numWorkers = 1;
  options.waitWorkers = false;
  td::compat::UseClassicTcpStoreServer(options);
  c10d::TCPStore store("127.0.0.1", options);
  store.set("k", std::vector<uint8_t>{1, 2});
  EXPECT_EQ(store.get("k"), (std::vector<uint8_t>{1, 2}));
}

TEST(CompatTest, GlooDerivesFromTheProcessGroupBase) {
  static_assert(std::is_base_of_v<td::compat::ProcessGroupBase, c10d::ProcessGroupGloo>);
  SUCCEED();
}

// NOTE [ Dtypes by LibTorch version ]: each dtype is present exactly from the version the table
// names, with the ScalarType value, name and element size Python uses.
TEST(CompatTest, NewerDtypesMatchThisLibTorch) {
  const int version = td::compat::kTorchVersionMajor * 100 + td::compat::kTorchVersionMinor;
  for (const td::compat::NewerDtypeInfo& d : td::compat::kNewerDtypes) {
    const std::string since(d.since);
    const int needs = std::stoi(since.substr(0, since.find('.'))) * 100 +
                      std::stoi(since.substr(since.find('.') + 1));
    EXPECT_EQ(d.type.has_value(), version >= needs) << d.name;
    EXPECT_EQ(td::compat::FindNewerDtype(d.name), &d);
    EXPECT_EQ(td::compat::FindNewerDtypeCode(d.code), &d);
    EXPECT_EQ(td::compat::NewerDtype(d.name), d.type);
    const std::string message = td::compat::NoSuchDtypeMessage(d);
    EXPECT_NE(message.find(std::string(d.name)), std::string::npos) << message;
    EXPECT_NE(message.find("has no dtype"), std::string::npos) << message;
    if (!d.type) continue;
    EXPECT_EQ(static_cast<int>(*d.type), d.code) << d.name;
    EXPECT_EQ(td::compat::FindNewerDtype(*d.type), &d);
    // "torch.float8_e4m3fn" is c10's name in lower case, as Python prints it.
    std::string c10_name = c10::toString(*d.type);
    for (char& c : c10_name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    EXPECT_EQ("torch." + c10_name, d.name);
    // "torch.uint16": 2 bytes; float8: 1.
    const size_t size = d.is_float8 ? 1 : std::stoul(std::string(d.name.substr(10))) / 8;
    EXPECT_EQ(c10::elementSize(*d.type), size) << d.name;
  }
  EXPECT_EQ(td::compat::FindNewerDtype("torch.float32"), nullptr);
  EXPECT_EQ(td::compat::FindNewerDtype(c10::ScalarType::Float), nullptr);
  EXPECT_EQ(td::compat::FindNewerDtypeCode(6), nullptr);
  EXPECT_FALSE(td::compat::NewerDtype("torch.uint128").has_value());
}

}  // namespace
