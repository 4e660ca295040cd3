#include "td/nn/sequence.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace td::nn {
namespace {

bool Contains(const std::vector<NestedKey>& keys, const NestedKey& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

bool AnyIn(const std::vector<NestedKey>& keys, const std::vector<NestedKey>& pool) {
  return std::any_of(keys.begin(), keys.end(),
                     [&](const NestedKey& k) { return Contains(pool, k); });
}

void AppendNew(std::vector<NestedKey>& to, const std::vector<NestedKey>& keys) {
  for (const NestedKey& k : keys) {
    if (!Contains(to, k)) to.push_back(k);
  }
}

}  // namespace

TensorDictSequentialImpl::TensorDictSequentialImpl(
    std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
    TensorDictSequentialOptions options)
    : modules_(std::move(modules)), options_(std::move(options)) {
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (!modules_[i]) Fail<ValueError>("TensorDictSequential: module ", i, " is null");
    list_->push_back(std::shared_ptr<torch::nn::Module>(modules_[i]));
  }
  register_module("module", list_);
  recompute_keys();
}

void TensorDictSequentialImpl::recompute_keys() {
  std::vector<NestedKey> in;
  std::vector<NestedKey> out;
  for (const auto& m : modules_) {
    for (const NestedKey& k : m->in_keys()) {
      if (!Contains(out, k) && !Contains(in, k)) in.push_back(k);
    }
    for (const NestedKey& k : m->out_keys()) {
      if (k != NestedKey("_") && !Contains(out, k)) out.push_back(k);
    }
  }
  in_keys_ = std::move(in);
  out_keys_source_ = std::move(out);
  out_keys_ = out_keys_source_;
  if (options_.selected_out_keys()) TensorDictModuleBase::select_out_keys(*options_.selected_out_keys());
}

void TensorDictSequentialImpl::append_module(std::shared_ptr<TensorDictModuleBase> module) {
  if (!module) Fail<ValueError>("TensorDictSequential::append: the module is null");
  modules_.push_back(module);
  list_->push_back(std::shared_ptr<torch::nn::Module>(std::move(module)));
  recompute_keys();
}

std::shared_ptr<TensorDictModuleBase> TensorDictSequentialImpl::operator[](size_t i) const {
  if (i >= modules_.size()) {
    Fail<IndexError>("TensorDictSequential: index ", i, " is out of range for ", modules_.size(),
                     " module(s)");
  }
  return modules_[i];
}

TensorDict TensorDictSequentialImpl::forward(const TensorDict& td) {
  TensorDict cur = td;
  for (size_t i = 0; i < modules_.size(); ++i) {
    TensorDictModuleBase& m = *modules_[i];
    if (options_.partial_tolerant()) {
      const auto& keys = m.in_keys();
      if (!std::all_of(keys.begin(), keys.end(),
                       [&](const NestedKey& k) { return cur.contains(k); })) {
        continue;
      }
    }
    try {
      cur = m.forward(cur);
    } catch (c10::Error& e) {
      e.add_context(absl::StrCat("in module ", i, " of TensorDictSequential(in_keys=",
                                 KeysRepr(in_keys_), ", out_keys=", KeysRepr(out_keys_), ")"));
      throw;
    }
  }
  if (out_keys_.size() != out_keys_source_.size()) {
    for (const NestedKey& k : out_keys_source_) {
      if (!Contains(out_keys_, k) && !Contains(in_keys_, k) && cur.contains(k)) cur.del_(k);
    }
  }
  return cur;
}

TensorDictModuleBase& TensorDictSequentialImpl::select_out_keys(
    const std::vector<NestedKey>& keys) {
  TensorDictModuleBase::select_out_keys(keys);
  options_.selected_out_keys(keys);
  return *this;
}

TensorDictModuleBase& TensorDictSequentialImpl::reset_out_keys() {
  TensorDictModuleBase::reset_out_keys();
  options_.selected_out_keys(std::nullopt);
  return *this;
}

TensorDictSequential TensorDictSequentialImpl::select_subsequence(
    std::optional<std::vector<NestedKey>> in_keys,
    std::optional<std::vector<NestedKey>> out_keys) const {
  std::vector<NestedKey> in = in_keys ? *in_keys : in_keys_;
  std::vector<NestedKey> out = out_keys ? *out_keys : out_keys_;
  std::vector<std::shared_ptr<TensorDictModuleBase>> mods = modules_;
  std::vector<bool> keep(mods.size(), true);
  // Forward: keep the modules whose inputs depend on `in`.
  for (size_t i = 0; i < mods.size(); ++i) {
    if (auto seq = std::dynamic_pointer_cast<TensorDictSequentialImpl>(mods[i])) {
      try {
        mods[i] = seq->select_subsequence(in, std::nullopt).ptr();
      } catch (const c10::ValueError&) {
        keep[i] = false;
        continue;
      }
    }
    if (AnyIn(mods[i]->in_keys(), in)) {
      AppendNew(in, mods[i]->out_keys());
    } else {
      keep[i] = false;
    }
  }
  // Backward: keep the modules whose outputs are needed for `out`.
  for (size_t j = mods.size(); j-- > 0;) {
    if (!keep[j]) continue;
    if (auto seq = std::dynamic_pointer_cast<TensorDictSequentialImpl>(mods[j])) {
      try {
        mods[j] = seq->select_subsequence(std::nullopt, out).ptr();
      } catch (const c10::ValueError&) {
        keep[j] = false;
        continue;
      }
    }
    if (AnyIn(mods[j]->out_keys(), out)) {
      AppendNew(out, mods[j]->in_keys());
    } else {
      keep[j] = false;
    }
  }
  std::vector<std::shared_ptr<TensorDictModuleBase>> kept;
  for (size_t i = 0; i < mods.size(); ++i) {
    if (keep[i]) kept.push_back(mods[i]);
  }
  if (kept.empty()) {
    Fail<ValueError>("select_subsequence: no modules left after selection with in_keys ",
                     KeysRepr(in_keys ? *in_keys : in_keys_), " and out_keys ",
                     KeysRepr(out_keys ? *out_keys : out_keys_),
                     "; make sure the in_keys and out_keys are coherent");
  }
  return TensorDictSequential(std::move(kept),
                              TensorDictSequentialOptions().partial_tolerant(partial_tolerant()));
}

std::shared_ptr<TensorDictSequentialImpl> TensorDictSequentialImpl::make_like(
    std::vector<std::shared_ptr<TensorDictModuleBase>> modules) const {
  return std::make_shared<TensorDictSequentialImpl>(std::move(modules), options_);
}

std::shared_ptr<torch::nn::Module> TensorDictSequentialImpl::clone(
    const c10::optional<at::Device>& device) const {
  std::vector<std::shared_ptr<TensorDictModuleBase>> copies;
  copies.reserve(modules_.size());
  for (const auto& m : modules_) {
    auto copy = std::dynamic_pointer_cast<TensorDictModuleBase>(m->clone(device));
    TORCH_CHECK(copy, "TensorDictSequential::clone: a module's clone is not a TensorDict module");
    copies.push_back(std::move(copy));
  }
  auto out = make_like(std::move(copies));
  out->train(is_training());
  return out;
}

void TensorDictSequentialImpl::pretty_print(std::ostream& stream) const {
  stream << "td::nn::TensorDictSequential(in_keys=" << KeysRepr(in_keys_)
         << ", out_keys=" << KeysRepr(out_keys_);
  if (partial_tolerant()) stream << ", partial_tolerant=true";
  stream << ")";
}

}  // namespace td::nn
