// The sample rows shared by the td/data tests.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

#include "td/core/tensordict.h"

namespace td {
namespace data {
namespace test {

// `n` rows: "x" [n, 3] = row * 3 + col, "y" [n] = row, "n"/"z" [n, 2] = row * 2 + col.
inline TensorDict Rows(int64_t n = 10) {
  return TensorDict({{"x", at::arange(n * 3, at::kFloat).view({n, 3})},
                     {"y", at::arange(n, at::kLong)},
                     {"n", {{"z", at::arange(n * 2, at::kDouble).view({n, 2})}}}},
                    {n});
}

}  // namespace test
}  // namespace data
}  // namespace td
