#include "td/nn/sequence.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "td/backends/lazy_stack/lazy_stack.h"

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

const NestedKey& Discard() {
  static const auto* key = new NestedKey("_");
  return *key;
}

bool HasAll(const TensorDict& td, const std::vector<NestedKey>& keys) {
  return std::all_of(keys.begin(), keys.end(), [&](const NestedKey& k) { return td.contains(k); });
}

// A new TensorDict sharing the tensors (so that writes into it leave `td` alone); a lazy stack
// stays a lazy stack (of copies of its members), keeping the keys only some members hold.
TensorDict ShallowCopy(const TensorDict& td) {
  const std::optional<LazyStackedTensorDict> stack = LazyStackedTensorDict::from(td);
  if (!stack) return td.copy();
  std::vector<TensorDict> members;
  members.reserve(stack->tensordicts().size());
  for (const TensorDict& m : stack->tensordicts()) members.push_back(ShallowCopy(m));
  return lazy_stack(members, stack->stack_dim());
}

// Runs `module` on (a shallow copy of) every member of the lazy stack `td` that holds all its in
// keys, descending into members that are lazy stacks themselves; collects (member, result).
void RunOnMembers(TensorDictModuleBase& module, const TensorDict& td,
                  std::vector<std::pair<TensorDict, TensorDict>>& results) {
  const LazyStackedTensorDict stack(td);
  for (const TensorDict& member : stack.tensordicts()) {
    if (HasAll(member, module.in_keys())) {
      results.emplace_back(member, module.forward(ShallowCopy(member)));
    } else if (LazyStackedTensorDict::from(member)) {
      RunOnMembers(module, member, results);
    }
  }
}

// Removes `key` from `td`, or from each member of a lazy stack holding it.
void DeleteWherePresent(const TensorDict& td, const NestedKey& key) {
  TensorDict t = td;
  if (t.contains(key)) {
    t.del_(key);
  } else if (const auto stack = LazyStackedTensorDict::from(t)) {
    for (const TensorDict& m : stack->tensordicts()) DeleteWherePresent(m, key);
  }
}

// Writes `key` of `from` into `to` through `tx`: the whole entry when `from` holds it, else
// member by member when both are lazy stacks of as many members along the same dim.
void WriteOut(const TensorDict& from, TensorDict& to, const NestedKey& key,
              internal::WriteTransaction& tx) {
  if (std::optional<Value> v = from.find(key)) {
    tx.set(to, key, *std::move(v));
    return;
  }
  const std::optional<LazyStackedTensorDict> src = LazyStackedTensorDict::from(from);
  const std::optional<LazyStackedTensorDict> dst = LazyStackedTensorDict::from(to);
  if (!src || !dst || src->tensordicts().size() != dst->tensordicts().size() ||
      src->stack_dim() != dst->stack_dim()) {
    return;
  }
  for (size_t i = 0; i < src->tensordicts().size(); ++i) {
    TensorDict target = dst->tensordicts()[i];  // a handle: writes reach the stack's member
    WriteOut(src->tensordicts()[i], target, key, tx);
  }
}

}  // namespace

TensorDictSequentialImpl::TensorDictSequentialImpl(
    std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
    TensorDictSequentialOptions options)
    : modules_(std::move(modules)), options_(std::move(options)) {
  for (size_t i = 0; i < modules_.size(); ++i) {
    if (!modules_[i]) TD_FAIL(ValueError, "TensorDictSequential: module ", i, " is null");
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
  if (!module) TD_FAIL(ValueError, "TensorDictSequential::append: the module is null");
  modules_.push_back(module);
  list_->push_back(std::shared_ptr<torch::nn::Module>(std::move(module)));
  recompute_keys();
}

std::shared_ptr<TensorDictModuleBase> TensorDictSequentialImpl::operator[](size_t i) const {
  if (i >= modules_.size()) {
    TD_FAIL(IndexError, "TensorDictSequential: index ", i, " is out of range for ", modules_.size(),
                     " module(s)");
  }
  return modules_[i];
}

TensorDict TensorDictSequentialImpl::run_module(size_t i, const TensorDict& td) {
  TensorDictModuleBase& m = *modules_[i];
  try {
    if (!options_.partial_tolerant() || HasAll(td, m.in_keys())) return m.forward(td);
    if (!LazyStackedTensorDict::from(td)) return td;  // skipped
    // Run on the members holding every in key, then write all their outputs, or none.
    std::vector<std::pair<TensorDict, TensorDict>> results;
    RunOnMembers(m, td, results);
    internal::WriteTransaction tx;
    for (auto& [member, result] : results) {
      if (result.is_same(member)) continue;
      for (const NestedKey& k : m.out_keys()) {
        if (k == Discard()) continue;
        if (std::optional<Value> v = result.find(k)) tx.set(member, k, *std::move(v));
      }
    }
    tx.commit();
    return td;
  } catch (c10::Error& e) {
    e.add_context(absl::StrCat("in module ", i, " of TensorDictSequential(in_keys=",
                               KeysRepr(in_keys_), ", out_keys=", KeysRepr(out_keys_), ")"));
    throw;
  }
}

TensorDict TensorDictSequentialImpl::run_chain(TensorDict td, size_t end) {
  for (size_t i = 0; i < end; ++i) td = run_module(i, td);
  return td;
}

TensorDict TensorDictSequentialImpl::forward(const TensorDict& td) {
  if (options_.inplace() == SequentialOutput::kNew) return forward_into(td, TensorDict());
  if (options_.inplace() == SequentialOutput::kEmpty) return forward_into(td, td.empty());
  TensorDict cur = run_chain(td, modules_.size());
  if (out_keys_.size() != out_keys_source_.size()) {
    for (const NestedKey& k : out_keys_source_) {
      if (!Contains(out_keys_, k) && !Contains(in_keys_, k)) DeleteWherePresent(cur, k);
    }
  }
  if (options_.inplace() == SequentialOutput::kInput && !cur.is_same(td)) {
    TensorDict out = td;
    internal::WriteTransaction tx;
    for (const NestedKey& k : out_keys_) WriteOut(cur, out, k, tx);
    tx.commit();
    return out;
  }
  return cur;
}

TensorDict TensorDictSequentialImpl::forward_into(const TensorDict& td, TensorDict out) {
  if (out.is_same(td)) return forward(td);
  const TensorDict result = run_chain(ShallowCopy(td), modules_.size());
  internal::WriteTransaction tx;
  for (const NestedKey& k : out_keys_) WriteOut(result, out, k, tx);
  tx.commit();
  return out;
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
    TD_FAIL(ValueError, "select_subsequence: no modules left after selection with in_keys ",
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
    const td::compat::OptionalDevice& device) const {
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
