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
//     policy(data);   // "hidden" is a draw, "hidden_log_prob" its log-probability
//   }
//
// With a CompositeDistributionFactory (td/nn/composite.h) the module draws several keys at once
// (e.g. a discrete and a continuous action) and writes one log-probability per draw, or their
// sum while composite_lp_aggregate() is true (SetCompositeLpAggregate). More distributions:
// td/nn/continuous.h and td/nn/discrete.h.
#pragma once

#include <ATen/core/Generator.h>

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
  // Also write the log-probability of the draw(s) (under log_prob_keys()).
  TORCH_ARG(bool, return_log_prob) = false;
  // Used when no SetInteractionType is live.
  TORCH_ARG(InteractionType, default_interaction_type) = InteractionType::kDeterministic;
  // Skip the run when the draw (and the log-prob, when written) already exist (see
  // SetSkipExisting, which overrides this while it lives).
  TORCH_ARG(bool, skip_existing) = false;
  // The distribution parameter name of each in key (Python's in_keys={"loc": key} form).
  // Empty: the last component of each in key. Not for a composite distribution (its parts name
  // their parameters).
  TORCH_ARG(std::vector<std::string>, dist_param_names) = {};
  // Python's num_samples: under InteractionType::kRandom the module draws this many samples
  // (sample_shape), and writes them into the input expanded to num_samples + batch_size (a new
  // TensorDict: the input is left unchanged). Other interaction types expand their single value
  // the same way. Empty: one draw, no expansion.
  TORCH_ARG(std::vector<int64_t>, num_samples) = {};
  // When InteractionType::kMean meets a distribution without a closed-form mean (it throws
  // c10::NotImplementedError, e.g. TanhNormal), the mean of this many draws is used instead.
  TORCH_ARG(int64_t, n_empirical_estimate) = 1000;
  // Keep the distribution forward() built (cached_dist() / cached_composite_dist()), e.g. to
  // compare it later with an updated policy's (PPO's KL term).
  TORCH_ARG(bool, cache_dist) = false;
  // The random draws of forward() come from this generator (its state advances in place across
  // calls; it must live on the parameters' device). Undefined: the default generator.
  TORCH_ARG(at::Generator, generator) = at::Generator();
  // Python's generator=<int>: a CPU generator seeded with this, created at construction and
  // advanced by every call.
  TORCH_ARG(std::optional<uint64_t>, seed) = std::nullopt;
  // Python's generator=<key>: the seed is read from this entry (a one-element integer tensor, or
  // an integer as non-tensor data, which a batched TensorDict can hold) on every call; draws come
  // from a CPU generator seeded with it, and the next seed (drawn from that generator) is written
  // back to the entry in the same form, JAX-style. An absent entry: the default generator.
  TORCH_ARG(std::optional<NestedKey>, generator_key) = std::nullopt;

 public:
  // Where the log-probability goes. With one draw, default "<out_key>_log_prob" (the out key's
  // last component suffixed, as tensordict 0.14 writes when composite_lp_aggregate() is false),
  // or "sample_log_prob" when the module is built while composite_lp_aggregate() is true. With a
  // composite distribution: the key of the summed log-probability, only while
  // composite_lp_aggregate() is true.
  //   ProbabilisticTensorDictModuleOptions().return_log_prob(true).log_prob_key("lp")
  ProbabilisticTensorDictModuleOptions& log_prob_key(NestedKey key) {
    log_prob_key_ = std::move(key);
    return *this;
  }
  const std::optional<NestedKey>& log_prob_key() const { return log_prob_key_; }
  // One log-prob key per draw, in out_keys order (default "<out_key>_log_prob" each); only while
  // composite_lp_aggregate() is false.
  ProbabilisticTensorDictModuleOptions& log_prob_keys(std::vector<NestedKey> keys) {
    log_prob_keys_ = std::move(keys);
    return *this;
  }
  const std::optional<std::vector<NestedKey>>& log_prob_keys() const { return log_prob_keys_; }

 private:
  std::optional<NestedKey> log_prob_key_;
  std::optional<std::vector<NestedKey>> log_prob_keys_;
};

class ProbabilisticTensorDictModuleImpl
    : public Cloneable<ProbabilisticTensorDictModuleImpl> {
 public:
  // `in_keys` hold the distribution's parameters, `out_keys` has exactly one key (the draw).
  // out_keys() is that key plus the log-prob key when return_log_prob. Throws ValueError when
  // out_keys does not have one key, when dist_param_names has another length than in_keys, when
  // the log-prob key options do not fit composite_lp_aggregate() (log_prob_keys while it is true;
  // both options; a count other than the draws'), when a log-prob key is a draw's key, or when
  // more than one of generator, seed and generator_key is set.
  ProbabilisticTensorDictModuleImpl(Keys in_keys, Keys out_keys,
                                    DistributionFactory distribution,
                                    ProbabilisticTensorDictModuleOptions options = {});
  // A composite distribution (Python's distribution_class=CompositeDistribution): `out_keys`
  // are the draws' keys, the keys of the factory's map (in any order). The log-probabilities
  // written: one per draw, not reduced (each part's log_prob, under "<key>_log_prob" or
  // log_prob_keys), as tensordict 0.14 does by default; while composite_lp_aggregate() is true
  // (at construction and when run), their reduced sum (CompositeDistribution::log_prob) under
  // log_prob_key (default "sample_log_prob"). The parameters: when `in_keys` is one key
  // holding a sub-TensorDict, that sub-TensorDict (Python's layout, e.g. {"params": {"disc":
  // {"logits": ...}, ...}}); otherwise a TensorDict holding the in_keys entries at their keys,
  // which the parts' param_keys name. Throws ValueError when out_keys are not the map's keys
  // (naming both), when dist_param_names is given, and as the first constructor.
  //   td::nn::ProbabilisticTensorDictModule head(
  //       {"params"}, {"disc", "cont"},
  //       td::nn::CompositeDistribution::factory({{"disc", td::nn::Categorical::factory()},
  //                                               {"cont", td::nn::Normal::factory()}}),
  //       td::nn::ProbabilisticTensorDictModuleOptions().return_log_prob(true));
  //   // writes "disc", "cont", "disc_log_prob" ([B]) and "cont_log_prob" ([B, 2])
  ProbabilisticTensorDictModuleImpl(Keys in_keys, Keys out_keys,
                                    CompositeDistributionFactory distribution,
                                    ProbabilisticTensorDictModuleOptions options = {});
  // Upstream's default distribution_class: Delta::factory() (a point mass at parameter "param",
  // so the in key is named "param", or dist_param_names({"param"}) names it).
  //   td::nn::ProbabilisticTensorDictModule point({"param"}, {"action"});
  ProbabilisticTensorDictModuleImpl(Keys in_keys, Keys out_keys,
                                    ProbabilisticTensorDictModuleOptions options = {});

  // Builds the distribution, writes the draw(s) (and the log-probabilities) into `td`, returns
  // `td` (with num_samples: a new TensorDict, `td` expanded). Throws KeyError naming a missing
  // parameter key; a distribution's own errors (bad shapes, non-positive scale) get this module
  // added to their message; c10::Error when composite_lp_aggregate() differs from its value at
  // construction (and return_log_prob); ValueError naming the key when the generator_key entry
  // holds no seed. On an error nothing is written.
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

  // Where the log-probabilities are written, one per draw (or the one summed key while
  // composite_lp_aggregate() is true). Throws c10::Error when composite_lp_aggregate() changed
  // since construction.
  //   m->log_prob_keys();   // {"action_log_prob"}
  std::vector<NestedKey> log_prob_keys() const;
  // The single log-prob key. Throws ValueError naming log_prob_keys() when there are several
  // (a composite module while composite_lp_aggregate() is false), and as log_prob_keys().
  NestedKey log_prob_key() const;
  // The keys of the draws (out_keys without the log-prob keys) and of the parameters (in_keys).
  std::vector<NestedKey> dist_sample_keys() const;
  std::vector<NestedKey> dist_params_keys() const { return in_keys_; }
  const std::vector<int64_t>& num_samples() const { return options_.num_samples(); }
  // The generator forward() draws from (the given one, or the one made from `seed`); undefined
  // when none (or generator_key) was given.
  const at::Generator& generator() const { return generator_; }
  // The distribution the last forward() built, when cache_dist (null before the first call or
  // without cache_dist).
  std::shared_ptr<Distribution> cached_dist() const { return cached_dist_; }
  std::shared_ptr<CompositeDistribution> cached_composite_dist() const {
    return cached_composite_;
  }

  const ProbabilisticTensorDictModuleOptions& options() const { return options_; }
  // The single distribution's factory (empty for a composite module).
  const DistributionFactory& distribution() const { return distribution_; }
  // The composite distribution's factory, when the module has one.
  const std::optional<CompositeDistributionFactory>& composite() const { return composite_; }
  bool is_composite() const { return composite_.has_value(); }
  // Called by clone() on the copy: the copy draws from a clone of the generator (same state,
  // advanced independently).
  void reset() override;
  void pretty_print(std::ostream& stream) const override;

 private:
  // Sets in_keys / out_keys (adding the log-prob key); `draw_keys` are the sampled keys.
  void set_keys(std::vector<NestedKey> in_keys, std::vector<NestedKey> draw_keys);
  std::string distribution_name() const;
  // Throws when composite_lp_aggregate() is not what it was at construction.
  void check_aggregate(const char* what) const;
  // The generator of this call: generator_, or one seeded from generator_key's entry (then
  // `seed_entry` is that entry).
  at::Generator call_generator(const TensorDict& td, std::optional<Value>& seed_entry) const;
  // Writes the draws, log-probabilities and next seed (all or nothing); returns the output.
  TensorDict forward_single(const TensorDict& td);
  TensorDict forward_composite(const TensorDict& td);

  DistributionFactory distribution_;
  std::optional<CompositeDistributionFactory> composite_;
  ProbabilisticTensorDictModuleOptions options_;
  std::vector<std::string> param_names_;
  size_t num_draws_ = 1;
  bool aggregate_at_init_ = false;
  std::vector<NestedKey> log_prob_keys_;
  at::Generator generator_;
  std::shared_ptr<Distribution> cached_dist_;
  std::shared_ptr<CompositeDistribution> cached_composite_;
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
  // Delta, upstream's default distribution_class.
  ProbabilisticTensorDictModule(Keys in_keys, Keys out_keys,
                                ProbabilisticTensorDictModuleOptions options = {})
      : ModuleHolder(std::make_shared<ProbabilisticTensorDictModuleImpl>(
            std::move(in_keys), std::move(out_keys), std::move(options))) {}
};

struct ProbabilisticTensorDictSequentialOptions {
  // Python's return_composite=: true makes get_composite_dist() a CompositeDistribution over
  // every probabilistic module of the sequence (see ProbabilisticTensorDictSequentialImpl);
  // false considers only the last module, which must then be a ProbabilisticTensorDictModule.
  // Unset: true when the last module is not a ProbabilisticTensorDictModule or more than one
  // module is, as upstream.
  TORCH_ARG(std::optional<bool>, return_composite) = std::nullopt;
  // partial_tolerant, selected_out_keys, inplace.
  TORCH_ARG(TensorDictSequentialOptions, sequential) = {};
};

// A TensorDictSequential with probabilistic modules: usually ending with one, whose distribution
// get_dist() returns; with return_composite, any number of them anywhere in the sequence, whose
// distributions get_composite_dist() gathers into one CompositeDistribution.
class ProbabilisticTensorDictSequentialImpl : public TensorDictSequentialImpl {
 public:
  // Throws TypeError when the last module is not a ProbabilisticTensorDictModule (unless
  // return_composite), or when no module is probabilistic (use a TensorDictSequential);
  // ValueError when there is no module.
  explicit ProbabilisticTensorDictSequentialImpl(
      std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
      TensorDictSequentialOptions options = {});
  //   ProbabilisticTensorDictSequentialImpl(
  //       modules, ProbabilisticTensorDictSequentialOptions().return_composite(true));
  ProbabilisticTensorDictSequentialImpl(std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
                                        ProbabilisticTensorDictSequentialOptions options);
  // Runs every module but the last on `td` (writing their outputs into it) and returns the
  // distribution of the last one. Throws TypeError with return_composite (the distribution is a
  // CompositeDistribution: call get_composite_dist()).
  std::shared_ptr<Distribution> get_dist(const TensorDict& td);
  // Without return_composite: the same for a last module with a composite distribution.
  // With return_composite (Python's get_dist then): runs the modules in order on a shallow copy of
  // `td` (`td` is left unchanged); each probabilistic module contributes its distribution, built
  // from what the modules before it wrote (a composite module its parts), and, unless it is the
  // last module, draws (as its forward() does: the interaction type set on this thread, else its
  // default) so that later modules are conditioned on that draw. Returns the CompositeDistribution
  // over those distributions, keyed by their draws' keys, in module order, with the batch shape of
  // `td`.
  //   auto dist = policy->get_composite_dist(data);   // dist->keys(): {"sample0", "sample1"}
  std::shared_ptr<CompositeDistribution> get_composite_dist(const TensorDict& td);
  // The log-probability of the draw(s) already in td under the distribution built from it (with
  // return_composite: the sum over every probabilistic module's draws, get_composite_dist(td)->
  // log_prob(td)).
  at::Tensor log_prob(const TensorDict& td);
  bool return_composite() const { return return_composite_; }
  // Python's get_dist_params: runs every module but the last on `td` (under the interaction type
  // set on this thread, else default_interaction_type()) and returns the result, which holds the
  // distribution's parameters.
  TensorDict get_dist_params(const TensorDict& td);
  // The last module's distribution built from parameters already in `td` (nothing else runs).
  std::shared_ptr<Distribution> build_dist_from_params(const TensorDict& td) const;
  // Python's det_part: every module but the last, as a TensorDictSequential (sharing them).
  TensorDictSequential det_part() const;
  // The last module's default interaction type.
  InteractionType default_interaction_type() const;
  // The last ProbabilisticTensorDictModule of the sequence (looking into nested probabilistic
  // sequences); without return_composite, the last module.
  ProbabilisticTensorDictModuleImpl& probabilistic_module() const;
  // The log-prob keys of the probabilistic modules, last module first (Python's order).
  std::vector<NestedKey> log_prob_keys() const;
  // The draws' and parameters' keys of the probabilistic modules, last module first.
  std::vector<NestedKey> dist_sample_keys() const;
  std::vector<NestedKey> dist_params_keys() const;
  // The sample dims the probabilistic modules add, the last module's first (each expands what
  // the previous ones wrote).
  std::vector<int64_t> num_samples() const;
  void pretty_print(std::ostream& stream) const override;

 protected:
  std::shared_ptr<TensorDictSequentialImpl> make_like(
      std::vector<std::shared_ptr<TensorDictModuleBase>> modules) const override;

 private:
  std::shared_ptr<CompositeDistribution> composite_of_all(const TensorDict& td);
  bool return_composite_ = false;
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
  //   td::nn::ProbabilisticTensorDictSequential seq(
  //       {a.ptr(), head0.ptr(), b.ptr(), head1.ptr()},
  //       td::nn::ProbabilisticTensorDictSequentialOptions().return_composite(true));
  ProbabilisticTensorDictSequential(std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
                                    ProbabilisticTensorDictSequentialOptions options)
      : ModuleHolder(std::make_shared<ProbabilisticTensorDictSequentialImpl>(
            std::move(modules), std::move(options))) {}
  template <class First, class... Rest,
            class = std::enable_if_t<
                !std::is_same_v<std::decay_t<First>, TensorDictSequentialOptions> &&
                !std::is_same_v<std::decay_t<First>, ProbabilisticTensorDictSequentialOptions> &&
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
