#include "td/nn/probabilistic.h"

#include <ATen/ATen.h>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <mutex>
#include <utility>

#include "absl/strings/str_cat.h"
#include "td/core/dtype.h"

namespace td::nn {
namespace {

thread_local std::optional<InteractionType> current_interaction_type;

std::string LeafKeys(const TensorDict& td) {
  return KeysRepr(td.keys(KeysOptions().include_nested(true).leaves_only(true)));
}

// An independent copy of `g`: the same state, advanced on its own. LibTorch 1.13's
// at::Generator::clone() leaks the copy: GeneratorImpl::clone adopts the new object after
// raising only its strong count, so its weak count stays 0 and dropping the last reference
// never deletes it (LeakSanitizer in //td/nn:probabilistic_keys_test, allocated by
// CPUGeneratorImpl::clone_impl). A CPU generator is copied through its state instead, on every
// LibTorch version; other devices keep clone().
at::Generator CopyGenerator(at::Generator g) {  // a handle: mutex() is non-const
  if (!g.device().is_cpu()) return g.clone();
  at::Tensor state;
  {
    std::lock_guard<std::mutex> lock(g.mutex());
    state = g.get_state();
  }
  at::Generator copy = at::detail::createCPUGenerator();
  copy.set_state(state);
  return copy;
}

}  // namespace

std::string_view InteractionTypeName(InteractionType type) {
  switch (type) {
    case InteractionType::kMode:
      return "MODE";
    case InteractionType::kMean:
      return "MEAN";
    case InteractionType::kRandom:
      return "RANDOM";
    case InteractionType::kDeterministic:
      return "DETERMINISTIC";
    case InteractionType::kMedian:
      return "MEDIAN";
  }
  return "?";
}

std::optional<InteractionType> interaction_type() { return current_interaction_type; }

SetInteractionType::SetInteractionType(InteractionType type)
    : previous_(current_interaction_type) {
  current_interaction_type = type;
}

SetInteractionType::~SetInteractionType() { current_interaction_type = previous_; }

// ---- ProbabilisticTensorDictModuleImpl ----------------------------------------------------------

ProbabilisticTensorDictModuleImpl::ProbabilisticTensorDictModuleImpl(
    Keys in_keys, Keys out_keys, ProbabilisticTensorDictModuleOptions options)
    : ProbabilisticTensorDictModuleImpl(std::move(in_keys), std::move(out_keys), Delta::factory(),
                                        std::move(options)) {}

ProbabilisticTensorDictModuleImpl::ProbabilisticTensorDictModuleImpl(
    Keys in_list, Keys out_list,
    DistributionFactory distribution, ProbabilisticTensorDictModuleOptions options)
    : distribution_(std::move(distribution)), options_(std::move(options)) {
  std::vector<NestedKey> in_keys = std::move(in_list).take();
  std::vector<NestedKey> out_keys = std::move(out_list).take();
  if (!distribution_.make) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: the distribution factory is empty");
  }
  if (out_keys.size() != 1) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: out_keys must hold exactly one key (the "
                     "draw); got ",
                     KeysRepr(out_keys));
  }
  const auto& names = options_.dist_param_names();
  if (!names.empty() && names.size() != in_keys.size()) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: dist_param_names ", KeysRepr(names),
                     " must name each of the in_keys ", KeysRepr(in_keys));
  }
  for (size_t i = 0; i < in_keys.size(); ++i) {
    param_names_.push_back(names.empty() ? in_keys[i].back() : names[i]);
  }
  set_keys(std::move(in_keys), std::move(out_keys));
}

ProbabilisticTensorDictModuleImpl::ProbabilisticTensorDictModuleImpl(
    Keys in_list, Keys out_list,
    CompositeDistributionFactory distribution, ProbabilisticTensorDictModuleOptions options)
    : composite_(std::move(distribution)), options_(std::move(options)) {
  std::vector<NestedKey> in_keys = std::move(in_list).take();
  std::vector<NestedKey> out_keys = std::move(out_list).take();
  const std::vector<NestedKey> map_keys = composite_->keys();
  std::vector<NestedKey> sorted_out = out_keys, sorted_map = map_keys;
  std::sort(sorted_out.begin(), sorted_out.end());
  std::sort(sorted_map.begin(), sorted_map.end());
  if (map_keys.empty() || sorted_out != sorted_map) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: with a composite distribution, out_keys ",
                     KeysRepr(out_keys), " must be the keys of its distribution map ",
                     KeysRepr(map_keys), " (in any order)");
  }
  if (!options_.dist_param_names().empty()) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: dist_param_names ",
                     KeysRepr(options_.dist_param_names()), " does not apply to ",
                     composite_->name(), ": its parts name their parameters (CompositePart's "
                     "param_keys)");
  }
  if (in_keys.empty()) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: ", composite_->name(),
                     " needs in_keys (a sub-TensorDict of parameters, or the parameter keys)");
  }
  num_draws_ = out_keys.size();
  set_keys(std::move(in_keys), std::move(out_keys));
}

void ProbabilisticTensorDictModuleImpl::set_keys(std::vector<NestedKey> in_keys,
                                                 std::vector<NestedKey> draw_keys) {
  aggregate_at_init_ = composite_lp_aggregate();
  const auto& given_key = options_.log_prob_key();
  const auto& given_keys = options_.log_prob_keys();
  const size_t n = draw_keys.size();
  if (given_keys) {
    if (aggregate_at_init_) {
      TD_FAIL(ValueError, "ProbabilisticTensorDictModule: log_prob_keys ", KeysRepr(*given_keys),
              " were given while composite_lp_aggregate() is true; give log_prob_key (the key of "
              "the summed log-probability) instead");
    }
    if (given_key) {
      TD_FAIL(ValueError, "ProbabilisticTensorDictModule: give log_prob_key (",
              given_key->repr(), ") or log_prob_keys (", KeysRepr(*given_keys), "), not both");
    }
    if (given_keys->size() != n) {
      TD_FAIL(ValueError, "ProbabilisticTensorDictModule: log_prob_keys ", KeysRepr(*given_keys),
              " must name one key per draw ", KeysRepr(draw_keys));
    }
    log_prob_keys_ = *given_keys;
  } else if (aggregate_at_init_) {
    log_prob_keys_ = {given_key.value_or(NestedKey("sample_log_prob"))};
  } else if (n == 1) {
    log_prob_keys_ = {given_key.value_or(add_suffix(draw_keys[0], "_log_prob"))};
  } else {
    if (given_key) {
      TD_FAIL(ValueError, "ProbabilisticTensorDictModule: log_prob_key ", given_key->repr(),
              " names one summed log-probability, but composite_lp_aggregate() is false and the "
              "module draws ", KeysRepr(draw_keys),
              ": give log_prob_keys (one per draw), or build the module under "
              "td::nn::SetCompositeLpAggregate(true)");
    }
    for (const NestedKey& k : draw_keys) log_prob_keys_.push_back(add_suffix(k, "_log_prob"));
  }
  for (size_t i = 0; i < log_prob_keys_.size(); ++i) {
    const NestedKey& k = log_prob_keys_[i];
    const bool twice = std::find(log_prob_keys_.begin(), log_prob_keys_.begin() + i, k) !=
                       log_prob_keys_.begin() + i;
    if (twice || std::find(draw_keys.begin(), draw_keys.end(), k) != draw_keys.end()) {
      TD_FAIL(ValueError, "ProbabilisticTensorDictModule: log-prob key ", k.repr(),
              twice ? " is given twice" : " is also the key of a draw", " (draws ",
              KeysRepr(draw_keys), ")");
    }
  }
  const int sources = static_cast<int>(options_.generator().defined()) +
                      static_cast<int>(options_.seed().has_value()) +
                      static_cast<int>(options_.generator_key().has_value());
  if (sources > 1) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: give at most one of generator, seed and "
            "generator_key");
  }
  if (options_.generator().defined()) generator_ = options_.generator();
  if (options_.seed()) generator_ = at::detail::createCPUGenerator(*options_.seed());
  for (int64_t s : options_.num_samples()) {
    if (s < 0) {
      TD_FAIL(ValueError, "ProbabilisticTensorDictModule: num_samples ",
              SizeRepr(options_.num_samples()), " has a negative size");
    }
  }
  in_keys_ = std::move(in_keys);
  out_keys_source_ = std::move(draw_keys);
  if (options_.return_log_prob()) {
    out_keys_source_.insert(out_keys_source_.end(), log_prob_keys_.begin(), log_prob_keys_.end());
  }
  out_keys_ = out_keys_source_;
}

void ProbabilisticTensorDictModuleImpl::check_aggregate(const char* what) const {
  const bool now = composite_lp_aggregate();
  if (now != aggregate_at_init_) {
    TD_FAIL(c10::Error, "ProbabilisticTensorDictModule::", what, ": composite_lp_aggregate() is ",
            now ? "true" : "false", " but was ", aggregate_at_init_ ? "true" : "false",
            " when the module was built, which decided its log-prob keys ",
            KeysRepr(log_prob_keys_), "; run it under the same setting");
  }
}

std::vector<NestedKey> ProbabilisticTensorDictModuleImpl::log_prob_keys() const {
  check_aggregate("log_prob_keys");
  return log_prob_keys_;
}

NestedKey ProbabilisticTensorDictModuleImpl::log_prob_key() const {
  check_aggregate("log_prob_key");
  if (log_prob_keys_.size() != 1) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule::log_prob_key: the module writes one "
            "log-probability per draw, under ", KeysRepr(log_prob_keys_),
            "; use log_prob_keys() (or build it under td::nn::SetCompositeLpAggregate(true) for "
            "one summed key)");
  }
  return log_prob_keys_[0];
}

std::vector<NestedKey> ProbabilisticTensorDictModuleImpl::dist_sample_keys() const {
  return std::vector<NestedKey>(out_keys_source_.begin(), out_keys_source_.begin() + num_draws_);
}

at::Generator ProbabilisticTensorDictModuleImpl::call_generator(
    const TensorDict& td, std::optional<Value>& seed_entry) const {
  if (!options_.generator_key()) return generator_;
  const NestedKey& key = *options_.generator_key();
  std::optional<Value> v = td.find(key);
  if (!v) return at::Generator();
  int64_t seed = 0;
  if (v->is_tensor() && v->tensor().numel() == 1 &&
      at::isIntegralType(v->tensor().scalar_type(), /*includeBool=*/false)) {
    seed = v->tensor().item<int64_t>();
  } else if (v->is_non_tensor() && v->non_tensor().is_number_integer()) {
    seed = v->non_tensor().get<int64_t>();
  } else {
    TD_FAIL(ValueError, "ProbabilisticTensorDictModule: the generator_key entry ", key.repr(),
            " must hold a seed: a one-element integer tensor or an integer (non-tensor data); "
            "got ",
            v->is_tensor() ? absl::StrCat(c10::toString(v->tensor().scalar_type()), " of shape ",
                                          SizeRepr(v->tensor().sizes()))
                           : absl::StrCat(std::string(v->kind()), v->is_non_tensor()
                                                         ? " " + v->non_tensor().dump()
                                                         : std::string()));
  }
  seed_entry = std::move(v);
  return at::detail::createCPUGenerator(static_cast<uint64_t>(seed));
}

void ProbabilisticTensorDictModuleImpl::reset() {
  if (generator_.defined()) generator_ = CopyGenerator(generator_);
  cached_dist_.reset();
  cached_composite_.reset();
}

std::string ProbabilisticTensorDictModuleImpl::distribution_name() const {
  return composite_ ? composite_->name() : distribution_.name;
}

InteractionType ProbabilisticTensorDictModuleImpl::current_interaction_type() const {
  return interaction_type().value_or(options_.default_interaction_type());
}

std::shared_ptr<Distribution> ProbabilisticTensorDictModuleImpl::get_dist(
    const TensorDict& td) const {
  if (composite_) {
    TD_FAIL(TypeError, "ProbabilisticTensorDictModule: the distribution is a ", composite_->name(),
                    "; use get_composite_dist()");
  }
  DistParams params;
  params.reserve(in_keys_.size());
  for (size_t i = 0; i < in_keys_.size(); ++i) {
    std::optional<Value> v = td.find(in_keys_[i]);
    if (!v || !v->is_tensor()) {
      TD_FAIL(KeyError, "ProbabilisticTensorDictModule(", distribution_.name, "): parameter key ",
                     in_keys_[i].repr(), v ? " is not a Tensor" : " is missing",
                     "; the TensorDict has keys ", LeafKeys(td));
    }
    params.emplace_back(param_names_[i], v->tensor());
  }
  try {
    return distribution_.make(params);
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("in ProbabilisticTensorDictModule(distribution=",
                               distribution_.name, ", in_keys=", KeysRepr(in_keys_), ")"));
    throw;
  }
}

std::shared_ptr<CompositeDistribution> ProbabilisticTensorDictModuleImpl::get_composite_dist(
    const TensorDict& td) const {
  if (!composite_) {
    TD_FAIL(TypeError, "ProbabilisticTensorDictModule: the distribution is a ", distribution_.name,
                    ", not a CompositeDistribution; use get_dist()");
  }
  std::optional<TensorDict> params;
  if (in_keys_.size() == 1) {
    std::optional<Value> v = td.find(in_keys_[0]);
    if (v && v->is_tensordict()) params = v->tensordict();
  }
  if (!params) {
    params = TensorDict({}, td.batch_size(), td.device());
    for (const NestedKey& k : in_keys_) {
      std::optional<Value> v = td.find(k);
      if (!v) {
        TD_FAIL(KeyError, "ProbabilisticTensorDictModule(", composite_->name(), "): parameter key ",
                       k.repr(), " is missing; the TensorDict has keys ", LeafKeys(td));
      }
      params->set(k, *std::move(v));
    }
  }
  try {
    return composite_->make(*params);
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("in ProbabilisticTensorDictModule(distribution=",
                               composite_->name(), ", in_keys=", KeysRepr(in_keys_), ")"));
    throw;
  }
}

at::Tensor ProbabilisticTensorDictModuleImpl::log_prob(const TensorDict& td) const {
  if (composite_) return get_composite_dist(td)->log_prob(td);
  return get_dist(td)->log_prob(td.get(out_keys_source_[0]));
}

namespace {

bool Selected(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

std::vector<int64_t> Concat(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

at::IntArrayRef Shape(const at::Tensor& draw) { return draw.sizes(); }
at::IntArrayRef Shape(const TensorDict& draw) { return draw.batch_size(); }

// The draw of `type` from a Distribution (a tensor) or a CompositeDistribution (a TensorDict),
// expanded by num_samples where the draw is not random. `mean` is dist.mean(), or what stands in
// for it.
template <class Dist, class MeanFn>
auto Draw(const Dist& dist, InteractionType type, at::IntArrayRef num_samples, MeanFn mean)
    -> decltype(dist.mode()) {
  decltype(dist.mode()) draw;
  switch (type) {
    case InteractionType::kMode:
      draw = dist.mode();
      break;
    case InteractionType::kMean:
      draw = mean();
      break;
    case InteractionType::kRandom:
      return dist.has_rsample() ? dist.rsample(num_samples) : dist.sample(num_samples);
    case InteractionType::kMedian:
      draw = dist.median();
      break;
    case InteractionType::kDeterministic:
      draw = dist.deterministic_sample();
      break;
  }
  return num_samples.empty() ? draw : draw.expand(Concat(num_samples, Shape(draw)));
}

at::Tensor DrawTensor(const Distribution& dist, InteractionType type, at::IntArrayRef num_samples,
                      int64_t n_empirical) {
  return Draw(dist, type, num_samples, [&] {
    try {
      return dist.mean();
    } catch (const c10::NotImplementedError&) {
      // No closed form: the mean of n draws (Python's n_empirical_estimate).
      const std::vector<int64_t> n = {n_empirical};
      return (dist.has_rsample() ? dist.rsample(n) : dist.sample(n)).mean(0);
    }
  });
}

TensorDict DrawComposite(const CompositeDistribution& dist, InteractionType type,
                         at::IntArrayRef num_samples) {
  return Draw(dist, type, num_samples, [&] { return dist.mean(); });
}

}  // namespace

TensorDict ProbabilisticTensorDictModuleImpl::forward(const TensorDict& td) {
  if (should_skip(td, options_.skip_existing())) return td;
  if (options_.return_log_prob()) check_aggregate("forward");
  return composite_ ? forward_composite(td) : forward_single(td);
}

namespace {

// The output TensorDict: `td`, or `td` expanded by num_samples.
TensorDict OutputFor(const TensorDict& td, at::IntArrayRef num_samples) {
  return num_samples.empty() ? td : td.expand(Concat(num_samples, td.batch_size()));
}

// Writes the next seed of the generator_key form back into the input, in the entry's form
// (Python's writeback).
void WriteNextSeed(internal::WriteTransaction& tx, const TensorDict& td, const NestedKey& key,
                   const Value& seed_entry, at::Generator& gen) {
  const at::Tensor next = at::randint(0, int64_t{1} << 62, {}, gen, at::TensorOptions(at::kLong));
  if (seed_entry.is_tensor()) {
    const at::Tensor& old = seed_entry.tensor();
    tx.set(td, key, next.to(old.options()).reshape(old.sizes()));
  } else {
    tx.set(td, key, NonTensorData(nlohmann::json(next.item<int64_t>())));
  }
}

}  // namespace

TensorDict ProbabilisticTensorDictModuleImpl::forward_single(const TensorDict& td) {
  std::optional<Value> seed_entry;
  at::Generator gen = call_generator(td, seed_entry);
  const std::shared_ptr<Distribution> dist = get_dist(td);
  at::Tensor draw;
  {
    SetSamplingGenerator use(gen);
    draw = DrawTensor(*dist, current_interaction_type(), options_.num_samples(),
                      options_.n_empirical_estimate());
  }
  const NestedKey& draw_key = out_keys_source_[0];
  const bool selected_draw = Selected(out_keys_, draw_key);
  const bool selected_lp = options_.return_log_prob() && Selected(out_keys_, log_prob_keys_[0]);
  at::Tensor lp;
  if (selected_lp) lp = dist->log_prob(draw);
  // Every write or none.
  TensorDict out = OutputFor(td, options_.num_samples());
  internal::WriteTransaction tx;
  if (selected_draw) tx.set(out, draw_key, draw);
  if (selected_lp) tx.set(out, log_prob_keys_[0], lp);
  if (seed_entry) WriteNextSeed(tx, td, *options_.generator_key(), *seed_entry, gen);
  tx.commit();
  if (options_.cache_dist()) cached_dist_ = dist;
  return out;
}

TensorDict ProbabilisticTensorDictModuleImpl::forward_composite(const TensorDict& td) {
  std::optional<Value> seed_entry;
  at::Generator gen = call_generator(td, seed_entry);
  const std::shared_ptr<CompositeDistribution> dist = get_composite_dist(td);
  TensorDict draw;
  {
    SetSamplingGenerator use(gen);
    draw = DrawComposite(*dist, current_interaction_type(), options_.num_samples());
  }
  std::vector<std::pair<NestedKey, at::Tensor>> lps;
  if (options_.return_log_prob()) {
    if (aggregate_at_init_) {
      if (Selected(out_keys_, log_prob_keys_[0])) {
        lps.emplace_back(log_prob_keys_[0], dist->log_prob(draw));
      }
    } else {
      const TensorDict parts = dist->log_prob_composite(draw, /*include_sum=*/false);
      for (size_t i = 0; i < num_draws_; ++i) {
        if (!Selected(out_keys_, log_prob_keys_[i])) continue;
        lps.emplace_back(log_prob_keys_[i],
                         parts.get(add_suffix(out_keys_source_[i], "_log_prob")));
      }
    }
  }
  // Every write or none.
  TensorDict out = OutputFor(td, options_.num_samples());
  internal::WriteTransaction tx;
  for (size_t i = 0; i < num_draws_; ++i) {
    const NestedKey& k = out_keys_source_[i];
    if (Selected(out_keys_, k)) tx.set(out, k, draw.get_value(k));
  }
  for (const auto& [k, lp] : lps) tx.set(out, k, lp);
  if (seed_entry) WriteNextSeed(tx, td, *options_.generator_key(), *seed_entry, gen);
  tx.commit();
  if (options_.cache_dist()) cached_composite_ = dist;
  return out;
}

void ProbabilisticTensorDictModuleImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::ProbabilisticTensorDictModule(in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_) << ", distribution=" << distribution_name()
         << ", default_interaction_type="
         << InteractionTypeName(options_.default_interaction_type())
         << ", return_log_prob=" << (options_.return_log_prob() ? "true" : "false");
  if (!options_.num_samples().empty()) stream << ", num_samples=" << SizeRepr(options_.num_samples());
  stream << ")";
}

// ---- ProbabilisticTensorDictSequentialImpl --------------------------------------------------------

namespace {

// The probabilistic modules of `modules` (nested probabilistic sequences' own), last first.
template <class Fn>
void ForEachProbabilisticReversed(const std::vector<std::shared_ptr<TensorDictModuleBase>>& modules,
                                  Fn fn) {
  for (auto it = modules.rbegin(); it != modules.rend(); ++it) {
    if (auto* m = dynamic_cast<ProbabilisticTensorDictModuleImpl*>(it->get())) fn(*m);
    if (auto* s = dynamic_cast<ProbabilisticTensorDictSequentialImpl*>(it->get())) {
      ForEachProbabilisticReversed(s->modules(), fn);
    }
  }
}

bool IsProbabilistic(const TensorDictModuleBase* m) {
  return dynamic_cast<const ProbabilisticTensorDictModuleImpl*>(m) != nullptr ||
         dynamic_cast<const ProbabilisticTensorDictSequentialImpl*>(m) != nullptr;
}

}  // namespace

ProbabilisticTensorDictSequentialImpl::ProbabilisticTensorDictSequentialImpl(
    std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
    TensorDictSequentialOptions options)
    : ProbabilisticTensorDictSequentialImpl(
          std::move(modules), ProbabilisticTensorDictSequentialOptions().sequential(options)) {}

ProbabilisticTensorDictSequentialImpl::ProbabilisticTensorDictSequentialImpl(
    std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
    ProbabilisticTensorDictSequentialOptions options)
    : TensorDictSequentialImpl(std::move(modules), options.sequential()) {
  if (modules_.empty()) {
    TD_FAIL(ValueError, "ProbabilisticTensorDictSequential needs at least one module");
  }
  const bool last_is_module =
      std::dynamic_pointer_cast<ProbabilisticTensorDictModuleImpl>(modules_.back()) != nullptr;
  size_t probabilistic = 0, prob_modules = 0;
  for (const auto& m : modules_) {
    probabilistic += IsProbabilistic(m.get()) ? 1 : 0;
    prob_modules += dynamic_cast<ProbabilisticTensorDictModuleImpl*>(m.get()) ? 1 : 0;
  }
  if (probabilistic == 0 || (!last_is_module && options.return_composite() == false)) {
    TD_FAIL(TypeError, "ProbabilisticTensorDictSequential: the last module must be a "
                    "ProbabilisticTensorDictModule",
                    probabilistic == 0 ? " (no module is probabilistic: use a TensorDictSequential)"
                                       : " unless return_composite is true",
                    "; got ", modules_.back()->name());
  }
  return_composite_ = options.return_composite().value_or(!last_is_module || prob_modules > 1);
}

ProbabilisticTensorDictModuleImpl& ProbabilisticTensorDictSequentialImpl::probabilistic_module()
    const {
  ProbabilisticTensorDictModuleImpl* last = nullptr;
  ForEachProbabilisticReversed(modules_, [&](ProbabilisticTensorDictModuleImpl& m) {
    if (last == nullptr) last = &m;
  });
  // The constructor checked that some module is probabilistic; a nested sequence has one too.
  return *last;
}

std::shared_ptr<Distribution> ProbabilisticTensorDictSequentialImpl::get_dist(
    const TensorDict& td) {
  if (return_composite_) {
    TD_FAIL(TypeError, "ProbabilisticTensorDictSequential::get_dist: with return_composite the "
                    "distribution is a CompositeDistribution over every probabilistic module; "
                    "call get_composite_dist()");
  }
  return probabilistic_module().get_dist(run_chain(td, modules_.size() - 1));
}

std::shared_ptr<CompositeDistribution> ProbabilisticTensorDictSequentialImpl::get_composite_dist(
    const TensorDict& td) {
  if (return_composite_) return composite_of_all(td);
  return probabilistic_module().get_composite_dist(run_chain(td, modules_.size() - 1));
}

std::shared_ptr<CompositeDistribution> ProbabilisticTensorDictSequentialImpl::composite_of_all(
    const TensorDict& td) {
  TensorDict cur = td.copy();
  std::vector<std::pair<NestedKey, std::shared_ptr<Distribution>>> dists;
  auto add_composite = [&dists](const CompositeDistribution& c) {
    for (size_t j = 0; j < c.keys().size(); ++j) dists.emplace_back(c.keys()[j], c.dists()[j]);
  };
  for (size_t i = 0; i < modules_.size(); ++i) {
    TensorDictModuleBase* m = modules_[i].get();
    if (auto* p = dynamic_cast<ProbabilisticTensorDictModuleImpl*>(m)) {
      if (p->is_composite()) {
        add_composite(*p->get_composite_dist(cur));
      } else {
        dists.emplace_back(p->dist_sample_keys()[0], p->get_dist(cur));
      }
    } else if (auto* s = dynamic_cast<ProbabilisticTensorDictSequentialImpl*>(m)) {
      // get_dist / get_composite_dist write the nested sequence's deterministic outputs into a
      // copy of `cur`; its draw (below) recomputes them.
      const TensorDict view = cur.copy();
      if (s->return_composite() || s->probabilistic_module().is_composite()) {
        add_composite(*s->get_composite_dist(view));
      } else {
        dists.emplace_back(s->probabilistic_module().dist_sample_keys()[0], s->get_dist(view));
      }
    } else {
      cur = run_module(i, cur);
      continue;
    }
    if (i + 1 < modules_.size()) cur = run_module(i, cur);  // the draw later modules read
  }
  return std::make_shared<CompositeDistribution>(
      CompositeDistribution::from_distributions(cur, std::move(dists)));
}

at::Tensor ProbabilisticTensorDictSequentialImpl::log_prob(const TensorDict& td) {
  // The draw is read from `td` itself (a module before the last may write elsewhere).
  if (return_composite_) return composite_of_all(td)->log_prob(td);
  ProbabilisticTensorDictModuleImpl& last = probabilistic_module();
  if (last.is_composite()) return get_composite_dist(td)->log_prob(td);
  return get_dist(td)->log_prob(td.get(last.out_keys_source()[0]));
}

TensorDict ProbabilisticTensorDictSequentialImpl::get_dist_params(const TensorDict& td) {
  SetInteractionType type(interaction_type().value_or(default_interaction_type()));
  return run_chain(td, modules_.size() - 1);
}

std::shared_ptr<Distribution> ProbabilisticTensorDictSequentialImpl::build_dist_from_params(
    const TensorDict& td) const {
  return probabilistic_module().get_dist(td);
}

TensorDictSequential ProbabilisticTensorDictSequentialImpl::det_part() const {
  return TensorDictSequential(
      std::vector<std::shared_ptr<TensorDictModuleBase>>(modules_.begin(), modules_.end() - 1));
}

InteractionType ProbabilisticTensorDictSequentialImpl::default_interaction_type() const {
  return probabilistic_module().options().default_interaction_type();
}

std::vector<NestedKey> ProbabilisticTensorDictSequentialImpl::log_prob_keys() const {
  std::vector<NestedKey> out;
  ForEachProbabilisticReversed(modules_, [&](const ProbabilisticTensorDictModuleImpl& m) {
    for (NestedKey& k : m.log_prob_keys()) out.push_back(std::move(k));
  });
  return out;
}

std::vector<NestedKey> ProbabilisticTensorDictSequentialImpl::dist_sample_keys() const {
  std::vector<NestedKey> out;
  ForEachProbabilisticReversed(modules_, [&](const ProbabilisticTensorDictModuleImpl& m) {
    for (NestedKey& k : m.dist_sample_keys()) out.push_back(std::move(k));
  });
  return out;
}

std::vector<NestedKey> ProbabilisticTensorDictSequentialImpl::dist_params_keys() const {
  std::vector<NestedKey> out;
  ForEachProbabilisticReversed(modules_, [&](const ProbabilisticTensorDictModuleImpl& m) {
    for (NestedKey& k : m.dist_params_keys()) out.push_back(std::move(k));
  });
  return out;
}

std::vector<int64_t> ProbabilisticTensorDictSequentialImpl::num_samples() const {
  std::vector<int64_t> out;
  ForEachProbabilisticReversed(modules_, [&](const ProbabilisticTensorDictModuleImpl& m) {
    out.insert(out.end(), m.num_samples().begin(), m.num_samples().end());
  });
  return out;
}

std::shared_ptr<TensorDictSequentialImpl> ProbabilisticTensorDictSequentialImpl::make_like(
    std::vector<std::shared_ptr<TensorDictModuleBase>> modules) const {
  return std::make_shared<ProbabilisticTensorDictSequentialImpl>(
      std::move(modules), ProbabilisticTensorDictSequentialOptions()
                              .sequential(options_)
                              .return_composite(return_composite_));
}

void ProbabilisticTensorDictSequentialImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::ProbabilisticTensorDictSequential(in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_) << ")";
}

}  // namespace td::nn
