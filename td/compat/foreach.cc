#include "td/compat/foreach.h"

#include <ATen/ATen.h>

#include "td/compat/torch.h"

namespace td::compat {

#if TORCH_VERSION_MAJOR >= 2
std::optional<std::vector<at::Tensor>> ForeachLerp(at::TensorList self, at::TensorList end,
                                                   const at::Scalar& weight) {
  return at::_foreach_lerp(self, end, weight);
}
std::optional<std::vector<at::Tensor>> ForeachLerp(at::TensorList self, at::TensorList end,
                                                   at::TensorList weight) {
  return at::_foreach_lerp(self, end, weight);
}
bool ForeachLerp_(at::TensorList self, at::TensorList end, const at::Scalar& weight) {
  at::_foreach_lerp_(self, end, weight);
  return true;
}
bool ForeachLerp_(at::TensorList self, at::TensorList end, at::TensorList weight) {
  at::_foreach_lerp_(self, end, weight);
  return true;
}
#else
std::optional<std::vector<at::Tensor>> ForeachLerp(at::TensorList, at::TensorList,
                                                   const at::Scalar&) {
  return std::nullopt;
}
std::optional<std::vector<at::Tensor>> ForeachLerp(at::TensorList, at::TensorList,
                                                   at::TensorList) {
  return std::nullopt;
}
bool ForeachLerp_(at::TensorList, at::TensorList, const at::Scalar&) { return false; }
bool ForeachLerp_(at::TensorList, at::TensorList, at::TensorList) { return false; }
#endif

}  // namespace td::compat
