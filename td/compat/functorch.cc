#include "td/compat/functorch.h"

#include <ATen/functorch/BatchedFallback.h>
#include <ATen/functorch/BatchedTensorImpl.h>
#include <ATen/functorch/DynamicLayer.h>
#include <c10/util/Exception.h>

namespace td::compat::functorch {
namespace ft = at::functorch;

namespace {
// RandomnessType is a plain enum in 1.13 and an enum class in 2.x; the qualified names work for
// both.
ft::RandomnessType ToTorch(Randomness r) {
  switch (r) {
    case Randomness::kDifferent:
      return ft::RandomnessType::Different;
    case Randomness::kSame:
      return ft::RandomnessType::Same;
    case Randomness::kError:
      break;
  }
  return ft::RandomnessType::Error;
}
}  // namespace

int64_t PushVmapLayer(int64_t batch_size, Randomness randomness) {
  // The batch size parameter is optional<int64_t> in 1.13 and optional<SymInt> in 2.x: both are
  // built from an int64_t.
  return ft::initAndPushDynamicLayer(ft::TransformType::Vmap, batch_size, ToTorch(randomness));
}

void PopVmapLayer(int64_t level) {
  auto current = ft::maybeCurrentDynamicLayer();
  TORCH_CHECK(current.has_value() && current->layerId() == level &&
                  current->key() == ft::TransformType::Vmap,
              "td::vmap: the innermost functorch layer is not the vmap layer ", level,
              " being closed (a layer was pushed or popped out of order)");
  ft::popDynamicLayerAndDeleteMetadata();
}

int64_t LayerDepth() { return static_cast<int64_t>(ft::getDynamicLayerStack().size()); }

at::Tensor AddBatchDim(const at::Tensor& tensor, int64_t dim, int64_t level) {
  return ft::addBatchDim(tensor, dim, level);
}

std::optional<Unwrapped> Unwrap(const at::Tensor& tensor) {
  if (!tensor.defined()) return std::nullopt;
  const ft::BatchedTensorImpl* impl = ft::maybeGetBatchedImpl(tensor);
  if (impl == nullptr) return std::nullopt;
  return Unwrapped{impl->value(), impl->bdim(), impl->level()};
}

at::Tensor UnwrapAll(const at::Tensor& tensor) {
  at::Tensor t = tensor;
  while (t.defined()) {
    const ft::BatchedTensorImpl* impl = ft::maybeGetBatchedImpl(t);
    if (impl == nullptr) break;
    t = impl->value();
  }
  return t;
}

bool FallbackWarningEnabled() { return ft::isVmapFallbackWarningEnabled(); }
void SetFallbackWarningEnabled(bool enabled) { ft::setVmapFallbackWarningEnabled(enabled); }
bool FallbackEnabled() { return ft::isVmapFallbackEnabled(); }
void SetFallbackEnabled(bool enabled) { ft::setVmapFallbackEnabled(enabled); }

}  // namespace td::compat::functorch
