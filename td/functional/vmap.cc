#include "td/functional/vmap.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/cat.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <variant>

#include "td/compat/functorch.h"
#include "td/core/dtype.h"
#include "td/core/stack.h"

namespace td {

namespace ft = compat::functorch;

int64_t vmap_nesting() { return ft::LayerDepth(); }
bool vmap_fallback_warning() { return ft::FallbackWarningEnabled(); }
void set_vmap_fallback_warning(bool enabled) { ft::SetFallbackWarningEnabled(enabled); }

InDim InDims::of(size_t i, size_t n) const {
  if (all_) return InDim(*all_);
  if (dims_.size() != n) {
    TD_FAIL(ValueError, "td::vmap: in_dims has ", dims_.size(), " entries but the function was "
            "called with ", n, " arguments (give one in_dim per argument, or one int for all)");
  }
  return dims_[i];
}

int64_t OutDims::of(size_t i, size_t n) const {
  if (all_) return *all_;
  if (dims_.size() != n) {
    TD_FAIL(ValueError, "td::vmap: out_dims has ", dims_.size(), " entries but the function "
            "returned ", n, " results (give one out_dim per result, or one int for all)");
  }
  return dims_[i];
}

namespace internal {
namespace vmap_ops {
namespace {

std::string ArgName(size_t i) { return "argument " + std::to_string(i); }

std::string Where(size_t arg, const std::vector<std::string>& path) {
  if (path.empty()) return ArgName(arg);
  return ArgName(arg) + ", key " + NestedKey(path).repr();
}

// A dim in [-n, n) made non-negative; nullopt when out of range.
std::optional<int64_t> WrapDim(int64_t dim, int64_t n) {
  if (dim < -n || dim >= n) return std::nullopt;
  return dim < 0 ? dim + n : dim;
}

}  // namespace

// One argument of the call, resolved: a tensor with its dim, or a TensorDict as a tree whose
// leaves carry their dims.
struct Call::Plan {
  struct Node;
  struct Leaf {
    at::Tensor tensor;
    std::optional<int64_t> dim;
  };
  struct Entry {
    std::string key;
    std::variant<Leaf, std::unique_ptr<Node>, Value> value;  // Value: non-tensor data
  };
  struct Node {
    std::vector<int64_t> inside_batch;  // the batch size fn sees
    std::optional<at::Device> device;
    bool locked = false;
    std::vector<Entry> entries;
  };

  enum Kind { kOther, kTensor, kTensorDict } kind = kOther;
  Leaf tensor;                  // kTensor
  std::unique_ptr<Node> root;   // kTensorDict mapped
  TensorDict shared;            // kTensorDict with kNone
  bool mapped = false;
};

Call::Call(const InDims& in_dims, size_t num_args, const VmapOptions& options)
    : in_dims_(in_dims), num_args_(num_args), options_(options) {
  plans_.resize(num_args);
}

Call::~Call() = default;

void Call::add_tensor(size_t i, const at::Tensor& t) {
  auto plan = std::make_unique<Plan>();
  plan->kind = Plan::kTensor;
  plan->tensor.tensor = t;
  const InDim d = in_dims_.of(i, num_args_);
  if (d.keys() != nullptr) {
    TD_FAIL(ValueError, "td::vmap: ", ArgName(i), " is a tensor; per-key in_dims are for "
            "TensorDict arguments");
  }
  if (d.dim()) {
    if (!t.defined()) TD_FAIL(ValueError, "td::vmap: ", ArgName(i), " is an undefined tensor");
    std::optional<int64_t> dim = WrapDim(*d.dim(), t.dim());
    if (!dim) {
      TD_FAIL(ValueError, "td::vmap: in_dim ", *d.dim(), " of ", ArgName(i),
              " is out of range for its shape ", SizeRepr(t.sizes()), " (expected -", t.dim(),
              " <= in_dim < ", t.dim(), ")");
    }
    plan->tensor.dim = dim;
    plan->mapped = true;
  }
  plans_[i] = std::move(plan);
}

namespace {

using Plan = Call::Plan;

// Maps every leaf under `td` along `dim` (a dim of every leaf: td's batch dims come first).
std::unique_ptr<Plan::Node> MapAll(const TensorDict& td, int64_t dim, size_t arg,
                                   std::vector<std::string>& path);

// The tensor entry `t` at `path`, along `dim` (a dim counted in t's dims, may be negative).
Plan::Leaf MapLeaf(const at::Tensor& t, int64_t dim, size_t arg,
                   const std::vector<std::string>& path) {
  std::optional<int64_t> d = WrapDim(dim, t.dim());
  if (!d) {
    TD_FAIL(ValueError, "td::vmap: in_dim ", dim, " of ", Where(arg, path),
            " is out of range for its shape ", SizeRepr(t.sizes()), " (expected -", t.dim(),
            " <= in_dim < ", t.dim(), ")");
  }
  return Plan::Leaf{t, d};
}

std::unique_ptr<Plan::Node> NewNode(const TensorDict& td, std::optional<int64_t> removed) {
  auto node = std::make_unique<Plan::Node>();
  const at::IntArrayRef b = td.batch_size();
  for (int64_t k = 0; k < static_cast<int64_t>(b.size()); ++k) {
    if (!removed || k != *removed) node->inside_batch.push_back(b[k]);
  }
  node->device = td.device();
  node->locked = td.is_locked();
  return node;
}

std::unique_ptr<Plan::Node> MapAll(const TensorDict& td, int64_t dim, size_t arg,
                                   std::vector<std::string>& path) {
  auto node = NewNode(td, dim < td.batch_dims() ? std::optional<int64_t>(dim) : std::nullopt);
  td.for_each_entry([&](const std::string& key, const Value& v) {
    path.push_back(key);
    if (v.is_tensor()) {
      node->entries.push_back({key, MapLeaf(v.tensor(), dim, arg, path)});
    } else if (v.is_tensordict()) {
      node->entries.push_back({key, MapAll(v.tensordict(), dim, arg, path)});
    } else {
      node->entries.push_back({key, v});
    }
    path.pop_back();
  });
  return node;
}

std::unique_ptr<Plan::Node> MapNone(const TensorDict& td);

// Adds the entry `key` -> `v` to `node` unmapped (a sub-TensorDict with every entry unmapped).
void PushUnmapped(Plan::Node& node, const std::string& key, const Value& v) {
  if (v.is_tensor()) {
    node.entries.push_back({key, Plan::Leaf{v.tensor(), std::nullopt}});
  } else if (v.is_tensordict()) {
    node.entries.push_back({key, MapNone(v.tensordict())});
  } else {
    node.entries.push_back({key, v});
  }
}

// Leaves every entry under `td` unmapped.
std::unique_ptr<Plan::Node> MapNone(const TensorDict& td) {
  auto node = NewNode(td, std::nullopt);
  td.for_each_entry([&](const std::string& key, const Value& v) { PushUnmapped(*node, key, v); });
  return node;
}

// A trie of the per-key dims.
struct KeyTrie {
  std::optional<std::optional<int64_t>> dim;  // set when a KeyDim names this node
  std::map<std::string, KeyTrie> children;
  bool used = false;
};

std::unique_ptr<Plan::Node> MapPerKey(const TensorDict& td, KeyTrie& trie, size_t arg,
                                      std::vector<std::string>& path) {
  auto node = NewNode(td, std::nullopt);
  const int64_t parent_batch = td.batch_dims();
  td.for_each_entry([&](const std::string& key, const Value& v) {
    path.push_back(key);
    auto it = trie.children.find(key);
    if (it == trie.children.end()) {
      PushUnmapped(*node, key, v);
      path.pop_back();
      return;
    }
    KeyTrie& sub = it->second;
    sub.used = true;
    if (sub.dim) {
      const std::optional<int64_t> dim = *sub.dim;
      if (!dim) {
        PushUnmapped(*node, key, v);
      } else if (v.is_tensor()) {
        Plan::Leaf leaf = MapLeaf(v.tensor(), *dim, arg, path);
        if (*leaf.dim < parent_batch) {
          TD_FAIL(ValueError, "td::vmap: in_dim ", *dim, " of ", Where(arg, path),
                  " (shape ", SizeRepr(v.tensor().sizes()), ") is a batch dim of the "
                  "TensorDict holding it (batch size ", SizeRepr(td.batch_size()),
                  "); per-key dims must come after it (map a batch dim with an int in_dim for "
                  "the whole TensorDict)");
        }
        node->entries.push_back({key, std::move(leaf)});
      } else if (v.is_tensordict()) {
        const TensorDict& child = v.tensordict();
        // Negative dims count from the end of the sub-TensorDict's batch dims.
        std::optional<int64_t> d = *dim >= 0 ? std::optional<int64_t>(*dim)
                                             : WrapDim(*dim, child.batch_dims());
        if (!d) {
          TD_FAIL(ValueError, "td::vmap: in_dim ", *dim, " of ", Where(arg, path),
                  " is out of range for its batch size ", SizeRepr(child.batch_size()));
        }
        if (*d < parent_batch) {
          TD_FAIL(ValueError, "td::vmap: in_dim ", *dim, " of ", Where(arg, path),
                  " is a batch dim of the TensorDict holding it (batch size ",
                  SizeRepr(td.batch_size()), "); per-key dims must come after it (map a batch "
                  "dim with an int in_dim for the whole TensorDict)");
        }
        node->entries.push_back({key, MapAll(child, *d, arg, path)});
      } else {
        TD_FAIL(ValueError, "td::vmap: ", Where(arg, path), " holds non-tensor data, which "
                "cannot be mapped (give it kNone)");
      }
    } else if (v.is_tensordict()) {
      node->entries.push_back({key, MapPerKey(v.tensordict(), sub, arg, path)});
    } else {
      TD_FAIL(ValueError, "td::vmap: per-key in_dims of ", ArgName(arg), " name keys under ",
              NestedKey(path).repr(), ", which is not a TensorDict");
    }
    path.pop_back();
  });
  return node;
}

void CheckAllUsed(const KeyTrie& trie, size_t arg, std::vector<std::string>& path) {
  for (const auto& [key, sub] : trie.children) {
    path.push_back(key);
    if (!sub.used) {
      TD_FAIL(KeyError, "td::vmap: per-key in_dims of ", ArgName(arg), " name the key ",
              NestedKey(path).repr(), ", which the TensorDict does not have");
    }
    CheckAllUsed(sub, arg, path);
    path.pop_back();
  }
}

}  // namespace

void Call::add_tensordict(size_t i, const TensorDict& td) {
  auto plan = std::make_unique<Plan>();
  plan->kind = Plan::kTensorDict;
  const InDim d = in_dims_.of(i, num_args_);
  std::vector<std::string> path;
  if (d.is_none()) {
    plan->shared = td;
  } else if (d.keys() != nullptr) {
    KeyTrie trie;
    for (const KeyDim& kd : *d.keys()) {
      KeyTrie* t = &trie;
      for (const std::string& part : kd.key.parts()) t = &t->children[part];
      if (t->dim) {
        TD_FAIL(ValueError, "td::vmap: per-key in_dims of ", ArgName(i), " name the key ",
                kd.key.repr(), " twice");
      }
      t->dim = kd.dim;
    }
    plan->root = MapPerKey(td, trie, i, path);
    CheckAllUsed(trie, i, path);
    plan->mapped = true;
  } else {
    std::optional<int64_t> dim = WrapDim(*d.dim(), td.batch_dims());
    if (!dim) {
      TD_FAIL(ValueError, "td::vmap: in_dim ", *d.dim(), " of ", ArgName(i),
              " is out of range for its batch size ", SizeRepr(td.batch_size()),
              ": an int in_dim of a TensorDict names one of its batch dims (use "
              "td::InDim::per_key to map its leaves along other dims)");
    }
    plan->root = MapAll(td, *dim, i, path);
    plan->mapped = true;
  }
  plans_[i] = std::move(plan);
}

void Call::add_other(size_t i) {
  const InDim d = in_dims_.of(i, num_args_);
  if (!d.is_none()) {
    TD_FAIL(ValueError, "td::vmap: ", ArgName(i), " is neither a tensor nor a TensorDict, so it "
            "cannot be mapped: give it the in_dim td::kNone");
  }
  plans_[i] = std::make_unique<Plan>();
}

namespace {

struct SizeSeen {
  int64_t size = -1;
  std::string where;
  std::string shape;
};

void CheckSize(const Plan::Leaf& leaf, size_t arg, const std::vector<std::string>& path,
               SizeSeen& seen) {
  if (!leaf.dim) return;
  const int64_t s = leaf.tensor.size(*leaf.dim);
  if (seen.size < 0) {
    seen = {s, Where(arg, path), SizeRepr(leaf.tensor.sizes())};
  } else if (s != seen.size) {
    TD_FAIL(ValueError, "td::vmap: ", Where(arg, path), " has size ", s, " along its mapped dim ",
            *leaf.dim, " (shape ", SizeRepr(leaf.tensor.sizes()), "), but ", seen.where,
            " has size ", seen.size, " along its mapped dim (shape ", seen.shape,
            "): every mapped dim must have the same size");
  }
}

void CheckSizes(const Plan::Node& node, size_t arg, std::vector<std::string>& path,
                SizeSeen& seen) {
  for (const Plan::Entry& e : node.entries) {
    path.push_back(e.key);
    if (const auto* leaf = std::get_if<Plan::Leaf>(&e.value)) {
      CheckSize(*leaf, arg, path, seen);
    } else if (const auto* child = std::get_if<std::unique_ptr<Plan::Node>>(&e.value)) {
      CheckSizes(**child, arg, path, seen);
    }
    path.pop_back();
  }
}

}  // namespace

void Call::prepare() {
  SizeSeen seen;
  std::vector<std::string> path;
  bool any = false;
  for (size_t i = 0; i < plans_.size(); ++i) {
    const Plan& p = *plans_[i];
    if (!p.mapped) continue;
    any = true;
    if (p.kind == Plan::kTensor) {
      CheckSize(p.tensor, i, path, seen);
    } else {
      CheckSizes(*p.root, i, path, seen);
    }
  }
  if (!any) {
    TD_FAIL(ValueError, "td::vmap: no argument is mapped (every in_dim is kNone); map at least "
            "one tensor or TensorDict");
  }
  if (seen.size < 0) {
    TD_FAIL(ValueError, "td::vmap: the mapped TensorDict arguments hold no tensor, so there is no "
            "dim to map over");
  }
  size_ = seen.size;
  if (options_.chunk_size() && *options_.chunk_size() < 1) {
    TD_FAIL(ValueError, "td::vmap: chunk_size must be >= 1, got ", *options_.chunk_size());
  }
  const int64_t chunk =
      options_.chunk_size() ? std::min(*options_.chunk_size(), size_) : size_;
  if (chunk <= 0 || chunk >= size_) {
    chunks_.push_back({0, size_});
  } else {
    for (int64_t start = 0; start < size_; start += chunk) {
      chunks_.push_back({start, std::min(chunk, size_ - start)});
    }
    if (options_.randomness() == Randomness::kSame) {
      at::Generator gen = at::detail::getDefaultCPUGenerator();
      std::lock_guard<std::mutex> lock(gen.mutex());
      rng_state_ = gen.get_state();
    }
  }
}

namespace {
ft::Randomness ToCompat(Randomness r) {
  switch (r) {
    case Randomness::kDifferent:
      return ft::Randomness::kDifferent;
    case Randomness::kSame:
      return ft::Randomness::kSame;
    case Randomness::kError:
      break;
  }
  return ft::Randomness::kError;
}
}  // namespace

Call::Layer::Layer(Call& call, size_t c)
    : level_(0), size_(call.chunks_[c].second), start_(call.chunks_[c].first) {
  if (call.rng_state_.defined()) {
    at::Generator gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(call.rng_state_);
  }
  level_ = ft::PushVmapLayer(size_, ToCompat(call.options_.randomness()));
}

Call::Layer::~Layer() {
  try {
    ft::PopVmapLayer(level_);
  } catch (const std::exception& e) {
    std::cerr << "td::vmap: " << e.what() << std::endl;
  }
}

namespace {

at::Tensor Batch(const Plan::Leaf& leaf, int64_t level, int64_t start, int64_t size,
                 int64_t total) {
  if (!leaf.dim) return leaf.tensor;
  at::Tensor t = leaf.tensor;
  if (size != total) t = t.narrow(*leaf.dim, start, size);
  return ft::AddBatchDim(t, *leaf.dim, level);
}

TensorDict BatchNode(const Plan::Node& node, int64_t level, int64_t start, int64_t size,
                     int64_t total) {
  TensorDict out({}, node.inside_batch, node.device);
  for (const Plan::Entry& e : node.entries) {
    if (const auto* leaf = std::get_if<Plan::Leaf>(&e.value)) {
      out.set(e.key, Batch(*leaf, level, start, size, total));
    } else if (const auto* child = std::get_if<std::unique_ptr<Plan::Node>>(&e.value)) {
      out.set(e.key, BatchNode(**child, level, start, size, total));
    } else {
      out.set(e.key, std::get<Value>(e.value));
    }
  }
  if (node.locked) out.lock_();
  return out;
}

}  // namespace

at::Tensor Call::inside_tensor(size_t i, const Layer& layer) const {
  return Batch(plans_[i]->tensor, layer.level(), layer.start(), layer.size(), size_);
}

TensorDict Call::inside_tensordict(size_t i, const Layer& layer) const {
  const Plan& p = *plans_[i];
  if (!p.mapped) return p.shared.copy();
  return BatchNode(*p.root, layer.level(), layer.start(), layer.size(), size_);
}

// ---- results -----------------------------------------------------------------------------------

namespace {

at::Tensor UnwrapLeaf(const at::Tensor& t, int64_t level, int64_t size, int64_t out_dim) {
  std::optional<ft::Unwrapped> u = ft::Unwrap(t);
  if (u && u->level > level) {
    TD_FAIL(ValueError, "td::vmap: fn returned a tensor batched by a vmap nested inside it "
            "(level ", u->level, ") that was not unwrapped by that vmap");
  }
  if (u && u->level == level) return u->value.movedim(u->bdim, out_dim);
  std::vector<int64_t> sizes = t.sizes().vec();
  sizes.insert(sizes.begin() + out_dim, size);
  return t.unsqueeze(out_dim).expand(sizes);
}

TensorDict UnwrapNode(const TensorDict& td, int64_t level, int64_t size, int64_t out_dim) {
  std::vector<int64_t> batch = td.batch_size().vec();
  batch.insert(batch.begin() + out_dim, size);
  TensorDict out({}, batch, td.device());
  td.for_each_entry([&](const std::string& key, const Value& v) {
    if (v.is_tensor()) {
      out.set(key, UnwrapLeaf(v.tensor(), level, size, out_dim));
    } else if (v.is_tensordict()) {
      out.set(key, UnwrapNode(v.tensordict(), level, size, out_dim));
    } else {
      out.set(key, v);
    }
  });
  if (td.is_locked()) out.lock_();
  return out;
}

}  // namespace

at::Tensor Unwrap(const at::Tensor& t, const Call::Layer& layer, int64_t out_dim) {
  if (!t.defined()) TD_FAIL(ValueError, "td::vmap: fn returned an undefined tensor");
  std::optional<int64_t> d = WrapDim(out_dim, t.dim() + 1);
  if (!d) {
    TD_FAIL(ValueError, "td::vmap: out_dim ", out_dim, " is out of range for a result of shape ",
            SizeRepr(t.sizes()), " (per member; expected -", t.dim() + 1, " <= out_dim <= ",
            t.dim(), ")");
  }
  return UnwrapLeaf(t, layer.level(), layer.size(), *d);
}

TensorDict Unwrap(const TensorDict& td, const Call::Layer& layer, int64_t out_dim) {
  std::optional<int64_t> d = WrapDim(out_dim, td.batch_dims() + 1);
  if (!d) {
    TD_FAIL(ValueError, "td::vmap: out_dim ", out_dim, " is out of range for a TensorDict result "
            "with batch size ", SizeRepr(td.batch_size()), " (per member; expected -",
            td.batch_dims() + 1, " <= out_dim <= ", td.batch_dims(), ")");
  }
  return UnwrapNode(td, layer.level(), layer.size(), *d);
}

at::Tensor Concat(const std::vector<at::Tensor>& chunks, int64_t out_dim) {
  const int64_t d = out_dim < 0 ? out_dim + chunks.front().dim() : out_dim;
  return at::cat(chunks, d);
}

TensorDict Concat(const std::vector<TensorDict>& chunks, int64_t out_dim) {
  const int64_t d = out_dim < 0 ? out_dim + chunks.front().batch_dims() : out_dim;
  return cat(chunks, d);
}

}  // namespace vmap_ops
}  // namespace internal
}  // namespace td
