// Case generators of the other leaf-wise rows of td/core/ops.def: dtype and device casts,
// copies, apply with a random leaf function, new_* tensors, batch indexing and index_put_,
// masks, where and gather. Indices address the batch dims only: each per-leaf definition spells
// the Ellipsis out as slices of the batch dims, so LibTorch's indexing of the leaf acts on them.
#include <algorithm>

#include "td/compat/torch.h"
#include "tests/generative/generative.h"

namespace td {
namespace generative {
namespace {

using X = const at::Tensor&;
using V = std::vector<int64_t>;
using at::indexing::TensorIndex;

Spec SameSpec(LeafDef def) {
  Spec s;
  s.leaf = std::move(def);
  s.names = SameNames();
  return s;
}

void Cast(RowTable& t, const std::string& id, std::function<TensorDict(const TensorDict&)> op,
          std::optional<at::ScalarType> dtype) {
  t[id] = [op, dtype](Case& c) {
    Spec s = SameSpec([dtype](const NestedKey&, X x) {
      TORCH_CHECK_TYPE(dtype.has_value(), "this LibTorch has no such dtype");
      if (isQIntType(*dtype)) {
        TORCH_CHECK_TYPE(x.scalar_type() == *dtype, "cannot cast to a quantized dtype");
        return x;
      }
      return x.to(*dtype);
    });
    // A dtype this LibTorch lacks is an error even without leaves.
    s.batch = [dtype](at::IntArrayRef b) {
      TORCH_CHECK_TYPE(dtype.has_value(), "this LibTorch has no such dtype");
      return b.vec();
    };
    CheckOut(
        c, [&] { return op(c.td); }, s);
  };
}

// A random index over the batch dims: ints, slices, None, one Ellipsis, long tensors, bool masks
// (sometimes out of range, too many, or two Ellipsis).
std::vector<TensorIndex> DrawIndex(Case& c, int64_t max_items = 3) {
  using namespace at::indexing;  // NOLINT
  const at::IntArrayRef b = c.td.batch_size();
  const int64_t nb = c.td.batch_dims();
  std::vector<TensorIndex> idx;
  int64_t dim = 0;
  const int64_t n = Uniform(c.rng, 1, max_items);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t size = dim < nb ? b[dim] : 1;
    switch (Uniform(c.rng, 0, 6)) {
      case 0:
        // In range 90% of the time; on a dim of size 0 every integer is out of range.
        idx.emplace_back(
            Uniform(c.rng, -size, std::max(-size, size - (Chance(c.rng, 0.9) ? 1 : 0))));
        ++dim;
        break;
      case 1: {
        compat::Optional<int64_t> stop;
        if (Chance(c.rng, 0.5)) stop = Uniform(c.rng, 0, 3);
        idx.emplace_back(Slice(Uniform(c.rng, -1, 1), stop, Uniform(c.rng, 1, 2)));
      }
        ++dim;
        break;
      case 2:
        idx.emplace_back(None);
        break;
      case 3:
        idx.emplace_back(Ellipsis);
        dim = std::max(dim, nb - (n - i - 1));
        break;
      case 4: {
        const int64_t len = Uniform(c.rng, 0, 3);
        at::Tensor t = at::randint(0, std::max<int64_t>(size, 1), {len}, at::kLong);
        if (size == 0 && len > 0) t.fill_(0);  // out of range: must raise
        idx.emplace_back(t);
        ++dim;
        break;
      }
      default: {
        V shape;
        for (int64_t d = dim; d < std::min(nb, dim + Uniform(c.rng, 1, 2)); ++d)
          shape.push_back(b[d]);
        if (shape.empty() || Chance(c.rng, 0.05)) shape.push_back(2);  // a wrong shape
        idx.emplace_back(at::rand(shape) > 0.5);
        dim += static_cast<int64_t>(shape.size());
      }
    }
  }
  std::ostringstream os;
  for (const TensorIndex& i : idx) os << (os.tellp() > 0 ? ", " : "") << i;
  c.Arg("index", "{" + os.str() + "}");
  return idx;
}

// The index for a leaf: the Ellipsis replaced by slices of the remaining batch dims (Python
// tensordict's rule: indices address the batch dims only).
std::vector<TensorIndex> Explicit(const std::vector<TensorIndex>& idx, int64_t nb) {
  int64_t used = 0, ellipses = 0;
  for (const TensorIndex& i : idx) {
    if (i.is_integer() || i.is_slice()) ++used;
    if (i.is_tensor()) used += i.tensor().scalar_type() == at::kBool ? i.tensor().dim() : 1;
    if (i.is_ellipsis()) ++ellipses;
  }
  TORCH_CHECK_INDEX(ellipses <= 1, "an index can only have a single ellipsis");
  TORCH_CHECK_INDEX(used <= nb, "too many indices for batch of ", nb, " dims");
  std::vector<TensorIndex> out;
  for (const TensorIndex& i : idx) {
    if (!i.is_ellipsis()) {
      out.push_back(i);
      continue;
    }
    for (int64_t k = used; k < nb; ++k) out.emplace_back(at::indexing::Slice());
  }
  // Python's x[...]: LibTorch's C++ API refuses an empty index list.
  if (out.empty()) out.emplace_back(at::indexing::Ellipsis);
  return out;
}

// A bool mask over the leading `m` batch dims (sometimes of a wrong shape).
at::Tensor DrawMask(Case& c) {
  V shape;
  const int64_t nb = c.td.batch_dims();
  for (int64_t d = 0, m = nb == 0 ? 0 : Uniform(c.rng, 1, nb); d < m; ++d) {
    shape.push_back(c.td.batch_size()[d]);
  }
  if (shape.empty() || Chance(c.rng, 0.05)) shape.push_back(shape.empty() ? 1 : 2);
  at::Tensor m = at::rand(shape) > 0.5;
  c.Arg("mask", DescribeTensor(m));
  return m;
}

// The mask broadcast over a leaf's remaining dims; it must cover leading batch dims (exactly,
// or with dims of size 1 when `broadcast`, as where() and masked_fill() take it).
void CheckMask(X m, at::IntArrayRef batch, bool broadcast) {
  bool ok = m.dim() <= static_cast<int64_t>(batch.size());
  for (int64_t d = 0; ok && d < m.dim(); ++d) {
    ok = m.size(d) == batch[d] || (broadcast && m.size(d) == 1);
  }
  TORCH_CHECK_INDEX(ok, "mask of shape ", m.sizes(), " does not cover batch dims of ", batch);
}
at::Tensor MaskFor(X m, X x, at::IntArrayRef batch, bool broadcast = true) {
  CheckMask(m, batch, broadcast);
  V shape = m.sizes().vec();
  shape.resize(static_cast<size_t>(x.dim()), 1);
  return m.view(shape);
}
// The spec of a masked row: the mask is checked even without leaves.
Spec Masked(LeafDef def, const at::Tensor& m) {
  Spec s = SameSpec(std::move(def));
  s.batch = [m](at::IntArrayRef b) {
    CheckMask(m, b, true);
    return b.vec();
  };
  return s;
}

// The spec of an index_put_ row: the index is checked on the batch even without leaves.
Spec Indexed(const std::vector<TensorIndex>& idx, int64_t nb, LeafDef def) {
  Spec s = SameSpec(std::move(def));
  s.batch = [idx, nb](at::IntArrayRef b) {
    at::zeros(b).index(Explicit(idx, nb));
    return b.vec();
  };
  return s;
}

at::Tensor WriteInto(at::Tensor x, const at::Tensor& r) {
  TORCH_CHECK_VALUE(r.sizes() == x.sizes(), "shape ", r.sizes(), " is not the leaf's ", x.sizes());
  return x.copy_(r);
}

}  // namespace

void AddMiscRows(RowTable& t) {
  using C = const TensorDict&;
  // ---- dtype and device casts
  const std::pair<const char*, at::ScalarType> verbs[] = {{"half", at::kHalf},
                                                          {"bfloat16", at::kBFloat16},
                                                          {"float16", at::kHalf},
                                                          {"float32", at::kFloat},
                                                          {"float64", at::kDouble},
                                                          {"int8", at::kChar},
                                                          {"int16", at::kShort},
                                                          {"int32", at::kInt},
                                                          {"int64", at::kLong},
                                                          {"uint8", at::kByte},
                                                          {"complex32", at::kComplexHalf},
                                                          {"complex64", at::kComplexFloat},
                                                          {"complex128", at::kComplexDouble},
                                                          {"qint8", at::kQInt8},
                                                          {"qint32", at::kQInt32},
                                                          {"quint8", at::kQUInt8},
                                                          {"quint4x2", at::kQUInt4x2}};
  for (const auto& [name, dtype] : verbs) {
    const std::string n = name;
    Cast(
        t, n + "()",
        [n](C a) {
          if (n == "half") return a.half();
          if (n == "bfloat16") return a.bfloat16();
          if (n == "float16") return a.float16();
          if (n == "float32") return a.float32();
          if (n == "float64") return a.float64();
          if (n == "int8") return a.int8();
          if (n == "int16") return a.int16();
          if (n == "int32") return a.int32();
          if (n == "int64") return a.int64();
          if (n == "uint8") return a.uint8();
          if (n == "complex32") return a.complex32();
          if (n == "complex64") return a.complex64();
          if (n == "complex128") return a.complex128();
          if (n == "qint8") return a.qint8();
          if (n == "qint32") return a.qint32();
          if (n == "quint8") return a.quint8();
          return a.quint4x2();
        },
        dtype);
  }
  Cast(
      t, "uint16()", [](C a) { return a.uint16(); }, compat::UnsignedDtype(16));
  Cast(
      t, "uint32()", [](C a) { return a.uint32(); }, compat::UnsignedDtype(32));
  Cast(
      t, "uint64()", [](C a) { return a.uint64(); }, compat::UnsignedDtype(64));
  const at::ScalarType targets[] = {at::kFloat, at::kDouble, at::kLong,
                                    at::kInt,   at::kBool,   at::kHalf};
  t["to(at::ScalarType dtype)"] = [targets](Case& c) {
    const at::ScalarType d = targets[Uniform(c.rng, 0, 5)];
    c.Arg("dtype", c10::toString(d));
    CheckOut(
        c, [&] { return c.td.to(d); }, SameSpec([d](const NestedKey&, X x) { return x.to(d); }));
  };
  t["type(at::ScalarType dtype)"] = [targets](Case& c) {
    const at::ScalarType d = targets[Uniform(c.rng, 0, 5)];
    c.Arg("dtype", c10::toString(d));
    CheckOut(
        c, [&] { return c.td.type(d); }, SameSpec([d](const NestedKey&, X x) { return x.to(d); }));
  };
  t["to(at::Device device, at::ScalarType dtype, bool non_blocking = false)"] = [targets](Case& c) {
    const at::ScalarType d = targets[Uniform(c.rng, 0, 5)];
    c.Arg("dtype", c10::toString(d));
    CheckOut(
        c, [&] { return c.td.to(at::Device("cpu"), d); },
        SameSpec([d](const NestedKey&, X x) { return x.to(at::kCPU, d); }));
  };
  const LeafDef to_cpu = [](const NestedKey&, X x) { return x.to(at::kCPU); };
  t["to(at::Device device, bool non_blocking = false)"] = [to_cpu](Case& c) {
    CheckOut(
        c, [&] { return c.td.to(at::Device("cpu")); }, SameSpec(to_cpu));
  };
  t["to(const std::string& device, bool non_blocking = false)"] = [to_cpu](Case& c) {
    CheckOut(
        c, [&] { return c.td.to(std::string("cpu")); }, SameSpec(to_cpu));
  };
  t["to(const char* device, bool non_blocking = false)"] = [to_cpu](Case& c) {
    CheckOut(
        c, [&] { return c.td.to("cpu"); }, SameSpec(to_cpu));
  };
  t["cpu()"] = [to_cpu](Case& c) {
    CheckOut(
        c, [&] { return c.td.cpu(); }, SameSpec(to_cpu));
  };

  // ---- copies
  auto copy_row = [&](const std::string& id, std::function<TensorDict(C)> op,
                      std::function<at::Tensor(X)> fn) {
    t[id] = [op, fn](Case& c) {
      CheckOut(
          c, [&] { return op(c.td); }, SameSpec([fn](const NestedKey&, X x) { return fn(x); }));
    };
  };
  copy_row(
      "clone()", [](C a) { return a.clone(); }, [](X x) { return x.clone(); });
  copy_row(
      "copy()", [](C a) { return a.copy(); }, [](X x) { return x; });
  copy_row(
      "contiguous()", [](C a) { return a.contiguous(); }, [](X x) { return x.contiguous(); });
  copy_row(
      "detach()", [](C a) { return a.detach(); }, [](X x) { return x.detach(); });
  copy_row(
      "data()", [](C a) { return a.data(); }, [](X x) { return x.variable_data(); });
  copy_row(
      "as_tensor()", [](C a) { return a.as_tensor(); }, [](X x) { return x; });
  copy_row(
      "to_dense()", [](C a) { return a.to_dense(); }, [](X x) { return x; });

  copy_row(
      "to_padded_tensor(double padding = 0.0)", [](C a) { return a.to_padded_tensor(-1); },
      [](X x) { return x; });
  // detach_ refuses a lazy backend (documented: its tensors are computed on every read).
  t["detach_()"] = [](Case& c) {
    Spec s = SameSpec([](const NestedKey&, X x) { return x; });
    const bool lazy = !StoresTensors(c.backend);
    bool view = false;  // LibTorch cannot detach a view in place
    for (const Value& v : c.td.values(KeysOptions().include_nested(true).leaves_only(true))) {
      view = view || (v.is_tensor() && v.tensor().is_view());
    }
    s.batch = [lazy, view](at::IntArrayRef b) {
      TORCH_CHECK_VALUE(!lazy, "detach_ of a lazy backend");
      TORCH_CHECK_VALUE(!view, "can't detach views in-place");
      return b.vec();
    };
    CheckIn(
        c, [&] { c.td.detach_(); }, s);
  };
  // copy_ / update_: every leaf of `other` copied into the leaf under its key (exact shapes).
  for (bool update : {false, true}) {
    t[update ? "update_(const TensorDict& other)" : "copy_(const TensorDict& other)"] =
        [update](Case& c) {
          const TensorDict o = RandomLike(c.rng, c.td, 0.6, Chance(c.rng, 0.3));
          c.Arg("other", Describe(o));
          CheckIn(
              c, [&] { update ? c.td.update_(o) : c.td.copy_(o); },
              SameSpec([o](const NestedKey& k, X x) {
                return o.contains(k) ? WriteInto(x, o.get(k)) : x;
              }));
        };
  }

  // ---- new_* tensors: batch size `size`, each leaf's feature dims after it
  for (int kind = 0; kind < 4; ++kind) {
    const char* ids[] = {"new_zeros(at::IntArrayRef size, const NewOptions& options = {})",
                         "new_ones(at::IntArrayRef size, const NewOptions& options = {})",
                         "new_empty(at::IntArrayRef size, const NewOptions& options = {})",
                         "new_full(at::IntArrayRef size, const at::Scalar& fill_value, const "
                         "NewOptions& options = {})"};
    t[ids[kind]] = [kind](Case& c) {
      V size;
      for (int64_t n = Uniform(c.rng, 0, 2); n > 0; --n) size.push_back(Uniform(c.rng, 0, 3));
      const at::Scalar fill = RandomScalar(c.rng);
      c.Arg("size", c10::str(at::IntArrayRef(size)));
      if (kind == 3) c.Arg("fill_value", fill);
      const int64_t nb = c.td.batch_dims();
      Spec s;
      s.leaf = [=](const NestedKey&, X x) {
        V shape = size;
        shape.insert(shape.end(), x.sizes().begin() + nb, x.sizes().end());
        if (kind == 0) return x.new_zeros(shape);
        if (kind == 1) return x.new_ones(shape);
        if (kind == 2) return x.new_empty(shape);
        return x.new_full(shape, fill);
      };
      s.batch = [size](at::IntArrayRef) { return size; };
      s.values = kind != 2;
      CheckOut(
          c,
          [&] {
            if (kind == 0) return c.td.new_zeros(size);
            if (kind == 1) return c.td.new_ones(size);
            if (kind == 2) return c.td.new_empty(size);
            return c.td.new_full(size, fill);
          },
          s);
    };
  }

  // ---- apply with a random leaf function (one that keeps shapes, casts, or drops bool leaves)
  const std::function<at::Tensor(X)> fns[] = {
      [](X x) { return x * 2; }, [](X x) { return x.to(at::kDouble); },
      [](X x) { return x.scalar_type() == at::kBool ? at::Tensor() : x + 1; }};
  auto draw_fn = [fns](Case& c) {
    const int64_t k = Uniform(c.rng, 0, 2);
    c.Arg("fn", k == 0 ? "x * 2" : k == 1 ? "x.double()" : "drop bool, else x + 1");
    return fns[k];
  };
  t["apply(const LeafFn& fn, std::optional<std::vector<int64_t>> batch_size = std::nullopt)"] =
      [draw_fn](Case& c) {
        const auto fn = draw_fn(c);
        CheckOut(
            c, [&] { return c.td.apply(fn); },
            SameSpec([fn](const NestedKey&, X x) { return fn(x); }));
      };
  t["apply(const LeafFn& fn, const ApplyOptions& options)"] = [draw_fn](Case& c) {
    const auto fn = draw_fn(c);
    const bool par = Chance(c.rng, 0.5);
    c.Arg("parallel", par);
    CheckOut(
        c, [&] { return c.td.apply(fn, ApplyOptions().parallel(par)); },
        SameSpec([fn](const NestedKey&, X x) { return fn(x); }));
  };
  t["named_apply(const NamedLeafFn& fn, const ApplyOptions& options = {})"] = [](Case& c) {
    const auto fn = [](const NestedKey& k, X x) { return k.size() > 1 ? x * 3 : x - 1; };
    CheckOut(
        c, [&] { return c.td.named_apply(fn); }, SameSpec(fn));
  };
  const auto binary = [](X x, X y) { return x * 2 + y; };
  t["apply(const BinaryLeafFn& fn, const TensorDict& other, const ApplyOptions& options = {})"] =
      [binary](Case& c) {
        const TensorDict o = RandomLike(c.rng, c.td, 0.7, Chance(c.rng, 0.3));
        c.Arg("other", Describe(o));
        CheckOut(
            c, [&] { return c.td.apply(binary, o); },
            SameSpec([o, binary](const NestedKey& k, X x) { return binary(x, o.get(k)); }));
      };
  t["apply(const NaryLeafFn& fn, const std::vector<TensorDict>& others, const ApplyOptions& "
    "options = {})"] = [binary](Case& c) {
    const TensorDict o = RandomLike(c.rng, c.td, 0.7, Chance(c.rng, 0.3));
    c.Arg("others", "{" + Describe(o) + "}");
    const auto nary = [binary](const std::vector<at::Tensor>& v) { return binary(v[0], v[1]); };
    CheckOut(
        c, [&] { return c.td.apply(nary, std::vector<TensorDict>{o}); },
        SameSpec([o, binary](const NestedKey& k, X x) { return binary(x, o.get(k)); }));
  };
  t["named_apply(const NamedNaryLeafFn& fn, const std::vector<TensorDict>& others, const "
    "ApplyOptions& options = {})"] = [binary](Case& c) {
    const TensorDict o = RandomLike(c.rng, c.td, 0.7, Chance(c.rng, 0.3));
    c.Arg("others", "{" + Describe(o) + "}");
    const auto fn = [binary](const NestedKey&, const std::vector<at::Tensor>& v) {
      return binary(v[0], v[1]);
    };
    CheckOut(
        c, [&] { return c.td.named_apply(fn, std::vector<TensorDict>{o}); },
        SameSpec([o, binary](const NestedKey& k, X x) { return binary(x, o.get(k)); }));
  };
  const auto in_fn = [](X x) { return x.scalar_type() == at::kBool ? x : x * 2; };
  t["apply_(const LeafFn& fn)"] = [in_fn](Case& c) {
    CheckIn(
        c, [&] { c.td.apply_(in_fn); },
        SameSpec([in_fn](const NestedKey&, X x) { return WriteInto(x, in_fn(x)); }));
  };
  t["apply_(const LeafFn& fn, const ApplyOptions& options)"] = [](Case& c) {
    const auto fn = [](X x) { return x.scalar_type() == at::kBool ? x.logical_not() : x - 1; };
    CheckIn(
        c, [&] { c.td.apply_(fn, ApplyOptions().parallel(false)); },
        SameSpec([fn](const NestedKey&, X x) { return WriteInto(x, fn(x)); }));
  };
  t["apply_(const BinaryLeafFn& fn, const TensorDict& other, const ApplyOptions& options = {})"] =
      [](Case& c) {
        const TensorDict o = RandomLike(c.rng, c.td, 1.0, Chance(c.rng, 0.3));
        c.Arg("other", Describe(o));
        const auto fn = [](X x, X y) { return y; };
        CheckIn(
            c, [&] { c.td.apply_(fn, o); },
            SameSpec([o](const NestedKey& k, X x) { return WriteInto(x, o.get(k)); }));
      };
  t["apply_(const NaryLeafFn& fn, const std::vector<TensorDict>& others, const ApplyOptions& "
    "options = {})"] = [](Case& c) {
    const TensorDict o = RandomLike(c.rng, c.td, 1.0, Chance(c.rng, 0.3));
    c.Arg("others", "{" + Describe(o) + "}");
    const auto fn = [](const std::vector<at::Tensor>& v) { return v[1]; };
    CheckIn(
        c, [&] { c.td.apply_(fn, std::vector<TensorDict>{o}); },
        SameSpec([o](const NestedKey& k, X x) { return WriteInto(x, o.get(k)); }));
  };

  // ---- indexing
  t["index(at::ArrayRef<at::indexing::TensorIndex> indices)"] = [](Case& c) {
    const std::vector<TensorIndex> idx = DrawIndex(c);
    const int64_t nb = c.td.batch_dims();
    Spec s;
    s.leaf = [idx, nb](const NestedKey&, X x) { return x.index(Explicit(idx, nb)); };
    s.batch = BatchByDummy(s.leaf);
    CheckOut(
        c, [&] { return c.td.index(idx); }, s);
  };
  t["index(std::initializer_list<at::indexing::TensorIndex> indices)"] = [](Case& c) {
    const std::vector<TensorIndex> idx = DrawIndex(c, 1);
    const int64_t nb = c.td.batch_dims();
    Spec s;
    s.leaf = [idx, nb](const NestedKey&, X x) { return x.index(Explicit(idx, nb)); };
    s.batch = BatchByDummy(s.leaf);
    CheckOut(
        c, [&] { return c.td.index({idx[0]}); }, s);
  };
  for (bool list : {false, true}) {
    const std::string idx_param = list ? "std::initializer_list<at::indexing::TensorIndex>"
                                       : "at::ArrayRef<at::indexing::TensorIndex>";
    t["index_put_(" + idx_param + " indices, const at::Tensor& value)"] = [list](Case& c) {
      const std::vector<TensorIndex> idx = DrawIndex(c, list ? 1 : 3);
      const int64_t k = Uniform(c.rng, 0, 2);
      const at::Tensor v = at::rand(k == 0 ? V{} : k == 1 ? V{1} : V{2}) * 10;
      c.Arg("value", DescribeTensor(v));
      const int64_t nb = c.td.batch_dims();
      CheckIn(
          c, [&] { list ? c.td.index_put_({idx[0]}, v) : c.td.index_put_(idx, v); },
          Indexed(idx, nb, [idx, v, nb](const NestedKey&, X x) {
            return at::Tensor(x).index_put_(Explicit(idx, nb), v.to(x.scalar_type()));
          }));
    };
    t["index_put_(" + idx_param + " indices, const at::Scalar& value)"] = [list](Case& c) {
      const std::vector<TensorIndex> idx = DrawIndex(c, list ? 1 : 3);
      const at::Scalar v = RandomScalar(c.rng);
      c.Arg("value", v);
      const int64_t nb = c.td.batch_dims();
      CheckIn(
          c, [&] { list ? c.td.index_put_({idx[0]}, v) : c.td.index_put_(idx, v); },
          Indexed(idx, nb, [idx, v, nb](const NestedKey&, X x) {
            return at::Tensor(x).index_put_(Explicit(idx, nb), v);
          }));
    };
    t["index_put_(" + idx_param + " indices, const TensorDict& value)"] = [list](Case& c) {
      const std::vector<TensorIndex> idx = DrawIndex(c, list ? 1 : 3);
      TensorDict like = c.td;
      try {
        like = c.td.index(idx).to_dense();
      } catch (const std::exception&) {
      }
      const TensorDict v = RandomLike(c.rng, like, 0.6, Chance(c.rng, 0.3));
      c.Arg("value", Describe(v));
      const int64_t nb = c.td.batch_dims();
      CheckIn(
          c, [&] { list ? c.td.index_put_({idx[0]}, v) : c.td.index_put_(idx, v); },
          Indexed(idx, nb, [idx, v, nb](const NestedKey& k, X x) {
            if (!v.contains(k)) return x;
            const at::Tensor val = v.get(k);
            return at::Tensor(x).index_put_(Explicit(idx, nb), val.to(x.scalar_type()));
          }));
    };
  }

  // ---- masks, where, gather
  t["masked_fill(const at::Tensor& mask, const at::Scalar& value)"] = [](Case& c) {
    const at::Tensor m = DrawMask(c);
    const at::Scalar v = RandomScalar(c.rng);
    c.Arg("value", v);
    const V b = c.td.batch_size().vec();
    CheckOut(
        c, [&] { return c.td.masked_fill(m, v); },
        Masked([m, v, b](const NestedKey&, X x) { return x.masked_fill(MaskFor(m, x, b), v); }, m));
  };
  t["masked_fill_(const at::Tensor& mask, const at::Scalar& value)"] = [](Case& c) {
    const at::Tensor m = DrawMask(c);
    const at::Scalar v = RandomScalar(c.rng);
    c.Arg("value", v);
    const V b = c.td.batch_size().vec();
    CheckIn(
        c, [&] { c.td.masked_fill_(m, v); },
        Masked([m, v, b](const NestedKey&,
                         X x) { return at::Tensor(x).masked_fill_(MaskFor(m, x, b), v); },
               m));
  };
  t["masked_select(const at::Tensor& mask)"] = [](Case& c) {
    const at::Tensor m = DrawMask(c);
    const V b = c.td.batch_size().vec();
    Spec s;
    s.leaf = [m, b](const NestedKey&, X x) {
      MaskFor(m, x, b, /*broadcast=*/false);
      return x.index({m});
    };
    s.batch = BatchByDummy(s.leaf);
    CheckOut(
        c, [&] { return c.td.masked_select(m); }, s);
  };
  t["where(const at::Tensor& condition, const at::Scalar& other)"] = [](Case& c) {
    const at::Tensor m = DrawMask(c);
    const at::Scalar v = RandomScalar(c.rng);
    c.Arg("other", v);
    const V b = c.td.batch_size().vec();
    CheckOut(
        c, [&] { return c.td.where(m, v); },
        Masked([m, v, b](const NestedKey&, X x) { return at::where(MaskFor(m, x, b), x, v); }, m));
  };
  t["where(const at::Tensor& condition, const TensorDict& other)"] = [](Case& c) {
    const at::Tensor m = DrawMask(c);
    const TensorDict o = RandomLike(c.rng, c.td, 0.6, Chance(c.rng, 0.3));
    c.Arg("other", Describe(o));
    const V b = c.td.batch_size().vec();
    CheckOut(
        c, [&] { return c.td.where(m, o); },
        Masked(
            [m, o, b](const NestedKey& k, X x) { return at::where(MaskFor(m, x, b), x, o.get(k)); },
            m));
  };
  t["where(const at::Tensor& condition, const TensorDict& other, const at::Scalar& pad)"] =
      [](Case& c) {
        const at::Tensor m = DrawMask(c);
        const TensorDict o = RandomLike(c.rng, c.td, 0.6, Chance(c.rng, 0.3));
        const at::Scalar pad = RandomScalar(c.rng);
        c.Arg("other", Describe(o));
        c.Arg("pad", pad);
        const V b = c.td.batch_size().vec();
        CheckOut(
            c, [&] { return c.td.where(m, o, pad); },
            Masked(
                [m, o, b, pad](const NestedKey& k, X x) {
                  const at::Tensor other = o.contains(k) ? o.get(k) : at::full_like(x, pad);
                  return at::where(MaskFor(m, x, b), x, other);
                },
                m));
      };
  t["gather(int64_t dim, const at::Tensor& index)"] = [](Case& c) {
    const int64_t nb = c.td.batch_dims();
    const int64_t dim = RandomDim(c.rng, nb);
    V shape = c.td.batch_size().vec();
    int64_t hi = 1;
    if (dim >= -nb && dim < nb) {
      hi = shape[WrapDim(dim, nb)];
      shape[WrapDim(dim, nb)] = Uniform(c.rng, 0, 3);
    }
    const at::Tensor index =
        hi == 0 ? at::zeros(shape, at::kLong) : at::randint(0, hi, shape, at::kLong);
    c.Arg("dim", dim);
    c.Arg("index", DescribeTensor(index));
    Spec s;
    s.leaf = [dim, index](const NestedKey&, X x) {
      const int64_t nb2 = index.dim();
      V shape = index.sizes().vec();
      shape.insert(shape.end(), x.sizes().begin() + nb2, x.sizes().end());
      V view = index.sizes().vec();
      view.resize(static_cast<size_t>(x.dim()), 1);
      return at::gather(x, WrapDim(dim, nb2), index.view(view).expand(shape));
    };
    s.batch = BatchByDummy(s.leaf);
    s.names = SameNames();
    CheckOut(
        c, [&] { return c.td.gather(dim, index); }, s);
  };
}

}  // namespace generative
}  // namespace td
