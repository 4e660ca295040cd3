// The parts of torch::nn::Module that LibTorch keeps private and that td::nn needs (see
// NOTE [ LibTorch versions ] in td/compat/torch.h): the registries themselves, not the copies
// Module's public API hands out, because to_module must replace a registered slot (NOTE
// [ Swapping tensors into LibTorch modules ] in td/nn/functional.h); Module::clone_, which
// td::nn::Cloneable calls on children as torch::nn::Cloneable does; and the flat weight list RNN,
// LSTM and GRU read their weights from.
//
// Everything here is reached through explicit template instantiations (module_access.cc), which
// the compiler checks against the member names and types: a LibTorch that renames or retypes
// them fails to build this target. //td/compat:compat_test checks on each LibTorch that what is
// reached is what the public API sees.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <torch/nn/module.h>
#include <torch/ordered_dict.h>

#include <memory>
#include <string>

#include "td/compat/torch.h"

namespace td::compat {

// The optional device torch::nn::Module::clone takes.
using OptionalDevice = Optional<c10::Device>;

using TensorRegistry = torch::OrderedDict<std::string, at::Tensor>;
using ModuleRegistry = torch::OrderedDict<std::string, std::shared_ptr<torch::nn::Module>>;

// The registered parameters / buffers / submodules of `m` (its own, not its children's).
TensorRegistry& ParametersOf(torch::nn::Module& m);
TensorRegistry& BuffersOf(torch::nn::Module& m);
ModuleRegistry& ChildrenOf(torch::nn::Module& m);
const TensorRegistry& ParametersOf(const torch::nn::Module& m);
const TensorRegistry& BuffersOf(const torch::nn::Module& m);
const ModuleRegistry& ChildrenOf(const torch::nn::Module& m);

// torch::nn::Module::clone_(other, device): makes `self` (a fresh module of other's type) a deep
// copy of `other`, as torch::nn::Cloneable::clone does for every child.
void CloneInto(torch::nn::Module& self, torch::nn::Module& other, const OptionalDevice& device);

// For torch::nn::RNN / LSTM / GRU: points the flat weight named `name` (e.g. "weight_ih_l0") at
// `value`, which is what their forward reads. Returns false when `m` is none of the three or has
// no such weight.
bool SetRnnFlatWeight(torch::nn::Module& m, const std::string& name, const at::Tensor& value);

}  // namespace td::compat
