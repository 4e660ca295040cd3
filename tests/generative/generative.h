// The generative differential test of the op table (NOTE [ The op table ] in td/core/ops.def):
// random nested TensorDicts on every backend, every row with a per-leaf definition checked
// against that definition applied leaf by leaf. See NOTE [ Generative test ] in
// tests/generative/generative_test.cc for the rules; this header is what its files share:
//   generator.cc  random TensorDicts, the backends, descriptions;
//   oracle.cc     the reference (the per-leaf definition applied to every leaf) and the checks;
//   rows_pointwise.cc, rows_reduce.cc, rows_shape.cc, rows_misc.cc  one case generator a row;
//   generative_test.cc  the row enumeration, the coverage check and the case loop.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "td/core/tensordict.h"

namespace td {
namespace generative {

using Rng = std::mt19937_64;

// A uniform integer in [lo, hi].
int64_t Uniform(Rng& rng, int64_t lo, int64_t hi);
// True with probability p.
bool Chance(Rng& rng, double p);

// How a random TensorDict is drawn (smaller for shrinking).
struct GenLimits {
  int64_t max_depth = 4;       // nested levels below the root (0-4)
  int64_t max_leaves = 3;      // tensor leaves a level
  int64_t max_level_dims = 2;  // batch dims each level adds
  bool non_tensor = true;      // some levels hold a string
  bool names = true;           // some dims are named
};

// A random dense TensorDict: batch dims, zero-size dims, dtypes (float32/64, int64/32, uint8,
// bool), empty levels, non-tensor entries, names on some dims.
TensorDict RandomTensorDict(Rng& rng, const GenLimits& limits);

// A TensorDict of `like`'s structure (same keys, batch sizes at every level) with new random
// leaves: same shapes, dtypes drawn again (kept with probability keep_dtype). With
// `break_some`, one leaf may be removed or given a feature shape that cannot broadcast.
TensorDict RandomLike(Rng& rng, const TensorDict& like, double keep_dtype, bool break_some);

// The backends a case may put its TensorDict on.
enum class Backend { kDense, kLazyStack, kIndexView, kPermuteView, kMemmap, kSharedMemory, kH5 };
const char* BackendName(Backend b);
inline constexpr int kNumBackends = 7;
// `content` on `backend` (a new TensorDict holding the same entries), or nullopt with `why`
// when the backend cannot hold it (a lazy stack needs a batch dim of non-zero size, ...).
std::optional<TensorDict> OnBackend(Backend backend, const TensorDict& content, std::string* why);
// True when get() on this backend returns the stored tensor itself (so "is a view" is defined).
bool StoresTensors(Backend backend);

// One line per level: batch size, names, keys with dtype and shape, non-tensor entries.
std::string Describe(const TensorDict& td);
std::string DescribeTensor(const at::Tensor& t);

// ---- the reference and the checks (oracle.cc) ----------------------------------------------

// The per-leaf definition of a row for one case: the leaf's full key and the leaf -> the
// result leaf. It throws when the op must throw.
using LeafDef = std::function<at::Tensor(const NestedKey& key, const at::Tensor& leaf)>;
// The names of the result's root batch dims from the input's.
using NamesRule = std::function<DimNames(const DimNames& in)>;

// What a row's result must be: leaf-wise `leaf`; the result's root batch size is `batch` of the
// input's (default: the same; it throws when the op must throw), and every nested level keeps
// its own dims after it (or has batch [] at every level when `full`).
struct Spec {
  LeafDef leaf;
  std::function<std::vector<int64_t>(at::IntArrayRef batch)> batch;
  bool full = false;
  std::optional<NamesRule> names;  // nullopt: names are not checked
  bool values = true;              // false: only dtypes and shapes (new_empty)
  bool check_views = true;         // which leaves share memory with the input's
};

// The batch size a batch op gives: `def` applied to a float tensor of shape `batch` (a leaf with
// no feature dims).
std::function<std::vector<int64_t>(at::IntArrayRef)> BatchByDummy(LeafDef def);
// Dims relative to a batch of rank `nb`, as torch wraps them for a tensor of that rank; throws
// c10::IndexError when out of range.
int64_t WrapDim(int64_t dim, int64_t nb);

// What a case found; `failures` empty when the library agreed with the reference.
struct Case {
  Rng rng;
  TensorDict td;  // the input, on `backend`
  Backend backend = Backend::kDense;
  std::string args;  // the arguments drawn, for the failure message
  std::vector<std::string> failures;
  bool raised = false;  // both raised (counted)
  void Fail(std::string what) { failures.push_back(std::move(what)); }
  // Records an argument: "name=value".
  template <class T>
  void Arg(const std::string& name, const T& value);
};

// The checks every row uses. `call` runs the op; each compares with the reference built from
// case.td before the call.
void CheckOut(Case& c, const std::function<TensorDict()>& call, const Spec& spec);
void CheckIn(Case& c, const std::function<void()>& call, const Spec& spec);
// LIST rows: piece i of each leaf is pieces(key, leaf)[i]; the batch of each piece from the
// same function on a dummy leaf.
using PiecesDef =
    std::function<std::vector<at::Tensor>(const NestedKey& key, const at::Tensor& leaf)>;
void CheckList(Case& c, const std::function<std::vector<TensorDict>()>& call,
               const PiecesDef& pieces, std::optional<NamesRule> names);
// PAIR rows (values, indices).
void CheckPair(Case& c, const std::function<ValuesIndices()>& call, const PiecesDef& pair,
               std::optional<NamesRule> names);
// QUERY rows answering one bool from every leaf (`fold` starts from `init`).
void CheckBool(Case& c, const std::function<bool()>& call,
               const std::function<bool(bool acc, const at::Tensor& leaf)>& fold, bool init);

// Records a failure unless `actual` holds the same entries, batch sizes, dtypes and values
// (NaN equal to NaN) as `expected`.
void ExpectSameContent(Case& c, const TensorDict& actual, const TensorDict& expected,
                       const std::string& what);

// Names rules.
NamesRule SameNames();
NamesRule NoNames(int64_t rank);                              // `rank` unnamed dims
NamesRule DropDims(std::vector<int64_t> dims, bool keepdim);  // reductions (dims wrapped)
NamesRule Permuted(std::vector<int64_t> order);               // result dim i <- input order[i]

// ---- the row table (rows_*.cc) ---------------------------------------------------------------

// One row's case generator: draws arguments from c.rng for c.td and runs the checks.
using RowCase = std::function<void(Case& c)>;
// Row id ("name(params)" as the preprocessor stringifies the row) -> its case generator.
using RowTable = std::map<std::string, RowCase>;
void AddPointwiseRows(RowTable& t);  // rows_pointwise.cc
void AddReduceRows(RowTable& t);     // rows_reduce.cc
void AddShapeRows(RowTable& t);      // rows_shape.cc
void AddMiscRows(RowTable& t);       // rows_misc.cc: casts, copies, apply, indexing, new_*

// Random dims / shapes for the row generators.
// A dim of a batch of rank nb: usually in range (negative half of the time), sometimes not.
int64_t RandomDim(Rng& rng, int64_t nb);
// A scalar for pointwise ops: an int, a float or a bool.
at::Scalar RandomScalar(Rng& rng);

}  // namespace generative
}  // namespace td

#include <sstream>

template <class T>
void td::generative::Case::Arg(const std::string& name, const T& value) {
  std::ostringstream os;
  os << name << "=" << value;
  if (!args.empty()) args += ", ";
  args += os.str();
}
