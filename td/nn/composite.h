// CompositeDistribution (Python's tensordict.nn.CompositeDistribution): one distribution per out
// key, built from a TensorDict of parameters. Its draws are TensorDicts (one entry per out key)
// and its log-probability is the sum of the parts', so a policy with a discrete and a continuous
// head draws both and scores them together.
//
//   td::TensorDict params({{"disc", {{"logits", logits}}},                      // [B, K]
//                          {"cont", {{"loc", loc}, {"scale", scale}}}}, {B});   // [B, 2]
//   td::nn::CompositeDistribution dist(params, {{"disc", td::nn::Categorical::factory()},
//                                               {"cont", td::nn::Normal::factory()}});
//   td::TensorDict draw = dist.sample();     // {"disc": [B] int64, "cont": [B, 2]}
//   at::Tensor lp = dist.log_prob(draw);     // [B]: Categorical's + Normal's summed over dim 1
//
// The batch shape is the parameters' batch size. Each part's batch shape must start with it;
// log_prob() and entropy() sum each part's result over its dims beyond the batch shape (Normal's
// per-coordinate log-densities above), so every part contributes a [*sample_shape, *batch_shape]
// tensor. ProbabilisticTensorDictModule takes a CompositeDistributionFactory (see
// probabilistic.h); under InteractionType::kRandom it draws rsample() when every part has one,
// sample() otherwise (so a Categorical part makes the whole draw gradient-free, as upstream).
#pragma once

#include <torch/arg.h>

#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "td/core/tensordict.h"
#include "td/nn/distributions.h"

namespace td::nn {

// Python's composite_lp_aggregate(): whether probabilistic modules write one summed
// log-probability ("sample_log_prob") instead of one per draw ("<out_key>_log_prob"). False by
// default, as in tensordict 0.14 (the environment variable COMPOSITE_LP_AGGREGATE=1 / true
// flips the default, read once); the innermost live SetCompositeLpAggregate on this thread
// overrides it.
//   bool summed = td::nn::composite_lp_aggregate();
bool composite_lp_aggregate();

// Python's set_composite_lp_aggregate: sets composite_lp_aggregate() on this thread while it
// lives (scopes nest). A ProbabilisticTensorDictModule reads the setting when it is built: build
// and run it under the same setting (it throws otherwise).
//   { td::nn::SetCompositeLpAggregate summed(true); td::nn::ProbabilisticTensorDictModule m(...); }
class SetCompositeLpAggregate {
 public:
  explicit SetCompositeLpAggregate(bool mode = true);
  ~SetCompositeLpAggregate();
  SetCompositeLpAggregate(const SetCompositeLpAggregate&) = delete;
  SetCompositeLpAggregate& operator=(const SetCompositeLpAggregate&) = delete;

 private:
  std::optional<bool> previous_;
};

// `key` with `suffix` appended to its last component: ("agent", "action") + "_log_prob" is
// ("agent", "action_log_prob"), the per-draw log-prob key.
//   td::nn::add_suffix("action", "_log_prob");   // "action_log_prob"
NestedKey add_suffix(const NestedKey& key, const std::string& suffix);

// One distribution of a CompositeDistribution: its factory and where its parameters are.
struct CompositePart {
  // Reads every tensor of the sub-TensorDict params[out key], named by its key (Python's
  // layout: params["cont"] = {"loc": ..., "scale": ...}).
  //   td::nn::CompositePart part = td::nn::Normal::factory();
  CompositePart(DistributionFactory factory);  // NOLINT: a factory is a part
  // Reads `param_keys` of params, each named by its last component.
  //   td::nn::CompositePart part(td::nn::Normal::factory(), {"mu", {"cont", "scale"}});
  CompositePart(DistributionFactory factory, std::vector<NestedKey> param_keys);

  DistributionFactory factory;
  std::vector<NestedKey> param_keys;
};

// Out key -> part, in order (Python's distribution_map).
using CompositeMap = std::vector<std::pair<NestedKey, CompositePart>>;

class CompositeDistribution;

// Upstream's CompositeDistribution(log_prob_key=, entropy_key=): where log_prob_composite() and
// entropy_composite() write their sums (and which entry log_prob() returns).
struct CompositeDistributionOptions {
  TORCH_ARG(NestedKey, log_prob_key) = NestedKey("sample_log_prob");
  TORCH_ARG(NestedKey, entropy_key) = NestedKey("entropy");
};

// Builds a CompositeDistribution from a parameter TensorDict (see
// ProbabilisticTensorDictModule).
struct CompositeDistributionFactory {
  CompositeMap map;
  CompositeDistributionOptions options = {};
  // CompositeDistribution(params, map).
  std::shared_ptr<CompositeDistribution> make(const TensorDict& params) const;
  // "CompositeDistribution(disc: Categorical, cont: Normal)".
  std::string name() const;
  // The out keys, in order.
  std::vector<NestedKey> keys() const;
};

class CompositeDistribution {
 public:
  // Builds every part. Throws ValueError for an empty map, a repeated out key, an empty factory,
  // or a part whose batch shape does not start with params.batch_size() (naming the key, the
  // distribution and both shapes); KeyError naming the out key, the missing parameter key and
  // the keys params has; the part's own errors with the out key added.
  //   td::nn::CompositeDistribution dist(params, {{"disc", td::nn::Categorical::factory()}});
  CompositeDistribution(const TensorDict& params, CompositeMap map,
                        CompositeDistributionOptions options = {});
  //   auto f = td::nn::CompositeDistribution::factory({{"disc", td::nn::Categorical::factory()},
  //                                                    {"cont", td::nn::Normal::factory()}});
  static CompositeDistributionFactory factory(CompositeMap map,
                                              CompositeDistributionOptions options = {});
  // Upstream's from_distributions: a CompositeDistribution over distributions already built,
  // out key -> distribution in order, with the batch shape of `params` (its values are not
  // read). `name_map` renames out keys (key -> where its draws are written). Throws ValueError
  // for an empty list, a null distribution, a repeated (renamed) out key, or a part whose batch
  // shape does not start with params.batch_size() (naming the key and both shapes); KeyError for
  // a name_map key that is not one of the distributions' keys.
  //   auto dist = td::nn::CompositeDistribution::from_distributions(
  //       params, {{"disc", std::make_shared<td::nn::Categorical>(logits)}});
  static CompositeDistribution from_distributions(
      const TensorDict& params,
      std::vector<std::pair<NestedKey, std::shared_ptr<Distribution>>> distributions,
      const std::vector<std::pair<NestedKey, NestedKey>>& name_map = {},
      CompositeDistributionOptions options = {});

  const NestedKey& log_prob_key() const { return options_.log_prob_key(); }
  const NestedKey& entropy_key() const { return options_.entropy_key(); }

  // "CompositeDistribution(disc: Categorical, cont: Normal)".
  std::string name() const;
  // The parameters' batch size.
  at::IntArrayRef batch_shape() const { return batch_shape_; }
  // The out keys, in order.
  const std::vector<NestedKey>& keys() const { return keys_; }
  // The part drawn under `key`. Throws KeyError naming the key and keys().
  const Distribution& dist(const NestedKey& key) const;
  // The parts, in keys() order (shared: from_distributions() may build another composite over
  // them).
  const std::vector<std::shared_ptr<Distribution>>& dists() const { return dists_; }

  // Draws as a TensorDict with batch size sample_shape + batch_shape(), one entry per out key
  // (nested keys nest). sample() records no gradient.
  //   td::TensorDict draws = dist.sample({10});
  TensorDict sample(at::IntArrayRef sample_shape = {}) const;
  // True when every part has rsample().
  bool has_rsample() const;
  // Reparameterized draws. Throws TypeError naming the parts without rsample().
  TensorDict rsample(at::IntArrayRef sample_shape = {}) const;
  TensorDict mode() const;
  TensorDict mean() const;
  // Throws NotImplementedError (with the out key) for a part without a median (Categorical).
  TensorDict median() const;
  TensorDict deterministic_sample() const;

  // The sum over the parts of their log-probabilities of sample[key], each summed over its dims
  // beyond batch_shape(): shape [*sample_shape, *batch_shape]. Throws KeyError naming a missing
  // key and the sample's keys; ValueError naming the key, the entry's shape and the shape the
  // part draws when they differ, or when the parts' sample dims disagree.
  //   at::Tensor lp = dist.log_prob(draws);
  at::Tensor log_prob(const TensorDict& sample) const;
  // Python's log_prob_composite: a TensorDict (batch size [*sample_shape, *batch_shape]) holding
  // each part's log-probability, not reduced, under "<key>_log_prob" (the last component
  // suffixed), and their reduced sum under log_prob_key() ("sample_log_prob") when include_sum. Same errors as
  // log_prob().
  //   dist.log_prob_composite(draws).get({"cont_log_prob"});   // [B, 2]
  TensorDict log_prob_composite(const TensorDict& sample, bool include_sum = true) const;
  // The sum of the parts' entropies, each summed over its dims beyond batch_shape().
  at::Tensor entropy() const;
  // Python's entropy_composite: a TensorDict (batch size batch_shape()) holding each part's
  // entropy, not reduced, under "<key>_entropy" (the last component suffixed), and their reduced
  // sum under entropy_key() ("entropy") when include_sum.
  //   dist.entropy_composite().get("cont_entropy");   // [B, 2]
  TensorDict entropy_composite(bool include_sum = true) const;
  // Upstream's cdf: writes each part's cdf of sample[key] under "<key>_cdf" (the last component
  // suffixed) into `sample` (a handle: the caller's TensorDict) and returns it. Throws KeyError
  // naming a missing key, c10::NotImplementedError naming a part without a cdf; nothing is
  // written then.
  //   dist.cdf(draws).get("cont_cdf");
  TensorDict cdf(TensorDict sample) const;
  // Upstream's icdf: writes each part's inverse cdf under "<key>_icdf", of sample["<key>_cdf"],
  // or of the cdf of sample[key] when there is no "<key>_cdf". Throws KeyError naming both keys
  // when neither is there, and as cdf().
  TensorDict icdf(TensorDict sample) const;

 private:
  template <class Fn>
  TensorDict collect(at::IntArrayRef sample_shape, const char* what, Fn fn) const;
  // Part i's log-probability of `sample`, and the same reduced to [*sample_shape, *batch].
  std::pair<at::Tensor, at::Tensor> part_log_prob(const TensorDict& sample, size_t i) const;
  at::Tensor reduce(const at::Tensor& t, size_t i) const;

  CompositeDistribution() = default;
  // Appends a built part, checking its key and batch shape.
  void add_part(const NestedKey& key, std::shared_ptr<Distribution> dist);

  CompositeDistributionOptions options_;
  std::vector<NestedKey> keys_;
  std::vector<std::shared_ptr<Distribution>> dists_;
  std::vector<int64_t> batch_shape_;
  std::optional<at::Device> device_;
};

}  // namespace td::nn
