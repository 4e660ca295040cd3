// Helpers of the CUDA behaviour tests (docs/cuda.md): the skip that names what is not checked,
// and leaf-by-leaf comparisons across devices.
#pragma once

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>

#include "td/core/tensordict.h"

// Skips the test where LibTorch sees no CUDA device (a CPU-only LibTorch, or no GPU), saying
// what the skipped test would have checked.
#define TD_REQUIRE_CUDA(what)                                        \
  if (!torch::cuda::is_available())                                  \
  GTEST_SKIP() << "no CUDA device: " << (what) << " not checked"

namespace td::cuda_test {

inline const KeysOptions& LeafKeys() {
  static const KeysOptions k = KeysOptions().include_nested(true).leaves_only(true);
  return k;
}

// Every tensor leaf of `got` on `device`, equal (after a copy to the CPU) to `want`'s, the same
// keys and non-tensor entries.
inline void ExpectSameOn(const TensorDict& got, const TensorDict& want, const at::Device& device,
                         const std::string& what) {
  ASSERT_EQ(got.keys(LeafKeys()), want.keys(LeafKeys())) << what;
  for (const NestedKey& k : want.keys(LeafKeys())) {
    if (!want.get_value(k).is_tensor()) continue;
    const at::Tensor g = got.get(k);
    EXPECT_EQ(g.device(), device) << what << ": " << k;
    EXPECT_TRUE(g.cpu().equal(want.get(k).cpu())) << what << ": " << k;
  }
}

// Whether every tensor leaf of `td` lies in one storage (so a move of it was one copy).
inline bool OneStorage(const TensorDict& td) {
  const void* base = nullptr;
  for (const NestedKey& k : td.keys(LeafKeys())) {
    if (!td.get_value(k).is_tensor()) continue;
    const void* b = td.get(k).storage().unsafeGetStorageImpl();
    if (base != nullptr && b != base) return false;
    base = b;
  }
  return base != nullptr;
}

}  // namespace td::cuda_test
