#include "td/backends/lazy_view/lazy_view.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "td/core/internal/leaves.h"
#include "td/core/dtype.h"
#include "td/core/internal/backend_hooks.h"
#include "td/core/internal/batch_index.h"
#include "td/core/internal/entry_list.h"
#include "td/core/internal/non_tensor_stack.h"
#include "td/core/storage.h"

namespace td {
namespace {

using at::indexing::TensorIndex;

std::vector<int64_t> Concat(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// One transform of the source's leading batch dims. See NOTE [ Lazy views ].
class ViewOp {
 public:
  ViewOp(std::vector<int64_t> source_prefix, std::vector<int64_t> view_prefix)
      : source_prefix_(std::move(source_prefix)), view_prefix_(std::move(view_prefix)) {}
  virtual ~ViewOp() = default;

  virtual std::string_view id() const = 0;
  // True when the transform is a bijection of whole tensors (every write can go through
  // inverse()); false for index views, which write through the source's index_put_.
  virtual bool bijective() const = 0;
  // The view of a source tensor whose leading dims are source_prefix().
  virtual at::Tensor forward(const at::Tensor& leaf) const = 0;
  // The source-layout tensor of a view-layout tensor (bijective ops only).
  virtual at::Tensor inverse(const at::Tensor& value) const = 0;
  // Index views only: the index into the source.
  virtual const std::vector<TensorIndex>& indices() const {
    static const auto* none = new std::vector<TensorIndex>;
    return *none;
  }

  // The source's leading batch dims the op reads, and what they become in the view.
  const std::vector<int64_t>& source_prefix() const { return source_prefix_; }
  const std::vector<int64_t>& view_prefix() const { return view_prefix_; }
  int64_t source_dims() const { return static_cast<int64_t>(source_prefix_.size()); }
  int64_t view_dims() const { return static_cast<int64_t>(view_prefix_.size()); }
  // The view shape of a source shape (and back): the prefix replaced.
  std::vector<int64_t> to_view(at::IntArrayRef source_shape) const {
    return Concat(view_prefix_, source_shape.slice(source_dims()));
  }
  std::vector<int64_t> to_source(at::IntArrayRef view_shape) const {
    return Concat(source_prefix_, view_shape.slice(view_dims()));
  }

 private:
  std::vector<int64_t> source_prefix_;
  std::vector<int64_t> view_prefix_;
};

class IndexOp final : public ViewOp {
 public:
  IndexOp(std::vector<int64_t> source_prefix, std::vector<int64_t> view_prefix,
          std::vector<TensorIndex> indices)
      : ViewOp(std::move(source_prefix), std::move(view_prefix)),
        indices_(std::move(indices)),
        // Integers, slices and None (basic indexing) become direct select/slice/unsqueeze calls,
        // which skip Tensor::index's parsing of the index list on every read.
        basic_(internal::IsBasicIndex(indices_)) {}
  std::string_view id() const override { return "index_view"; }
  bool bijective() const override { return false; }
  at::Tensor forward(const at::Tensor& leaf) const override {
    return basic_ ? internal::IndexBasic(leaf, indices_) : leaf.index(indices_);
  }
  at::Tensor inverse(const at::Tensor&) const override {
    TORCH_INTERNAL_ASSERT(false, "an index view has no inverse");
  }
  const std::vector<TensorIndex>& indices() const override { return indices_; }

 private:
  std::vector<TensorIndex> indices_;  // Ellipsis expanded: applies to the leading dims only
  bool basic_;
};

class PermuteOp final : public ViewOp {
 public:
  PermuteOp(std::vector<int64_t> source_prefix, std::vector<int64_t> dims)
      : ViewOp(source_prefix, Permuted(source_prefix, dims)), dims_(std::move(dims)) {
    inverse_.resize(dims_.size());
    for (size_t i = 0; i < dims_.size(); ++i) inverse_[dims_[i]] = static_cast<int64_t>(i);
  }
  std::string_view id() const override { return "permute_view"; }
  bool bijective() const override { return true; }
  at::Tensor forward(const at::Tensor& leaf) const override { return Apply(leaf, dims_); }
  at::Tensor inverse(const at::Tensor& value) const override { return Apply(value, inverse_); }

 private:
  static std::vector<int64_t> Permuted(const std::vector<int64_t>& shape,
                                       const std::vector<int64_t>& dims) {
    std::vector<int64_t> out;
    for (int64_t d : dims) out.push_back(shape[d]);
    return out;
  }
  static at::Tensor Apply(const at::Tensor& t, const std::vector<int64_t>& dims) {
    c10::SmallVector<int64_t, 8> all(dims.begin(), dims.end());
    for (int64_t d = static_cast<int64_t>(dims.size()); d < t.dim(); ++d) all.push_back(d);
    return t.permute(all);
  }
  std::vector<int64_t> dims_;
  std::vector<int64_t> inverse_;
};

class UnsqueezeOp final : public ViewOp {
 public:
  UnsqueezeOp(std::vector<int64_t> source_prefix, int64_t dim)
      : ViewOp(source_prefix, Inserted(source_prefix, dim)), dim_(dim) {}
  std::string_view id() const override { return "unsqueeze_view"; }
  bool bijective() const override { return true; }
  at::Tensor forward(const at::Tensor& leaf) const override { return leaf.unsqueeze(dim_); }
  at::Tensor inverse(const at::Tensor& value) const override { return value.squeeze(dim_); }

 private:
  static std::vector<int64_t> Inserted(std::vector<int64_t> shape, int64_t dim) {
    shape.insert(shape.begin() + dim, 1);
    return shape;
  }
  int64_t dim_;
};

class SqueezeOp final : public ViewOp {
 public:
  SqueezeOp(std::vector<int64_t> source_prefix, int64_t dim)
      : ViewOp(source_prefix, Removed(source_prefix, dim)), dim_(dim) {}
  std::string_view id() const override { return "squeeze_view"; }
  bool bijective() const override { return true; }
  at::Tensor forward(const at::Tensor& leaf) const override { return leaf.squeeze(dim_); }
  at::Tensor inverse(const at::Tensor& value) const override { return value.unsqueeze(dim_); }

 private:
  static std::vector<int64_t> Removed(std::vector<int64_t> shape, int64_t dim) {
    shape.erase(shape.begin() + dim);
    return shape;
  }
  int64_t dim_;
};

class ReshapeOp final : public ViewOp {
 public:
  using ViewOp::ViewOp;
  std::string_view id() const override { return "reshape_view"; }
  bool bijective() const override { return true; }
  at::Tensor forward(const at::Tensor& leaf) const override {
    return leaf.reshape(to_view(leaf.sizes()));
  }
  at::Tensor inverse(const at::Tensor& value) const override {
    return value.reshape(to_source(value.sizes()));
  }
};

class LazyViewStorage final : public LazyStorage,
                              public std::enable_shared_from_this<LazyViewStorage> {
 public:
  LazyViewStorage(TensorDict source, std::shared_ptr<const ViewOp> op)
      : LazyStorage(op->to_view(source.batch_size()), source.device()),
        source_(std::move(source)),
        op_(std::move(op)) {
    add_lazy_source(source_, op_->id());
    assign_locked(source_.is_locked());
  }

  std::string_view backend_id() const override { return op_->id(); }
  Capabilities capabilities() const override {
    Capabilities c = Capability::kInPlaceWrite | Capability::kNewKeys | Capability::kLazy;
    return op_->bijective() ? c | Capability::kReplaceEntries : c;
  }

  size_t size() const override { return source_.storage().size(); }
  std::vector<std::string> keys() const override { return source_.storage().keys(); }
  bool contains(std::string_view key) const override { return source_.storage().contains(key); }

  std::optional<Value> get(std::string_view key) const override {
    std::optional<Value> holder;  // no copy of the source's entry when it holds its entries
    const Value* v = FindEntry(source_.storage(), key, &holder);
    if (v == nullptr) return std::nullopt;
    if (v->is_tensor()) return op_->forward(v->tensor());
    if (v->is_tensordict()) return TensorDict(sub_view(v->tensordict()));
    // A NonTensorStack's values move as the view moves elements (NOTE [ Non-tensor stacks ]).
    return Value(internal::MoveStack(v->non_tensor_data(), source_.batch_size(),
                                     source_.device().value_or(at::kCPU),
                                     [&](const at::Tensor& i) { return op_->forward(i); }));
  }

  std::optional<EntryMeta> meta(std::string_view key) const override {
    std::optional<EntryMeta> m = source_.storage().meta(key);
    if (!m || m->kind == EntryMeta::Kind::kNonTensor) return m;
    std::vector<int64_t> shape = op_->to_view(m->shape);
    m->shape.assign(shape.begin(), shape.end());
    return m;
  }

  void set(std::string_view key, Value value) override {
    const NestedKey k{std::string(key)};
    if (value.is_non_tensor() && value.non_tensor_data().is_stack()) {
      if (!op_->bijective()) {
        TD_FAIL(ValueError, "cannot set the NonTensorStack ", k.repr(), " through the ", op_->id(),
                " of batch size ", SizeRepr(batch_size()), ": it does not cover every element "
                "of its source (set it on the source TensorDict)");
      }
      internal::StackTable table;
      source_.set(k, table.Gather(op_->inverse(table.Add(value.non_tensor_data(), batch_size(),
                                                         at::kCPU))));
    } else if (value.is_non_tensor()) {
      source_.set(k, std::move(value));
    } else if (op_->bijective()) {
      if (value.is_tensor()) {
        source_.set(k, op_->inverse(value.tensor()));
      } else {
        const TensorDict& sub = value.tensordict();
        source_.set(k, sub.apply([this](const at::Tensor& t) { return op_->inverse(t); },
                                 op_->to_source(sub.batch_size())));
      }
    } else {
      source_.index_put_(op_->indices(), TensorDict({{k, std::move(value)}}, batch_size()));
    }
  }

  void set_(std::string_view key, const at::Tensor& value) override {
    const NestedKey k{std::string(key)};
    if (op_->bijective()) {
      source_.set_(k, op_->inverse(value));
    } else {
      source_.index_put_(op_->indices(), TensorDict({{k, value}}, batch_size()));
    }
  }

  bool erase(std::string_view key) override {
    const NestedKey k{std::string(key)};
    if (!source_.contains(k)) return false;
    source_.del_(k);
    return true;
  }

  bool rename_key(std::string_view old_key, std::string_view new_key) override {
    source_.rename_key_(NestedKey(std::string(old_key)), NestedKey(std::string(new_key)),
                        /*safe=*/false);
    return true;
  }

  // Indexing a view gives a view of the view, so that writes into the result reach the source.
  std::optional<TensorDict> index(at::ArrayRef<TensorIndex> indices) const override {
    return index_view(TensorDict(std::const_pointer_cast<LazyViewStorage>(shared_from_this())),
                      indices);
  }

  // No set_batch_size: a view declares no Capability::kBatchResize, so the core refuses to
  // change its batch size (it follows the source's).

  const TensorDict& source() const { return source_; }

 private:
  // A nested level seen through the view. Its leading dims are this level's, so they carry this
  // level's names; its own extra dims keep the source child's (NOTE [ Dim names ] in
  // td/core/names.cc).
  std::shared_ptr<Storage> sub_view(const TensorDict& sub_source) const {
    auto out = std::make_shared<LazyViewStorage>(sub_source, op_);
    out->assign_locked(locked());
    const DimNames* child = sub_source.storage().names();
    if (names() != nullptr || child != nullptr) {
      DimNames sub = names() != nullptr ? *names() : DimNames(batch_size().size());
      const size_t parent_dims = source_.batch_size().size();
      for (size_t i = parent_dims; i < sub_source.batch_size().size(); ++i) {
        sub.push_back(child != nullptr ? (*child)[i] : std::nullopt);
      }
      out->set_names(std::make_shared<const DimNames>(std::move(sub)));
    }
    return out;
  }

  TensorDict source_;
  std::shared_ptr<const ViewOp> op_;
};

int64_t WrapDim(int64_t dim, int64_t n, const TensorDict& source, const char* op) {
  const int64_t d = dim < 0 ? dim + n : dim;
  if (d < 0 || d >= n) {
    TD_FAIL(c10::IndexError, op, ": dim ", dim, " is out of range for batch size ",
                          SizeRepr(source.batch_size()), " (expected a dim in [", -n, ", ",
                          n - 1, "])");
  }
  return d;
}

// `names`: what the same op gives the source's dim names (NOTE [ Dim names ] in
// td/core/names.cc), computed by the caller on an empty dense probe; the view's own level only.
TensorDict MakeView(const TensorDict& source, std::shared_ptr<const ViewOp> op,
                    std::shared_ptr<const DimNames> names = nullptr) {
  auto storage = std::make_shared<LazyViewStorage>(source, std::move(op));
  if (names) storage->set_names(std::move(names));
  return TensorDict(std::move(storage));
}

// An empty dense TensorDict with `source`'s batch size and names, to compute a view's names.
TensorDict NamesProbe(const TensorDict& source) {
  return TensorDict({}, source.batch_size(), std::nullopt,
                    source.has_names() ? source.names() : DimNames{});
}

}  // namespace

TensorDict index_view(const TensorDict& source, at::ArrayRef<TensorIndex> indices) {
  // The core validates the index and reports errors in its words; the probe gives the batch.
  const TensorDict probe = NamesProbe(source).index(indices);
  const internal::BatchIndex ex =
      internal::ExpandBatchIndex(indices, source.batch_size(), "index_view");
  return MakeView(source,
                  std::make_shared<IndexOp>(
                      source.batch_size().vec(), probe.batch_size().vec(),
                      internal::WithoutTrailingFullSlices(ex, source.batch_size())),
                  probe.storage().shared_names());
}

TensorDict index_view(const TensorDict& source, std::initializer_list<TensorIndex> indices) {
  return index_view(source, at::ArrayRef<TensorIndex>(indices.begin(), indices.size()));
}

TensorDict permute_view(const TensorDict& source, at::IntArrayRef dims) {
  const int64_t n = source.batch_dims();
  std::vector<int64_t> d(dims.size());
  std::vector<bool> seen(n, false);
  bool ok = static_cast<int64_t>(dims.size()) == n;
  for (size_t i = 0; ok && i < dims.size(); ++i) {
    d[i] = dims[i] < 0 ? dims[i] + n : dims[i];
    ok = d[i] >= 0 && d[i] < n && !seen[d[i]];
    if (ok) seen[d[i]] = true;
  }
  if (!ok) {
    TD_FAIL(c10::ValueError, "permute_view: ", dims, " is not a permutation of the ", n,
                          " batch dims of batch size ", SizeRepr(source.batch_size()));
  }
  std::shared_ptr<const DimNames> names =
      source.has_names() ? NamesProbe(source).permute(d).storage().shared_names() : nullptr;
  return MakeView(source, std::make_shared<PermuteOp>(source.batch_size().vec(), std::move(d)),
                  std::move(names));
}

TensorDict transpose_view(const TensorDict& source, int64_t dim0, int64_t dim1) {
  const int64_t n = source.batch_dims();
  const int64_t a = WrapDim(dim0, n, source, "transpose_view");
  const int64_t b = WrapDim(dim1, n, source, "transpose_view");
  std::vector<int64_t> dims(n);
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[a], dims[b]);
  return permute_view(source, dims);
}

TensorDict unsqueeze_view(const TensorDict& source, int64_t dim) {
  const int64_t d = WrapDim(dim, source.batch_dims() + 1, source, "unsqueeze_view");
  std::shared_ptr<const DimNames> names =
      source.has_names() ? NamesProbe(source).unsqueeze(d).storage().shared_names() : nullptr;
  return MakeView(source, std::make_shared<UnsqueezeOp>(source.batch_size().vec(), d),
                  std::move(names));
}

TensorDict squeeze_view(const TensorDict& source, int64_t dim) {
  const int64_t d = WrapDim(dim, source.batch_dims(), source, "squeeze_view");
  if (source.batch_size()[d] != 1) {
    TD_FAIL(c10::ValueError, "squeeze_view: batch dim ", dim, " of batch size ",
                          SizeRepr(source.batch_size()), " has size ", source.batch_size()[d],
                          ", not 1");
  }
  std::shared_ptr<const DimNames> names =
      source.has_names() ? NamesProbe(source).squeeze(d).storage().shared_names() : nullptr;
  return MakeView(source, std::make_shared<SqueezeOp>(source.batch_size().vec(), d),
                  std::move(names));
}

TensorDict reshape_view(const TensorDict& source, at::IntArrayRef shape) {
  std::vector<int64_t> view = shape.vec();
  int64_t known = 1;
  int64_t infer = -1;
  bool ok = true;
  for (size_t i = 0; i < view.size(); ++i) {
    if (view[i] == -1 && infer < 0) {
      infer = static_cast<int64_t>(i);
    } else if (view[i] < 0) {
      ok = false;
    } else {
      known *= view[i];
    }
  }
  const int64_t numel = source.numel();
  if (ok && infer >= 0) {
    ok = known != 0 && numel % known == 0;
    if (ok) view[infer] = numel / known;
  }
  if (!ok || known * (infer >= 0 ? view[infer] : 1) != numel) {
    TD_FAIL(c10::ValueError, "reshape_view: shape ", shape, " is invalid for batch size ",
                          SizeRepr(source.batch_size()), " (", numel, " elements)");
  }
  return MakeView(source, std::make_shared<ReshapeOp>(source.batch_size().vec(), view));
}

std::optional<LazyViewTensorDict> LazyViewTensorDict::from(const TensorDict& td) {
  if (dynamic_cast<const LazyViewStorage*>(&td.storage()) == nullptr) return std::nullopt;
  return LazyViewTensorDict(td);
}

TensorDict LazyViewTensorDict::source() const {
  return static_cast<const LazyViewStorage&>(storage()).source();
}

namespace {

// The lazy forms of TensorDict's shape ops under lazy_legacy() (NOTE [ Lazy legacy ] in
// td/core/lazy_legacy.h).
TensorDict PermuteHook(const TensorDict& td, at::IntArrayRef dims) { return permute_view(td, dims); }
TensorDict TransposeHook(const TensorDict& td, int64_t d0, int64_t d1) {
  return transpose_view(td, d0, d1);
}
TensorDict UnsqueezeHook(const TensorDict& td, int64_t dim) { return unsqueeze_view(td, dim); }
TensorDict SqueezeHook(const TensorDict& td, int64_t dim) { return squeeze_view(td, dim); }
TensorDict ReshapeHook(const TensorDict& td, at::IntArrayRef shape) {
  return reshape_view(td, shape);
}

const bool kLazyViewHooksRegistered = internal::hooks::permute_view.Register(&PermuteHook) &&
                                      internal::hooks::transpose_view.Register(&TransposeHook) &&
                                      internal::hooks::unsqueeze_view.Register(&UnsqueezeHook) &&
                                      internal::hooks::squeeze_view.Register(&SqueezeHook) &&
                                      internal::hooks::reshape_view.Register(&ReshapeHook);

}  // namespace

}  // namespace td
