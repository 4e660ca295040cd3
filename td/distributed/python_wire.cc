// Python tensordict's wire protocol (NOTE [ Python wire ] in python_wire.h).

#include "td/distributed/python_wire.h"

#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "td/core/errors.h"
#include "td/distributed/internal.h"
#include "td/distributed/internal/packing.h"

namespace td {
namespace distributed {

// ---------------------------------------------------------------------------------------------
// tensordict.utils.int_generator: numpy's default_rng(seed) is a PCG64 bit generator seeded
// through a SeedSequence; Generator.bytes(8) draws two uint32 (the low, then the high half of one
// 64-bit output, as PCG64 buffers the high half), written little-endian: the 8 bytes of the
// 64-bit output in little-endian order, which int.from_bytes(..., "big") reads byte-swapped.
namespace {

constexpr uint32_t kInitA = 0x43b0d7e5u;
constexpr uint32_t kMultA = 0x931e8875u;
constexpr uint32_t kInitB = 0x8b51f9ddu;
constexpr uint32_t kMultB = 0x58f38dedu;
constexpr uint32_t kMixMultL = 0xca01f9ddu;
constexpr uint32_t kMixMultR = 0x4973f715u;
constexpr int kXShift = 16;
constexpr int kPoolSize = 4;

uint32_t HashMix(uint32_t value, uint32_t& hash_const) {
  value ^= hash_const;
  hash_const *= kMultA;
  value *= hash_const;
  value ^= value >> kXShift;
  return value;
}

uint32_t Mix(uint32_t x, uint32_t y) {
  uint32_t r = kMixMultL * x - kMixMultR * y;
  r ^= r >> kXShift;
  return r;
}

using U128 = unsigned __int128;

U128 Make128(uint64_t hi, uint64_t lo) { return (static_cast<U128>(hi) << 64) | lo; }

// PCG64's default multiplier, 0x2360ED051FC65DA44385DF649FCCF645.
const U128 kPcgMult = Make128(0x2360ED051FC65DA4ull, 0x4385DF649FCCF645ull);

uint64_t FirstPcg64Output(uint64_t seed) {
  // SeedSequence(seed): the entropy as little-endian 32-bit words (0 is one word), mixed into a
  // pool of 4 words.
  std::vector<uint32_t> entropy;
  for (uint64_t s = seed; s != 0; s >>= 32) entropy.push_back(static_cast<uint32_t>(s));
  if (entropy.empty()) entropy.push_back(0);
  uint32_t pool[kPoolSize];
  uint32_t hash_const = kInitA;
  for (int i = 0; i < kPoolSize; ++i) {
    pool[i] = HashMix(i < static_cast<int>(entropy.size()) ? entropy[i] : 0u, hash_const);
  }
  for (int src = 0; src < kPoolSize; ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      if (src != dst) pool[dst] = Mix(pool[dst], HashMix(pool[src], hash_const));
    }
  }
  for (size_t src = kPoolSize; src < entropy.size(); ++src) {
    for (int dst = 0; dst < kPoolSize; ++dst) {
      pool[dst] = Mix(pool[dst], HashMix(entropy[src], hash_const));
    }
  }
  // generate_state(4, uint64): 8 words, pairs read little-endian.
  uint32_t words[8];
  uint32_t hash_b = kInitB;
  for (int i = 0; i < 8; ++i) {
    uint32_t v = pool[i % kPoolSize];
    v ^= hash_b;
    hash_b *= kMultB;
    v *= hash_b;
    v ^= v >> kXShift;
    words[i] = v;
  }
  uint64_t w[4];
  for (int k = 0; k < 4; ++k) w[k] = words[2 * k] | (static_cast<uint64_t>(words[2 * k + 1]) << 32);
  // pcg64_set_seed(state = w[0]:w[1], sequence = w[2]:w[3]), then one step and XSL-RR output.
  const U128 inc = (Make128(w[2], w[3]) << 1) | 1u;
  U128 state = 0;
  state = state * kPcgMult + inc;
  state += Make128(w[0], w[1]);
  state = state * kPcgMult + inc;
  state = state * kPcgMult + inc;
  const uint64_t xored = static_cast<uint64_t>(state >> 64) ^ static_cast<uint64_t>(state);
  const unsigned rot = static_cast<unsigned>(state >> 122);
  return (xored >> rot) | (xored << ((64u - rot) & 63u));
}

}  // namespace

int python_int_generator(int64_t seed) {
  if (seed < 0) {
    TD_FAIL(ValueError, "td::distributed::python_int_generator: seed ", seed,
            " is negative (numpy's SeedSequence takes non-negative integers)");
  }
  const uint64_t out = FirstPcg64Output(static_cast<uint64_t>(seed));
  return static_cast<int>(__builtin_bswap64(out) % 10000u);
}

// ---------------------------------------------------------------------------------------------
namespace {

using internal::PackedLayout;
using internal::WorkPtr;
using Timeout = std::optional<std::chrono::milliseconds>;

// "leaf ('b', 'y') (Long [4], 32 bytes, tag 3)": a leaf-by-leaf message in errors.
std::string Describe(const PythonWireLeaf& leaf) {
  return c10::str("leaf ", leaf.key.repr(), " (", leaf.tensor.scalar_type(), " ",
                  leaf.tensor.sizes(), ", ", leaf.nbytes, " bytes, tag ", leaf.tag, ")");
}

std::vector<PythonWireLeaf> InsertionOrder(const TensorDict& td) {
  std::vector<PythonWireLeaf> leaves;
  for (const auto& [key, v] : td.items(KeysOptions().include_nested(true).leaves_only(true))) {
    if (!v.is_tensor()) continue;  // non-tensor data: no bytes on the wire
    PythonWireLeaf leaf{key, v.tensor()};
    leaf.nbytes = leaf.tensor.numel() * static_cast<int64_t>(leaf.tensor.element_size());
    leaves.push_back(std::move(leaf));
  }
  return leaves;
}

int64_t Pad8(int64_t n) { return (n + 7) / 8 * 8; }

void CheckOptions(const PythonWire& o, const std::string& what) {
  if (o.init_tag() < 0) {
    TD_FAIL(ValueError, what, ": init_tag ", o.init_tag(), " is negative (c10d tags are >= 0)");
  }
  internal::CheckTimeout(o.timeout(), what);
}

void CheckCpu(const std::vector<PythonWireLeaf>& leaves, const std::string& what) {
  for (const auto& leaf : leaves) {
    if (!leaf.tensor.device().is_cpu()) {
      TD_FAIL(ValueError, what, ": key ", leaf.key.repr(), " is on ", leaf.tensor.device(),
              "; the Python protocol over Gloo moves CPU tensors (move the TensorDict first)");
    }
  }
}

std::string PeerWhat(const char* call, const char* role, int peer) {
  return c10::str("td::distributed::", call, " (", role, " rank ", peer, ")");
}

// A plain TensorDict's structure as "<key> <dtype> <shape>" lines, in wire order.
std::string Describe(const std::vector<PythonWireLeaf>& leaves) {
  std::string s;
  for (const auto& l : leaves) {
    s += c10::str(l.key.repr(), " ", l.tensor.scalar_type(), " ", l.tensor.sizes(), "\n");
  }
  return s;
}

std::string LeafText(const PythonWireLeaf& l) {
  return c10::str(l.tensor.scalar_type(), " ", l.tensor.sizes());
}

// The first difference between the sender's leaves `a` and the receiver's `b` (both sorted by
// key), naming the key with both dtypes and shapes; empty when they agree.
std::string FirstDifference(const std::vector<PythonWireLeaf>& a,
                            const std::vector<PythonWireLeaf>& b) {
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].key < b[j].key)) {
      return c10::str("key ", a[i].key.repr(), " (", LeafText(a[i]),
                      ") is present on the sender side but not on the receiver side");
    }
    if (i == a.size() || b[j].key < a[i].key) {
      return c10::str("key ", b[j].key.repr(), " (", LeafText(b[j]),
                      ") is present on the receiver side but not on the sender side");
    }
    if (a[i].tensor.scalar_type() != b[j].tensor.scalar_type() ||
        a[i].tensor.sizes() != b[j].tensor.sizes()) {
      return c10::str("key ", a[i].key.repr(), ": ", LeafText(a[i]), " (sender) vs ",
                      LeafText(b[j]), " (receiver)");
    }
    ++i;
    ++j;
  }
  return "";
}

// Throws ValueError naming the first difference between the sender's structure `expect` and the
// receiving `td` (NOTE [ Python wire ], point 1).
void CheckExpected(const TensorDict& expect, const TensorDict& td, bool consolidated,
                   const std::string& what) {
  const std::string diff =
      FirstDifference(python_wire_plan(expect, {}), python_wire_plan(td, {}));
  if (!diff.empty()) {
    TD_FAIL(ValueError, what, ": the receiving TensorDict differs from the sender's: ", diff,
            "; nothing was received or written");
  }
  if (consolidated) {
    // Same leaves; the consolidated storage also needs them in the same insertion order.
    const auto a = InsertionOrder(expect);
    const auto b = InsertionOrder(td);
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].key != b[i].key) {
        TD_FAIL(ValueError, what, ": the consolidated storage lists the leaves in insertion "
                "order, and leaf ", i, " is ", a[i].key.repr(), " on the sender side but ",
                b[i].key.repr(), " on the receiver side; nothing was received or written.\n",
                "sender:\n", Describe(a), "receiver:\n", Describe(b));
      }
    }
  }
}

// A receive in flight: the staging buffer its messages land in, and where each leaf's bytes go.
struct Incoming {
  std::shared_ptr<PackedLayout> layout;  // of the receiving TensorDict
  std::vector<PythonWireLeaf> plan;
  at::Tensor staging;  // consolidated: Python's storage; leaf by leaf: the packed data
  std::vector<WorkPtr> works;  // one per plan leaf (leaf by leaf) or one (consolidated)
};

std::shared_ptr<Incoming> PostReceive(const ProcessGroupPtr& pg, const TensorDict& td, int src,
                                      const PythonWire& o, const std::string& what) {
  CheckOptions(o, what);
  auto in = std::make_shared<Incoming>();
  in->plan = python_wire_plan(td, o);
  CheckCpu(in->plan, what);
  if (o.expect()) CheckExpected(*o.expect(), td, o.consolidated(), what);
  in->layout = std::make_shared<PackedLayout>(td);
  in->layout->CheckWritable(what);
  // The staging buffer starts as a copy of the receiving leaves (NOTE [ Python wire ]): a
  // message shorter than its leaf leaves the leaf's own tail, not a pooled buffer's old bytes.
  if (o.consolidated()) {
    in->staging = internal::ScratchBytes(python_consolidated_nbytes(td), at::kCPU);
    for (const auto& leaf : in->plan) {
      if (leaf.nbytes == 0) continue;
      at::Tensor c = leaf.tensor.contiguous();
      std::memcpy(static_cast<uint8_t*>(in->staging.data_ptr()) + leaf.offset, c.data_ptr(),
                  static_cast<size_t>(leaf.nbytes));
    }
    std::vector<at::Tensor> bufs{in->staging};
    in->works.push_back(internal::Transport(what, [&] { return pg->recv(bufs, src, 0); }));
    return in;
  }
  in->staging = in->layout->Pack();
  // PackedLayout's leaves are sorted by key as the plan's are: leaf i is plan leaf i.
  const auto& packed = in->layout->leaves();
  TORCH_INTERNAL_ASSERT(packed.size() == in->plan.size());
  for (size_t i = 0; i < in->plan.size(); ++i) {
    TORCH_INTERNAL_ASSERT(packed[i].key == in->plan[i].key);
    std::vector<at::Tensor> bufs{in->staging.narrow(0, packed[i].offset, in->plan[i].nbytes)};
    try {
      in->works.push_back(internal::Transport(
          what + ", " + Describe(in->plan[i]),
          [&] { return pg->recv(bufs, src, in->plan[i].tag); }));
    } catch (...) {
      internal::WaitQuietly(in->works, o.timeout());
      throw;
    }
  }
  return in;
}

// Waits for every message, then writes `td`; on any failure `td` is untouched.
void FinishReceive(Incoming& in, TensorDict& td, const Timeout& timeout, const std::string& what,
                   bool consolidated) {
  for (size_t i = 0; i < in.works.size(); ++i) {
    try {
      internal::Wait(in.works[i], timeout,
                     consolidated ? c10::str(what, ", the consolidated storage (",
                                             in.staging.numel(), " bytes, tag 0)")
                                  : c10::str(what, ", ", Describe(in.plan[i])));
    } catch (const TransportError& e) {
      std::vector<WorkPtr> rest(in.works.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                in.works.end());
      internal::WaitQuietly(rest, timeout);
      TD_FAIL(TransportError, e.what_without_backtrace(),
              " (the message did not arrive: the sender has fewer leaves, other tags or has "
              "failed; nothing was written)");
    }
  }
  if (in.layout->nbytes() == 0) return;
  if (!consolidated) {
    in.layout->Unpack(in.staging, td);
    return;
  }
  // Python's storage (insertion order, 8-byte padding) into the packed layout, then the leaves.
  at::Tensor data = internal::ScratchBytes(in.layout->nbytes(), at::kCPU);
  std::vector<const PackedLayout::Leaf*> by_key;
  for (const auto& l : in.layout->leaves()) by_key.push_back(&l);
  for (const auto& leaf : in.plan) {
    auto it = std::lower_bound(by_key.begin(), by_key.end(), leaf.key,
                               [](const PackedLayout::Leaf* l, const NestedKey& k) {
                                 return l->key < k;
                               });
    TORCH_INTERNAL_ASSERT(it != by_key.end() && (*it)->key == leaf.key);
    if (leaf.nbytes == 0) continue;
    std::memcpy(static_cast<uint8_t*>(data.data_ptr()) + (*it)->offset,
                static_cast<const uint8_t*>(in.staging.data_ptr()) + leaf.offset,
                static_cast<size_t>(leaf.nbytes));
  }
  in.layout->Unpack(data, td);
}

// The messages of a send: the tensors (contiguous CPU, kept alive until the send completes).
struct Outgoing {
  std::vector<at::Tensor> tensors;
  std::vector<int> tags;
  std::vector<std::string> whats;
  std::vector<WorkPtr> works;
};

std::shared_ptr<Outgoing> PostSend(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
                                   const PythonWire& o, const std::string& what, bool copy) {
  CheckOptions(o, what);
  auto out = std::make_shared<Outgoing>();
  const auto plan = python_wire_plan(td, o);
  CheckCpu(plan, what);
  if (o.consolidated()) {
    at::Tensor storage = at::zeros({python_consolidated_nbytes(td)}, at::kByte);
    for (const auto& leaf : plan) {
      if (leaf.nbytes == 0) continue;
      at::Tensor c = leaf.tensor.contiguous();
      std::memcpy(static_cast<uint8_t*>(storage.data_ptr()) + leaf.offset, c.data_ptr(),
                  static_cast<size_t>(leaf.nbytes));
    }
    out->tensors.push_back(storage);
    out->tags.push_back(0);
    out->whats.push_back(c10::str(what, ", the consolidated storage (", storage.numel(),
                                  " bytes, tag 0)"));
  } else {
    for (const auto& leaf : plan) {
      at::Tensor t = leaf.tensor.contiguous();
      if (copy && t.is_same(leaf.tensor)) t = t.clone();
      out->tensors.push_back(std::move(t));
      out->tags.push_back(leaf.tag);
      out->whats.push_back(what + ", " + Describe(leaf));
    }
  }
  for (size_t i = 0; i < out->tensors.size(); ++i) {
    std::vector<at::Tensor> bufs{out->tensors[i]};
    try {
      out->works.push_back(
          internal::Transport(out->whats[i], [&] { return pg->send(bufs, dst, out->tags[i]); }));
    } catch (...) {
      internal::WaitQuietly(out->works, o.timeout());
      throw;
    }
  }
  return out;
}

void FinishSend(Outgoing& out, const Timeout& timeout) {
  for (size_t i = 0; i < out.works.size(); ++i) {
    try {
      internal::Wait(out.works[i], timeout, out.whats[i]);
    } catch (...) {
      std::vector<WorkPtr> rest(out.works.begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                out.works.end());
      internal::WaitQuietly(rest, timeout);
      throw;
    }
  }
}

}  // namespace

std::vector<PythonWireLeaf> python_wire_plan(const TensorDict& td, const PythonWire& options) {
  std::vector<PythonWireLeaf> leaves = InsertionOrder(td);
  if (options.consolidated()) {
    int64_t offset = 0;
    for (auto& leaf : leaves) {
      leaf.offset = offset;
      offset += Pad8(leaf.nbytes);
    }
    return leaves;
  }
  // Sorted keys, depth first: NestedKey's operator< compares part by part.
  std::stable_sort(leaves.begin(), leaves.end(),
                   [](const PythonWireLeaf& a, const PythonWireLeaf& b) { return a.key < b.key; });
  int64_t tag = static_cast<int64_t>(options.init_tag()) - 1;
  for (auto& leaf : leaves) {
    tag = options.pseudo_rand() ? python_int_generator(tag + 1) : tag + 1;
    if (tag > INT32_MAX) {
      TD_FAIL(ValueError, "td::distributed: the tag of key ", leaf.key.repr(), " (init_tag ",
              options.init_tag(), " + ", &leaf - leaves.data(), ") exceeds the int range");
    }
    leaf.tag = static_cast<int>(tag);
  }
  return leaves;
}

int64_t python_consolidated_nbytes(const TensorDict& td) {
  int64_t n = 0;
  for (const auto& leaf : InsertionOrder(td)) n += Pad8(leaf.nbytes);
  return n;
}

void send_py(const ProcessGroupPtr& pg, const TensorDict& td, int dst, const PythonWire& options) {
  internal::CheckPeer(pg, dst, "send_py", "destination", false);
  const std::string what = PeerWhat("send_py", "destination", dst);
  auto out = PostSend(pg, td, dst, options, what, /*copy=*/false);
  FinishSend(*out, options.timeout());
}

void recv_py(const ProcessGroupPtr& pg, TensorDict& td, int src, const PythonWire& options) {
  internal::CheckPeer(pg, src, "recv_py", "source", false);
  const std::string what = PeerWhat("recv_py", "source", src);
  auto in = PostReceive(pg, td, src, options, what);
  FinishReceive(*in, td, options.timeout(), what, options.consolidated());
}

void recv_py(const ProcessGroupPtr& pg, TensorDict&& td, int src, const PythonWire& options) {
  recv_py(pg, td, src, options);
}

Work isend_py(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
              const PythonWire& options) {
  internal::CheckPeer(pg, dst, "isend_py", "destination", false);
  if (options.consolidated()) {
    TD_FAIL(ValueError, "td::distributed::isend_py: consolidated=true is a send_py option "
            "(Python's isend has no consolidated form)");
  }
  const std::string what = PeerWhat("isend_py", "destination", dst);
  auto out = PostSend(pg, td, dst, options, what, /*copy=*/true);
  auto impl = std::make_unique<Work::Impl>();
  const Timeout timeout = options.timeout();
  impl->finish = [out, timeout] { FinishSend(*out, timeout); };
  return Work(std::move(impl));
}

Work irecv_py(const ProcessGroupPtr& pg, TensorDict& td, int src, const PythonWire& options) {
  internal::CheckPeer(pg, src, "irecv_py", "source", false);
  if (options.consolidated()) {
    TD_FAIL(ValueError, "td::distributed::irecv_py: consolidated=true is a recv_py option "
            "(Python's irecv has no consolidated form)");
  }
  const std::string what = PeerWhat("irecv_py", "source", src);
  auto in = PostReceive(pg, td, src, options, what);
  auto impl = std::make_unique<Work::Impl>();
  const Timeout timeout = options.timeout();
  TensorDict target = td;  // a handle: writes reach the caller's leaves
  impl->finish = [in, target, timeout, what]() mutable {
    FinishReceive(*in, target, timeout, what, false);
  };
  return Work(std::move(impl));
}

}  // namespace distributed
}  // namespace td
