// ATen's _foreach_ kernels that only some LibTorch versions have (see NOTE [ LibTorch versions ]
// in td/compat/torch.h). Each returns nullopt / false where the kernel does not exist, and the
// caller goes leaf by leaf instead.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <optional>
#include <vector>

namespace td::compat {

// at::_foreach_lerp(self, end, weight) (LibTorch >= 2.0).
std::optional<std::vector<at::Tensor>> ForeachLerp(at::TensorList self, at::TensorList end,
                                                   const at::Scalar& weight);
std::optional<std::vector<at::Tensor>> ForeachLerp(at::TensorList self, at::TensorList end,
                                                   at::TensorList weight);
// at::_foreach_lerp_(self, end, weight); true when it ran.
bool ForeachLerp_(at::TensorList self, at::TensorList end, const at::Scalar& weight);
bool ForeachLerp_(at::TensorList self, at::TensorList end, at::TensorList weight);

}  // namespace td::compat
