// Case generators of the shape-op rows of td/core/ops.def ("shape ops on the batch dims"): each
// per-leaf definition is LibTorch's op acting on the leaf's leading batch dims (dims wrapped for
// the batch rank, the feature dims appended to every shape argument), so the result's batch
// size is what the same definition gives for a leaf without feature dims.
#include <algorithm>
#include <numeric>

#include "tests/generative/generative.h"

namespace td {
namespace generative {
namespace {

using X = const at::Tensor&;
using V = std::vector<int64_t>;

V Feat(X x, int64_t nb) {
  return V(x.sizes().begin() + std::min<int64_t>(nb, x.dim()), x.sizes().end());
}
V Cat(V a, const V& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::string Str(const V& v) { return c10::str(at::IntArrayRef(v)); }

// A batch op: `def(leaf, nb)` on every leaf; batch size by the dummy leaf.
using BatchDef = std::function<at::Tensor(X, int64_t nb)>;
void Out(Case& c, const std::function<TensorDict()>& call, BatchDef def,
         std::optional<NamesRule> names) {
  const int64_t nb = c.td.batch_dims();
  Spec s;
  s.leaf = [def, nb](const NestedKey&, X x) { return def(x, nb); };
  s.batch = BatchByDummy(s.leaf);
  s.names = std::move(names);
  CheckOut(c, call, s);
}

using ListDef = std::function<std::vector<at::Tensor>(X, int64_t nb)>;
void List(Case& c, const std::function<std::vector<TensorDict>()>& call, ListDef def,
          std::optional<NamesRule> names) {
  const int64_t nb = c.td.batch_dims();
  CheckList(
      c, call, [def, nb](const NestedKey&, X x) { return def(x, nb); }, std::move(names));
}

// A shape with the batch's number of elements (one dim may be -1), or sometimes not.
V DrawShape(Case& c) {
  const V b = c.td.batch_size().vec();
  int64_t n = 1;
  for (int64_t d : b) n *= d;
  V shape;
  if (Chance(c.rng, 0.1)) {
    shape = {n + 1};
  } else if (Chance(c.rng, 0.3) || n == 0) {
    shape = b;
    std::reverse(shape.begin(), shape.end());
  } else {
    shape = {n};
    if (n % 2 == 0 && Chance(c.rng, 0.5)) shape = {2, n / 2};
    if (Chance(c.rng, 0.3)) shape.back() = -1;
  }
  c.Arg("shape", Str(shape));
  return shape;
}

// `shape` with its -1 resolved for the leaf's batch dims (the batch's number of elements).
V Concrete(const V& shape, X x, int64_t nb) {
  int64_t n = 1, known = 1, free = -1;
  for (int64_t d = 0; d < nb; ++d) n *= x.size(d);
  V out = shape;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      TORCH_CHECK_VALUE(free < 0, "only one dimension can be inferred");
      free = static_cast<int64_t>(i);
    } else {
      known *= out[i];
    }
  }
  if (free >= 0) {
    TORCH_CHECK_VALUE(known != 0 && n % known == 0, "shape ", at::IntArrayRef(shape),
                      " is invalid for a batch of ", n, " elements");
    out[static_cast<size_t>(free)] = n / known;
  }
  TORCH_CHECK_VALUE(free >= 0 || known == n, "shape ", at::IntArrayRef(shape),
                    " is invalid for a batch of ", n, " elements");
  return out;
}

// A permutation of the batch dims, sometimes negative, sometimes not a permutation.
V DrawPermutation(Case& c) {
  const int64_t nb = c.td.batch_dims();
  V p(static_cast<size_t>(nb));
  std::iota(p.begin(), p.end(), 0);
  std::shuffle(p.begin(), p.end(), c.rng);
  for (int64_t& d : p) {
    if (Chance(c.rng, 0.3)) d -= nb;
  }
  if (Chance(c.rng, 0.08)) p.push_back(0);
  c.Arg("dims", Str(p));
  return p;
}

V WrapAll(const V& dims, int64_t nb) {
  V w;
  for (int64_t d : dims) w.push_back(WrapDim(d, nb));
  return w;
}

// The batch dims, with leaf's feature dims kept in place (identity after nb).
V Identity(int64_t from, int64_t to) {
  V v;
  for (int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

// Names of a batch permuted by `perm` (already wrapped).
NamesRule PermNames(const V& perm) { return Permuted(perm); }

}  // namespace

void AddShapeRows(RowTable& t) {
  t["view(at::IntArrayRef shape)"] = [](Case& c) {
    const V shape = DrawShape(c);
    const bool same = at::IntArrayRef(shape) == c.td.batch_size();
    Out(
        c, [&] { return c.td.view(shape); },
        [shape](X x, int64_t nb) { return x.view(Cat(Concrete(shape, x, nb), Feat(x, nb))); },
        same ? SameNames() : NoNames(static_cast<int64_t>(shape.size())));
  };
  t["reshape(at::IntArrayRef shape)"] = [](Case& c) {
    const V shape = DrawShape(c);
    // The same batch size (a -1 resolved) keeps the names.
    bool same = false;
    try {
      same = at::empty(c.td.batch_size()).reshape(shape).sizes() == c.td.batch_size();
    } catch (const std::exception&) {
    }
    Out(
        c, [&] { return c.td.reshape(shape); },
        [shape](X x, int64_t nb) { return x.reshape(Cat(Concrete(shape, x, nb), Feat(x, nb))); },
        same ? SameNames() : NoNames(static_cast<int64_t>(shape.size())));
  };
  t["squeeze(std::optional<int64_t> dim = std::nullopt)"] = [](Case& c) {
    std::optional<int64_t> dim;
    if (Chance(c.rng, 0.6)) dim = RandomDim(c.rng, c.td.batch_dims());
    c.Arg("dim", dim ? std::to_string(*dim) : "nullopt");
    const V b = c.td.batch_size().vec();
    V keep;
    for (int64_t i = 0; i < static_cast<int64_t>(b.size()); ++i) {
      if (b[i] != 1 || (dim && *dim != i && *dim != i - static_cast<int64_t>(b.size())))
        keep.push_back(i);
    }
    Out(
        c, [&] { return c.td.squeeze(dim); },
        [dim](X x, int64_t nb) {
          if (dim) return x.squeeze(WrapDim(*dim, nb));
          V shape;
          for (int64_t i = 0; i < x.dim(); ++i) {
            if (i >= nb || x.size(i) != 1) shape.push_back(x.size(i));
          }
          return x.view(shape);
        },
        PermNames(keep));
  };
  t["unsqueeze(int64_t dim)"] = [](Case& c) {
    const int64_t nb = c.td.batch_dims();
    const int64_t dim = RandomDim(c.rng, nb + 1);
    c.Arg("dim", dim);
    V order;
    const int64_t w = dim < 0 ? dim + nb + 1 : dim;
    for (int64_t i = 0; i <= nb; ++i) order.push_back(i < w ? i : i == w ? -1 : i - 1);
    Out(
        c, [&] { return c.td.unsqueeze(dim); },
        [dim](X x, int64_t nb) { return x.unsqueeze(WrapDim(dim, nb + 1)); }, PermNames(order));
  };
  t["permute(at::IntArrayRef dims)"] = [](Case& c) {
    const V p = DrawPermutation(c);
    std::optional<NamesRule> names;
    try {
      names = PermNames(WrapAll(p, c.td.batch_dims()));
    } catch (const std::exception&) {
    }
    Out(
        c, [&] { return c.td.permute(p); },
        [p](X x, int64_t nb) {
          V w = WrapAll(p, nb);
          TORCH_CHECK_VALUE(static_cast<int64_t>(w.size()) == nb, "not a permutation");
          return x.permute(Cat(w, Identity(nb, x.dim())));
        },
        names);
  };
  // transpose / swapaxes / swapdims.
  for (const char* name :
       {"transpose(int64_t dim0, int64_t dim1)", "swapaxes(int64_t axis0, int64_t axis1)",
        "swapdims(int64_t dim0, int64_t dim1)"}) {
    const int kind = name[1] == 'r' ? 0 : name[4] == 'a' ? 1 : 2;
    t[name] = [kind](Case& c) {
      const int64_t nb = c.td.batch_dims();
      const int64_t a = RandomDim(c.rng, nb), b = RandomDim(c.rng, nb);
      c.Arg("dim0", a);
      c.Arg("dim1", b);
      std::optional<NamesRule> names;
      try {
        V perm = Identity(0, nb);
        std::swap(perm[WrapDim(a, nb)], perm[WrapDim(b, nb)]);
        names = PermNames(perm);
      } catch (const std::exception&) {
      }
      Out(
          c,
          [&] {
            return kind == 0   ? c.td.transpose(a, b)
                   : kind == 1 ? c.td.swapaxes(a, b)
                               : c.td.swapdims(a, b);
          },
          [a, b](X x, int64_t nb) { return x.transpose(WrapDim(a, nb), WrapDim(b, nb)); }, names);
    };
  }
  t["expand(at::IntArrayRef shape)"] = [](Case& c) {
    V shape = c.td.batch_size().vec();
    for (int64_t& d : shape) {
      if (d == 1 && Chance(c.rng, 0.5))
        d = 3;
      else if (Chance(c.rng, 0.3))
        d = -1;
      else if (Chance(c.rng, 0.05))
        d += 1;  // cannot expand
    }
    if (Chance(c.rng, 0.4)) shape.insert(shape.begin(), 2);
    c.Arg("shape", Str(shape));
    const int64_t extra = static_cast<int64_t>(shape.size()) - c.td.batch_dims();
    V order;
    for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
      order.push_back(i < extra ? -1 : i - extra);
    Out(
        c, [&] { return c.td.expand(shape); },
        [shape](X x, int64_t nb) {
          TORCH_CHECK_VALUE(static_cast<int64_t>(shape.size()) >= nb, "too few dims");
          return x.expand(Cat(shape, Feat(x, nb)));
        },
        PermNames(order));
  };
  t["flatten(int64_t start_dim = 0, int64_t end_dim = -1)"] = [](Case& c) {
    const int64_t nb = c.td.batch_dims();
    const int64_t s = Chance(c.rng, 0.3) ? 0 : RandomDim(c.rng, nb);
    const int64_t e = Chance(c.rng, 0.3) ? -1 : RandomDim(c.rng, nb);
    c.Arg("start_dim", s);
    c.Arg("end_dim", e);
    Out(
        c, [&] { return c.td.flatten(s, e); },
        [s, e](X x, int64_t nb) {
          if (nb == 0) {  // torch.flatten of a 0-dim tensor is 1-dim
            TORCH_CHECK_INDEX((s == 0 || s == -1) && (e == 0 || e == -1), "dim out of range");
            return x.unsqueeze(0);
          }
          const int64_t ws = WrapDim(s, nb), we = WrapDim(e, nb);
          TORCH_CHECK_VALUE(ws <= we, "start_dim cannot come after end_dim");
          return x.flatten(ws, we);
        },
        std::nullopt);
  };
  t["unflatten(int64_t dim, at::IntArrayRef sizes)"] = [](Case& c) {
    const int64_t nb = c.td.batch_dims();
    const int64_t dim = RandomDim(c.rng, nb);
    V sizes{-1};
    if (nb > 0) {
      const int64_t n = c.td.batch_size()[WrapDim(dim < -nb || dim >= nb ? 0 : dim, nb)];
      sizes = Chance(c.rng, 0.5) ? V{1, n} : (n % 2 == 0 ? V{2, -1} : V{n + 1, 1});
    }
    c.Arg("dim", dim);
    c.Arg("sizes", Str(sizes));
    Out(
        c, [&] { return c.td.unflatten(dim, sizes); },
        [dim, sizes](X x, int64_t nb) { return x.unflatten(WrapDim(dim, nb), sizes); },
        std::nullopt);
  };
  t["split(int64_t split_size, int64_t dim = 0)"] = [](Case& c) {
    const int64_t size = Uniform(c.rng, 0, 3), dim = RandomDim(c.rng, c.td.batch_dims());
    c.Arg("split_size", size);
    c.Arg("dim", dim);
    List(
        c, [&] { return c.td.split(size, dim); },
        [size, dim](X x, int64_t nb) { return x.split(size, WrapDim(dim, nb)); }, SameNames());
  };
  t["split(at::IntArrayRef split_sizes, int64_t dim = 0)"] = [](Case& c) {
    const int64_t nb = c.td.batch_dims();
    const int64_t dim = RandomDim(c.rng, nb);
    V sizes;
    int64_t left = (dim >= -nb && dim < nb) ? c.td.batch_size()[WrapDim(dim, nb)] : 2;
    while (left > 0) {
      sizes.push_back(Uniform(c.rng, 1, left));
      left -= sizes.back();
    }
    if (Chance(c.rng, 0.1)) sizes.push_back(1);  // sums to more
    c.Arg("split_sizes", Str(sizes));
    c.Arg("dim", dim);
    List(
        c, [&] { return c.td.split(sizes, dim); },
        [sizes, dim](X x, int64_t nb) { return x.split_with_sizes(sizes, WrapDim(dim, nb)); },
        SameNames());
  };
  t["chunk(int64_t chunks, int64_t dim = 0)"] = [](Case& c) {
    const int64_t n = Uniform(c.rng, 0, 4), dim = RandomDim(c.rng, c.td.batch_dims());
    c.Arg("chunks", n);
    c.Arg("dim", dim);
    List(
        c, [&] { return c.td.chunk(n, dim); },
        [n, dim](X x, int64_t nb) { return x.chunk(n, WrapDim(dim, nb)); }, SameNames());
  };
  t["unbind(int64_t dim = 0)"] = [](Case& c) {
    const int64_t nb = c.td.batch_dims();
    const int64_t dim = RandomDim(c.rng, nb);
    c.Arg("dim", dim);
    std::optional<NamesRule> names;
    if (dim >= -nb && dim < nb) names = DropDims({WrapDim(dim, nb)}, false);
    List(
        c, [&] { return c.td.unbind(dim); },
        [dim](X x, int64_t nb) { return x.unbind(WrapDim(dim, nb)); }, names);
  };
  t["tensor_split(int64_t sections, int64_t dim = 0)"] = [](Case& c) {
    const int64_t n = Uniform(c.rng, 0, 4), dim = RandomDim(c.rng, c.td.batch_dims());
    c.Arg("sections", n);
    c.Arg("dim", dim);
    List(
        c, [&] { return c.td.tensor_split(n, dim); },
        [n, dim](X x, int64_t nb) { return at::tensor_split(x, n, WrapDim(dim, nb)); },
        SameNames());
  };
  t["tensor_split(at::IntArrayRef indices, int64_t dim = 0)"] = [](Case& c) {
    const V idx = Chance(c.rng, 0.5) ? V{1} : V{0, 2};
    const int64_t dim = RandomDim(c.rng, c.td.batch_dims());
    c.Arg("indices", Str(idx));
    c.Arg("dim", dim);
    List(
        c, [&] { return c.td.tensor_split(at::IntArrayRef(idx), dim); },
        [idx, dim](X x, int64_t nb) { return at::tensor_split(x, idx, WrapDim(dim, nb)); },
        SameNames());
  };
  t["flip(at::IntArrayRef dims)"] = [](Case& c) {
    V dims;
    for (int64_t n = Uniform(c.rng, 1, 2); n > 0; --n)
      dims.push_back(RandomDim(c.rng, c.td.batch_dims()));
    c.Arg("dims", Str(dims));
    Out(
        c, [&] { return c.td.flip(dims); },
        [dims](X x, int64_t nb) { return x.flip(WrapAll(dims, nb)); }, SameNames());
  };
  t["roll(at::IntArrayRef shifts, at::IntArrayRef dims)"] = [](Case& c) {
    V dims, shifts;
    for (int64_t n = Uniform(c.rng, 1, 2); n > 0; --n) {
      dims.push_back(RandomDim(c.rng, c.td.batch_dims()));
      shifts.push_back(Uniform(c.rng, -3, 3));
    }
    if (Chance(c.rng, 0.05)) shifts.push_back(1);  // lengths differ
    c.Arg("shifts", Str(shifts));
    c.Arg("dims", Str(dims));
    Out(
        c, [&] { return c.td.roll(shifts, dims); },
        [shifts, dims](X x, int64_t nb) { return x.roll(shifts, WrapAll(dims, nb)); }, SameNames());
  };
  t["narrow(int64_t dim, int64_t start, int64_t length)"] = [](Case& c) {
    const int64_t dim = RandomDim(c.rng, c.td.batch_dims());
    const int64_t start = Uniform(c.rng, -1, 2), length = Uniform(c.rng, 0, 2);
    c.Arg("dim", dim);
    c.Arg("start", start);
    c.Arg("length", length);
    Out(
        c, [&] { return c.td.narrow(dim, start, length); },
        [=](X x, int64_t nb) { return x.narrow(WrapDim(dim, nb), start, length); }, SameNames());
  };
  t["repeat(at::IntArrayRef repeats)"] = [](Case& c) {
    V r;
    const int64_t nb = c.td.batch_dims();
    for (int64_t n = std::max<int64_t>(0, nb + Uniform(c.rng, -1, 1)); n > 0; --n)
      r.push_back(Uniform(c.rng, 0, 2));
    c.Arg("repeats", Str(r));
    Out(
        c, [&] { return c.td.repeat(r); },
        [r](X x, int64_t nb) {
          TORCH_CHECK_VALUE(static_cast<int64_t>(r.size()) >= nb, "too few repeats");
          return x.repeat(Cat(r, V(static_cast<size_t>(x.dim() - nb), 1)));
        },
        std::nullopt);
  };
  t["tile(at::IntArrayRef dims)"] = [](Case& c) {
    V r;
    for (int64_t n = Uniform(c.rng, 0, c.td.batch_dims() + 1); n > 0; --n)
      r.push_back(Uniform(c.rng, 1, 2));
    c.Arg("dims", Str(r));
    Out(
        c, [&] { return c.td.tile(r); },
        [r](X x, int64_t nb) {
          V full = r;
          while (static_cast<int64_t>(full.size()) < nb) full.insert(full.begin(), 1);
          return x.repeat(Cat(full, V(static_cast<size_t>(x.dim() - nb), 1)));
        },
        std::nullopt);
  };
  t["repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt)"] = [](Case& c) {
    const int64_t r = Uniform(c.rng, 0, 2);
    std::optional<int64_t> dim;
    if (Chance(c.rng, 0.7)) dim = RandomDim(c.rng, c.td.batch_dims());
    c.Arg("repeats", r);
    c.Arg("dim", dim ? std::to_string(*dim) : "nullopt");
    Out(
        c, [&] { return c.td.repeat_interleave(r, dim); },
        [r, dim](X x, int64_t nb) {
          if (dim) return x.repeat_interleave(r, WrapDim(*dim, nb));
          return (nb == 0 ? x.unsqueeze(0) : x.flatten(0, nb - 1)).repeat_interleave(r, 0);
        },
        std::nullopt);
  };
  t["repeat_interleave(const at::Tensor& repeats, std::optional<int64_t> dim = std::nullopt)"] =
      [](Case& c) {
        const int64_t nb = c.td.batch_dims();
        const int64_t dim = RandomDim(c.rng, nb);
        const int64_t n = dim >= -nb && dim < nb ? c.td.batch_size()[WrapDim(dim, nb)] : 1;
        at::Tensor r = at::randint(0, 3, {Chance(c.rng, 0.1) ? n + 1 : n}, at::kLong);
        c.Arg("repeats", r);
        c.Arg("dim", dim);
        Out(
            c, [&] { return c.td.repeat_interleave(r, dim); },
            [r, dim](X x, int64_t nb) { return x.repeat_interleave(r, WrapDim(dim, nb)); },
            SameNames());
      };
  t["pad(at::IntArrayRef pad, const at::Scalar& value = 0)"] = [](Case& c) {
    V pad;
    for (int64_t n = 2 * Uniform(c.rng, 0, c.td.batch_dims()); n > 0; --n)
      pad.push_back(Uniform(c.rng, -1, 2));
    const at::Scalar v = Uniform(c.rng, -2, 2);
    c.Arg("pad", Str(pad));
    c.Arg("value", v);
    Out(
        c, [&] { return c.td.pad(pad, v); },
        [pad, v](X x, int64_t nb) {
          TORCH_CHECK_VALUE(static_cast<int64_t>(pad.size()) <= 2 * nb, "pad too long");
          V torch_pad;  // from the last dim of the leaf
          for (int64_t d = x.dim() - 1; d >= 0; --d) {
            const bool has = 2 * d + 1 < static_cast<int64_t>(pad.size()) && d < nb;
            torch_pad.push_back(has ? pad[2 * d] : 0);
            torch_pad.push_back(has ? pad[2 * d + 1] : 0);
          }
          return at::constant_pad_nd(x, torch_pad, v);
        },
        SameNames());
  };
  t["broadcast_to(at::IntArrayRef shape)"] = [](Case& c) {
    V shape = c.td.batch_size().vec();
    if (Chance(c.rng, 0.5)) shape.insert(shape.begin(), 2);
    c.Arg("shape", Str(shape));
    Out(
        c, [&] { return c.td.broadcast_to(shape); },
        [shape](X x, int64_t nb) { return x.expand(Cat(shape, Feat(x, nb))); }, std::nullopt);
  };
  t["expand_as(const at::Tensor& other)"] = [](Case& c) {
    V shape = c.td.batch_size().vec();
    if (Chance(c.rng, 0.5)) shape.insert(shape.begin(), 3);
    const at::Tensor o = at::zeros(shape);
    c.Arg("other", DescribeTensor(o));
    Out(
        c, [&] { return c.td.expand_as(o); },
        [shape](X x, int64_t nb) { return x.expand(Cat(shape, Feat(x, nb))); }, std::nullopt);
  };
  t["expand_as(const TensorDict& other)"] = [](Case& c) {
    V shape = c.td.batch_size().vec();
    if (Chance(c.rng, 0.5)) shape.insert(shape.begin(), 3);
    const TensorDict o({}, shape);
    c.Arg("other", Str(shape));
    Out(
        c, [&] { return c.td.expand_as(o); },
        [shape](X x, int64_t nb) { return x.expand(Cat(shape, Feat(x, nb))); }, std::nullopt);
  };
  for (const char* name : {"movedim(at::IntArrayRef source, at::IntArrayRef destination)",
                           "moveaxis(at::IntArrayRef source, at::IntArrayRef destination)"}) {
    const bool axis = name[4] == 'a';
    t[name] = [axis](Case& c) {
      const int64_t nb = c.td.batch_dims();
      V src{RandomDim(c.rng, nb)}, dst{RandomDim(c.rng, nb)};
      c.Arg("source", Str(src));
      c.Arg("destination", Str(dst));
      Out(
          c, [&] { return axis ? c.td.moveaxis(src, dst) : c.td.movedim(src, dst); },
          [src, dst](X x, int64_t nb) { return x.movedim(WrapAll(src, nb), WrapAll(dst, nb)); },
          std::nullopt);
    };
  }
  t["fliplr()"] = [](Case& c) {
    Out(
        c, [&] { return c.td.fliplr(); },
        [](X x, int64_t nb) {
          TORCH_CHECK_VALUE(nb >= 2, "fliplr needs 2 batch dims");
          return x.flip({1});
        },
        SameNames());
  };
  t["flipud()"] = [](Case& c) {
    Out(
        c, [&] { return c.td.flipud(); },
        [](X x, int64_t nb) {
          TORCH_CHECK_VALUE(nb >= 1, "flipud needs a batch dim");
          return x.flip({0});
        },
        SameNames());
  };
  t["rot90(int64_t k = 1, at::IntArrayRef dims = {0, 1})"] = [](Case& c) {
    const int64_t k = Uniform(c.rng, -1, 3);
    const int64_t nb = c.td.batch_dims();
    V dims{RandomDim(c.rng, nb), RandomDim(c.rng, nb)};
    if (Chance(c.rng, 0.3)) dims = {0, 1};
    c.Arg("k", k);
    c.Arg("dims", Str(dims));
    Out(
        c, [&] { return c.td.rot90(k, dims); },
        [k, dims](X x, int64_t nb) { return at::rot90(x, k, WrapAll(dims, nb)); }, std::nullopt);
  };
  for (int n : {1, 2, 3}) {
    t["atleast_" + std::to_string(n) + "d()"] = [n](Case& c) {
      Out(
          c,
          [&] {
            return n == 1 ? c.td.atleast_1d() : n == 2 ? c.td.atleast_2d() : c.td.atleast_3d();
          },
          [n](X x, int64_t nb) {
            return nb >= n ? x : x.view(Cat(V(static_cast<size_t>(n - nb), 1), x.sizes().vec()));
          },
          std::nullopt);
    };
  }
}

}  // namespace generative
}  // namespace td
