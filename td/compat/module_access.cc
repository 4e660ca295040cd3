#include "td/compat/module_access.h"

#include <torch/nn/modules/rnn.h>

#include <vector>

namespace td::compat {
namespace {

using torch::nn::Module;

// An explicit template instantiation may name private members ([temp.spec]/6: access checking
// does not apply to the names in an explicit instantiation); the friend function each
// instantiation defines hands out the pointer-to-member.
template <class Tag, typename Tag::type kMember>
struct MemberThief {
  friend typename Tag::type Steal(Tag) { return kMember; }
};

// Each tag befriends its own non-template Steal overload, defined by the matching MemberThief
// instantiation: the non-template friend is the point of the idiom, so GCC's warning that it is
// not a template is silenced here and only here.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wnon-template-friend"
#endif
struct ParametersTag {
  using type = TensorRegistry Module::*;
  friend type Steal(ParametersTag);
};
struct BuffersTag {
  using type = TensorRegistry Module::*;
  friend type Steal(BuffersTag);
};
struct ChildrenTag {
  using type = ModuleRegistry Module::*;
  friend type Steal(ChildrenTag);
};
struct CloneTag {
  using type = void (Module::*)(Module&, const OptionalDevice&);
  friend type Steal(CloneTag);
};
template <class Impl>
struct FlatWeightsTag {
  using type = std::vector<at::Tensor> torch::nn::detail::RNNImplBase<Impl>::*;
  friend type Steal(FlatWeightsTag);
};
template <class Impl>
struct FlatNamesTag {
  using type = std::vector<std::string> torch::nn::detail::RNNImplBase<Impl>::*;
  friend type Steal(FlatNamesTag);
};
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

template struct MemberThief<ParametersTag, &Module::parameters_>;
template struct MemberThief<BuffersTag, &Module::buffers_>;
template struct MemberThief<ChildrenTag, &Module::children_>;
template struct MemberThief<CloneTag, &Module::clone_>;
#define TD_COMPAT_STEAL_RNN(Impl)                                                            \
  template struct MemberThief<FlatWeightsTag<Impl>,                                          \
                              &torch::nn::detail::RNNImplBase<Impl>::flat_weights_>;         \
  template struct MemberThief<FlatNamesTag<Impl>,                                            \
                              &torch::nn::detail::RNNImplBase<Impl>::flat_weights_names_>
TD_COMPAT_STEAL_RNN(torch::nn::RNNImpl);
TD_COMPAT_STEAL_RNN(torch::nn::LSTMImpl);
TD_COMPAT_STEAL_RNN(torch::nn::GRUImpl);
#undef TD_COMPAT_STEAL_RNN

template <class Impl>
bool SetFlat(Module& m, const std::string& name, const at::Tensor& value) {
  auto* impl = dynamic_cast<Impl*>(&m);
  if (impl == nullptr) return false;
  auto& base = static_cast<torch::nn::detail::RNNImplBase<Impl>&>(*impl);
  const std::vector<std::string>& names = base.*Steal(FlatNamesTag<Impl>{});
  std::vector<at::Tensor>& weights = base.*Steal(FlatWeightsTag<Impl>{});
  for (size_t i = 0; i < names.size() && i < weights.size(); ++i) {
    if (names[i] == name) {
      weights[i] = value;
      return true;
    }
  }
  return false;
}

}  // namespace

TensorRegistry& ParametersOf(Module& m) { return m.*Steal(ParametersTag{}); }
TensorRegistry& BuffersOf(Module& m) { return m.*Steal(BuffersTag{}); }
ModuleRegistry& ChildrenOf(Module& m) { return m.*Steal(ChildrenTag{}); }
const TensorRegistry& ParametersOf(const Module& m) { return m.*Steal(ParametersTag{}); }
const TensorRegistry& BuffersOf(const Module& m) { return m.*Steal(BuffersTag{}); }
const ModuleRegistry& ChildrenOf(const Module& m) { return m.*Steal(ChildrenTag{}); }

void CloneInto(Module& self, Module& other, const OptionalDevice& device) {
  (self.*Steal(CloneTag{}))(other, device);
}

bool SetRnnFlatWeight(Module& m, const std::string& name, const at::Tensor& value) {
  return SetFlat<torch::nn::RNNImpl>(m, name, value) ||
         SetFlat<torch::nn::LSTMImpl>(m, name, value) ||
         SetFlat<torch::nn::GRUImpl>(m, name, value);
}

}  // namespace td::compat
