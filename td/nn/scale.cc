#include "td/nn/scale.h"

#include <ATen/ATen.h>

#include <cmath>
#include <map>
#include <mutex>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "td/core/dtype.h"
#include "td/core/errors.h"
#include "td/core/nested_key.h"
#include "td/nn/functional.h"

namespace td::nn {
namespace {

std::mutex& CustomMutex() {
  static std::mutex* m = new std::mutex;
  return *m;
}

std::map<std::string, ScaleMapping>& CustomMappings() {
  static auto* m = new std::map<std::string, ScaleMapping>;
  return *m;
}

const char* const kBuiltinNames =
    "'softplus', 'exp', 'relu', 'none', 'expln', 'biased_softplus', "
    "'biased_softplus_<bias>', 'biased_softplus_<bias>_<min_val>'";

}  // namespace

double inv_softplus(double y) { return std::log(std::max(std::expm1(y), 1e-6)); }

at::Tensor inv_softplus(const at::Tensor& y) { return at::log(at::expm1(y).clamp_min(1e-6)); }

ScaleMapping biased_softplus(double bias, double min_val) {
  if (!(bias > min_val)) {
    TD_FAIL(ValueError, "biased_softplus: bias (", bias, ") must be greater than min_val (",
            min_val, ")");
  }
  const double shift = inv_softplus(bias - min_val);
  return [shift, min_val](const at::Tensor& x) { return at::softplus(x + shift) + min_val; };
}

at::Tensor expln(const at::Tensor& x) {
  return at::where(x <= 0, at::exp(x.clamp_max(0)), at::log1p(x.clamp_min(0)) + 1);
}

ScaleMapping mappings(const std::string& name) {
  {
    std::lock_guard<std::mutex> lock(CustomMutex());
    auto it = CustomMappings().find(name);
    if (it != CustomMappings().end()) return it->second;
  }
  if (name == "softplus") return [](const at::Tensor& x) { return at::softplus(x); };
  if (name == "exp") return [](const at::Tensor& x) { return at::exp(x); };
  if (name == "relu") return [](const at::Tensor& x) { return at::relu(x); };
  if (name == "none") return [](const at::Tensor& x) { return x; };
  if (name == "expln") return [](const at::Tensor& x) { return expln(x); };
  if (name == "biased_softplus") return biased_softplus(1.0);
  const std::string prefix = "biased_softplus_";
  if (name.rfind(prefix, 0) == 0) {
    std::vector<std::string> parts = absl::StrSplit(name.substr(prefix.size()), '_');
    double bias = 0, min_val = 0.01;
    if ((parts.size() == 1 || parts.size() == 2) && absl::SimpleAtod(parts[0], &bias) &&
        (parts.size() == 1 || absl::SimpleAtod(parts[1], &min_val))) {
      return biased_softplus(bias, min_val);
    }
    TD_FAIL(ValueError, "mappings: '", name,
            "' must be 'biased_softplus_<bias>' or 'biased_softplus_<bias>_<min_val>' with "
            "numbers for <bias> and <min_val>");
  }
  std::vector<std::string> custom;
  {
    std::lock_guard<std::mutex> lock(CustomMutex());
    for (const auto& [k, v] : CustomMappings()) custom.push_back(k);
  }
  TD_FAIL(ValueError, "unknown scale mapping '", name, "'; expected one of ", kBuiltinNames,
          custom.empty() ? "" : " or a custom mapping ", custom.empty() ? "" : KeysRepr(custom),
          " (add one with td::nn::add_custom_mapping)");
}

void add_custom_mapping(const std::string& name, ScaleMapping mapping) {
  if (name.empty()) TD_FAIL(ValueError, "add_custom_mapping: the name is empty");
  if (!mapping) TD_FAIL(ValueError, "add_custom_mapping('", name, "'): the function is empty");
  std::lock_guard<std::mutex> lock(CustomMutex());
  CustomMappings()[name] = std::move(mapping);
}

// ---- AddStateIndependentNormalScale -------------------------------------------------------------

AddStateIndependentNormalScaleImpl::AddStateIndependentNormalScaleImpl(
    AddStateIndependentNormalScaleOptions options)
    : options_(std::move(options)), mapping_(mappings(options_.scale_mapping())) {
  // to_module() swaps the member handle forward() reads (NOTE [ Swapping tensors into LibTorch
  // modules ] in td/nn/functional.h).
  static const bool registered = [] {
    register_tensor_members<AddStateIndependentNormalScaleImpl>(
        {{"state_independent_scale",
          &AddStateIndependentNormalScaleImpl::state_independent_scale}});
    return true;
  }();
  (void)registered;
  for (int64_t s : options_.scale_shape()) {
    if (s < 0) {
      TD_FAIL(ValueError, "AddStateIndependentNormalScale: scale_shape ",
              SizeRepr(options_.scale_shape()), " has a negative size");
    }
  }
  reset();
}

void AddStateIndependentNormalScaleImpl::reset() {
  at::Tensor init = at::full(options_.scale_shape(), options_.init_value());
  if (options_.make_param()) {
    state_independent_scale = register_parameter("state_independent_scale", init);
  } else {
    state_independent_scale = register_buffer("state_independent_scale", init);
  }
}

void AddStateIndependentNormalScaleImpl::reset_parameters() {
  at::NoGradGuard no_grad;
  state_independent_scale.fill_(options_.init_value());
}

std::tuple<at::Tensor, at::Tensor> AddStateIndependentNormalScaleImpl::forward(
    const at::Tensor& loc) {
  const auto& shape = options_.scale_shape();
  const int64_t n = static_cast<int64_t>(shape.size());
  if (loc.dim() < n || loc.sizes().slice(loc.dim() - n) != at::IntArrayRef(shape)) {
    TD_FAIL(ValueError, "AddStateIndependentNormalScale: the last dims of loc (shape ",
            SizeRepr(loc.sizes()), ") must equal scale_shape ", SizeRepr(shape));
  }
  at::Tensor scale = mapping_(state_independent_scale.expand(loc.sizes()));
  return {loc, scale.clamp_min(options_.scale_lb())};
}

void AddStateIndependentNormalScaleImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::AddStateIndependentNormalScale(scale_shape="
         << SizeRepr(options_.scale_shape()) << ", scale_mapping=" << options_.scale_mapping()
         << ", scale_lb=" << options_.scale_lb() << ")";
}

}  // namespace td::nn
