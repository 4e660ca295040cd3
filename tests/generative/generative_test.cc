// The generative differential test of the op table (//tests/generative:generative_test; the
// long sweep is //tests/generative:generative_sweep_test).
//
// NOTE [ Generative test ]
// Every row of the op table (td/core/ops.def and td/core/ops_math.def, NOTE [ The op table ])
// is enumerated here by including the table with this file's own row macros, and each row must
// be either
//   - covered by a per-leaf definition: TD_UNARY rows automatically (td.NAME() against
//     leaf.NAME() and td.NAME_() against leaf.NAME_() on every leaf), the TD_OP rows by the case
//     generators of RowTable() (tests/generative/rows_pointwise.cc and the other rows_ files), keyed by "NAME(PARAMS)" as the
//     preprocessor stringifies the row; or
//   - listed in NotLeafwise() below, with the reason.
// A row that is neither (a new row, or a changed parameter list) fails
// Generative.EveryRowIsCoveredOrExplained naming it, so no op row slips through untested; a
// stale entry (no such row) fails it too.
// A case: a random TensorDict (depth 0-4, each level adding 0-2 batch dims of its own, zero-size
// dims, float32/64, int64/32, uint8 and bool leaves, empty levels, a non-tensor entry on some
// levels, names on some dims; tests/generative/generator.cc) put on one of the backends
// (dense, lazy stack, index view, transposed view, memmap, shared memory, HDF5; the ones that
// cannot hold it fall back to dense), a row, random arguments for it (dims within the batch rank
// and sometimes not, operands of a compatible shape and sometimes not), then the library's
// result against the row's per-leaf definition applied leaf by leaf: values, dtypes, the batch
// size of every level, names, which leaves share memory with the input's (on the backends that
// store their tensors), and that the input did not change -- or both raise (an in-place row that
// raises must leave the TensorDict unchanged).
// Reproducible: TD_GENERATIVE_SEED (default 46) and the case index give the case; a failure
// prints both, the row, the backend, the arguments and the input shrunk to the fewest entries
// that still fail. TD_GENERATIVE_CASES sets the number of cases (default 2500),
// TD_GENERATIVE_CASE runs one case, TD_GENERATIVE_ROW only the rows whose id contains it.
// Disagreements known to be library bugs are listed in KnownIssues() (each with a test that
// replays it and is skipped naming the bug while it still fails): they are reported, not failed.
#include "tests/generative/generative.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <set>

#include "td/compat/torch.h"
#include "td/core/comparison.h"
#include "td/core/pointwise_ops.h"

namespace td {
namespace generative {
namespace {

struct RowId {
  std::string kind;  // TD_OP's KIND, or UNARY
  std::string id;    // "NAME(PARAMS)", or NAME for a TD_UNARY row
};

// Every row of the table, in table order.
std::vector<RowId> AllRows() {
  std::vector<RowId> rows;
#define TD_OP(kind, ret, name, params, args, sample) rows.push_back({#kind, #name #params});
#define TD_UNARY(name, kernel) rows.push_back({"UNARY", #name});
#include "td/core/ops.def"
  return rows;
}

// The TD_UNARY rows as calls: the TensorDict members and the tensor methods of each name.
struct UnaryRow {
  const char* name;
  TensorDict (*out)(const TensorDict&);
  void (*in)(TensorDict&);
  at::Tensor (*leaf)(const at::Tensor&);
  at::Tensor (*leaf_)(at::Tensor);
};
const std::vector<UnaryRow>& UnaryRows() {
  static const auto* rows = new std::vector<UnaryRow>{
#define TD_UNARY(name, kernel)                                                              \
  {#name, [](const TensorDict& t) { return t.name(); }, [](TensorDict& t) { t.name##_(); }, \
   [](const at::Tensor& x) { return x.name(); }, [](at::Tensor x) { return x.name##_(); }},
#include "td/core/ops.def"
  };
  return *rows;
}

const char kNames[] = "names and batch-size metadata: no leaf is computed (//td/core:names_test)";
const char kQuery[] =
    "a query about the entries or the metadata, not a TensorDict of leaf results "
    "(//td/core:leaf_queries_test, //td/core:tensordict_test)";
const char kDict[] =
    "a dict verb: adds, removes, renames or writes the keys its arguments name "
    "(//td/core:dict_ops_test, tests/conformance)";
const char kCombine[] = "combines every leaf into one tensor (//td/core:dict_ops_test)";
const char kLock[] = "locking: no leaf changes (//td/core:tensordict_test)";
const char kDevice[] =
    "needs an accelerator, or changes device metadata only (//td/core:memory_ops_test)";
const char kAutograd[] = "autograd state, not leaf values (//td/core:memory_ops_test)";
const char kStorage[] = "moves the storage to a backend; the backends have tests/conformance";
const char kInterop[] =
    "printing and interop: strings, IValues, state dicts (//td/core:interop_test)";
const char kNewtensor[] =
    "every leaf becomes a copy of `data`, not a function of the leaf (//td/core:memory_ops_test)";

// The rows without a per-leaf definition, and why.
const std::map<std::string, const char*>& NotLeafwise() {
  static const auto* rows = new std::map<std::string, const char*>{
      {"set_batch_size(at::IntArrayRef batch_size)", kNames},
      {"auto_batch_size_(std::optional<int64_t> batch_dims = std::nullopt)", kNames},
      {"names()", kNames},
      {"has_names()", kNames},
      {"set_names(const DimNames& names)", kNames},
      {"refine_names(const DimNames& names)", kNames},
      {"rename(const DimNames& names)", kNames},
      {"rename(const DimRenames& renames)", kNames},
      {"rename_(const DimNames& names)", kNames},
      {"rename_(const DimRenames& renames)", kNames},
      {"get(KeyRef key)", kQuery},
      {"get(KeyRef key, const at::Tensor& default_value)", kQuery},
      {"get_tensordict(KeyRef key)", kQuery},
      {"get_non_tensor(KeyRef key)", kQuery},
      {"get_value(KeyRef key)", kQuery},
      {"find(KeyRef key)", kQuery},
      {"contains(KeyRef key)", kQuery},
      {"size()", kQuery},
      {"size(int64_t dim)", kQuery},
      {"num_keys()", kQuery},
      {"keys(const KeysOptions& options = {})", kQuery},
      {"values(const KeysOptions& options = {})", kQuery},
      {"items(const KeysOptions& options = {})", kQuery},
      {"for_each_entry(absl::FunctionRef<void(const std::string& key, const Value& value)> "
       "fn)",
       kQuery},
      {"get_at(KeyRef key, at::ArrayRef<at::indexing::TensorIndex> index)", kQuery},
      {"get_at(KeyRef key, at::ArrayRef<at::indexing::TensorIndex> index, const "
       "at::Tensor& default_value)",
       kQuery},
      {"sorted_keys()", kQuery},
      {"is_empty()", kQuery},
      {"non_tensor_items(bool include_nested = false)", kQuery},
      {"is_locked()", kQuery},
      {"is_floating_point()", kQuery},
      {"is_contiguous()", kQuery},
      {"is_cpu()", kQuery},
      {"is_cuda()", kQuery},
      {"is_meta()", kQuery},
      {"requires_grad()", kQuery},
      {"dtype()", kQuery},
      {"data_ptr(bool storage = false)", kQuery},
      {"bytes(bool count_duplicates = true)", kQuery},
      {"param_count(bool count_duplicates = true)", kQuery},
      {"depth()", kQuery},
      {"get_item_shape(KeyRef key)", kQuery},
      {"entry_class(KeyRef key)", kQuery},
      {"is_memmap()", kQuery},
      {"is_shared()", kQuery},
      {"set(KeyRef key, Value value)", kDict},
      {"set_non_tensor(KeyRef key, nlohmann::json data)", kDict},
      {"set_(KeyRef key, const at::Tensor& value)", kDict},
      {"update(const TensorDict& other)", kDict},
      {"update(std::initializer_list<Item> items)", kDict},
      {"del_(KeyRef key)", kDict},
      {"erase(KeyRef key)", kDict},
      {"pop(KeyRef key)", kDict},
      {"pop(KeyRef key, Value default_value)", kDict},
      {"rename_key_(KeyRef old_key, KeyRef new_key, bool safe = true)", kDict},
      {"set(KeyRef key, Value value, const SetOptions& options)", kDict},
      {"update(const TensorDict& other, const UpdateOptions& options)", kDict},
      {"set_at_(KeyRef key, const at::Tensor& value, "
       "at::ArrayRef<at::indexing::TensorIndex> index)",
       kDict},
      {"update_at_(const TensorDict& other, at::ArrayRef<at::indexing::TensorIndex> index)", kDict},
      {"popitem()", kDict},
      {"setdefault(KeyRef key, Value default_value)", kDict},
      {"clear()", kDict},
      {"filter_non_tensor_data()", kDict},
      {"copy_at_(const TensorDict& other, at::ArrayRef<at::indexing::TensorIndex> index)", kDict},
      {"create_nested(KeyRef key)", kDict},
      {"filter_empty_()", kDict},
      {"replace(const TensorDict& other)", kDict},
      {"replace(std::initializer_list<Item> items)", kDict},
      {"separates(const std::vector<NestedKey>& keys, bool strict = true, bool "
       "filter_empty = true)",
       kDict},
      {"cat_tensors(const std::vector<NestedKey>& keys, KeyRef out_key, int64_t dim = 0, "
       "bool keep_entries = false)",
       kDict},
      {"stack_tensors(const std::vector<NestedKey>& keys, KeyRef out_key, int64_t dim = 0, "
       "bool keep_entries = false)",
       kDict},
      {"select(const std::vector<NestedKey>& keys, bool strict = true)", kDict},
      {"exclude(const std::vector<NestedKey>& keys)", kDict},
      {"split_keys(const std::vector<std::vector<NestedKey>>& groups)", kDict},
      {"flatten_keys(std::string_view separator = \".\")", kDict},
      {"unflatten_keys(std::string_view separator = \".\")", kDict},
      {"empty(bool recurse = false)", kDict},
      {"fill_(KeyRef key, const at::Scalar& value)", kDict},
      {"load_state_dict(const TensorMap& state, bool strict = true, std::string_view "
       "separator = \".\")",
       kDict},
      {"load_state_dict(const StateDict& state, bool strict = true, std::string_view "
       "separator = \".\")",
       kDict},
      {"cat_from_tensordict(int64_t dim = 0, bool sorted = false)", kCombine},
      {"cat_from_tensordict(const std::vector<NestedKey>& keys, int64_t dim = 0)", kCombine},
      {"stack_from_tensordict(int64_t dim = 0, bool sorted = false)", kCombine},
      {"stack_from_tensordict(const std::vector<NestedKey>& keys, int64_t dim = 0)", kCombine},
      {"lock_()", kLock},
      {"unlock_()", kLock},
      {"pin_memory()", kDevice},
      {"pin_memory_()", kDevice},
      {"record_stream(c10::Stream stream)", kDevice},
      {"cuda(std::optional<int64_t> index = std::nullopt)", kDevice},
      {"clear_device_()", kDevice},
      {"auto_device_()", kDevice},
      {"requires_grad_(bool requires_grad = true)", kAutograd},
      {"grad()", kAutograd},
      {"zero_grad(bool set_to_none = true)", kAutograd},
      {"backward(std::optional<bool> retain_graph = std::nullopt, bool create_graph = "
       "false)",
       kAutograd},
      {"backward(const TensorDict& gradient, std::optional<bool> retain_graph = "
       "std::nullopt, bool create_graph = false)",
       kAutograd},
      {"memmap(const std::string& prefix, const MemmapOptions& options = {})", kStorage},
      {"memmap_(const std::string& prefix, const MemmapOptions& options = {})", kStorage},
      {"memmap_like(const std::string& prefix, const MemmapOptions& options = {})", kStorage},
      {"share_memory_()", kStorage},
      {"repr()", kInterop},
      {"to_ivalue()", kInterop},
      {"to_dict()", kInterop},
      {"tolist()", kInterop},
      {"state_dict(std::string_view separator = \".\")", kInterop},
      {"state_dict_with_metadata(std::string_view separator = \".\")", kInterop},
      {"new_tensor(const at::Tensor& data, const NewOptions& options = {})", kNewtensor},
      {"new_tensor(const TensorDict& data, const NewOptions& options = {})", kNewtensor},
  };
  return *rows;
}

// Library bugs the test finds, each reported (not failed) while it lasts: the row, a fragment
// of the failure message, and the bug. Each has a replay test below (GenerativeKnownIssue).
struct KnownIssue {
  std::string row;      // "" for every row
  std::string backend;  // "" for every backend
  std::string fragment;
  std::string bug;
  bool libtorch1 = false;  // LibTorch 1.x's behaviour: on 2.x the case must pass
};
const std::vector<KnownIssue>& KnownIssues() {
  static const auto* issues = new std::vector<KnownIssue>{
      {"", "", "raises (The shape of the mask",
       "not a library bug: LibTorch refuses a 2-d bool mask followed by None (it inserts the "
       "new dim before the mask's second dim); the library applies a mask over the batch dims "
       "it covers, as NumPy and docs/ops.md do, on every backend (LibTorch 2.x agrees)",
       true},
      {"addcmul_(const Operand& t1, const Operand& t2, const at::Scalar& value = 1)", "",
       "needs_dynamic_casting",
       "LibTorch 1.13's addcmul_ raises an internal assert for dtype mixes that the out-of-place "
       "op followed by a copy handles",
       true},
  };
  return *issues;
}

const KnownIssue* Known(const std::string& row, const std::string& backend,
                        const std::string& failure) {
  for (const KnownIssue& k : KnownIssues()) {
    if (k.libtorch1 && compat::kTorchVersionMajor >= 2) continue;
    if ((k.row.empty() || k.row == row) && (k.backend.empty() || k.backend == backend) &&
        failure.find(k.fragment) != std::string::npos) {
      return &k;
    }
  }
  return nullptr;
}

int64_t EnvInt(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::strtoll(v, nullptr, 10) : fallback;
}

// The case generators by row id: the TD_UNARY rows (both members) and RowTable's.
struct Entry {
  std::string id;
  RowCase run;
};
std::vector<Entry> CoveredRows() {
  RowTable table;
  AddPointwiseRows(table);
  AddReduceRows(table);
  AddShapeRows(table);
  AddMiscRows(table);
  std::vector<Entry> out;
  for (const UnaryRow& u : UnaryRows()) {
    out.push_back({u.name, [u](Case& c) {
                     if (Chance(c.rng, 0.5)) {
                       c.Arg("form", u.name);
                       Spec s;
                       s.leaf = [u](const NestedKey&, const at::Tensor& x) { return u.leaf(x); };
                       s.names = SameNames();
                       CheckOut(
                           c, [&] { return u.out(c.td); }, s);
                     } else {
                       c.Arg("form", std::string(u.name) + "_");
                       Spec s;
                       s.leaf = [u](const NestedKey&, const at::Tensor& x) { return u.leaf_(x); };
                       s.names = SameNames();
                       CheckIn(
                           c, [&] { u.in(c.td); }, s);
                     }
                   }});
  }
  for (auto& [id, run] : table) out.push_back({id, run});
  return out;
}

struct Outcome {
  std::vector<std::string> failures;
  bool raised = false;
  std::string backend;
  std::string fallback;  // why the drawn backend could not hold the input
  std::string input;
  std::string args;
};

// Every nested level's leading batch dims carry the root's names (NOTE [ Dim names ] in
// td/core/names.cc).
void ExpectNestedNames(Case& c, const TensorDict& td) {
  const DimNames root = td.names();
  for (const NestedKey& k : td.keys(KeysOptions().include_nested(true))) {
    if (!td.get_value(k).is_tensordict()) continue;
    const DimNames n = td.get_tensordict(k).names();
    if (!std::equal(root.begin(), root.end(), n.begin())) {
      c.Fail("the backend's level " + k.repr() + " lacks the names of the root's dims");
      return;
    }
  }
}

// Runs case `index` of `seed` for `row` on `content` (drawn here when null).
Outcome RunCase(uint64_t seed, int64_t index, const Entry& row,
                const std::optional<TensorDict>& content_in, TensorDict* content_out) {
  std::seed_seq seq{seed, static_cast<uint64_t>(index)};
  Rng rng(seq);
  at::manual_seed(seed * 7919 + static_cast<uint64_t>(index));
  const TensorDict content = content_in ? *content_in : RandomTensorDict(rng, GenLimits());
  if (content_out) *content_out = content;
  std::seed_seq seq2{seed, static_cast<uint64_t>(index), uint64_t{1}};
  Case c;
  c.rng = Rng(seq2);
  Backend b = Chance(c.rng, 0.4) ? Backend::kDense
                                 : static_cast<Backend>(Uniform(c.rng, 1, kNumBackends - 1));
  if (const char* force = std::getenv("TD_GENERATIVE_BACKEND")) {
    for (int i = 0; i < kNumBackends; ++i) {
      if (std::string(force) == BackendName(static_cast<Backend>(i))) b = static_cast<Backend>(i);
    }
  }
  Outcome out;
  std::optional<TensorDict> td;
  try {
    td = OnBackend(b, content, &out.fallback);
  } catch (const std::exception& e) {
    out.fallback = std::string("it threw: ") + e.what();
    out.fallback = out.fallback.substr(0, 300);
  }
  if (!td) {
    out.fallback = std::string(BackendName(b)) + ": " + out.fallback;
    b = Backend::kDense;
    td = content;
  }
  out.backend = BackendName(b);
  out.input = Describe(*td);
  c.td = *td;
  c.backend = b;
  if (b != Backend::kDense) {
    // The backend must hold what it was given.
    ExpectSameContent(c, td->to_dense(), content, "the backend's content");
    ExpectNestedNames(c, *td);
    if (!c.failures.empty()) {
      out.failures = c.failures;
      return out;
    }
  }
  try {
    row.run(c);
  } catch (const std::exception& e) {
    c.Fail(std::string("the case itself threw: ") + e.what());
  }
  out.failures = c.failures;
  out.raised = c.raised;
  out.args = c.args;
  return out;
}

// Removes entries of `content` one at a time while the case still fails: the smallest input.
TensorDict Shrink(uint64_t seed, int64_t index, const Entry& row, TensorDict content) {
  for (int round = 0; round < 40; ++round) {
    bool removed = false;
    for (const NestedKey& k : content.keys(KeysOptions().include_nested(true))) {
      TensorDict smaller = content.clone();
      try {
        smaller.del_(k);
      } catch (const std::exception&) {
        continue;
      }
      if (!RunCase(seed, index, row, smaller, nullptr).failures.empty()) {
        content = smaller;
        removed = true;
        break;
      }
    }
    if (!removed) break;
  }
  return content;
}

TEST(Generative, EveryRowIsCoveredOrExplained) {
  std::set<std::string> covered;
  for (const Entry& e : CoveredRows()) covered.insert(e.id);
  std::set<std::string> seen;
  for (const RowId& r : AllRows()) {
    seen.insert(r.id);
    const bool leafwise = covered.count(r.id) > 0;
    const bool explained = NotLeafwise().count(r.id) > 0;
    EXPECT_TRUE(leafwise || explained)
        << "op table row " << r.kind << " " << r.id
        << " has no per-leaf case generator (tests/generative/rows_pointwise.cc and the other rows_ files) and is not in "
           "NotLeafwise() (tests/generative/generative_test.cc): add one or the other";
    EXPECT_FALSE(leafwise && explained) << r.id << " is both covered and in NotLeafwise()";
  }
  for (const std::string& id : covered) {
    EXPECT_TRUE(seen.count(id)) << "a case generator for " << id << ", which is no op table row";
  }
  for (const auto& [id, why] : NotLeafwise()) {
    EXPECT_TRUE(seen.count(id)) << "NotLeafwise() lists " << id << ", which is no op table row";
  }
  for (const KnownIssue& k : KnownIssues()) {
    EXPECT_TRUE(k.row.empty() || covered.count(k.row))
        << "a known issue of " << k.row << ", not a covered row";
  }
  std::cout << seen.size() << " rows: " << covered.size() << " with a per-leaf definition, "
            << NotLeafwise().size() << " not leaf-wise\n";
}

TEST(Generative, RandomCases) {
  const uint64_t seed = static_cast<uint64_t>(EnvInt("TD_GENERATIVE_SEED", 46));
  const int64_t cases = EnvInt("TD_GENERATIVE_CASES", 2500);
  const int64_t only = EnvInt("TD_GENERATIVE_CASE", -1);
  const char* row_filter = std::getenv("TD_GENERATIVE_ROW");
  std::vector<Entry> rows = CoveredRows();
  if (row_filter != nullptr && *row_filter != '\0') {
    std::vector<Entry> kept;
    for (const Entry& e : rows) {
      if (e.id.find(row_filter) != std::string::npos) kept.push_back(e);
    }
    rows = kept;
  }
  ASSERT_FALSE(rows.empty());
  struct RowStats {
    int64_t cases = 0, raised = 0, failed = 0, known = 0;
  };
  std::map<std::string, RowStats> stats;
  std::map<std::string, int64_t> backends, fallbacks;
  std::map<std::string, std::string> fallback_example;
  int64_t reported = 0;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t i = only >= 0 ? only : 0; i < (only >= 0 ? only + 1 : cases); ++i) {
    const Entry& row = rows[static_cast<size_t>(i) % rows.size()];
    TensorDict content;
    Outcome o = RunCase(seed, i, row, std::nullopt, &content);
    RowStats& s = stats[row.id];
    ++s.cases;
    ++backends[o.backend];
    if (!o.fallback.empty()) {
      const std::string b = o.fallback.substr(0, o.fallback.find(':'));
      if (++fallbacks[b] == 1) fallback_example[b] = o.fallback;
    }
    if (o.raised) ++s.raised;
    if (o.failures.empty()) continue;
    const KnownIssue* known = Known(row.id, o.backend, o.failures.front());
    if (known != nullptr) {
      ++s.known;
      continue;
    }
    ++s.failed;
    if (++reported > 25) {  // the first ones in full, the others a line each
      std::cout << "  also failed: " << row.id << " on " << o.backend << " case " << i << ": "
                << o.failures.front().substr(0, o.failures.front().find('\n')) << "\n";
      continue;
    }
    const TensorDict small = Shrink(seed, i, row, content);
    const Outcome so = RunCase(seed, i, row, small, nullptr);
    const Outcome& shown = so.failures.empty() ? o : so;
    std::ostringstream msg;
    msg << "row " << row.id << " on " << shown.backend
        << ": reproduce with TD_GENERATIVE_SEED=" << seed << " TD_GENERATIVE_CASE=" << i
        << "\n  input (shrunk): " << shown.input << "\n  args: " << shown.args;
    for (const std::string& f : shown.failures) msg << "\n  - " << f;
    ADD_FAILURE() << msg.str();
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "seed " << seed << ": " << cases << " cases over " << rows.size() << " rows in "
            << seconds << " s\n";
  for (const auto& [b, n] : backends) std::cout << "  backend " << b << ": " << n << " cases\n";
  for (const auto& [b, n] : fallbacks) {
    std::cout << "  fell back to dense " << n << " times, e.g. " << fallback_example[b] << "\n";
  }
  for (const auto& [id, s] : stats) {
    if (s.failed > 0 || s.known > 0) {
      std::cout << "  " << id << ": " << s.cases << " cases, " << s.raised << " both raised, "
                << s.failed << " failed, " << s.known << " known issue\n";
    }
  }
}

// The known issues, replayed from the case that found each: skipped, naming the bug, while the
// case still fails; a failure once the case passes (remove the issue from KnownIssues()). An
// issue of LibTorch 1.x (`libtorch1`) must pass on 2.x.
void Replay(const std::string& row_id, uint64_t seed, int64_t index, const std::string& bug,
            bool libtorch1 = false) {
  for (const Entry& e : CoveredRows()) {
    if (e.id != row_id) continue;
    const Outcome o = RunCase(seed, index, e, std::nullopt, nullptr);
    if (libtorch1 && compat::kTorchVersionMajor >= 2) {
      EXPECT_TRUE(o.failures.empty()) << "fails on LibTorch 2.x: " << o.failures.front();
      return;
    }
    if (o.failures.empty()) {
      FAIL() << "fixed: " << bug << " (row " << row_id << ", TD_GENERATIVE_SEED=" << seed
             << " TD_GENERATIVE_CASE=" << index << " passes): remove it from KnownIssues()";
    }
    ASSERT_NE(Known(row_id, o.backend, o.failures.front()), nullptr)
        << "the case fails otherwise: " << o.failures.front();
    GTEST_SKIP() << "library bug: " << bug << "\n  input: " << o.input << "\n  args: " << o.args
                 << "\n  " << o.failures.front();
  }
  FAIL() << "no row " << row_id;
}

TEST(GenerativeKnownIssue, MaskThenNoneAsNumPy) {
  Replay("index(at::ArrayRef<at::indexing::TensorIndex> indices)", 4646, 21103,
         "index({mask [2, 2], None}) of batch [2, 2] gives [3, 1] where LibTorch 1.13 raises",
         /*libtorch1=*/true);
}
TEST(GenerativeKnownIssue, TorchAddcmulInPlaceDynamicCasting) {
  Replay("addcmul_(const Operand& t1, const Operand& t2, const at::Scalar& value = 1)", 4646,
         32010, "addcmul_ hits LibTorch 1.13's needs_dynamic_casting internal assert",
         /*libtorch1=*/true);
}

}  // namespace
}  // namespace generative
}  // namespace td
