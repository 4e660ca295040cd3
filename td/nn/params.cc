#include "td/nn/params.h"

#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "td/core/dtype.h"

namespace td::nn {

TensorDictParamsImpl::TensorDictParamsImpl(const TensorDict& params,
                                           const TensorDictParamsOptions& options)
    : options_(options),
      batch_size_(params.batch_size().vec()),
      device_(params.device()),
      layout_(params) {
  register_from(params, /*fresh=*/false);
}

void TensorDictParamsImpl::register_from(const TensorDict& params, bool fresh) {
  // `fresh` (clone): same keys and kinds as at construction, new tensors (clone() then copies
  // the values in). The kinds come from order_, not from the dtypes, which to() may change.
  if (fresh) {
    for (const auto& [k, kind] : order_) {
      switch (kind) {
        case Kind::kParameter:
          register_parameter(k, at::empty_like(params.get(k)), /*requires_grad=*/true);
          break;
        case Kind::kBuffer:
          register_buffer(k, at::empty_like(params.get(k)));
          break;
        case Kind::kChild:
          register_module(k, std::make_shared<TensorDictParamsImpl>(params.get_tensordict(k), options_));
          break;
        case Kind::kNonTensor:
          break;
      }
    }
    return;
  }
  order_.clear();
  params.for_each_entry([&](const std::string& k, const Value& entry) {
    const Value* v = &entry;
    if (k.empty() || k.find('.') != std::string::npos) {
      TD_FAIL(ValueError, "TensorDictParams: key '", k,
                       "' cannot name a module parameter (empty, or contains a '.')");
    }
    if (v->is_tensor()) {
      // detach(): a new TensorImpl sharing the memory, so that to() or set_data() on the
      // registered tensor never changes the caller's tensor object.
      const at::Tensor t = v->tensor().detach();
      const bool parameter = options_.no_convert() ? v->tensor().requires_grad()
                                                   : t.is_floating_point() || t.is_complex();
      if (parameter) {
        register_parameter(k, t, /*requires_grad=*/true);
        order_.emplace_back(k, Kind::kParameter);
      } else {
        register_buffer(k, t);
        order_.emplace_back(k, Kind::kBuffer);
      }
    } else if (v->is_tensordict()) {
      register_module(k, std::make_shared<TensorDictParamsImpl>(v->tensordict(), options_));
      order_.emplace_back(k, Kind::kChild);
    } else {
      order_.emplace_back(k, Kind::kNonTensor);
    }
  });
}

TensorDict TensorDictParamsImpl::params() const {
  // No device: set() would move (copy) a tensor living elsewhere, losing its identity.
  TensorDict out({}, batch_size_);
  const auto own_params = named_parameters(/*recurse=*/false);
  const auto own_buffers = named_buffers(/*recurse=*/false);
  const auto children = named_children();
  for (const auto& [k, kind] : order_) {
    switch (kind) {
      case Kind::kParameter:
        out.set(k, own_params[k]);
        break;
      case Kind::kBuffer:
        out.set(k, own_buffers[k]);
        break;
      case Kind::kChild:
        out.set(k, std::dynamic_pointer_cast<TensorDictParamsImpl>(children[k])->params());
        break;
      case Kind::kNonTensor:
        out.set(k, layout_.get_value(k));
        break;
    }
  }
  if (options_.lock()) out.lock_();
  return out;
}

void TensorDictParamsImpl::reset() { register_from(layout_, /*fresh=*/true); }

void TensorDictParamsImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::TensorDictParams(batch_size=" << SizeRepr(batch_size_)
         << ", params=" << parameters(/*recurse=*/true).size()
         << ", buffers=" << buffers(/*recurse=*/true).size() << ")";
}

}  // namespace td::nn
