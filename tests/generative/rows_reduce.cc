// Case generators of the reduction rows of td/core/ops_math.def: dims drawn within the batch
// rank (negative half of the time), sometimes repeated or out of range (the op must raise);
// each leaf is reduced by LibTorch over the same dims (its feature dims kept), or over all its
// elements when no dim is given.
#include <algorithm>

#include "td/compat/torch.h"
#include "td/core/pointwise_ops.h"
#include "tests/generative/generative.h"

namespace td {
namespace generative {
namespace {

using X = const at::Tensor&;

// Distinct-or-not batch dims to reduce: at least one.
std::vector<int64_t> DrawDims(Case& c) {
  const int64_t nb = c.td.batch_dims();
  std::vector<int64_t> dims;
  const int64_t n = nb == 0 ? 1 : Uniform(c.rng, 1, nb);
  for (int64_t i = 0; i < n; ++i) dims.push_back(RandomDim(c.rng, nb));
  if (Chance(c.rng, 0.05)) dims.push_back(dims.front());  // repeated: must raise
  std::string s;
  for (int64_t d : dims) s += (s.empty() ? "" : ",") + std::to_string(d);
  c.Arg("dims", "{" + s + "}");
  return dims;
}

// `dims` wrapped for a batch of rank nb; a repeated dim raises as LibTorch does.
std::vector<int64_t> Wrapped(const std::vector<int64_t>& dims, int64_t nb) {
  std::vector<int64_t> w;
  for (int64_t d : dims) {
    const int64_t x = WrapDim(d, nb);
    TORCH_CHECK_VALUE(std::find(w.begin(), w.end(), x) == w.end(), "dim ", x,
                      " appears multiple times in the list of dims");
    w.push_back(x);
  }
  return w;
}

// A reduction over several dims with a one-dim LibTorch op: the dims from the last.
at::Tensor OneAtATime(X x, std::vector<int64_t> dims, bool keepdim,
                      const std::function<at::Tensor(X, int64_t, bool)>& op) {
  std::sort(dims.rbegin(), dims.rend());
  at::Tensor r = x;
  for (int64_t d : dims) r = op(r, d, keepdim);
  return r;
}

using DimsFn = std::function<at::Tensor(X, at::IntArrayRef dims, bool keepdim)>;
using AllFn = std::function<at::Tensor(X)>;

// The two rows of a reduction: (dims, keepdim) and (ReduceOptions).
void Reduction(RowTable& t, const std::string& name,
               std::function<TensorDict(const TensorDict&, at::IntArrayRef, bool)> by_dims,
               std::function<TensorDict(const TensorDict&, const ReduceOptions&)> by_options,
               DimsFn dims_fn, AllFn all_fn, bool has_options = true) {
  auto dims_case = [dims_fn](Case& c, const std::vector<int64_t>& dims, bool keepdim,
                             const std::function<TensorDict()>& call) {
    const int64_t nb = c.td.batch_dims();
    Spec s;
    s.leaf = [dims, keepdim, nb, dims_fn](const NestedKey&, X x) {
      return dims_fn(x, Wrapped(dims, nb), keepdim);
    };
    s.batch = BatchByDummy(s.leaf);
    try {
      s.names = DropDims(Wrapped(dims, nb), keepdim);
    } catch (const std::exception&) {
    }
    CheckOut(c, call, s);
  };
  t[name + "(at::IntArrayRef dims, bool keepdim = false)"] = [by_dims, dims_case](Case& c) {
    const std::vector<int64_t> dims = DrawDims(c);
    const bool keepdim = Chance(c.rng, 0.5);
    c.Arg("keepdim", keepdim);
    dims_case(c, dims, keepdim, [&] { return by_dims(c.td, dims, keepdim); });
  };
  if (!has_options) return;
  t[name + "(const ReduceOptions& options = {})"] = [by_options, dims_case, all_fn](Case& c) {
    if (Chance(c.rng, 0.5)) {
      const std::vector<int64_t> dims = DrawDims(c);
      const bool keepdim = Chance(c.rng, 0.5);
      c.Arg("keepdim", keepdim);
      const ReduceOptions o = ReduceOptions().dim(dims).keepdim(keepdim);
      dims_case(c, dims, keepdim, [&] { return by_options(c.td, o); });
      return;
    }
    c.Arg("options", "{}");
    Spec s;
    s.leaf = [all_fn](const NestedKey&, X x) { return all_fn(x); };
    s.batch = BatchByDummy(s.leaf);  // an empty batch is refused without leaves too
    s.full = true;
    s.names = NoNames(0);
    CheckOut(
        c, [&] { return by_options(c.td, ReduceOptions()); }, s);
  };
}

std::vector<int64_t> AllDims(X x) {
  std::vector<int64_t> d(static_cast<size_t>(x.dim()));
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<int64_t>(i);
  return d;
}

}  // namespace

void AddReduceRows(RowTable& t) {
  using C = const TensorDict&;
  using A = at::IntArrayRef;
  using O = const ReduceOptions&;
  Reduction(
      t, "sum", [](C a, A d, bool k) { return a.sum(d, k); }, [](C a, O o) { return a.sum(o); },
      [](X x, A d, bool k) { return at::sum(x, d, k); }, [](X x) { return at::sum(x); });
  Reduction(
      t, "mean", [](C a, A d, bool k) { return a.mean(d, k); }, [](C a, O o) { return a.mean(o); },
      [](X x, A d, bool k) { return at::mean(x, d, k); }, [](X x) { return at::mean(x); });
  Reduction(
      t, "std", [](C a, A d, bool k) { return a.std(d, k); }, [](C a, O o) { return a.std(o); },
      [](X x, A d, bool k) { return at::std(x, d, /*unbiased=*/true, k); },
      [](X x) { return at::std(x); });
  Reduction(
      t, "var", [](C a, A d, bool k) { return a.var(d, k); }, [](C a, O o) { return a.var(o); },
      [](X x, A d, bool k) { return at::var(x, d, /*unbiased=*/true, k); },
      [](X x) { return at::var(x); });
  for (const char* name : {"min", "amin"}) {
    const bool a_ = name[0] == 'a';
    Reduction(
        t, name, [a_](C a, A d, bool k) { return a_ ? a.amin(d, k) : a.min(d, k); },
        [a_](C a, O o) { return a_ ? a.amin(o) : a.min(o); },
        [](X x, A d, bool k) { return at::amin(x, d, k); },
        [](X x) { return at::amin(x, AllDims(x)); });
  }
  for (const char* name : {"max", "amax"}) {
    const bool a_ = name[0] == 'a';
    Reduction(
        t, name, [a_](C a, A d, bool k) { return a_ ? a.amax(d, k) : a.max(d, k); },
        [a_](C a, O o) { return a_ ? a.amax(o) : a.max(o); },
        [](X x, A d, bool k) { return at::amax(x, d, k); },
        [](X x) { return at::amax(x, AllDims(x)); });
  }
  Reduction(
      t, "logsumexp", [](C a, A d, bool k) { return a.logsumexp(d, k); },
      [](C a, O o) { return a.logsumexp(o); },
      [](X x, A d, bool k) { return at::logsumexp(x, d, k); },
      [](X x) { return at::logsumexp(x.reshape({-1}), {0}); });
  Reduction(
      t, "prod", [](C a, A d, bool k) { return a.prod(d, k); }, [](C a, O o) { return a.prod(o); },
      [](X x, A d, bool k) {
        return OneAtATime(x, d.vec(), k,
                          [](X y, int64_t i, bool kk) { return at::prod(y, i, kk); });
      },
      [](X x) { return at::prod(x); });
  Reduction(
      t, "nansum", [](C a, A d, bool k) { return a.nansum(d, k); },
      [](C a, O o) { return a.nansum(o); }, [](X x, A d, bool k) { return at::nansum(x, d, k); },
      [](X x) { return at::nansum(x); });
  Reduction(
      t, "nanmean", [](C a, A d, bool k) { return a.nanmean(d, k); },
      [](C a, O o) { return a.nanmean(o); }, [](X x, A d, bool k) { return at::nanmean(x, d, k); },
      [](X x) { return at::nanmean(x); });
  // any / all over batch dims: torch.any / torch.all of each leaf (bool leaves, except uint8
  // leaves, which LibTorch reduces to uint8).
  Reduction(
      t, "any", [](C a, A d, bool k) { return a.any(d, k); }, nullptr,
      [](X x, A d, bool k) {
        return OneAtATime(x, d.vec(), k, [](X y, int64_t i, bool kk) { return at::any(y, i, kk); });
      },
      nullptr, /*has_options=*/false);
  Reduction(
      t, "all", [](C a, A d, bool k) { return a.all(d, k); }, nullptr,
      [](X x, A d, bool k) {
        return OneAtATime(x, d.vec(), k, [](X y, int64_t i, bool kk) { return at::all(y, i, kk); });
      },
      nullptr, /*has_options=*/false);
  t["all()"] = [](Case& c) {
    CheckBool(
        c, [&] { return c.td.all(); },
        [](bool acc, X x) { return acc && (x.numel() == 0 || x.all().item<bool>()); }, true);
  };
  t["any()"] = [](Case& c) {
    CheckBool(
        c, [&] { return c.td.any(); },
        [](bool acc, X x) { return acc || (x.numel() > 0 && x.any().item<bool>()); }, false);
  };
  // norm(p, options).
  t["norm(const at::Scalar& p = 2, const ReduceOptions& options = {})"] = [](Case& c) {
    const at::Scalar p = Chance(c.rng, 0.5) ? at::Scalar(2) : at::Scalar(1);
    c.Arg("p", p);
    Spec s;
    if (Chance(c.rng, 0.5)) {
      s.leaf = [p](const NestedKey&, X x) { return at::norm(x, p); };
      s.full = true;
      s.names = NoNames(0);
      CheckOut(
          c, [&] { return c.td.norm(p); }, s);
      return;
    }
    const std::vector<int64_t> dims = DrawDims(c);
    const bool keepdim = Chance(c.rng, 0.5);
    c.Arg("keepdim", keepdim);
    const int64_t nb = c.td.batch_dims();
    s.leaf = [p, dims, keepdim, nb](const NestedKey&, X x) {
      return at::norm(x, p, Wrapped(dims, nb), keepdim);
    };
    s.batch = BatchByDummy(s.leaf);
    CheckOut(
        c, [&] { return c.td.norm(p, ReduceOptions().dim(dims).keepdim(keepdim)); }, s);
  };
  // softmax / log_softmax along a batch dim.
  for (bool log : {false, true}) {
    t[std::string(log ? "log_softmax" : "softmax") +
      "(int64_t dim, std::optional<at::ScalarType> dtype = std::nullopt)"] = [log](Case& c) {
      const int64_t dim = RandomDim(c.rng, c.td.batch_dims());
      std::optional<at::ScalarType> dtype;
      if (Chance(c.rng, 0.3)) dtype = Chance(c.rng, 0.5) ? at::kFloat : at::kDouble;
      c.Arg("dim", dim);
      c.Arg("dtype", dtype ? c10::toString(*dtype) : "nullopt");
      const int64_t nb = c.td.batch_dims();
      Spec s;
      compat::Optional<at::ScalarType> cdtype;
      if (dtype) cdtype = *dtype;
      s.leaf = [dim, cdtype, nb, log](const NestedKey&, X x) {
        return log ? at::log_softmax(x, WrapDim(dim, nb), cdtype)
                   : at::softmax(x, WrapDim(dim, nb), cdtype);
      };
      s.batch = BatchByDummy(s.leaf);  // the dim is checked without leaves too
      s.names = SameNames();
      CheckOut(
          c, [&] { return log ? c.td.log_softmax(dim, dtype) : c.td.softmax(dim, dtype); }, s);
    };
  }
  // quantile(q, dim, keepdim, interpolation).
  t["quantile(double q, std::optional<int64_t> dim = std::nullopt, bool keepdim = false, "
    "std::string_view interpolation = \"linear\")"] = [](Case& c) {
    const double qs[] = {0.0, 0.25, 0.5, 1.0, 1.5};
    const double q = qs[Uniform(c.rng, 0, 4)];
    const char* interps[] = {"linear", "lower", "higher", "midpoint", "nearest"};
    const std::string interp = interps[Uniform(c.rng, 0, 4)];
    std::optional<int64_t> dim;
    if (Chance(c.rng, 0.6)) dim = RandomDim(c.rng, c.td.batch_dims());
    const bool keepdim = dim.has_value() && Chance(c.rng, 0.5);
    c.Arg("q", q);
    c.Arg("dim", dim ? std::to_string(*dim) : "nullopt");
    c.Arg("keepdim", keepdim);
    c.Arg("interpolation", interp);
    const int64_t nb = c.td.batch_dims();
    Spec s;
    s.leaf = [q, dim, keepdim, interp, nb](const NestedKey&, X x) {
      const compat::StringView how(interp);
      if (!dim) return at::quantile(x, q, compat::kNullopt, false, how);
      return at::quantile(x, q, compat::Optional<int64_t>(WrapDim(*dim, nb)), keepdim, how);
    };
    s.batch = BatchByDummy(s.leaf);  // q and an empty batch are refused without leaves too
    s.full = !dim;
    CheckOut(
        c, [&] { return c.td.quantile(q, dim, keepdim, interp); }, s);
  };
  // (values, indices) along a batch dim.
  for (const char* name : {"min_with_indices", "max_with_indices"}) {
    const bool mx = name[1] == 'a';
    t[std::string(name) + "(int64_t dim, bool keepdim = false)"] = [mx](Case& c) {
      const int64_t dim = RandomDim(c.rng, c.td.batch_dims());
      const bool keepdim = Chance(c.rng, 0.5);
      c.Arg("dim", dim);
      c.Arg("keepdim", keepdim);
      const int64_t nb = c.td.batch_dims();
      CheckPair(
          c,
          [&] {
            return mx ? c.td.max_with_indices(dim, keepdim) : c.td.min_with_indices(dim, keepdim);
          },
          [=](const NestedKey&, X x) {
            auto r =
                mx ? at::max(x, WrapDim(dim, nb), keepdim) : at::min(x, WrapDim(dim, nb), keepdim);
            return std::vector<at::Tensor>{std::get<0>(r), std::get<1>(r)};
          },
          std::nullopt);
    };
  }
  for (const char* name : {"cummax", "cummin"}) {
    const bool mx = name[4] == 'a';
    t[std::string(name) + "(int64_t dim)"] = [mx](Case& c) {
      const int64_t dim = RandomDim(c.rng, c.td.batch_dims());
      c.Arg("dim", dim);
      const int64_t nb = c.td.batch_dims();
      CheckPair(
          c, [&] { return mx ? c.td.cummax(dim) : c.td.cummin(dim); },
          [=](const NestedKey&, X x) {
            auto r = mx ? at::cummax(x, WrapDim(dim, nb)) : at::cummin(x, WrapDim(dim, nb));
            return std::vector<at::Tensor>{std::get<0>(r), std::get<1>(r)};
          },
          SameNames());
    };
  }
}

}  // namespace generative
}  // namespace td
