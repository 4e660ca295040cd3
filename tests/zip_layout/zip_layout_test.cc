// Built against LibTorch in the official zip's layout (see WORKSPACE): the process must load
// LibTorch from that folder, and the library must work on it.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/linear.h>

#include <fstream>
#include <string>

#include "td/core/tensordict.h"
#include "td/nn/common.h"

namespace {

TEST(ZipLayoutTest, LibTorchComesFromTheZipFolder) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  bool torch_cpu = false, c10 = false;
  while (std::getline(maps, line)) {
    torch_cpu = torch_cpu || line.find("/tensordict-zip-layout/libtorch/lib/libtorch_cpu.so") !=
                                 std::string::npos;
    c10 = c10 || line.find("/tensordict-zip-layout/libtorch/lib/libc10.so") != std::string::npos;
  }
  EXPECT_TRUE(torch_cpu);
  EXPECT_TRUE(c10);
}

TEST(ZipLayoutTest, TensorDictAndModulesWork) {
  td::TensorDict data({{"obs", at::ones({4, 3})}}, {4});
  td::nn::TensorDictModule module(torch::nn::Linear(3, 2), {"obs"}, {"action"});
  td::TensorDict out = module(data);
  EXPECT_EQ(out.get("action").sizes(), (at::IntArrayRef{4, 2}));
  EXPECT_EQ(out.index({0}).batch_size().size(), 0u);
  auto copy = std::dynamic_pointer_cast<td::nn::TensorDictModuleImpl>(module->clone());
  ASSERT_NE(copy, nullptr);
  EXPECT_TRUE(at::equal(copy->forward(data.clone()).get("action"), out.get("action")));
}

}  // namespace
