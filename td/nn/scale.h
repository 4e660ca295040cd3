// Positive scale mappings (Python's tensordict.nn.mappings, inv_softplus, biased_softplus,
// add_custom_mapping) and AddStateIndependentNormalScale, the module that pairs a location with
// a learned scale that does not depend on the input.
//
//   td::nn::ScaleMapping f = td::nn::mappings("biased_softplus_1.0");   // f(0) == 1
//   td::nn::add_custom_mapping("square_plus", [](const at::Tensor& x) { return x * x + 1; });
//   td::nn::NormalParamExtractor extract(
//       td::nn::NormalParamExtractorOptions().scale_mapping("square_plus"));
//
// The names mappings() knows: "softplus", "exp", "relu", "none", "expln", "biased_softplus"
// (bias 1.0), "biased_softplus_<bias>" and "biased_softplus_<bias>_<min_val>", and every name
// given to add_custom_mapping (which may replace a built-in one, as in Python).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>
#include <torch/nn/cloneable.h>
#include <torch/nn/pimpl.h>

#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <vector>

namespace td::nn {

// A map from the reals to the positive reals, applied elementwise.
using ScaleMapping = std::function<at::Tensor(const at::Tensor&)>;

// The inverse of softplus: log(expm1(y)), with expm1(y) clamped at 1e-6 (as Python does, so a
// non-positive y gives log(1e-6) rather than NaN).
//   td::nn::inv_softplus(1.0);   // 0.5413...; softplus(0.5413) == 1
double inv_softplus(double y);
at::Tensor inv_softplus(const at::Tensor& y);

// softplus(x + inv_softplus(bias - min_val)) + min_val: maps 0 to `bias`, never goes below
// min_val. Throws ValueError when bias <= min_val (naming both).
//   td::nn::biased_softplus(1.0)(at::zeros({3}));   // [1, 1, 1]
ScaleMapping biased_softplus(double bias, double min_val = 0.01);

// exp(x) for x <= 0, log1p(x) + 1 above: a smooth positive map that grows like a log.
at::Tensor expln(const at::Tensor& x);

// The mapping named `name` (see the file comment). Throws ValueError naming `name` and the known
// names when it is unknown, or when a biased_softplus suffix is not one or two numbers.
//   td::nn::mappings("exp")(x);   // at::exp(x)
ScaleMapping mappings(const std::string& name);

// Registers `mapping` under `name` for mappings() (and so for NormalParamExtractor and
// AddStateIndependentNormalScale built afterwards). Process-wide; thread-safe. Throws ValueError
// for an empty name or an empty function.
void add_custom_mapping(const std::string& name, ScaleMapping mapping);

struct AddStateIndependentNormalScaleOptions {
  // The shape of the learned scale: the trailing dims of `loc` must equal it.
  TORCH_ARG(std::vector<int64_t>, scale_shape) = {};
  // A mappings() name.
  TORCH_ARG(std::string, scale_mapping) = "exp";
  // The scale is at least this.
  TORCH_ARG(double, scale_lb) = 1e-4;
  // A trainable parameter (true) or a buffer (false), named "state_independent_scale".
  TORCH_ARG(bool, make_param) = true;
  // The initial (pre-mapping) value of every entry.
  TORCH_ARG(double, init_value) = 0.0;
};

// forward(loc) returns (loc, scale) with scale = max(mapping(state_independent_scale), scale_lb)
// expanded to loc's shape. Throws ValueError naming the mapping when it is unknown (at
// construction), and naming loc's shape and scale_shape when loc's trailing dims differ.
//   td::nn::AddStateIndependentNormalScale add(
//       td::nn::AddStateIndependentNormalScaleOptions().scale_shape({4}));
//   auto [loc, scale] = add(at::randn({2, 4}));   // scale: exp(0) == 1, shape [2, 4]
class AddStateIndependentNormalScaleImpl
    : public torch::nn::Cloneable<AddStateIndependentNormalScaleImpl> {
 public:
  explicit AddStateIndependentNormalScaleImpl(AddStateIndependentNormalScaleOptions options = {});
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& loc);
  // Registers the scale (filled with init_value).
  void reset() override;
  // Fills the scale with init_value again (what reset_parameters_recursive calls).
  void reset_parameters();
  void pretty_print(std::ostream& stream) const override;
  const AddStateIndependentNormalScaleOptions& options() const { return options_; }

  at::Tensor state_independent_scale;

 private:
  AddStateIndependentNormalScaleOptions options_;
  ScaleMapping mapping_;
};
TORCH_MODULE(AddStateIndependentNormalScale);

}  // namespace td::nn
