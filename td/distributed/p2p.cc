// send / recv / isend / irecv / init_remote / from_remote_init (message layout: NOTE [ Packed
// layout ] in packing.h).
#include <ATen/ATen.h>

#include <c10/util/intrusive_ptr.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "td/distributed/distributed.h"
#include "td/distributed/internal.h"
#include "td/distributed/internal/init_message.h"
#include "td/distributed/internal/packing.h"
#include "td/distributed/internal/wire.h"

namespace td {
namespace distributed {

Work::Work(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Work::Work(Work&&) noexcept = default;
Work& Work::operator=(Work&& other) noexcept {
  Work old(std::move(other));
  std::swap(impl_, old.impl_);
  return *this;  // `old`, now holding the work this one held, waits for it
}
Work::~Work() {
  try {
    wait();
  } catch (...) {
  }
}
void Work::wait() {
  if (!impl_ || impl_->done) return;
  impl_->done = true;  // a failed wait is not retried
  impl_->finish();
}
bool Work::completed() const { return !impl_ || impl_->done; }

namespace internal {

void FailTransport(const std::string& what, const std::string& message) {
  TD_FAIL(TransportError, what, ": transport failure: ", message);
}

void Wait(const WorkPtr& work, const std::optional<std::chrono::milliseconds>& timeout,
          const std::string& what) {
  Transport(what, [&] { return timeout ? work->wait(*timeout) : work->wait(); });
}

void WaitQuietly(const std::vector<WorkPtr>& works,
                 const std::optional<std::chrono::milliseconds>& timeout) {
  for (const WorkPtr& w : works) {
    try {
      Wait(w, timeout, "");
    } catch (const TransportError&) {
    }
  }
}

bool DeviceAvailable(const c10::Device& d) { return d.is_cpu() || (d.is_cuda() && at::hasCUDA()); }

void CheckTimeout(const std::optional<std::chrono::milliseconds>& timeout,
                  const std::string& what) {
  if (timeout && timeout->count() <= 0) {
    TD_FAIL(ValueError, what, ": timeout of ", timeout->count(),
            " ms: a timeout must be positive (leave it unset, std::nullopt, for the group's "
            "timeout)");
  }
}

void CheckPeer(const ProcessGroupPtr& pg, int peer, const char* call, const char* role,
               bool allow_self) {
  if (!pg) TD_FAIL(ValueError, "td::distributed::", call, ": the process group is null");
  if (peer < 0 || peer >= pg->getSize()) {
    TD_FAIL(ValueError, "td::distributed::", call, ": ", role, " rank ", peer,
            " is outside the group [0, ", pg->getSize(), ")");
  }
  if (!allow_self && peer == pg->getRank()) {
    TD_FAIL(ValueError, "td::distributed::", call, ": ", role, " rank ", peer,
            " is this process's own rank");
  }
}

}  // namespace internal

namespace {

using internal::AlignUp;
using internal::PackedLayout;
using internal::WorkPtr;
using internal::kHeaderBytes;

enum Kind : int64_t { kData = internal::kKindData, kInit = internal::kKindInit };
// The header's room at the front of a one-message send: the data starts aligned.
constexpr int64_t kInlinePrefix = AlignUp(kHeaderBytes);

// NOTE [ Agreed structures ]
// init_remote(td, dst, tag) and the from_remote_init(src, tag) that takes it leave both ranks with
// one record: on this group, from this rank to that one, on this tag, TensorDicts have this
// structure (signature, fingerprint, data and leaf bytes). Afterwards a send of that structure
// sends neither description nor table (NOTE [ Packed layout ]), and every receive on that group,
// peer and tag posts a first buffer with room for the header and the agreed data, so that either
// kind of first message fits: a sender whose TensorDict differs sends the header alone first.
// The receiver records the agreement whenever it takes an init_remote message, also in a recv
// that refuses it (AcceptInit), since the sender recorded it either way; an irecv posted earlier
// has room for the agreement of its posting time. A receiver whose TensorDict differs gets the
// usual ValueError (the agreed signature stands for the sender's), nothing written, the message
// consumed. Gloo aborts on a message larger than its posted buffer, hence both sides decide from
// the same record, never a guess. A later init_remote on the same group, peers and tag replaces
// the record; a record ends with its group (a weak reference: a new group never finds it).
struct Agreement {
  uint64_t fingerprint = 0;
  int64_t nbytes = 0;
  int64_t inline_bytes = 0;  // what a kPacked send puts behind its header
  std::string signature;
  // Bytes of each leaf a send sends alone (OwnMessages), in data order: [kPacked, kPerLeaf].
  std::array<std::vector<int64_t>, 2> alone;
  std::string refusal;  // Side::kBroken: the error of every later receive
};

std::vector<int64_t> AloneBytes(const PackedLayout& layout, bool per_leaf) {
  std::vector<int64_t> out;
  for (size_t i : layout.OwnMessages(per_leaf)) {
    out.push_back(static_cast<int64_t>(layout.leaves()[i].tensor.nbytes()));
  }
  return out;
}

// kBroken: receiving from that peer on that tag is no longer possible (NOTE [ Bounded receives ]).
enum class Side { kSend, kRecv, kBroken };

class Agreements {
 public:
  static Agreements& Get() {
    static auto* registry = new Agreements();  // never destroyed: sends may run at exit
    return *registry;
  }

  std::shared_ptr<const Agreement> Find(const ProcessGroupPtr& pg, int peer, int tag, Side side) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(Key{pg.get(), peer, tag, side});
    return it == entries_.end() ? nullptr : it->second.agreement;
  }

  void Record(const ProcessGroupPtr& pg, int peer, int tag, Side side, Agreement agreement) {
    Entry e{c10::weak_intrusive_ptr<ProcessGroup>(pg),
            std::make_shared<const Agreement>(std::move(agreement))};
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      it = it->second.group.expired() ? entries_.erase(it) : std::next(it);
    }
    entries_.insert_or_assign(Key{pg.get(), peer, tag, side}, std::move(e));
  }

 private:
  using Key = std::tuple<const ProcessGroup*, int, int, Side>;
  struct Entry {
    // Keeps the group's memory (not the group) alive, so a key's address is never another group's.
    c10::weak_intrusive_ptr<ProcessGroup> group;
    std::shared_ptr<const Agreement> agreement;
  };
  std::mutex mu_;
  std::map<Key, Entry> entries_;
};

Agreement AgreementOf(const PackedLayout& layout) {
  std::array<std::vector<int64_t>, 2> alone = {AloneBytes(layout, false), AloneBytes(layout, true)};
  return {layout.fingerprint(), layout.nbytes(),  layout.inline_nbytes(),
          layout.signature(),   std::move(alone), ""};
}

// NOTE [ Messages larger than the receive ]
// Gloo hands a message to the oldest receive posted for its peer and tag and learns its size only
// from its preamble, on its I/O thread: one longer than that receive's buffer fails
// GLOO_ENFORCE_LE(op.preamble.length, op.nbytes) (gloo/transport/tcp/pair.cc) there, outside any
// call of ours, and the process ends in std::terminate. Gloo can neither probe a message's size
// nor skip a message, so no receive is safe against every size. Hence:
//  * our own messages always fit: both sides size from the same header or agreement;
//  * every receive's first buffer holds at least kFirstBufferMinBytes, so a stray message up to
//    that size on a header tag (a plain c10d send) is read as a header, refused by name ("not a
//    td::distributed message") and consumed;
//  * receives after a header (tag 2 * tag + 1) take the sizes it announced: a stray message there,
//    or a longer one on a header tag, still ends the process.
constexpr int64_t kFirstBufferMinBytes = int64_t{64} << 10;

using Timeout = std::optional<std::chrono::milliseconds>;

// Buffers and works of one outgoing message, in posting order: header, payload, leaves.
struct Outgoing {
  std::vector<std::vector<at::Tensor>> buffers;
  std::vector<WorkPtr> works;
};

// Posts `post(0)` .. `post(n - 1)` in order; on a failure, waits for those posted, then rethrows.
template <class F>
std::vector<WorkPtr> PostEach(size_t n, const Timeout& timeout, const std::string& what, F post) {
  std::vector<WorkPtr> works;
  for (size_t i = 0; i < n; ++i) {
    try {
      works.push_back(internal::Transport(what, [&] { return post(i); }));
    } catch (const TransportError&) {
      internal::WaitQuietly(works, timeout);
      throw;
    }
  }
  return works;
}

// Waits for every work (after a failure, the rest quietly, then rethrows).
void WaitAll(const std::vector<WorkPtr>& works, const Timeout& timeout, const std::string& what) {
  for (size_t i = 0; i < works.size(); ++i) {
    try {
      internal::Wait(works[i], timeout, what);
    } catch (const TransportError&) {
      internal::WaitQuietly(std::vector<WorkPtr>(works.begin() + i + 1, works.end()), timeout);
      throw;
    }
  }
}

struct Incoming {
  internal::Header h;  // per_leaf: the leaves to come travel one message each
  std::string desc;
  at::Tensor data;  // uint8: the inline data (kPerLeaf: none)
  at::Tensor large;  // agreed kPacked: the large groups' room in the first buffer; else undefined
  std::vector<int64_t> alone;  // the byte count of each leaf message to come
};

// A receive's first buffer, posted at once: the header (and agreed data), >= kFirstBufferMinBytes.
struct FirstMessage {
  std::vector<at::Tensor> buffer;
  WorkPtr work;
  std::shared_ptr<const Agreement> agreed;
};

FirstMessage PostFirst(const ProcessGroupPtr& pg, int src, int tag, const std::string& what) {
  if (auto broken = Agreements::Get().Find(pg, src, tag, Side::kBroken)) {
    TD_FAIL(ValueError, what, ": ", broken->refusal);
  }
  FirstMessage first;
  first.agreed = Agreements::Get().Find(pg, src, tag, Side::kRecv);
  const int64_t bytes = std::max(
      kFirstBufferMinBytes, first.agreed ? kInlinePrefix + first.agreed->nbytes : kHeaderBytes);
  first.buffer = {internal::ScratchBytes(bytes, at::kCPU)};
  first.work = internal::Transport(what, [&] { return pg->recv(first.buffer, src, tag); });
  return first;
}

// NOTE [ Bounded receives ]
// Gloo needs a buffer as large as a header announces posted before the bytes can be taken, so a
// broken or hostile header could make a receive allocate anything (up to 2^46 bytes) unchecked.
// A receive allocates at most its limit: recv / irecv the larger of its TensorDict's own message
// size (a matching message always fits) and P2POptions::max_bytes (so a differing message that
// size is still drained and its first difference named); from_remote_init P2POptions::max_bytes.
// A larger announcement is refused WITHOUT receiving what follows the header. Those bytes stay
// queued on the pair, where the next receive would take them for a header (or, larger than its
// buffer, make Gloo abort), so the refusal is recorded (Side::kBroken): every later receive from
// that rank on that tag throws the same ValueError before posting anything. An init_remote
// structure is then checked (ValidateStructure in wire.h) before its leaves are allocated.
[[noreturn]] void Break(const ProcessGroupPtr& pg, int src, int tag, const std::string& refusal,
                        const std::string& what) {
  Agreements::Get().Record(pg, src, tag, Side::kBroken, {0, 0, 0, "", {}, refusal});
  TD_FAIL(ValueError, what, ": ", refusal);
}

[[noreturn]] void RefuseUnreceived(const ProcessGroupPtr& pg, int src, int tag, int64_t announced,
                                   int64_t limit, const std::string& detail,
                                   const std::string& what) {
  Break(pg, src, tag, c10::str(
      "the message from rank ", src, " on tag ", tag / 2, " announced ", announced, " bytes (",
      detail, "), more than this receive allocates (", limit,
      " bytes: the receiving TensorDict's own message size or P2POptions::max_bytes, whichever "
      "is larger); its bytes were not received, so no later receive from rank ", src, " on tag ",
      tag / 2, " of this group can find where the next message starts, and each throws this "
      "error (NOTE [ Bounded receives ]); nothing was written"),
        what);
}

// Receives the messages after a header (tag + 1) into `targets`: all posted, then all waited.
void ReceiveAll(const ProcessGroupPtr& pg, const std::vector<at::Tensor>& targets, int src, int tag,
                const Timeout& timeout, const std::string& what) {
  std::vector<std::vector<at::Tensor>> bufs;
  for (const at::Tensor& t : targets) bufs.push_back({t});
  WaitAll(PostEach(bufs.size(), timeout, what,
                   [&](size_t i) { return pg->recv(bufs[i], src, tag + 1); }),
          timeout, what);
}

// Waits for the first message, then receives the payload it announces (per leaf: not the leaves
// yet), allocating at most `limit` bytes for it (NOTE [ Bounded receives ]).
Incoming Receive(const ProcessGroupPtr& pg, const FirstMessage& first, int src, int tag,
                 int64_t limit, const Timeout& timeout, const std::string& what) {
  internal::Wait(first.work, timeout, what);
  int64_t words[internal::kHeaderWords];
  std::memcpy(words, first.buffer[0].data_ptr<uint8_t>(), sizeof(words));
  const internal::Header h =
      internal::ParseHeader(words, what, c10::str("the message from rank ", src));
  const Agreement* agreed = first.agreed.get();
  Incoming in;
  in.h = h;
  if (h.agreed) {
    // Only the sizes of that init_remote were recorded when its structure was invalid here: the
    // byte counts of leaf messages that follow are unknown, so they cannot be drained.
    if (agreed != nullptr && h.fingerprint == agreed->fingerprint && agreed->signature.empty() &&
        (h.per_leaf ? agreed->nbytes > 0 : h.data_bytes < agreed->nbytes)) {
      Break(pg, src, tag,
            c10::str("rank ", src, " sent leaf messages of the structure its init_remote on tag ",
                     tag / 2, " agreed on, but that structure was invalid here; they cannot be "
                     "received or drained, so each later receive from rank ", src,
                     " on this tag throws this error; nothing was written"),
            what);
    }
    if (agreed == nullptr || h.fingerprint != agreed->fingerprint || h.desc_bytes != 0 ||
        h.data_bytes != (h.per_leaf ? 0 : agreed->inline_bytes)) {
      TD_FAIL(ValueError, what, ": rank ", src,
              " sent a TensorDict of the structure its init_remote agreed on, but this rank holds "
              "no such agreement for it on this tag (from_remote_init was not called here, or on "
              "another group or tag)");
    }
    in.desc = agreed->signature;
    in.alone = agreed->alone[h.per_leaf];
    if (!h.per_leaf) {
      // PostFirst made room for all the data: the large groups follow the inline data.
      in.data = first.buffer[0].narrow(0, kInlinePrefix, agreed->inline_bytes);
      in.large = first.buffer[0].narrow(0, kInlinePrefix + agreed->inline_bytes,
                                        agreed->nbytes - agreed->inline_bytes);
    }
    return in;
  }
  const int64_t prefix = AlignUp(h.desc_bytes);
  if (prefix + h.data_bytes > limit) {  // each <= 2^46: no overflow
    RefuseUnreceived(pg, src, tag, prefix + h.data_bytes, limit,
                     c10::str(h.desc_bytes, " of description, ", h.data_bytes,
                              h.kind == kInit ? " of data" : " of table and data"),
                     what);
  }
  std::vector<at::Tensor> payload = {internal::ScratchBytes(prefix + h.data_bytes, at::kCPU)};
  if (payload[0].numel() > 0) ReceiveAll(pg, payload, src, tag, timeout, what);
  in.desc.assign(reinterpret_cast<const char*>(payload[0].data_ptr<uint8_t>()), h.desc_bytes);
  if (h.kind == kInit) {  // no table: every leaf inline
    in.data = payload[0].narrow(0, prefix, h.data_bytes);
    return in;
  }
  // The table: how many leaf messages follow, then the byte count of each.
  const auto* table = reinterpret_cast<const int64_t*>(payload[0].data_ptr<uint8_t>() + prefix);
  const int64_t table_words = h.data_bytes / static_cast<int64_t>(sizeof(int64_t));
  const int64_t n = table_words >= 1 ? table[0] : -1;
  const int64_t table_bytes =
      n >= 0 && n < table_words ? AlignUp((n + 1) * static_cast<int64_t>(sizeof(int64_t))) : -1;
  if (table_bytes < 0 || table_bytes > h.data_bytes ||
      (h.per_leaf && table_bytes != h.data_bytes)) {
    TD_FAIL(ValueError, what, ": the message from rank ", src, " announces ", n,
            " leaf messages in ", h.data_bytes,
            " bytes: it is not a td::distributed message; nothing was written");
  }
  in.alone.assign(table + 1, table + 1 + n);
  in.data = payload[0].narrow(0, prefix + table_bytes, h.data_bytes - table_bytes);
  int64_t total = 0;
  for (int64_t b : in.alone) {
    if (b <= 0 || b > internal::kMaxAnnouncedBytes) {
      TD_FAIL(ValueError, what, ": the message from rank ", src, " announces a leaf of ", b,
              " bytes: it is not a td::distributed message; nothing was written");
    }
    if (__builtin_add_overflow(total, b, &total)) total = INT64_MAX;  // stays saturated
  }
  if (total > limit) {
    RefuseUnreceived(pg, src, tag, total, limit, c10::str(in.alone.size(), " leaf messages"), what);
  }
  return in;
}

// Consumes the leaf messages of a refused message, so the next recv starts clean.
void Drain(const ProcessGroupPtr& pg, const Incoming& in, int src, int tag, const Timeout& timeout,
           const std::string& what) {
  std::vector<at::Tensor> scratch;
  for (int64_t b : in.alone) scratch.push_back(at::empty({b}, at::kByte));
  ReceiveAll(pg, scratch, src, tag, timeout, what);
}

// Takes an init_remote message's structure (from_remote_init, or a recv refusing it), recording
// the agreement before anything can fail, as the sender did (NOTE [ Agreed structures ]). Returns
// its TensorDict, leaves filled when `fill`; ValueError for an invalid structure (sizes recorded).
TensorDict AcceptInit(const ProcessGroupPtr& pg, const Incoming& in, int src, int tag,
                      const std::string& what, bool fill) {
  const int64_t n = in.data.numel();
  Agreements::Get().Record(pg, src, tag, Side::kRecv, {in.h.fingerprint, n, n, "", {}, ""});
  TensorDict td =
      internal::InitStructure(in.desc, n, in.h.fingerprint, what, c10::str("rank ", src));
  const PackedLayout layout(td);
  Agreements::Get().Record(pg, src, tag, Side::kRecv, AgreementOf(layout));
  if (fill && n > 0) layout.Unpack(in.data, td);
  return td;
}

void Deliver(const ProcessGroupPtr& pg, const Incoming& in, TensorDict& td,
             const PackedLayout& layout, int src, int tag, const Timeout& timeout,
             const std::string& what) {
  if (in.h.kind != kData) {
    // Refused, but the agreement it carries stands on both sides.
    try {
      AcceptInit(pg, in, src, tag, what, /*fill=*/false);
    } catch (const ValueError&) {
    }
    TD_FAIL(ValueError, what, ": rank ", src,
            " sent an init_remote message; receive it with from_remote_init (the message is "
            "consumed and its structure agreed on; nothing was written)");
  }
  const int64_t inline_bytes = in.data.defined() ? in.data.numel() : 0;
  try {  // refused: the message is drained, then the error rethrown
    if (in.h.fingerprint != layout.fingerprint() || in.desc != layout.signature() ||
        in.alone != AloneBytes(layout, in.h.per_leaf) ||
        inline_bytes != (in.h.per_leaf ? 0 : layout.inline_nbytes())) {
      TD_FAIL(ValueError, what, ": the TensorDict sent by rank ", src,
              " differs from the receiving one: ",
              internal::DescribeMismatch(in.desc, "sender", layout.signature(), "receiver"),
              "; nothing was written");
    }
    layout.CheckWritable(what);
  } catch (const ValueError&) {
    Drain(pg, in, src, tag, timeout, what);
    throw;
  }
  // Lone leaves land: kPerLeaf, in place for contiguous CPU leaves that write through, else in a
  // temporary; kPacked, in staging laid out as the large groups, written once every byte is here.
  const std::vector<size_t> alone = layout.OwnMessages(in.h.per_leaf);
  const bool dense = in.h.per_leaf && internal::LeavesWriteThrough(td);
  auto direct = [&](const at::Tensor& t) { return dense && t.is_cpu() && t.is_contiguous(); };
  at::Tensor large = in.large;
  if (!in.h.per_leaf && !large.defined()) {
    large = alone.empty()
                ? at::empty({0}, at::kByte)
                : internal::ScratchBytes(layout.nbytes() - layout.inline_nbytes(), at::kCPU);
  }
  std::vector<at::Tensor> targets;
  for (size_t i : alone) {
    const auto& leaf = layout.leaves()[i];
    const auto n = static_cast<int64_t>(leaf.tensor.nbytes());
    targets.push_back(!in.h.per_leaf ? large.narrow(0, leaf.offset - layout.inline_nbytes(), n)
                      : direct(leaf.tensor) ? leaf.tensor.detach().reshape({-1}).view(at::kByte)
                                            : at::empty({n}, at::kByte));
  }
  ReceiveAll(pg, targets, src, tag, timeout, what);
  if (in.h.per_leaf) {
    at::NoGradGuard no_grad;  // as PackedLayout::Unpack
    TensorDict incoming;
    for (size_t k = 0; k < alone.size(); ++k) {
      const auto& leaf = layout.leaves()[alone[k]];
      const at::Tensor& t = leaf.tensor;
      if (direct(t)) continue;
      at::Tensor value = targets[k].view(t.scalar_type()).view(t.sizes()).to(t.device());
      if (dense) {
        t.copy_(value);
      } else {
        incoming.set(leaf.key, value);
      }
    }
    if (!dense && !alone.empty()) td.update_(incoming);
  } else if (layout.nbytes() > 0) {
    at::Tensor data = in.data;
    if (!layout.leaves().empty() && layout.leaves()[0].tensor.device() != data.device()) {
      data = data.to(layout.leaves()[0].tensor.device());
      large = large.to(layout.leaves()[0].tensor.device());
    }
    layout.Unpack(data, large, td);
  }
}

// A bound on what a send of `layout`'s structure puts after its header in either wire format
// (payload and leaf messages), so that a matching message always fits the receive's limit.
int64_t OwnMessageBytes(const PackedLayout& layout) {
  const int64_t table =
      AlignUp(static_cast<int64_t>((1 + layout.leaves().size()) * sizeof(int64_t)));
  return AlignUp(static_cast<int64_t>(layout.signature().size())) + table + layout.nbytes();
}

// The checks every call starts with (a receive's also max_bytes): its tag on the wire and its
// `what`, "td::distributed::recv (source rank 1)".
std::pair<int, std::string> Start(const ProcessGroupPtr& pg, int peer, const P2POptions& o,
                                  const char* call, bool receive) {
  const char* role = receive ? "source" : "destination";
  internal::CheckPeer(pg, peer, call, role, false);
  if (o.tag() < 0 || o.tag() > INT_MAX / 2 - 1) {
    TD_FAIL(ValueError, "td::distributed::", call, ": tag ", o.tag(), " is outside [0, ",
            INT_MAX / 2 - 1, "]");
  }
  std::string what = c10::str("td::distributed::", call, " (", role, " rank ", peer, ")");
  internal::CheckTimeout(o.timeout(), what);
  if (receive && o.max_bytes() < 0) {
    TD_FAIL(ValueError, what, ": max_bytes ", o.max_bytes(), " is negative");
  }
  return {o.tag() * 2, std::move(what)};
}

// send (snapshot false: waits before returning) and isend (true): posts one send's messages
// (NOTE [ Packed layout ], NOTE [ Agreed structures ]). `snapshot`: the lone leaves are copies
// taken now (isend returns before Gloo reads them), else their own memory when contiguous (send
// returns only once they are sent); the inline data always is a copy.
Work StartSend(const ProcessGroupPtr& pg, const TensorDict& td, int dst, const P2POptions& options,
               bool snapshot) {
  auto [tag, what] = Start(pg, dst, options, "send", false);
  PackedLayout layout(td);
  const auto agreement = Agreements::Get().Find(pg, dst, tag, Side::kSend);
  const bool agreed = agreement && agreement->signature == layout.signature();  // same layout
  const bool per_leaf = options.wire_format() == WireFormat::kPerLeaf;
  auto out = std::make_shared<Outgoing>();
  std::vector<int64_t> table = {0};  // how many leaves travel alone, then the bytes of each
  std::vector<at::Tensor> leaves;    // contiguous 1-D bytes
  for (size_t i : layout.OwnMessages(per_leaf)) {
    at::Tensor t = layout.leaves()[i].tensor.detach();
    t = snapshot ? t.clone(at::MemoryFormat::Contiguous) : t.contiguous();
    leaves.push_back(t.reshape({-1}).view(at::kByte));
    table.push_back(leaves.back().numel());
  }
  table[0] = static_cast<int64_t>(leaves.size());
  const int64_t inline_bytes = per_leaf ? 0 : layout.inline_nbytes();
  const int64_t desc_bytes = AlignUp(static_cast<int64_t>(layout.signature().size()));
  const int64_t table_bytes = AlignUp(static_cast<int64_t>(table.size() * sizeof(int64_t)));
  const std::array<int64_t, internal::kHeaderWords> h = internal::HeaderWords(
      {kData, layout.fingerprint(), agreed ? 0 : static_cast<int64_t>(layout.signature().size()),
       agreed ? inline_bytes : table_bytes + inline_bytes, per_leaf, agreed});
  // The bytes ahead of the inline data in its message: agreed, the header (kPacked: ONE message);
  // else [description | padding | table], behind a header message of its own.
  std::vector<uint8_t> front;
  if (agreed && !per_leaf) {
    front.resize(kInlinePrefix);
    std::memcpy(front.data(), h.data(), kHeaderBytes);
  } else {
    out->buffers.push_back({at::empty({kHeaderBytes}, at::kByte)});
    std::memcpy(out->buffers[0][0].data_ptr<uint8_t>(), h.data(), kHeaderBytes);
    if (!agreed) {
      front.resize(static_cast<size_t>(desc_bytes + table_bytes));
      std::memcpy(front.data(), layout.signature().data(), layout.signature().size());
      std::memcpy(front.data() + desc_bytes, table.data(), table.size() * sizeof(int64_t));
    }
  }
  if (!front.empty()) {
    const auto n = static_cast<int64_t>(front.size());
    at::Tensor buf =
        per_leaf ? internal::ScratchBytes(n, at::kCPU) : layout.Pack(n, /*inline_only=*/true);
    if (buf.is_cpu()) {
      std::memcpy(buf.data_ptr<uint8_t>(), front.data(), front.size());
    } else {
      buf.narrow(0, 0, n).copy_(at::from_blob(front.data(), {n}, at::kByte));
    }
    out->buffers.push_back({buf});
  }
  for (at::Tensor& l : leaves) out->buffers.push_back({std::move(l)});
  out->works = PostEach(out->buffers.size(), options.timeout(), what, [&](size_t i) {
    return pg->send(out->buffers[i], dst, i == 0 ? tag : tag + 1);
  });
  auto impl = std::make_unique<Work::Impl>();
  impl->finish = [out, timeout = options.timeout(), what = std::move(what)] {
    WaitAll(out->works, timeout, what);
  };
  return Work(std::move(impl));
}

}  // namespace

void send(const ProcessGroupPtr& pg, const TensorDict& td, int dst, const P2POptions& options) {
  StartSend(pg, td, dst, options, /*snapshot=*/false).wait();
}

Work isend(const ProcessGroupPtr& pg, const TensorDict& td, int dst, const P2POptions& options) {
  return StartSend(pg, td, dst, options, /*snapshot=*/true);
}

void recv(const ProcessGroupPtr& pg, TensorDict& td, int src, const P2POptions& options) {
  irecv(pg, td, src, options).wait();
}

void recv(const ProcessGroupPtr& pg, TensorDict&& td, int src, const P2POptions& options) {
  recv(pg, td, src, options);
}

Work irecv(const ProcessGroupPtr& pg, TensorDict& td, int src, const P2POptions& options) {
  auto [tag, what] = Start(pg, src, options, "recv", true);
  auto first = std::make_shared<FirstMessage>(PostFirst(pg, src, tag, what));
  auto impl = std::make_unique<Work::Impl>();
  impl->finish = [pg, td, first, src, tag = tag, timeout = options.timeout(),
                  max_bytes = options.max_bytes(), what = std::move(what)]() mutable {
    PackedLayout layout(td);
    Incoming in =
        Receive(pg, *first, src, tag, std::max(max_bytes, OwnMessageBytes(layout)), timeout, what);
    Deliver(pg, in, td, layout, src, tag, timeout, what);
  };
  return Work(std::move(impl));
}

void init_remote(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
                 const P2POptions& options) {
  const auto [tag, what] = Start(pg, dst, options, "init_remote", false);
  // EncodeInitMessage's bytes: the header alone on `tag`, the rest on tag + 1.
  std::string bytes = internal::EncodeInitMessage(td);
  std::vector<std::vector<at::Tensor>> parts = {
      {at::from_blob(bytes.data(), {kHeaderBytes}, at::kByte)},
      {at::from_blob(bytes.data() + kHeaderBytes,
                     {static_cast<int64_t>(bytes.size()) - kHeaderBytes}, at::kByte)}};
  const std::vector<WorkPtr> works = PostEach(2, options.timeout(), what, [&](size_t i) {
    return pg->send(parts[i], dst, tag + static_cast<int>(i));
  });
  // Recorded once posted, in message order (NOTE [ Agreed structures ]).
  Agreements::Get().Record(pg, dst, tag, Side::kSend, AgreementOf(PackedLayout(td)));
  WaitAll(works, options.timeout(), what);
}

TensorDict from_remote_init(const ProcessGroupPtr& pg, int src, const P2POptions& options) {
  const auto [tag, what] = Start(pg, src, options, "from_remote_init", true);
  FirstMessage first = PostFirst(pg, src, tag, what);
  Incoming in = Receive(pg, first, src, tag, options.max_bytes(), options.timeout(), what);
  if (in.h.kind != kInit) {
    Drain(pg, in, src, tag, options.timeout(), what);
    TD_FAIL(ValueError, what, ": rank ", src,
            " sent a plain send(); from_remote_init expects init_remote");
  }
  return AcceptInit(pg, in, src, tag, what, /*fill=*/true);
}

}  // namespace distributed
}  // namespace td
