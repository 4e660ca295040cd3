// Random TensorDicts for the generative test, the backends they are put on, and their
// descriptions (tests/generative/generative.h).
#include <stdlib.h>

#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "td/backends/h5/h5.h"
#include "td/backends/lazy_stack/lazy_stack.h"
#include "td/backends/lazy_view/lazy_view.h"
#include "td/core/storage.h"
#include "tests/generative/generative.h"

namespace td {
namespace generative {

int64_t Uniform(Rng& rng, int64_t lo, int64_t hi) {
  // An empty range is undefined behaviour (libstdc++'s assertions abort on it): a test bug.
  TORCH_CHECK(lo <= hi, "Uniform: empty range [", lo, ", ", hi, "]");
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

bool Chance(Rng& rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

namespace {

const at::ScalarType kDtypes[] = {at::kFloat, at::kDouble, at::kLong,
                                  at::kInt,   at::kByte,   at::kBool};

at::ScalarType RandomDtype(Rng& rng) { return kDtypes[Uniform(rng, 0, 5)]; }

int64_t RandomSize(Rng& rng) { return Chance(rng, 0.08) ? 0 : Uniform(rng, 1, 3); }

// Values from the case's own generator (not LibTorch's global one), so a case is reproducible
// alone.
at::Tensor RandomTensor(Rng& rng, std::vector<int64_t> shape, at::ScalarType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  std::normal_distribution<double> normal(0, 2);
  for (double& x : v) {
    if (dtype == at::kBool) {
      x = Chance(rng, 0.5);
    } else if (dtype == at::kByte) {
      x = static_cast<double>(Uniform(rng, 0, 9));
    } else if (at::isIntegralType(dtype, false)) {
      x = static_cast<double>(Uniform(rng, -6, 6));
    } else {
      x = normal(rng);
      if (Chance(rng, 0.02)) x = std::nan("");
      if (Chance(rng, 0.02)) x = Chance(rng, 0.5) ? INFINITY : -INFINITY;
      if (Chance(rng, 0.05)) x = 0;
    }
  }
  return at::tensor(v, at::kDouble).view(shape).to(dtype).clone();  // not a view
}

std::vector<int64_t> Concat(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> r = a.vec();
  r.insert(r.end(), b.begin(), b.end());
  return r;
}

void FillLevel(Rng& rng, TensorDict& level, int64_t depth, const GenLimits& lim,
               int64_t* name_counter) {
  const int64_t leaves = Uniform(rng, 0, lim.max_leaves);
  for (int64_t i = 0; i < leaves; ++i) {
    std::vector<int64_t> feature;
    for (int64_t f = Uniform(rng, 0, 2); f > 0; --f) feature.push_back(RandomSize(rng));
    level.set(absl::StrCat("t", i),
              RandomTensor(rng, Concat(level.batch_size(), feature), RandomDtype(rng)));
  }
  if (lim.non_tensor && Chance(rng, 0.2)) level.set("s", std::string("text"));
  if (depth >= lim.max_depth) return;
  const int64_t subs = Chance(rng, 0.6) ? Uniform(rng, 1, 2) : 0;
  for (int64_t i = 0; i < subs; ++i) {
    std::vector<int64_t> own;
    for (int64_t d = Uniform(rng, 0, lim.max_level_dims); d > 0; --d)
      own.push_back(RandomSize(rng));
    TensorDict sub({}, Concat(level.batch_size(), own));
    if (lim.names && !own.empty() && Chance(rng, 0.3)) {
      DimNames names(sub.batch_size().size());
      names.back() = absl::StrCat("n", (*name_counter)++);
      sub.set_names(names);
    }
    FillLevel(rng, sub, depth + 1, lim, name_counter);
    level.set(absl::StrCat("d", i), sub);
  }
}

}  // namespace

TensorDict RandomTensorDict(Rng& rng, const GenLimits& lim) {
  std::vector<int64_t> batch;
  for (int64_t d = Uniform(rng, 0, lim.max_level_dims); d > 0; --d)
    batch.push_back(RandomSize(rng));
  TensorDict root({}, batch);
  int64_t names = 0;
  FillLevel(rng, root, 0, lim, &names);
  if (lim.names && !batch.empty() && Chance(rng, 0.3)) {
    DimNames n(batch.size());
    for (size_t i = 0; i < n.size(); ++i) {
      if (Chance(rng, 0.6)) n[i] = absl::StrCat("r", i);
    }
    root.set_names(n);
  }
  return root;
}

namespace {

void LikeLevel(Rng& rng, const TensorDict& like, TensorDict& out, double keep_dtype, bool* broken,
               bool break_some) {
  like.for_each_entry([&](const std::string& k, const Value& v) {
    if (v.is_tensor()) {
      const at::Tensor& t = v.tensor();
      std::vector<int64_t> shape = t.sizes().vec();
      if (break_some && !*broken && Chance(rng, 0.15)) {
        *broken = true;
        if (Chance(rng, 0.5)) return;  // missing leaf
        if (static_cast<int64_t>(shape.size()) > like.batch_dims()) {
          shape.back() = shape.back() <= 1 ? 2 : shape.back() + 1;  // cannot broadcast (1 would to 0)
        } else {
          shape.push_back(2);  // broadcasts to a larger shape, or not in place
        }
      }
      const at::ScalarType dtype = Chance(rng, keep_dtype) ? t.scalar_type() : RandomDtype(rng);
      out.set(k, RandomTensor(rng, shape, dtype));
    } else if (v.is_tensordict()) {
      TensorDict sub({}, v.tensordict().batch_size());
      LikeLevel(rng, v.tensordict(), sub, keep_dtype, broken, break_some);
      out.set(k, sub);
    } else {
      out.set(k, v);
    }
  });
}

}  // namespace

TensorDict RandomLike(Rng& rng, const TensorDict& like, double keep_dtype, bool break_some) {
  TensorDict out({}, like.batch_size());
  bool broken = false;
  LikeLevel(rng, like, out, keep_dtype, &broken, break_some);
  return out;
}

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kDense:
      return "dense";
    case Backend::kLazyStack:
      return "lazy_stack";
    case Backend::kIndexView:
      return "index_view";
    case Backend::kPermuteView:
      return "permute_view";
    case Backend::kMemmap:
      return "memmap";
    case Backend::kSharedMemory:
      return "shared_memory";
    case Backend::kH5:
      return "h5";
  }
  return "?";
}

bool StoresTensors(Backend b) {
  return b == Backend::kDense || b == Backend::kMemmap || b == Backend::kSharedMemory;
}

namespace {

std::string FreshDir(const std::string& tag) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/gen-" + tag + "-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("mkdtemp failed: " + dir);
  return dir;
}

// `content` with one more row of other values before and after, along batch dim 0.
TensorDict Padded(const TensorDict& content) {
  std::vector<int64_t> batch = content.batch_size().vec();
  batch[0] += 2;
  return content.apply(
      [](const at::Tensor& t) {
        at::Tensor pad = at::zeros_like(t.narrow(0, 0, 1));
        return at::cat({pad, t, pad});
      },
      batch);
}

}  // namespace

// The same constructions as the traits of tests/conformance/lazy_view_conformance_test.cc and the
// other backends' conformance tests (private to those tests), for contents of any batch size.
std::optional<TensorDict> OnBackend(Backend backend, const TensorDict& content, std::string* why) {
  const int64_t nb = content.batch_dims();
  switch (backend) {
    case Backend::kDense:
      return content;
    case Backend::kLazyStack: {
      if (nb == 0 || content.batch_size()[0] == 0) {
        *why = "a lazy stack needs a first batch dim of non-zero size";
        return std::nullopt;
      }
      std::vector<TensorDict> members;
      for (const TensorDict& m : content.unbind(0)) members.push_back(m.clone());
      return lazy_stack(members, 0);
    }
    case Backend::kIndexView:
      if (nb == 0) {
        *why = "an index view of rows needs a batch dim";
        return std::nullopt;
      }
      return index_view(Padded(content), {at::indexing::Slice(1, 1 + content.batch_size()[0])});
    case Backend::kPermuteView: {
      if (nb < 2) {
        *why = "a transposed view needs two batch dims";
        return std::nullopt;
      }
      return transpose_view(content.transpose(0, 1).contiguous(), 0, 1);
    }
    case Backend::kMemmap: {
      TensorDict t = content.memmap(FreshDir("memmap") + "/td");
      t.unlock_();
      return t;
    }
    case Backend::kSharedMemory: {
      TensorDict t =
          MakeTensorDict("shared_memory", StorageSpec().batch_size(content.batch_size().vec()));
      t.update(content);
      return t;
    }
    case Backend::kH5:
      return TensorDict(h5::to_h5(content, FreshDir("h5") + "/td.h5"));
  }
  return std::nullopt;
}

std::string DescribeTensor(const at::Tensor& t) {
  std::ostringstream os;
  os << c10::toString(t.scalar_type()) << t.sizes();
  return os.str();
}

namespace {

std::string NamesString(const DimNames& names) {
  bool any = false;
  for (const auto& n : names) any = any || n.has_value();
  if (!any) return "";
  return absl::StrCat(
      " names=[",
      absl::StrJoin(names, ",",
                    [](std::string* out, const auto& n) { absl::StrAppend(out, n ? *n : "_"); }),
      "]");
}

void DescribeLevel(const TensorDict& td, const std::string& indent, std::ostringstream& os) {
  os << td.batch_size() << NamesString(td.names()) << " {";
  std::string sep;
  td.for_each_entry([&](const std::string& k, const Value& v) {
    os << sep;
    sep = ", ";
    if (v.is_tensor()) {
      os << k << ": " << DescribeTensor(v.tensor());
    } else if (v.is_tensordict()) {
      os << "\n" << indent << "  " << k << ": ";
      DescribeLevel(v.tensordict(), indent + "  ", os);
    } else {
      os << k << ": non-tensor";
    }
  });
  os << "}";
}

}  // namespace

std::string Describe(const TensorDict& td) {
  std::ostringstream os;
  DescribeLevel(td, "", os);
  return os.str();
}

int64_t RandomDim(Rng& rng, int64_t nb) {
  if (nb == 0 || Chance(rng, 0.08)) return Chance(rng, 0.5) ? nb : -nb - 1;  // out of range
  const int64_t d = Uniform(rng, 0, nb - 1);
  return Chance(rng, 0.5) ? d : d - nb;
}

at::Scalar RandomScalar(Rng& rng) {
  switch (Uniform(rng, 0, 3)) {
    case 0:
      return at::Scalar(Uniform(rng, -3, 3));
    case 1:
      return at::Scalar(static_cast<double>(Uniform(rng, -8, 8)) / 4.0);
    case 2:
      return at::Scalar(Chance(rng, 0.5));
    default:
      return at::Scalar(2);
  }
}

}  // namespace generative
}  // namespace td
