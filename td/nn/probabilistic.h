// Probabilistic TensorDict modules: ProbabilisticTensorDictModule builds a distribution from
// TensorDict entries and writes a draw (and optionally its log-probability);
// ProbabilisticTensorDictSequential is a TensorDictSequential ending with one, which can also
// return the distribution itself. How the draw is taken is the InteractionType: the module's
// default, or the one set on this thread by the innermost live SetInteractionType.
//
//   td::nn::ProbabilisticTensorDictSequential policy(
//       td::nn::TensorDictModule(torch::nn::Linear(4, 8), {"input"}, {"params"}),
//       td::nn::TensorDictModule(td::nn::NormalParamExtractor(), {"params"}, {"loc", "scale"}),
//       td::nn::ProbabilisticTensorDictModule(
//           {"loc", "scale"}, {"hidden"}, td::nn::Normal::factory(),
//           td::nn::ProbabilisticTensorDictModuleOptions().return_log_prob(true)));
//   {
//     td::nn::SetInteractionType random(td::nn::InteractionType::kRandom);
//     policy(data);   // "hidden" is a draw, "sample_log_prob" its log-probability
//   }
//
// With a CompositeDistributionFactory (td/nn/composite.h) the module draws several keys at once
// (e.g. a discrete and a continuous action) and writes one summed log-probability.
#pragma once

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "td/nn/common.h"
#include "td/nn/composite.h"
#include "td/nn/distributions.h"
#include "td/nn/sequence.h"

namespace td::nn {

enum class InteractionType {
  kMode,           // dist.mode()
  kMean,           // dist.mean()
  kRandom,         // dist.rsample() where it exists, else dist.sample()
  kDeterministic,  // dist.deterministic_sample(): the mean, or the mode for discrete ones
  kMedian,         // dist.median() (Python's InteractionType.MEDIAN); not for Categorical
};

// "MODE", "MEAN", "RANDOM", "DETERMINISTIC", "MEDIAN".
//   td::nn::InteractionTypeName(td::nn::InteractionType::kMedian);   // "MEDIAN"
std::string_view InteractionTypeName(InteractionType type);

// The interaction type set on this thread by the innermost live SetInteractionType, or nullopt.
std::optional<InteractionType> interaction_type();

// Sets the interaction type of every probabilistic module run on this thread while it lives
// (scopes nest; the previous setting comes back at the end of the scope).
//   { td::nn::SetInteractionType mode(td::nn::InteractionType::kMode); policy(data); }
class SetInteractionType {
 public:
  explicit SetInteractionType(InteractionType type);
  ~SetInteractionType();
  SetInteractionType(const SetInteractionType&) = delete;
  SetInteractionType& operator=(const SetInteractionType&) = delete;

 private:
  std::optional<InteractionType> previous_;
};

struct ProbabilisticTensorDictModuleOptions {
  // Also write the log-probability of the draw under log_prob_key.
  TORCH_ARG(bool, return_log_prob) = false;
  TORCH_ARG(NestedKey, log_prob_key) = NestedKey("sample_log_prob");
  // Used when no SetInteractionType is live.
  TORCH_ARG(InteractionType, default_interaction_type) = InteractionType::kDeterministic;
  // Skip the run when the draw (and the log-prob, when written) already exist (see
  // SetSkipExisting, which overrides this while it lives).
  TORCH_ARG(bool, skip_existing) = false;
  // The distribution parameter name of each in key (Python's in_keys={"loc": key} form).
  // Empty: the last component of each in key. Not for a composite distribution (its parts name
  // their parameters).
  TORCH_ARG(std::vector<std::string>, dist_param_names) = {};
};

class ProbabilisticTensorDictModuleImpl
    : public Cloneable<ProbabilisticTensorDictModuleImpl> {
 public:
  // `in_keys` hold the distribution's parameters, `out_keys` has exactly one key (the draw).
  // out_keys() is that key plus the log-prob key when return_log_prob. Throws ValueError when
  // out_keys does not have one key or dist_param_names has another length than in_keys.
  ProbabilisticTensorDictModuleImpl(Keys in_keys, Keys out_keys,
                                    DistributionFactory distribution,
                                    ProbabilisticTensorDictModuleOptions options = {});
  // A composite distribution (Python's distribution_class=CompositeDistribution): `out_keys`
  // are the draws' keys, the keys of the factory's map (in any order); the log-prob written is
  // their sum (CompositeDistribution::log_prob). The parameters: when `in_keys` is one key
  // holding a sub-TensorDict, that sub-TensorDict (Python's layout, e.g. {"params": {"disc":
  // {"logits": ...}, ...}}); otherwise a TensorDict holding the in_keys entries at their keys,
  // which the parts' param_keys name. Throws ValueError when out_keys are not the map's keys
  // (naming both), when log_prob_key is one of them, or when dist_param_names is given.
  //   td::nn::ProbabilisticTensorDictModule head(
  //       {"params"}, {"disc", "cont"},
  //       td::nn::CompositeDistribution::factory({{"disc", td::nn::Categorical::factory()},
  //                                               {"cont", td::nn::Normal::factory()}}),
  //       td::nn::ProbabilisticTensorDictModuleOptions().return_log_prob(true));
  ProbabilisticTensorDictModuleImpl(Keys in_keys, Keys out_keys,
                                    CompositeDistributionFactory distribution,
                                    ProbabilisticTensorDictModuleOptions options = {});

  // Builds the distribution, writes the draw(s) (and the log-probability) into `td`, returns
  // `td`. Throws KeyError naming a missing parameter key; a distribution's own errors (bad
  // shapes, non-positive scale) get this module added to their message. On an error nothing is
  // written.
  TensorDict forward(const TensorDict& td) override;
  // The distribution built from `td`'s parameter entries. Throws TypeError for a composite
  // module (see get_composite_dist).
  std::shared_ptr<Distribution> get_dist(const TensorDict& td) const;
  // The composite distribution built from `td`'s parameters. Throws TypeError for a module with
  // a single distribution.
  //   auto dist = head->get_composite_dist(data);   // dist->entropy(), dist->sample(), ...
  std::shared_ptr<CompositeDistribution> get_composite_dist(const TensorDict& td) const;
  // The log-probability of the draw already in `td` (out_keys()[0]; for a composite, the sum
  // over the draws' keys).
  at::Tensor log_prob(const TensorDict& td) const;
  // The interaction type forward() would use now.
  InteractionType current_interaction_type() const;

  const ProbabilisticTensorDictModuleOptions& options() const { return options_; }
  // The single distribution's factory (empty for a composite module).
  const DistributionFactory& distribution() const { return distribution_; }
  // The composite distribution's factory, when the module has one.
  const std::optional<CompositeDistributionFactory>& composite() const { return composite_; }
  bool is_composite() const { return composite_.has_value(); }
  void reset() override {}
  void pretty_print(std::ostream& stream) const override;

 private:
  // Sets in_keys / out_keys (adding the log-prob key); `draw_keys` are the sampled keys.
  void set_keys(std::vector<NestedKey> in_keys, std::vector<NestedKey> draw_keys);
  std::string distribution_name() const;
  TensorDict forward_composite(const TensorDict& td);

  DistributionFactory distribution_;
  std::optional<CompositeDistributionFactory> composite_;
  ProbabilisticTensorDictModuleOptions options_;
  std::vector<std::string> param_names_;
  size_t num_draws_ = 1;
};

// The holder (key lists as td::nn::Keys: braced, or one key alone):
//   td::nn::ProbabilisticTensorDictModule m({"loc", "scale"}, "action",
//                                           td::nn::Normal::factory());
class ProbabilisticTensorDictModule
    : public torch::nn::ModuleHolder<ProbabilisticTensorDictModuleImpl> {
 public:
  ProbabilisticTensorDictModule(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  ProbabilisticTensorDictModule(std::shared_ptr<ProbabilisticTensorDictModuleImpl> impl)  // NOLINT
      : ModuleHolder(std::move(impl)) {}
  ProbabilisticTensorDictModule(Keys in_keys, Keys out_keys,
                                DistributionFactory distribution,
                                ProbabilisticTensorDictModuleOptions options = {})
      : ModuleHolder(std::make_shared<ProbabilisticTensorDictModuleImpl>(
            std::move(in_keys), std::move(out_keys), std::move(distribution),
            std::move(options))) {}
  //   td::nn::ProbabilisticTensorDictModule head({"params"}, {"disc", "cont"}, composite_factory);
  ProbabilisticTensorDictModule(Keys in_keys, Keys out_keys,
                                CompositeDistributionFactory distribution,
                                ProbabilisticTensorDictModuleOptions options = {})
      : ModuleHolder(std::make_shared<ProbabilisticTensorDictModuleImpl>(
            std::move(in_keys), std::move(out_keys), std::move(distribution),
            std::move(options))) {}
};

// A TensorDictSequential whose last module is a ProbabilisticTensorDictModule.
class ProbabilisticTensorDictSequentialImpl : public TensorDictSequentialImpl {
 public:
  // Throws TypeError when the last module is not a ProbabilisticTensorDictModule, ValueError
  // when there is no module.
  explicit ProbabilisticTensorDictSequentialImpl(
      std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
      TensorDictSequentialOptions options = {});
  // Runs every module but the last on `td` (writing their outputs into it) and returns the
  // distribution of the last one.
  std::shared_ptr<Distribution> get_dist(const TensorDict& td);
  // The same for a last module with a composite distribution.
  //   auto dist = policy->get_composite_dist(data);
  std::shared_ptr<CompositeDistribution> get_composite_dist(const TensorDict& td);
  // The log-probability of the draw(s) already in td under the distribution built from it.
  at::Tensor log_prob(const TensorDict& td);
  ProbabilisticTensorDictModuleImpl& probabilistic_module() const;
  void pretty_print(std::ostream& stream) const override;

 protected:
  std::shared_ptr<TensorDictSequentialImpl> make_like(
      std::vector<std::shared_ptr<TensorDictModuleBase>> modules) const override;
};

class ProbabilisticTensorDictSequential
    : public torch::nn::ModuleHolder<ProbabilisticTensorDictSequentialImpl> {
 public:
  ProbabilisticTensorDictSequential(std::nullptr_t) : ModuleHolder(nullptr) {}  // NOLINT
  ProbabilisticTensorDictSequential(  // NOLINT
      std::shared_ptr<ProbabilisticTensorDictSequentialImpl> impl)
      : ModuleHolder(std::move(impl)) {}
  ProbabilisticTensorDictSequential(std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
                                    TensorDictSequentialOptions options = {})
      : ModuleHolder(std::make_shared<ProbabilisticTensorDictSequentialImpl>(
            std::move(modules), std::move(options))) {}
  template <class First, class... Rest,
            class = std::enable_if_t<
                !std::is_same_v<std::decay_t<First>, TensorDictSequentialOptions> &&
                !std::is_same_v<std::decay_t<First>, std::nullptr_t> &&
                !(sizeof...(Rest) == 0 &&
                  std::is_same_v<std::decay_t<First>, ProbabilisticTensorDictSequential>) &&
                !std::is_same_v<std::decay_t<First>,
                                std::vector<std::shared_ptr<TensorDictModuleBase>>> &&
                !std::is_same_v<std::decay_t<First>,
                                std::shared_ptr<ProbabilisticTensorDictSequentialImpl>>>>
  explicit ProbabilisticTensorDictSequential(First&& first, Rest&&... rest)
      : ProbabilisticTensorDictSequential(std::vector<std::shared_ptr<TensorDictModuleBase>>{
            AsTensorDictModule(std::forward<First>(first)),
            AsTensorDictModule(std::forward<Rest>(rest))...}) {}
};

}  // namespace td::nn
