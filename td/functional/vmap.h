// td::vmap: runs a function once per member of a batch dim, as one vectorised call, the way
// Python's torch.func.vmap does with TensorDicts. The machinery is LibTorch's own functorch
// interpreter (its batching rules; td/compat/functorch.h): inside the function, tensors and
// TensorDicts look like ONE member (the mapped dim is hidden from sizes() and batch_size()), the
// operations run batched over all members at once, and the results gain the mapped dim back.
//
//   // an ensemble: one model, parameters stacked along dim 0 (batch [E])
//   td::TensorDict stacked = td::stack({params, params}, 0);
//   auto run = [&](const at::Tensor& x, const td::TensorDict& p) {
//     auto guard = td::nn::to_module(p, *model);   // p holds ONE member's tensors (batched)
//     return model->forward(x);
//   };
//   at::Tensor y = td::vmap(run, {td::kNone, 0})(x, stacked);   // [E, *model(x).sizes()]
//
// NOTE [ vmap over TensorDicts ]
// Arguments are tensors, TensorDicts (any backend, nested) and anything else (passed through
// unchanged; its in_dim must be kNone). Each argument's InDim says how it is mapped:
//  * kNone: not mapped; every member sees it whole. A TensorDict is passed as a shallow copy
//    (copy()), so entries fn sets do not reach the caller's TensorDict.
//  * an int d: for a tensor, its dim d (negative counts from the end); for a TensorDict, its
//    batch dim d: every leaf is mapped along d and, inside fn, the TensorDict's batch size leaves
//    d out (batch [E, B] with d = 0 is seen as batch [B]), as in Python.
//  * InDim::per_key({{key, dim}, ...}): a TensorDict whose entries are mapped differently; a key
//    names a leaf or a sub-TensorDict (all of its leaves), keys not listed are kNone. A dim counts
//    in the entry's own dims (for a sub-TensorDict, batch dims first, as every leaf's leading
//    dims are its batch dims) and must come after the batch dims of the TensorDict holding the
//    entry, so that TensorDict's batch size is the same inside fn; a sub-TensorDict mapped along
//    one of its own batch dims is seen without it.
// Every mapped dim must have the same size (the number of members): the error names the argument
// and the key of the first one that differs. Inside fn, a TensorDict is a new dense TensorDict of
// batched leaves (locked when the argument was), so any TensorDict call that does not read raw
// memory works on it (get/set/apply/index/shape ops; not memmap, data_ptr, or consolidation).
// A lazy stack is read through its storage: each leaf is the members' leaves stacked.
// Results: a tensor, a TensorDict, or a std::tuple / std::pair / std::vector of these. Each gets
// the mapped dim back at its out_dim (for a TensorDict, a batch dim position in
// 0..batch_dims(), negative counting from batch_dims() + 1); a result that does not depend on
// the mapped inputs is expanded (a view) to the same shape, as in Python.
//
// NOTE [ vmap layers and randomness ]
// Each call pushes one functorch vmap layer on the calling thread and pops it on every way out
// (an exception thrown by fn included), so a failed call leaves nothing behind. Calls nest (a
// vmap inside fn pushes a layer above the outer one; inner results are unwrapped before the
// outer layer sees them). Random operations inside fn follow VmapOptions::randomness, as
// torch.func.vmap's `randomness`: kError throws (the default), kDifferent draws independently
// for each member, kSame draws once for all members. With chunk_size and kSame the CPU generator
// is reset to the same state before each chunk, so every chunk draws the same values (as Python
// does). Operations without a batching rule in LibTorch still work: LibTorch runs them member by
// member (and warns, unless set_vmap_fallback_warning(false)).
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "td/core/errors.h"
#include "td/core/nested_key.h"
#include "td/core/tensordict.h"

namespace td {

// The in_dim of an argument that is not mapped.
inline constexpr std::nullopt_t kNone = std::nullopt;

// One per-key dim of InDim::per_key: `key` names a leaf or a sub-TensorDict; `dim` is a dim of it
// or kNone.
struct KeyDim {
  NestedKey key;
  std::optional<int64_t> dim;
};

// How one argument is mapped (NOTE [ vmap over TensorDicts ]).
class InDim {
 public:
  InDim(std::nullopt_t) {}                   // NOLINT: kNone
  InDim(int64_t dim) : dim_(dim) {}          // NOLINT
  InDim(int dim) : dim_(dim) {}              // NOLINT
  // Per-key dims for a TensorDict argument.
  //   td::InDim::per_key({{"params", 0}, {{"obs", "pixels"}, td::kNone}})
  static InDim per_key(std::vector<KeyDim> dims) {
    InDim d;
    d.per_key_ = std::make_shared<const std::vector<KeyDim>>(std::move(dims));
    return d;
  }

  bool is_none() const { return !dim_ && !per_key_; }
  const std::optional<int64_t>& dim() const { return dim_; }
  // Non-null for per_key().
  const std::vector<KeyDim>* keys() const { return per_key_.get(); }

 private:
  InDim() = default;
  std::optional<int64_t> dim_;
  std::shared_ptr<const std::vector<KeyDim>> per_key_;
};

// The in_dims of a call: one InDim for every argument, or one int for all of them.
//   td::vmap(fn, 0)                 // every argument along dim 0
//   td::vmap(fn, {td::kNone, 0})    // first argument shared, second mapped along dim 0
class InDims {
 public:
  InDims(int64_t all) : all_(all) {}                                    // NOLINT
  InDims(int all) : all_(all) {}                                        // NOLINT
  InDims(std::initializer_list<InDim> dims) : dims_(dims) {}            // NOLINT
  InDims(std::vector<InDim> dims) : dims_(std::move(dims)) {}           // NOLINT
  // The InDim of argument `i` of `n` (ValueError when a list does not have `n` entries).
  InDim of(size_t i, size_t n) const;

 private:
  std::optional<int64_t> all_;
  std::vector<InDim> dims_;
};

// Where each result gets the mapped dim: one int for every result, or one per element of a
// tuple / pair / vector result.
class OutDims {
 public:
  OutDims(int64_t all) : all_(all) {}                                            // NOLINT
  OutDims(int all) : all_(all) {}                                                // NOLINT
  OutDims(std::initializer_list<int64_t> dims) : dims_(dims) {}                  // NOLINT
  // The out_dim of element `i` of a result with `n` elements (ValueError when a list does not
  // have `n` entries).
  int64_t of(size_t i, size_t n) const;

 private:
  std::optional<int64_t> all_;
  std::vector<int64_t> dims_;
};

// How random operations behave inside fn (NOTE [ vmap layers and randomness ]).
enum class Randomness { kError, kDifferent, kSame };

struct VmapOptions {
  // Run at most this many members per batched call (the results are concatenated): bounds the
  // memory of large vmaps. nullopt: all members at once. Must be >= 1.
  TORCH_ARG(std::optional<int64_t>, chunk_size) = std::nullopt;
  TORCH_ARG(Randomness, randomness) = Randomness::kError;
};

// The number of vmap layers active on this thread (0 outside td::vmap; 2 inside a nested one).
int64_t vmap_nesting();

// Whether LibTorch warns when an operation without a batching rule runs member by member inside
// vmap (process-wide; LibTorch's own switch, at::functorch::setVmapFallbackWarningEnabled).
bool vmap_fallback_warning();
void set_vmap_fallback_warning(bool enabled);

// ---- implementation details used by the templates below --------------------------------------

namespace internal {
namespace vmap_ops {

// The mapped argument of one call, resolved against its in_dim (vmap.cc).
class Call {
 public:
  Call(const InDims& in_dims, size_t num_args, const VmapOptions& options);
  ~Call();
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  void add_tensor(size_t i, const at::Tensor& t);
  void add_tensordict(size_t i, const TensorDict& td);
  void add_other(size_t i);
  // Checks the sizes and plans the chunks; ValueError when nothing is mapped or sizes differ.
  void prepare();

  int64_t size() const { return size_; }
  // [start, length) of each chunk.
  const std::vector<std::pair<int64_t, int64_t>>& chunks() const { return chunks_; }

  // Pushes the layer of chunk `c` (popped by ~Layer).
  class Layer {
   public:
    Layer(Call& call, size_t c);
    ~Layer();
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;
    int64_t level() const { return level_; }
    int64_t size() const { return size_; }
    int64_t start() const { return start_; }

   private:
    int64_t level_;
    int64_t size_;
    int64_t start_;
  };

  // Argument i as fn sees it in `layer`.
  at::Tensor inside_tensor(size_t i, const Layer& layer) const;
  TensorDict inside_tensordict(size_t i, const Layer& layer) const;

  struct Plan;  // defined in vmap.cc

 private:
  std::vector<std::unique_ptr<Plan>> plans_;
  const InDims& in_dims_;
  size_t num_args_;
  VmapOptions options_;
  int64_t size_ = -1;
  std::vector<std::pair<int64_t, int64_t>> chunks_;
  at::Tensor rng_state_;  // kSame with several chunks
  friend class Layer;
};

at::Tensor Unwrap(const at::Tensor& t, const Call::Layer& layer, int64_t out_dim);
TensorDict Unwrap(const TensorDict& td, const Call::Layer& layer, int64_t out_dim);
at::Tensor Concat(const std::vector<at::Tensor>& chunks, int64_t out_dim);
TensorDict Concat(const std::vector<TensorDict>& chunks, int64_t out_dim);

template <class T>
inline constexpr bool kIsTensorDict = std::is_base_of_v<TensorDict, std::decay_t<T>>;
template <class T>
inline constexpr bool kIsTensor = std::is_same_v<std::decay_t<T>, at::Tensor>;

// What fn receives for an argument of type A.
template <class A>
using Inside = std::conditional_t<kIsTensor<A>, at::Tensor,
                                  std::conditional_t<kIsTensorDict<A>, TensorDict,
                                                     std::remove_reference_t<A>&>>;

template <class A>
Inside<A> MakeInside(const Call& call, size_t i, A& arg, const Call::Layer& layer) {
  if constexpr (kIsTensor<A>) {
    return call.inside_tensor(i, layer);
  } else if constexpr (kIsTensorDict<A>) {
    return call.inside_tensordict(i, layer);
  } else {
    return arg;
  }
}

template <class A>
void AddArg(Call& call, size_t i, const A& arg) {
  if constexpr (kIsTensor<A>) {
    call.add_tensor(i, arg);
  } else if constexpr (kIsTensorDict<A>) {
    call.add_tensordict(i, arg);
  } else {
    call.add_other(i);
  }
}

// The result types fn may return, and what vmap returns for them.
template <class R, class = void>
struct Result {
  static_assert(sizeof(R) == 0,
                "td::vmap: fn must return an at::Tensor, a td::TensorDict, or a std::tuple / "
                "std::pair / std::vector of these");
};
template <>
struct Result<at::Tensor> {
  using type = at::Tensor;
  static constexpr size_t kSize = 1;
  static type Unwrap(const at::Tensor& r, const Call::Layer& l, const OutDims& d, size_t i,
                     size_t n) {
    return internal::vmap_ops::Unwrap(r, l, d.of(i, n));
  }
  static type Concat(const std::vector<type>& c, const OutDims& d, size_t i, size_t n) {
    return internal::vmap_ops::Concat(c, d.of(i, n));
  }
};
template <class R>
struct Result<R, std::enable_if_t<kIsTensorDict<R>>> {
  using type = TensorDict;
  static constexpr size_t kSize = 1;
  static type Unwrap(const TensorDict& r, const Call::Layer& l, const OutDims& d, size_t i,
                     size_t n) {
    return internal::vmap_ops::Unwrap(r, l, d.of(i, n));
  }
  static type Concat(const std::vector<type>& c, const OutDims& d, size_t i, size_t n) {
    return internal::vmap_ops::Concat(c, d.of(i, n));
  }
};
template <class T>
struct Result<std::vector<T>> {
  using E = Result<T>;
  using type = std::vector<typename E::type>;
  static type Unwrap(const std::vector<T>& r, const Call::Layer& l, const OutDims& d, size_t,
                     size_t) {
    type out;
    out.reserve(r.size());
    for (size_t j = 0; j < r.size(); ++j) out.push_back(E::Unwrap(r[j], l, d, j, r.size()));
    return out;
  }
  // Every chunk must have returned as many outputs as the first (checked before any is
  // concatenated, so that a first chunk's empty vector does not drop the others' outputs).
  static type Concat(const std::vector<type>& c, const OutDims& d, size_t, size_t) {
    type out;
    const size_t n = c.front().size();
    for (size_t k = 1; k < c.size(); ++k) {
      if (c[k].size() != n) {
        TD_FAIL(ValueError, "td::vmap: with chunk_size, fn returned a vector of ", n,
                " outputs for chunk 0 but of ", c[k].size(), " for chunk ", k, " (of ", c.size(),
                "); every chunk must return the same number of outputs");
      }
    }
    for (size_t j = 0; j < n; ++j) {
      std::vector<typename E::type> parts;
      parts.reserve(c.size());
      for (const type& chunk : c) parts.push_back(chunk[j]);
      out.push_back(E::Concat(parts, d, j, n));
    }
    return out;
  }
};
template <template <class...> class Tuple, class... Ts>
struct TupleResult {
  using type = Tuple<typename Result<std::decay_t<Ts>>::type...>;
  template <size_t... I>
  static type UnwrapImpl(const Tuple<Ts...>& r, const Call::Layer& l, const OutDims& d,
                         std::index_sequence<I...>) {
    return type(Result<std::decay_t<Ts>>::Unwrap(std::get<I>(r), l, d, I, sizeof...(Ts))...);
  }
  static type Unwrap(const Tuple<Ts...>& r, const Call::Layer& l, const OutDims& d, size_t,
                     size_t) {
    return UnwrapImpl(r, l, d, std::index_sequence_for<Ts...>{});
  }
  template <size_t I>
  static auto ConcatOne(const std::vector<type>& c, const OutDims& d) {
    using E = Result<std::decay_t<std::tuple_element_t<I, std::tuple<Ts...>>>>;
    std::vector<typename E::type> parts;
    parts.reserve(c.size());
    for (const type& chunk : c) parts.push_back(std::get<I>(chunk));
    return E::Concat(parts, d, I, sizeof...(Ts));
  }
  template <size_t... I>
  static type ConcatImpl(const std::vector<type>& c, const OutDims& d,
                         std::index_sequence<I...>) {
    return type(ConcatOne<I>(c, d)...);
  }
  static type Concat(const std::vector<type>& c, const OutDims& d, size_t, size_t) {
    return ConcatImpl(c, d, std::index_sequence_for<Ts...>{});
  }
};
template <class... Ts>
struct Result<std::tuple<Ts...>> : TupleResult<std::tuple, Ts...> {};
template <class A, class B>
struct Result<std::pair<A, B>> : TupleResult<std::pair, A, B> {};

}  // namespace vmap_ops
}  // namespace internal

// The vectorised form of a function (see td::vmap).
template <class Fn>
class Vmapped {
 public:
  Vmapped(Fn fn, InDims in_dims, OutDims out_dims, VmapOptions options)
      : fn_(std::move(fn)),
        in_dims_(std::move(in_dims)),
        out_dims_(std::move(out_dims)),
        options_(options) {}

  template <class... Args>
  auto operator()(Args&&... args) const {
    return call(std::index_sequence_for<Args...>{}, args...);
  }

 private:
  template <size_t... I, class... Args>
  auto call(std::index_sequence<I...>, Args&... args) const {
    using R = std::decay_t<std::invoke_result_t<const Fn&, internal::vmap_ops::Inside<Args>&...>>;
    using Out = internal::vmap_ops::Result<R>;
    internal::vmap_ops::Call call(in_dims_, sizeof...(Args), options_);
    (internal::vmap_ops::AddArg(call, I, args), ...);
    call.prepare();
    std::vector<typename Out::type> outs;
    outs.reserve(call.chunks().size());
    for (size_t c = 0; c < call.chunks().size(); ++c) {
      internal::vmap_ops::Call::Layer layer(call, c);
      std::tuple<internal::vmap_ops::Inside<Args>...> inside(
          internal::vmap_ops::MakeInside<Args>(call, I, args, layer)...);
      const R r = std::apply(fn_, inside);
      outs.push_back(Out::Unwrap(r, layer, out_dims_, 0, 1));
    }
    if (outs.size() == 1) return std::move(outs.front());
    return Out::Concat(outs, out_dims_, 0, 1);
  }

  Fn fn_;
  InDims in_dims_;
  OutDims out_dims_;
  VmapOptions options_;
};

// Returns `fn` vectorised over a dim of its arguments (NOTE [ vmap over TensorDicts ]): calling
// the result with arguments whose mapped dims have size E runs fn once, batched, on all E members,
// and returns fn's results with a dim of size E at out_dims. in_dims: one per argument (kNone,
// an int, or InDim::per_key for a TensorDict), or one int for all. Throws, before fn runs,
// ValueError naming the argument (and key) for an in_dim out of range, an in_dim on an argument
// that is neither a tensor nor a TensorDict, sizes of the mapped dims that differ, no mapped
// argument, and a chunk_size < 1; after fn: ValueError for an out_dim out of range. What fn
// throws is rethrown with the vmap layer popped.
//   auto batched_dot = td::vmap([](const at::Tensor& a, const at::Tensor& b) {
//     return at::dot(a, b);
//   });
//   at::Tensor d = batched_dot(x, y);   // x, y: [E, 5] -> d: [E]
template <class Fn>
Vmapped<std::decay_t<Fn>> vmap(Fn&& fn, InDims in_dims = 0, OutDims out_dims = 0,
                               VmapOptions options = {}) {
  return Vmapped<std::decay_t<Fn>>(std::forward<Fn>(fn), std::move(in_dims), std::move(out_dims),
                                   options);
}

}  // namespace td
