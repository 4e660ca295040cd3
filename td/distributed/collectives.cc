// broadcast / reduce / all_reduce / all_gather / gather / scatter over a TensorDict: one c10d
// call on the packed byte buffer (reductions: one per group of small leaves and one per large
// leaf, each posted as soon as it is packed), NOTE [ Packed layout ].
// A receiving rank checks that it can write every leaf (PackedLayout::CheckWritable) after the
// exchange and before writing any: a rank that cannot write throws alone, with its TensorDict
// unchanged, and no other rank is left waiting in a collective it skipped.
#include <ATen/ATen.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

#include "td/core/dtype.h"
#include "td/distributed/distributed.h"
#include "td/distributed/internal.h"
#include "td/distributed/internal/init_message.h"
#include "td/distributed/internal/packing.h"
#include "td/distributed/internal/wire.h"

namespace td {
namespace distributed {
namespace {

using internal::PackedLayout;
using internal::WorkPtr;
using Timeout = std::optional<std::chrono::milliseconds>;

// NOTE [ Transport errors ] in internal.h: the call, its root if any, and this rank's place.
std::string What(const ProcessGroupPtr& pg, const char* call,
                 std::optional<std::pair<const char*, int>> root = std::nullopt) {
  std::string where = c10::str("rank ", pg->getRank(), " of ", pg->getSize());
  if (root) where = c10::str(root->first, " rank ", root->second, "; ", where);
  return c10::str("td::distributed::", call, " (", where, ")");
}

// Posts one collective and waits for it, both inside internal::Transport.
template <class Post>
void Collective(const std::string& what, const Timeout& timeout, Post&& post) {
  internal::Wait(internal::Transport(what, post), timeout, what);
}

template <class Opts>
Opts WithTimeout(Opts o, const Timeout& t) {
  if (t) o.timeout = *t;
  return o;
}

std::string BytesToString(const at::Tensor& t, int64_t n) {
  return std::string(reinterpret_cast<const char*>(t.data_ptr<uint8_t>()), n);
}

// Every rank's (fingerprint, bytes, signature length); on any difference every rank takes the
// slow path (all_gather of the signatures) and throws the same ValueError.
void CheckStructure(const ProcessGroupPtr& pg, const PackedLayout& layout,
                    const CollectiveOptions& options, const std::string& what) {
  if (!options.check_structure() || pg->getSize() == 1) return;
  const int world = pg->getSize();
  at::Tensor mine = at::empty({3}, at::kLong);
  uint64_t fp = layout.fingerprint();
  std::memcpy(mine.data_ptr<int64_t>(), &fp, sizeof(fp));
  mine.data_ptr<int64_t>()[1] = layout.nbytes();
  mine.data_ptr<int64_t>()[2] = static_cast<int64_t>(layout.signature().size());
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int r = 0; r < world; ++r) outs[0].push_back(at::empty({3}, at::kLong));
  std::vector<at::Tensor> in = {mine};
  Collective(what + " (structure check)", options.timeout(), [&] {
    return pg->allgather(outs, in, WithTimeout(c10d::AllgatherOptions(), options.timeout()));
  });
  int differing = -1;
  int64_t max_len = 0;
  for (int r = 0; r < world; ++r) {
    max_len = std::max(max_len, outs[0][r].data_ptr<int64_t>()[2]);
    if (differing < 0 && !at::equal(outs[0][r], outs[0][0])) differing = r;
  }
  if (differing < 0) return;
  at::Tensor sig = at::zeros({max_len}, at::kByte);
  std::memcpy(sig.data_ptr<uint8_t>(), layout.signature().data(), layout.signature().size());
  std::vector<std::vector<at::Tensor>> sigs(1);
  for (int r = 0; r < world; ++r) sigs[0].push_back(at::empty({max_len}, at::kByte));
  std::vector<at::Tensor> sig_in = {sig};
  Collective(what + " (structure check)", options.timeout(), [&] {
    return pg->allgather(sigs, sig_in, WithTimeout(c10d::AllgatherOptions(), options.timeout()));
  });
  std::string s0 = BytesToString(sigs[0][0], outs[0][0].data_ptr<int64_t>()[2]);
  std::string sr = BytesToString(sigs[0][differing], outs[0][differing].data_ptr<int64_t>()[2]);
  TD_FAIL(ValueError, what, ": the TensorDict of rank ", differing, " differs from rank 0's: ",
                   internal::DescribeMismatch(sr, c10::str("rank ", differing), s0, "rank 0"),
                   "; nothing was exchanged");
}

c10d::ReduceOp ToC10d(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg:
      return c10d::ReduceOp::SUM;
    case ReduceOp::kProduct:
      return c10d::ReduceOp::PRODUCT;
    case ReduceOp::kMin:
      return c10d::ReduceOp::MIN;
    case ReduceOp::kMax:
      return c10d::ReduceOp::MAX;
  }
  return c10d::ReduceOp::SUM;
}

// Gloo reduces float, double, half, int8, uint8, int32 and int64 itself; PackAndReduce maps bool
// (as uint8 with the logical op), bfloat16 (in float32), int16 (in int32: the same result modulo
// 2^16) and complex (sum / avg as pairs of reals). Anything else is refused here, before a byte
// moves, naming the key.
void CheckReducible(const PackedLayout& layout, ReduceOp op, const std::string& what) {
  for (const auto& leaf : layout.leaves()) {
    at::ScalarType t = leaf.tensor.scalar_type();
    if (op == ReduceOp::kAvg && !at::isFloatingType(t) && !at::isComplexType(t)) {
      TD_FAIL(ValueError, what, ": ReduceOp::kAvg needs floating-point leaves; key ",
                       leaf.key.repr(), " is ", t);
    }
    if (at::isComplexType(t) && t != at::kComplexHalf) {
      if (op != ReduceOp::kSum && op != ReduceOp::kAvg) {
        TD_FAIL(ValueError, what, ": complex leaves can only be summed or averaged; key ",
                         leaf.key.repr(), " is ", t);
      }
      continue;
    }
    switch (t) {
      case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kChar:
      case at::kByte: case at::kShort: case at::kInt: case at::kLong: case at::kBool:
        break;
      default:
        TD_FAIL(ValueError, what, ": key ", leaf.key.repr(), " has dtype ", t,
                         ", which c10d cannot reduce");
    }
  }
}

// Packs `layout`'s leaves into `buffer` (layout.Allocate()) and reduces them, one c10d call per
// piece (PackedLayout::Pieces: each group of small leaves, each large leaf): every piece is posted
// as soon as it is packed, so packing the next overlaps reducing this one. All posted, then all
// waited.
void PackAndReduce(const ProcessGroupPtr& pg, const PackedLayout& layout, const at::Tensor& buffer,
                   ReduceOp op, std::optional<int> dst, const Timeout& timeout,
                   const std::string& what) {
  std::vector<std::vector<at::Tensor>> views;
  std::vector<std::pair<size_t, at::Tensor>> widened;  // (views index, bfloat16 group)
  std::vector<WorkPtr> works;
  const std::vector<PackedLayout::Piece> pieces = layout.Pieces();
  views.reserve(pieces.size());
  for (const PackedLayout::Piece& piece : pieces) {
    layout.PackPiece(buffer, piece);
    at::Tensor view = layout.PieceView(buffer, piece);
    c10d::ReduceOp c10d_op = ToC10d(op);
    if (view.scalar_type() == at::kBool) {
      // Gloo has no bool reductions: reduce the same bytes as uint8 with the logical op
      // (sum = or = max, product = and = min), which never overflows.
      view = view.view(at::kByte);
      if (op == ReduceOp::kSum) c10d_op = c10d::ReduceOp::MAX;
      if (op == ReduceOp::kProduct) c10d_op = c10d::ReduceOp::MIN;
    } else if (view.scalar_type() == at::kBFloat16 || view.scalar_type() == at::kShort) {
      // Nor bfloat16 (LibTorch 1.13) or int16 ones: reduce in float32 / int32, copied back
      // below (int16 wraps exactly as it would have: the low 16 bits of the int32 result).
      widened.emplace_back(views.size(), view);
      view = view.to(view.scalar_type() == at::kShort ? at::kInt : at::kFloat);
    } else if (at::isComplexType(view.scalar_type())) {
      view = at::view_as_real(view);  // sum / avg only (CheckReducible)
    }
    views.push_back({view});
    try {
      works.push_back(internal::Transport(what, [&] {
        if (dst) {
          c10d::ReduceOptions o;
          o.reduceOp = c10d_op;
          o.rootRank = *dst;
          return pg->reduce(views.back(), WithTimeout(o, timeout));
        }
        c10d::AllreduceOptions o;
        o.reduceOp = c10d_op;
        return pg->allreduce(views.back(), WithTimeout(o, timeout));
      }));
    } catch (const TransportError&) {
      internal::WaitQuietly(works, timeout);  // the pieces already posted still use `buffer`
      throw;
    }
  }
  for (auto& w : works) internal::Wait(w, timeout, what);
  if (dst && *dst != pg->getRank()) return;
  if (op == ReduceOp::kAvg) {
    for (auto& v : views) v[0].div_(pg->getSize());
  }
  for (auto& [i, group] : widened) group.copy_(views[i][0]);
}

}  // namespace

void broadcast(const ProcessGroupPtr& pg, TensorDict& td, int src,
               const CollectiveOptions& options) {
  internal::CheckPeer(pg, src, "broadcast", "source", true);
  std::string what = What(pg, "broadcast", {{"source", src}});
  internal::CheckTimeout(options.timeout(), what);
  PackedLayout layout(td);
  CheckStructure(pg, layout, options, what);
  if (layout.nbytes() == 0) return;
  std::vector<at::Tensor> buf = {pg->getRank() == src ? layout.Pack() : layout.Allocate()};
  c10d::BroadcastOptions o;
  o.rootRank = src;
  Collective(what, options.timeout(),
             [&] { return pg->broadcast(buf, WithTimeout(o, options.timeout())); });
  if (pg->getRank() != src) {
    layout.CheckWritable(what);
    layout.Unpack(buf[0], td);
  }
}

void broadcast(const ProcessGroupPtr& pg, TensorDict&& td, int src,
               const CollectiveOptions& options) {
  broadcast(pg, td, src, options);
}

void reduce(const ProcessGroupPtr& pg, TensorDict& td, int dst, ReduceOp op,
            const CollectiveOptions& options) {
  internal::CheckPeer(pg, dst, "reduce", "destination", true);
  std::string what = What(pg, "reduce", {{"destination", dst}});
  internal::CheckTimeout(options.timeout(), what);
  PackedLayout layout(td);
  CheckReducible(layout, op, what);
  CheckStructure(pg, layout, options, what);
  if (layout.nbytes() == 0) return;
  at::Tensor buffer = layout.Allocate();
  PackAndReduce(pg, layout, buffer, op, dst, options.timeout(), what);
  if (pg->getRank() == dst) {
    layout.CheckWritable(what);
    layout.Unpack(buffer, td);
  }
}

void reduce(const ProcessGroupPtr& pg, TensorDict&& td, int dst, ReduceOp op,
            const CollectiveOptions& options) {
  reduce(pg, td, dst, op, options);
}

void all_reduce(const ProcessGroupPtr& pg, TensorDict& td, ReduceOp op,
                const CollectiveOptions& options) {
  if (!pg) TD_FAIL(ValueError, "td::distributed::all_reduce: the process group is null");
  std::string what = What(pg, "all_reduce");
  internal::CheckTimeout(options.timeout(), what);
  PackedLayout layout(td);
  CheckReducible(layout, op, what);
  CheckStructure(pg, layout, options, what);
  if (layout.nbytes() == 0) return;
  at::Tensor buffer = layout.Allocate();
  PackAndReduce(pg, layout, buffer, op, std::nullopt, options.timeout(), what);
  layout.CheckWritable(what);
  layout.Unpack(buffer, td);
}

void all_reduce(const ProcessGroupPtr& pg, TensorDict&& td, ReduceOp op,
                const CollectiveOptions& options) {
  all_reduce(pg, td, op, options);
}

namespace {

// One dense TensorDict shaped like `td` per buffer.
std::vector<TensorDict> Materialize(const TensorDict& td, const std::vector<at::Tensor>& buffers) {
  nlohmann::json structure = internal::StructureToJson(td);
  std::vector<TensorDict> out;
  out.reserve(buffers.size());
  for (const at::Tensor& b : buffers) {
    TensorDict t = internal::EmptyFromJson(structure);
    PackedLayout l(t);
    if (l.nbytes() > 0) l.Unpack(b, t);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

std::vector<TensorDict> all_gather(const ProcessGroupPtr& pg, const TensorDict& td,
                                   const CollectiveOptions& options) {
  if (!pg) TD_FAIL(ValueError, "td::distributed::all_gather: the process group is null");
  std::string what = What(pg, "all_gather");
  internal::CheckTimeout(options.timeout(), what);
  PackedLayout layout(td);
  CheckStructure(pg, layout, options, what);
  std::vector<std::vector<at::Tensor>> outs(1);
  for (int r = 0; r < pg->getSize(); ++r) outs[0].push_back(layout.Allocate());
  if (layout.nbytes() > 0) {
    std::vector<at::Tensor> in = {layout.Pack()};
    Collective(what, options.timeout(), [&] {
      return pg->allgather(outs, in, WithTimeout(c10d::AllgatherOptions(), options.timeout()));
    });
  }
  return Materialize(td, outs[0]);
}

std::vector<TensorDict> gather(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
                               const CollectiveOptions& options) {
  internal::CheckPeer(pg, dst, "gather", "destination", true);
  std::string what = What(pg, "gather", {{"destination", dst}});
  internal::CheckTimeout(options.timeout(), what);
  PackedLayout layout(td);
  CheckStructure(pg, layout, options, what);
  const bool root = pg->getRank() == dst;
  std::vector<std::vector<at::Tensor>> outs;
  if (root) {
    outs.resize(1);
    for (int r = 0; r < pg->getSize(); ++r) outs[0].push_back(layout.Allocate());
  }
  if (layout.nbytes() > 0) {
    std::vector<at::Tensor> in = {layout.Pack()};
    c10d::GatherOptions o;
    o.rootRank = dst;
    Collective(what, options.timeout(),
               [&] { return pg->gather(outs, in, WithTimeout(o, options.timeout())); });
  }
  if (!root) return {};
  return Materialize(td, outs[0]);
}

std::optional<TensorDict> gather_and_stack(const ProcessGroupPtr& pg, TensorDict& td, int dst,
                                           const CollectiveOptions& options) {
  internal::CheckPeer(pg, dst, "gather_and_stack", "destination", true);
  std::string what = What(pg, "gather_and_stack", {{"destination", dst}});
  const int world = pg->getSize();
  if (world < 2) {
    TD_FAIL(ValueError, what, ": needs at least 2 ranks (the destination stacks the others')");
  }
  if (pg->getRank() != dst) {
    gather(pg, td, dst, options);
    return std::nullopt;
  }
  const bool rows = td.batch_dims() > 0 && td.batch_size()[0] > 0;
  const bool fits = td.batch_dims() > 0 && td.batch_size()[0] == world - 1;
  auto misfit = [&] {
    TD_FAIL(ValueError, what, ": the destination's batch size ", SizeRepr(td.batch_size()),
            " must start with world_size - 1 = ", world - 1, " (one row per other rank)");
  };
  // Without a row to offer, the TensorDict itself goes in: its structure differs from the
  // others', so the structure check fails every rank rather than leaving them waiting.
  const TensorDict mine = rows ? td.index({0}) : td;
  std::vector<TensorDict> all;
  try {
    all = gather(pg, mine, dst, options);
  } catch (const c10::ValueError&) {
    if (!fits) misfit();
    throw;
  }
  if (!fits) misfit();
  std::vector<TensorDict> others;
  for (int r = 0; r < world; ++r) {
    if (r != dst) others.push_back(std::move(all[r]));
  }
  td.update_(stack(others, 0));
  return td;
}

TensorDict scatter(const ProcessGroupPtr& pg, const std::vector<TensorDict>& tds, int src,
                   const CollectiveOptions& options) {
  internal::CheckPeer(pg, src, "scatter", "source", true);
  std::string what = What(pg, "scatter", {{"source", src}});
  internal::CheckTimeout(options.timeout(), what);
  const int world = pg->getSize();
  const bool root = pg->getRank() == src;
  // The source checks its inputs, then broadcasts [ok, structure bytes] and the structure, so
  // that every rank fails together when they are invalid.
  std::string error, desc;
  std::vector<PackedLayout> layouts;
  if (root) {
    if (static_cast<int>(tds.size()) != world) {
      error = c10::str("the source passed ", tds.size(), " TensorDicts for a group of ", world);
    } else {
      for (int r = 0; r < world && error.empty(); ++r) {
        layouts.emplace_back(tds[r]);
        if (layouts[r].signature() != layouts[0].signature()) {
          error = c10::str("TensorDict ", r, " differs from TensorDict 0: ",
                           internal::DescribeMismatch(layouts[r].signature(),
                                                      c10::str("TensorDict ", r),
                                                      layouts[0].signature(), "TensorDict 0"));
        }
      }
      if (error.empty()) desc = internal::StructureToJson(tds[0]).dump();
    }
  }
  std::vector<at::Tensor> header = {at::zeros({2}, at::kLong)};
  if (root) {
    header[0].data_ptr<int64_t>()[0] = error.empty() ? 1 : 0;
    header[0].data_ptr<int64_t>()[1] = static_cast<int64_t>(desc.size());
  }
  c10d::BroadcastOptions bo;
  bo.rootRank = src;
  bo = WithTimeout(bo, options.timeout());
  Collective(what, options.timeout(), [&] { return pg->broadcast(header, bo); });
  if (header[0].data_ptr<int64_t>()[0] != 1) {
    TD_FAIL(ValueError, what, ": ", root ? error : c10::str("the inputs of source rank ", src,
                                                         " are invalid (see its error)"));
  }
  std::vector<at::Tensor> structure = {at::empty({header[0].data_ptr<int64_t>()[1]}, at::kByte)};
  if (root) std::memcpy(structure[0].data_ptr<uint8_t>(), desc.data(), desc.size());
  Collective(what, options.timeout(), [&] { return pg->broadcast(structure, bo); });
  // Keys, shapes, dtypes, devices and depth, before allocating (no bound on the leaves' bytes:
  // the data has not arrived yet).
  TensorDict out =
      internal::ReadStructure(BytesToString(structure[0], structure[0].numel()), INT64_MAX, what,
                              c10::str("source rank ", src));
  PackedLayout layout(out);
  if (layout.nbytes() == 0) return out;
  std::vector<at::Tensor> mine = {layout.Allocate()};
  std::vector<std::vector<at::Tensor>> inputs;
  if (root) {
    inputs.resize(1);
    for (int r = 0; r < world; ++r) inputs[0].push_back(layouts[r].Pack());
  }
  c10d::ScatterOptions so;
  so.rootRank = src;
  Collective(what, options.timeout(),
             [&] { return pg->scatter(mine, inputs, WithTimeout(so, options.timeout())); });
  layout.Unpack(mine[0], out);
  return out;
}

}  // namespace distributed
}  // namespace td
