// Whole-TensorDict comparisons: allclose / assert_allclose (td/core/comparison.cc; part of
// //td/core:tensordict; tensordict.h includes this file). Entry-wise ==, !=, all() and any() are
// members of TensorDict.
#pragma once

#include <torch/arg.h>

namespace td {

class TensorDict;

struct AllCloseOptions {
  TORCH_ARG(double, rtol) = 1e-5;
  TORCH_ARG(double, atol) = 1e-8;
  TORCH_ARG(bool, equal_nan) = false;
};
// True when both have the same keys and batch size and every pair of leaves is allclose (and
// non-tensor entries equal).
bool allclose(const TensorDict& a, const TensorDict& b, const AllCloseOptions& options = {});
// Like allclose, but throws c10::Error describing the first difference (key, shapes, max error).
void assert_allclose(const TensorDict& a, const TensorDict& b,
                     const AllCloseOptions& options = {});

}  // namespace td
