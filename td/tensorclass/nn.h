// td::nn modules called on TensorClasses: a TensorDictModule (or TensorDictSequential, or any
// td::nn::TensorDictModuleBase) reads its in_keys from a TensorClass's fields and writes its
// out_keys into fields, keys being field names (`{"next", "obs"}` reaches a nested class's
// field). Link //td/tensorclass:nn (it brings //td/nn).
//
//   class Transition : public td::TensorClass<Transition> {
//    public:
//     TD_TENSORCLASS(Transition, (at::Tensor, obs), (std::optional<at::Tensor>, action))
//   };
//   td::nn::TensorDictModule actor(torch::nn::Linear(4, 2), {"obs"}, {"action"});
//   Transition out = td::nn::forward(*actor, data);   // out.action() is set
#pragma once

#include <string>
#include <vector>

#include "td/core/errors.h"
#include "td/core/tensordict.h"
#include "td/nn/common.h"
#include "td/tensorclass/tensorclass.h"

namespace td::nn {

// Runs `module` on `data`'s fields and returns the class holding the inputs and the outputs.
// `data` itself is not modified: the module writes into a shallow copy (tensors shared), so a
// failing call leaves nothing half-written. Every out key must start with a field name
// (KeyError naming the keys that do not, and the fields, checked before the module runs); the
// result is checked as D::from_tensordict (TypeError when an output lands in a non-tensor field,
// KeyError when a required field is missing). Throws whatever the module throws.
//   Transition out = td::nn::forward(*actor, data);
template <class D, std::enable_if_t<tc_detail::kIsTensorClass<D>, int> = 0>
D forward(TensorDictModuleBase& module, const D& data) {
  std::vector<std::string> bad;
  for (const NestedKey& k : module.out_keys()) {
    if (!D::has_field(k.front())) bad.push_back(k.repr());
  }
  if (!bad.empty()) {
    std::string list;
    for (const std::string& b : bad) list += (list.empty() ? "" : ", ") + b;
    std::string fields;
    for (std::string_view f : D::field_names()) {
      fields += (fields.empty() ? "'" : ", '") + std::string(f) + "'";
    }
    TD_FAIL(KeyError, "td::nn::forward: the module writes ", list, ", which ",
                   bad.size() > 1 ? "are not fields" : "is not a field", " of ", D::kClassName,
                   " (fields: [", fields, "])");
  }
  return D::from_tensordict(module.forward(data.tensordict().copy()));
}

}  // namespace td::nn
