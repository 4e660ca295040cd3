// The reference of the generative test -- a row's per-leaf definition applied to every leaf of
// the input -- and the comparison of the library's result with it (tests/generative/generative.h).
#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/core/pointwise_ops.h"
#include "tests/generative/generative.h"

namespace td {
namespace generative {
namespace {

// A failure of the test's own machinery (a reference that does not fit its batch size), which
// must not be mistaken for "the definition raises".
struct HarnessError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string ErrorText(const std::exception& e) {
  if (const auto* c = dynamic_cast<const c10::Error*>(&e)) return c->what_without_backtrace();
  return e.what();
}

std::string Path(const std::string& prefix, const std::string& k) {
  return prefix.empty() ? k : prefix + "/" + k;
}

NestedKey Join(const NestedKey* prefix, const std::string& k) {
  if (prefix == nullptr) return NestedKey(k);
  NestedKey::Parts parts(prefix->begin(), prefix->end());
  parts.push_back(k);
  return NestedKey(std::move(parts));
}

void ForEachLeaf(
    const TensorDict& td, const NestedKey* prefix, const std::string& path,
    const std::function<void(const NestedKey&, const std::string&, const at::Tensor&)>& fn) {
  td.for_each_entry([&](const std::string& k, const Value& v) {
    const NestedKey key = Join(prefix, k);
    if (v.is_tensor()) fn(key, Path(path, k), v.tensor());
    if (v.is_tensordict()) ForEachLeaf(v.tensordict(), &key, Path(path, k), fn);
  });
}

// The reference level: every leaf mapped by `def`, batch `root` followed by the level's own
// dims (after the input root's `nb`), or [] everywhere when `full`.
TensorDict MapLevel(const TensorDict& level, const NestedKey* prefix,
                    const std::vector<int64_t>& root, int64_t nb, bool full, const LeafDef& def) {
  std::vector<int64_t> batch = full ? std::vector<int64_t>{} : root;
  if (!full) {
    const at::IntArrayRef b = level.batch_size();
    batch.insert(batch.end(), b.begin() + nb, b.end());
  }
  TensorDict out({}, batch);
  level.for_each_entry([&](const std::string& k, const Value& v) {
    const NestedKey key = Join(prefix, k);
    if (v.is_tensor()) {
      at::Tensor r = def(key, v.tensor());  // throws: the op must throw
      if (!r.defined()) return;             // apply's fn drops the entry
      try {
        out.set(k, r);
      } catch (const std::exception& e) {
        // A leaf that cannot be stored under this batch size: the op must raise.
        throw std::runtime_error("reference leaf " + key.repr() + " " + DescribeTensor(r) +
                                 " does not fit batch " + c10::str(at::IntArrayRef(batch)) + ": " +
                                 ErrorText(e));
      }
    } else if (v.is_tensordict()) {
      out.set(k, MapLevel(v.tensordict(), &key, root, nb, full, def));
    } else {
      out.set(k, v);
    }
  });
  return out;
}

struct Ref {
  bool raised = false;
  std::string error;
  TensorDict td;
};

// Returns false (after recording the failure) on a harness error.
bool BuildRef(Case& c, const TensorDict& in, const LeafDef& def,
              const std::function<std::vector<int64_t>(at::IntArrayRef)>& batch, bool full,
              Ref* ref) {
  try {
    const std::vector<int64_t> root = batch ? batch(in.batch_size()) : in.batch_size().vec();
    ref->td = MapLevel(in, nullptr, root, in.batch_dims(), full, def);
  } catch (const HarnessError& e) {
    c.Fail(std::string("harness: ") + e.what());
    return false;
  } catch (const std::exception& e) {
    ref->raised = true;
    ref->error = ErrorText(e);
  }
  return true;
}

using Leaves = std::map<std::string, at::Tensor>;

Leaves StoredLeaves(const Case& c) {
  Leaves out;
  if (!StoresTensors(c.backend)) return out;
  ForEachLeaf(c.td, nullptr, "",
              [&](const NestedKey&, const std::string& p, const at::Tensor& t) { out[p] = t; });
  return out;
}

bool SameValues(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0) return true;
  at::Tensor x = a, y = b;
  if (a.scalar_type() == at::kComplexHalf) {
    x = a.to(at::kComplexFloat);
    y = b.to(at::kComplexFloat);
  }
  if (x.is_floating_point() || x.is_complex()) {
    const bool low = x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16;
    return at::allclose(x, y, low ? 1e-2 : 1e-5, low ? 1e-2 : 1e-6, /*equal_nan=*/true);
  }
  return at::equal(x, y);
}

struct CompareCtx {
  const Spec* spec;
  std::optional<DimNames> root_names;  // expected names of the result's root dims
  int64_t nb_in = 0;                   // the input root's batch dims
  const Leaves* before = nullptr;      // stored leaves of the input (stable backends)
  bool inplace = false;
  std::string what;  // "result", "piece 2", ...
};

void CompareLevel(Case& c, const TensorDict& actual, const TensorDict& expected,
                  const TensorDict* input, const std::string& path, const CompareCtx& ctx) {
  const std::string where = ctx.what + (path.empty() ? " root" : " level '" + path + "'");
  if (actual.batch_size() != expected.batch_size()) {
    c.Fail(absl::StrCat(where, ": batch size ", c10::str(actual.batch_size()), ", expected ",
                        c10::str(expected.batch_size())));
    return;
  }
  if (ctx.root_names && input != nullptr) {
    DimNames want;
    if (!ctx.spec->full) {
      want = *ctx.root_names;
      const DimNames in = input->names();
      if (static_cast<int64_t>(in.size()) >= ctx.nb_in) {
        want.insert(want.end(), in.begin() + ctx.nb_in, in.end());
      }
    }
    DimNames got = actual.names();
    if (got.size() == want.size() && got != want) {
      auto str = [](const DimNames& n) {
        std::string s;
        for (const auto& x : n) s += (s.empty() ? "" : ",") + (x ? *x : std::string("_"));
        return "[" + s + "]";
      };
      c.Fail(absl::StrCat(where, ": names ", str(got), ", expected ", str(want)));
    }
  }
  std::vector<std::string> ka, ke;
  actual.for_each_entry([&](const std::string& k, const Value&) { ka.push_back(k); });
  expected.for_each_entry([&](const std::string& k, const Value&) { ke.push_back(k); });
  if (ka != ke) {
    c.Fail(absl::StrCat(where, ": keys [", absl::StrJoin(ka, ","), "], expected [",
                        absl::StrJoin(ke, ","), "]"));
    return;
  }
  expected.for_each_entry([&](const std::string& k, const Value& e) {
    const Value a = actual.get_value(k);
    const std::string p = Path(path, k);
    if (e.is_tensor() != a.is_tensor() || e.is_tensordict() != a.is_tensordict()) {
      c.Fail(absl::StrCat(where, ": entry '", k, "' is a ", std::string(a.kind()), ", expected a ",
                          std::string(e.kind())));
      return;
    }
    if (e.is_tensordict()) {
      std::optional<TensorDict> in_sub;
      if (input != nullptr && input->contains(k) && input->get_value(k).is_tensordict()) {
        in_sub = input->get_tensordict(k);
      }
      CompareLevel(c, a.tensordict(), e.tensordict(), in_sub ? &*in_sub : nullptr, p, ctx);
      return;
    }
    if (!e.is_tensor()) {
      if (a.non_tensor() != e.non_tensor()) c.Fail(where + ": non-tensor '" + k + "' differs");
      return;
    }
    const at::Tensor& at = a.tensor();
    const at::Tensor& et = e.tensor();
    if (at.scalar_type() != et.scalar_type() || at.sizes() != et.sizes()) {
      c.Fail(absl::StrCat(where, ": leaf '", k, "' is ", DescribeTensor(at), ", expected ",
                          DescribeTensor(et)));
      return;
    }
    if (ctx.spec->values && !SameValues(at, et)) {
      std::ostringstream os;
      os << where << ": leaf '" << k << "' values differ\n  got      "
         << at.flatten().slice(0, 0, 12) << "\n  expected " << et.flatten().slice(0, 0, 12);
      c.Fail(os.str());
      return;
    }
    if (ctx.before == nullptr || !ctx.spec->check_views) return;
    auto it = ctx.before->find(p);
    if (it == ctx.before->end() || it->second.numel() == 0 || at.numel() == 0) return;
    const bool got = at.is_alias_of(it->second);
    const bool want = ctx.inplace || et.is_alias_of(it->second);
    if (got != want) {
      c.Fail(absl::StrCat(where, ": leaf '", k, got ? "' shares" : "' does not share",
                          " memory with the input's, the per-leaf definition's ",
                          want ? "does" : "does not"));
    }
  });
}

std::optional<DimNames> RootNames(const Spec& spec, const TensorDict& in) {
  if (!spec.names) return std::nullopt;
  if (spec.full) return DimNames{};
  try {
    return (*spec.names)(in.names());
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// The input's content, copied, to check that it did not change (out-of-place rows) or changed
// nothing when the call failed (in-place rows).
TensorDict Snapshot(const TensorDict& td) { return td.to_dense().clone(); }

}  // namespace

void ExpectSameContent(Case& c, const TensorDict& actual, const TensorDict& expected,
                       const std::string& what) {
  Spec same;
  same.check_views = false;
  CompareCtx ctx{&same, std::nullopt, 0, nullptr, false, what};
  CompareLevel(c, actual, expected, nullptr, "", ctx);
}

namespace {

void ExpectUnchanged(Case& c, const TensorDict& snapshot, const std::string& when) {
  Spec same;
  same.check_views = false;
  CompareCtx ctx{&same, std::nullopt, 0, nullptr, false, "input " + when};
  const size_t before = c.failures.size();
  CompareLevel(c, c.td.to_dense(), snapshot, nullptr, "", ctx);
  if (c.failures.size() > before) c.failures.back() += " (the input changed)";
}

template <class T>
bool Run(Case& c, const std::function<T()>& call, T* out, std::string* err) {
  try {
    *out = call();
    return true;
  } catch (const std::exception& e) {
    *err = ErrorText(e);
    return false;
  }
}

// Records a disagreement on raising; true when both raised (nothing more to compare) or one did.
bool RaiseMismatch(Case& c, bool ref_raised, const std::string& ref_error, bool ok,
                   const std::string& err, const std::function<std::string()>& got) {
  if (ref_raised && ok) {
    c.Fail("the per-leaf definition raises (" + ref_error.substr(0, 300) +
           ") but the op returned " + got());
    return true;
  }
  if (!ref_raised && !ok) {
    c.Fail("the op raised, the per-leaf definition does not: " + err.substr(0, 600));
    return true;
  }
  if (ref_raised) c.raised = true;
  return ref_raised;
}

}  // namespace

int64_t WrapDim(int64_t dim, int64_t nb) {
  if (dim < -nb || dim >= nb) {
    TORCH_CHECK_INDEX(false, "dim ", dim, " out of range for ", nb, " batch dims");
  }
  return dim < 0 ? dim + nb : dim;
}

std::function<std::vector<int64_t>(at::IntArrayRef)> BatchByDummy(LeafDef def) {
  return [def](at::IntArrayRef batch) {
    return def(NestedKey("<batch>"), at::zeros(batch)).sizes().vec();
  };
}

void CheckOut(Case& c, const std::function<TensorDict()>& call, const Spec& spec) {
  Ref ref;
  if (!BuildRef(c, c.td, spec.leaf, spec.batch, spec.full, &ref)) return;
  const Leaves before = StoredLeaves(c);
  const TensorDict snapshot = Snapshot(c.td);
  TensorDict actual;
  std::string err;
  const bool ok = Run(c, call, &actual, &err);
  ExpectUnchanged(c, snapshot, "after an out-of-place op");
  if (RaiseMismatch(c, ref.raised, ref.error, ok, err, [&] { return Describe(actual); })) return;
  CompareCtx ctx{&spec, RootNames(spec, c.td), c.td.batch_dims(), &before, false, "result"};
  CompareLevel(c, actual, ref.td, &c.td, "", ctx);
}

void CheckIn(Case& c, const std::function<void()>& call, const Spec& spec) {
  Ref ref;
  const LeafDef def = spec.leaf;
  const LeafDef on_copy = [def](const NestedKey& k, const at::Tensor& x) {
    return def(k, x.clone());
  };
  if (!BuildRef(c, c.td, on_copy, spec.batch, spec.full, &ref)) return;
  const Leaves before = StoredLeaves(c);
  const TensorDict snapshot = Snapshot(c.td);
  bool ok = true;
  std::string err;
  try {
    call();
  } catch (const std::exception& e) {
    ok = false;
    err = ErrorText(e);
  }
  if (RaiseMismatch(c, ref.raised, ref.error, ok, err, [&] { return Describe(c.td); })) {
    if (!ok) ExpectUnchanged(c, snapshot, "after a failed in-place op");
    return;
  }
  CompareCtx ctx{&spec, RootNames(spec, c.td), c.td.batch_dims(), &before, true, "in place"};
  CompareLevel(c, c.td, ref.td, &c.td, "", ctx);
}

namespace {

// Shared by CheckList and CheckPair: the pieces of every leaf, then one reference per piece.
void CheckPieces(Case& c, const std::vector<TensorDict>* actual, bool ok, const std::string& err,
                 const PiecesDef& pieces, std::optional<NamesRule> names, const Leaves& before,
                 const std::vector<std::string>& labels) {
  bool raised = false;
  std::string ref_error;
  std::vector<at::Tensor> dummy;
  std::map<std::string, std::vector<at::Tensor>> cache;
  try {
    dummy = pieces(NestedKey("<batch>"), at::zeros(c.td.batch_size()));
    ForEachLeaf(c.td, nullptr, "",
                [&](const NestedKey& k, const std::string& p, const at::Tensor& t) {
                  cache[p] = pieces(k, t);
                  if (cache[p].size() != dummy.size()) {
                    throw c10::ValueError({__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
                                          "leaf " + p + " gives another number of pieces");
                  }
                });
  } catch (const std::exception& e) {
    raised = true;
    ref_error = ErrorText(e);
  }
  if (RaiseMismatch(c, raised, ref_error, ok, err,
                    [&] { return absl::StrCat(actual->size(), " pieces"); })) {
    return;
  }
  if (actual->size() != dummy.size()) {
    c.Fail(absl::StrCat(actual->size(), " ", labels[0], "s, expected ", dummy.size()));
    return;
  }
  for (size_t i = 0; i < dummy.size(); ++i) {
    Spec spec;
    spec.names = names;
    spec.leaf = [&](const NestedKey& k, const at::Tensor&) {
      std::string p;
      for (const std::string& part : k) p = p.empty() ? part : p + "/" + part;
      return cache.at(p)[i];
    };
    const std::vector<int64_t> root = dummy[i].sizes().vec();
    spec.batch = [root](at::IntArrayRef) { return root; };
    Ref ref;
    if (!BuildRef(c, c.td, spec.leaf, spec.batch, false, &ref)) return;
    const std::string what = labels.size() > 1 ? labels[i] : absl::StrCat(labels[0], " ", i);
    CompareCtx ctx{&spec, RootNames(spec, c.td), c.td.batch_dims(), &before, false, what};
    CompareLevel(c, (*actual)[i], ref.td, &c.td, "", ctx);
  }
}

}  // namespace

void CheckList(Case& c, const std::function<std::vector<TensorDict>()>& call,
               const PiecesDef& pieces, std::optional<NamesRule> names) {
  const Leaves before = StoredLeaves(c);
  std::vector<TensorDict> actual;
  std::string err;
  const bool ok = Run(c, call, &actual, &err);
  CheckPieces(c, &actual, ok, err, pieces, names, before, {"piece"});
}

void CheckPair(Case& c, const std::function<ValuesIndices()>& call, const PiecesDef& pair,
               std::optional<NamesRule> names) {
  const Leaves before = StoredLeaves(c);
  ValuesIndices vi;
  std::string err;
  const bool ok = Run(c, call, &vi, &err);
  std::vector<TensorDict> actual;
  if (ok) actual = {vi.values, vi.indices};
  CheckPieces(c, &actual, ok, err, pair, names, before, {"values", "indices"});
}

void CheckBool(Case& c, const std::function<bool()>& call,
               const std::function<bool(bool, const at::Tensor&)>& fold, bool init) {
  bool want = init;
  ForEachLeaf(c.td, nullptr, "", [&](const NestedKey&, const std::string&, const at::Tensor& t) {
    want = fold(want, t);
  });
  bool got = false;
  std::string err;
  if (!Run(c, call, &got, &err)) {
    c.Fail("the op raised, the per-leaf definition does not: " + err);
  } else if (got != want) {
    c.Fail(absl::StrCat("returned ", got, ", the leaves give ", want));
  }
}

NamesRule SameNames() {
  return [](const DimNames& in) { return in; };
}

NamesRule NoNames(int64_t rank) {
  return [rank](const DimNames&) { return DimNames(static_cast<size_t>(rank)); };
}

NamesRule DropDims(std::vector<int64_t> dims, bool keepdim) {
  return [dims, keepdim](const DimNames& in) {
    if (keepdim) return in;
    DimNames out;
    for (int64_t i = 0; i < static_cast<int64_t>(in.size()); ++i) {
      if (std::find(dims.begin(), dims.end(), i) == dims.end()) out.push_back(in[i]);
    }
    return out;
  };
}

NamesRule Permuted(std::vector<int64_t> order) {
  return [order](const DimNames& in) {
    DimNames out;
    for (int64_t o : order) out.push_back(o < 0 ? std::nullopt : in.at(static_cast<size_t>(o)));
    return out;
  };
}

}  // namespace generative
}  // namespace td
