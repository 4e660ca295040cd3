// td::distributed: TensorDicts between processes over LibTorch's c10d (Gloo on CPU; any
// c10d process group works). Point to point: send / recv / isend / irecv, init_remote /
// from_remote_init; collectives: broadcast, reduce, all_reduce, all_gather, scatter, gather.
// Every call moves the small leaves of a TensorDict in one buffer (NOTE [ Packed layout ] in
// td/distributed/internal/packing.h): a send is a small header plus one message (after init_remote, one
// message alone), a collective is one c10d call (reductions: one per dtype), whatever the number
// of leaves. Leaves of 1 MiB or more (kAloneMinBytes) are not copied into that buffer: a send
// sends each from its own memory as a message of its own, a reduction reduces each in a call
// of its own.
//
//   auto pg = td::distributed::init_process_group(td::distributed::options_from_env());
//   if (pg->getRank() == 0) {
//     td::distributed::send(pg, rollout, /*dst=*/1);
//   } else {
//     td::distributed::recv(pg, rollout, /*src=*/0);   // rollout: same keys/shapes/dtypes
//   }
//   td::distributed::all_reduce(pg, grads, td::distributed::ReduceOp::kAvg);
//
// Structures are checked before any data is used: a receiver whose TensorDict differs from the
// sender's (keys, shapes, dtypes; non-tensor data is not compared and not sent) gets a
// td::ValueError naming the first differing key, and its TensorDict is left untouched. Errors
// of the transport (peer gone, connection closed, timeout) are td::distributed::TransportError
// naming the call and the peer, whether c10d reports them when the call posts its work or while
// it waits (NOTE [ Transport errors ] in td/distributed/internal.h).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

#include "td/core/tensordict.h"
#include "td/distributed/group.h"

namespace td {
namespace distributed {

// How send / isend put a TensorDict on the wire; recv / irecv read either (the header says which).
enum class WireFormat {
  // A header, then ONE message holding the structure signature and every small leaf packed
  // (NOTE [ Packed layout ]), then one message per leaf of 1 MiB or more, sent from the leaf's
  // own memory (isend: from a copy taken before it returns). The receiver takes every byte into
  // a reused staging buffer and writes its leaves only once all have arrived, so a transport
  // failure leaves them untouched.
  kPacked,
  // A header, one message with the structure signature, then one message per non-empty leaf,
  // sent from the leaf's own memory (isend: from a copy taken before it returns) and received
  // straight into the receiver's leaf (dense TensorDict, contiguous CPU leaf; the others through
  // a temporary): no copy on either side. The structure is still checked before any leaf is
  // written, but a transport failure part-way leaves the leaves received so far written.
  kPerLeaf,
};

// Options of the point-to-point calls.
struct P2POptions {
  // Messages of different tags never mix (the matching recv must use the same tag). >= 0.
  TORCH_ARG(int, tag) = 0;
  // Bound on each wait of the call; nullopt: the group's timeout. Must be positive: 0 or a
  // negative value is a ValueError naming the call (c10d would read 0 and -1 ms as the group's
  // timeout, other negative values as already expired). A timeout that fires makes Gloo close
  // the connections of the rank that timed out for good (the one to that peer at least), on both
  // ends: every later call between the two ranks, on any tag, fails with TransportError; treat
  // the group as unusable and create a new one.
  TORCH_ARG(std::optional<std::chrono::milliseconds>, timeout) = std::nullopt;
  // send / isend only (init_remote always packs).
  TORCH_ARG(WireFormat, wire_format) = WireFormat::kPacked;
  // Receives only: the most bytes a message's header may make this rank allocate before the
  // structure is checked (NOTE [ Bounded receives ] in p2p.cc). recv / irecv always take a
  // message the size of the receiving TensorDict's own, and take (then refuse, naming the first
  // difference) a differing one of up to max(that size, max_bytes); from_remote_init takes
  // init_remote messages of up to max_bytes (raise it for larger TensorDicts). A larger
  // announcement is a ValueError and its bytes are left unreceived, after which every receive
  // from that rank on that tag throws the same error (the pair can no longer tell where the next
  // message starts). >= 0.
  TORCH_ARG(int64_t, max_bytes) = int64_t{1} << 30;
};

// Options of the collectives.
struct CollectiveOptions {
  // First gather every rank's structure fingerprint (one small all_gather) so that ranks with
  // different TensorDicts all throw a ValueError naming the first difference instead of
  // exchanging mismatched bytes. Turn off only when the structures are known to be equal.
  TORCH_ARG(bool, check_structure) = true;
  // As P2POptions::timeout: positive or nullopt (the group's timeout); once one fires, the
  // connections it waited on are closed for good on every rank involved.
  TORCH_ARG(std::optional<std::chrono::milliseconds>, timeout) = std::nullopt;
};

enum class ReduceOp { kSum, kProduct, kMin, kMax, kAvg };

// A pending isend / irecv. wait() finishes it (rethrowing its error); the destructor of a
// handle never waited on waits (and swallows errors: call wait() to see them).
class Work {
 public:
  Work(Work&&) noexcept;
  Work& operator=(Work&&) noexcept;
  ~Work();
  // Blocks until done (at most the options' timeout per underlying wait). Throws like the
  // blocking call. Calling it again is a no-op.
  void wait();
  bool completed() const;

  struct Impl;
  explicit Work(std::unique_ptr<Impl> impl);

 private:
  std::unique_ptr<Impl> impl_;
};

// Sends every tensor leaf of `td` to rank `dst` (a header, then one message, then its leaves
// of 1 MiB or more one message each). Blocks until
// sent. Throws ValueError for dst out of range or dst == own rank, TransportError when the
// transport fails or times out.
//   send(pg, td, 1);
void send(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
          const P2POptions& options = {});
// Receives into the leaves of `td` (same keys, shapes and dtypes as the sender's; nested keys
// too) from rank `src`. Writes in place: a memmap or shared-memory TensorDict is written
// through; leaves that require grad are written under no-grad. Throws ValueError naming the first
// differing key/shape/dtype when the structures differ, or the key of a leaf that cannot be
// written in place (PackedLayout::CheckWritable); td is then untouched and the message consumed.
// TransportError when the transport fails or times out.
//   recv(pg, td, 0);
void recv(const ProcessGroupPtr& pg, TensorDict& td, int src, const P2POptions& options = {});
// A TensorDict is a handle: a temporary one writes through to the tensors it holds, e.g. a
// module's parameters (written under no-grad, as load_state_dict does):
//   recv(pg, td::nn::from_module(*policy), 0);
void recv(const ProcessGroupPtr& pg, TensorDict&& td, int src, const P2POptions& options = {});
// Non-blocking forms: the leaves are packed or copied before isend returns (td may change
// afterwards); irecv writes `td` when wait() returns. Pending irecvs of the same src and tag must be waited
// in the order they were posted.
Work isend(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
           const P2POptions& options = {});
Work irecv(const ProcessGroupPtr& pg, TensorDict& td, int src, const P2POptions& options = {});

// Ships the whole structure (keys, nesting, batch sizes, device, shapes, dtypes, non-tensor
// data) and the data of `td` to `dst`, whose from_remote_init returns a TensorDict equal to it;
// later send/recv pairs reuse that TensorDict. Both ranks also record the structure for this
// group, pair of ranks and tag: a later send of a TensorDict of that structure is then ONE
// message (header and data together; kPerLeaf: no message of byte counts), and a TensorDict of
// another structure still travels, announced by its header. A later init_remote on the same
// tag replaces the record.
//   auto copy = from_remote_init(pg, 0);     // on rank 1, after init_remote(pg, td, 1) on 0
void init_remote(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
                 const P2POptions& options = {});
TensorDict from_remote_init(const ProcessGroupPtr& pg, int src, const P2POptions& options = {});

// Collectives: every rank of the group calls them with TensorDicts of the same structure.
// Copies `src`'s leaves into every other rank's `td` (in place).
// Receiving ranks write their leaves under no-grad (as load_state_dict does), so parameters
// that require grad are written in place; a temporary TensorDict writes through to its tensors:
//   broadcast(pg, td::nn::from_module(*policy), 0);   // the learner's weights to every actor
// A rank whose leaves cannot all be written (an expanded view, an inference tensor) throws
// ValueError naming the key after the exchange, with its TensorDict unchanged; reduce and
// all_reduce do the same.
void broadcast(const ProcessGroupPtr& pg, TensorDict& td, int src,
               const CollectiveOptions& options = {});
void broadcast(const ProcessGroupPtr& pg, TensorDict&& td, int src,
               const CollectiveOptions& options = {});
// Reduces every leaf over the ranks into `td` on `dst` (other ranks' tds are left unspecified
// by c10d's reduce; treat them as scratch). kAvg needs floating-point leaves. Every dtype but
// complex reduces with every op (bool: sum = or, product = and); complex leaves only sum / avg.
// Throws ValueError naming the key otherwise.
void reduce(const ProcessGroupPtr& pg, TensorDict& td, int dst, ReduceOp op = ReduceOp::kSum,
            const CollectiveOptions& options = {});
void reduce(const ProcessGroupPtr& pg, TensorDict&& td, int dst, ReduceOp op = ReduceOp::kSum,
            const CollectiveOptions& options = {});
// Reduces every leaf over the ranks into every rank's `td` (one c10d all_reduce per dtype for
// the small leaves, one per leaf of 1 MiB or more; every rank's leaves are written once all
// have finished).
//   all_reduce(pg, grads, ReduceOp::kAvg);
void all_reduce(const ProcessGroupPtr& pg, TensorDict& td, ReduceOp op = ReduceOp::kSum,
                const CollectiveOptions& options = {});
void all_reduce(const ProcessGroupPtr& pg, TensorDict&& td, ReduceOp op = ReduceOp::kSum,
                const CollectiveOptions& options = {});
// Every rank's `td`, in rank order (new dense TensorDicts shaped like `td`).
std::vector<TensorDict> all_gather(const ProcessGroupPtr& pg, const TensorDict& td,
                                   const CollectiveOptions& options = {});
// On `dst`: every rank's td in rank order; elsewhere: an empty vector.
std::vector<TensorDict> gather(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
                               const CollectiveOptions& options = {});
// Upstream's td.gather_and_stack(dst): every other rank's `td` gathered to `dst`, stacked along a
// new dim 0 in rank order (dst's own left out) and written into dst's `td` in place (update_;
// a memmap or shared-memory TensorDict is written through), so dst's `td` has batch size
// [world_size - 1, *the others' batch size]. Returns `td` on dst, nullopt elsewhere. dst
// contributes its first row to the gather, so the structure check (CollectiveOptions) compares it
// with the others' TensorDicts: differing keys, shapes or dtypes are a ValueError on every rank
// naming the first difference, and dst's `td` is left untouched. Throws ValueError on dst when its
// batch size does not start with world_size - 1 (after the exchange, so no rank waits for it),
// and on every rank when the group has a single rank. Non-tensor data is not sent (as gather).
//   if (rank == 0) buffer = td::TensorDict({{"obs", at::zeros({world - 1, 8})}}, {world - 1});
//   gather_and_stack(pg, rank == 0 ? buffer : mine, 0);   // buffer[r - 1] holds rank r's obs
std::optional<TensorDict> gather_and_stack(const ProcessGroupPtr& pg, TensorDict& td, int dst,
                                           const CollectiveOptions& options = {});
// On `src`, `tds` holds one TensorDict per rank (all of the same structure); other ranks pass
// an empty vector. Returns this rank's TensorDict (structure of tds[0], shipped by src).
TensorDict scatter(const ProcessGroupPtr& pg, const std::vector<TensorDict>& tds, int src,
                   const CollectiveOptions& options = {});

}  // namespace distributed
}  // namespace td
