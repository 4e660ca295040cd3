// Python tensordict's own wire protocol over c10d, so that a C++ process and a Python process
// running tensordict's `TensorDict.send` / `recv` / `isend` / `irecv` exchange TensorDicts.
// docs/distributed.md, "Talking to Python tensordict", says which upstream versions were checked.
//
//   // C++ rank 0                                   # Python rank 1 (tensordict)
//   send_py(pg, rollout, 1);                        td.recv(src=0)          # or group_src=0
//   recv_py(pg, params, 1,                          params.send(dst=0, init_tag=100,
//           PythonWire().init_tag(100).pseudo_rand(true));           pseudo_rand=True)
//   send_py(pg, rollout, 1, PythonWire().consolidated(true));  td_c.recv(src=0, consolidated=True)
//
// NOTE [ Python wire ]
// - Leaf by leaf (tensordict's default, every version from 0.4 on): every tensor leaf is one c10d
//   message of its raw bytes, in sorted-keys order depth first (the order of NestedKey's
//   operator<: at each level the keys sorted as Python's sorted() sorts str, a nested
//   TensorDict's leaves at its key's place). Leaf i travels on tag t_i: t_i = init_tag + i, or
//   with pseudo_rand t_0 = G(init_tag), t_i = G(t_{i-1} + 1), where G is tensordict's
//   `int_generator` (python_int_generator below). Non-tensor entries travel not at all (Python:
//   a NonTensorData is a nested TensorDict without tensor leaves). Nothing but the bytes
//   travels: both sides must hold the same keys, shapes and dtypes.
// - Consolidated (tensordict >= 0.12, `send(consolidated=True)` / `recv(consolidated=True)`):
//   ONE message on tag 0, the bytes of Python's consolidated storage: every tensor leaf in
//   depth-first INSERTION order (a nested TensorDict's leaves at its place), each leaf's bytes
//   followed by zeros up to a multiple of 8 bytes (`_reduce_vals_and_metadata` with padding, which
//   consolidate() always asks for). The Python side must have inserted its keys in the same
//   order as the C++ side (or hold the TensorDict that from_remote_init built from ours).
// - What a receiver can check: Gloo gives a receive no byte count and no metadata, so the wire
//   cannot tell a different shape of the same byte size; a message SHORTER than the receiving
//   leaf completes with the leaf's tail unwritten (it keeps the values it had when the receive
//   was posted, as Python's recv into the leaf does), and a LONGER one makes Gloo terminate the
//   receiving process (an enforce in gloo/transport/tcp/pair.cc, on a Gloo thread; Python's
//   recv dies the same way). recv_py therefore (1) when told the sender's structure
//   (PythonWire::expect), compares it with the receiving TensorDict before posting any receive
//   and throws ValueError naming the first differing key with both shapes and dtypes; (2) takes
//   every message into a staging buffer (a copy of the receiving leaves, so that what a message
//   does not cover keeps the leaf's values) and writes the TensorDict only once all have arrived: a
//   message that never arrives (the sender has fewer leaves, or other tags) is a TransportError
//   naming that leaf's key, shape, dtype and tag, with the TensorDict untouched.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/arg.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "td/core/tensordict.h"
#include "td/distributed/distributed.h"

namespace td {
namespace distributed {

// Options of the Python-protocol calls; the names are Python's keyword arguments.
struct PythonWire {
  // Tag of the first leaf (Python's init_tag); the leaves count up from it. >= 0.
  TORCH_ARG(int, init_tag) = 0;
  // Python's pseudo_rand: tags from tensordict's int_generator chain (in [0, 10000)).
  TORCH_ARG(bool, pseudo_rand) = false;
  // Python's consolidated=True: one message of the consolidated storage, on tag 0 (init_tag and
  // pseudo_rand are not used, as in Python). send_py / recv_py only.
  TORCH_ARG(bool, consolidated) = false;
  // Bound on each wait; nullopt: the group's timeout. Positive (as P2POptions::timeout).
  TORCH_ARG(std::optional<std::chrono::milliseconds>, timeout) = std::nullopt;
  // Receives only: the sender's structure (a TensorDict shaped like what the peer sends, e.g.
  // built by the same code; only keys, shapes and dtypes are read). Compared with the receiving
  // TensorDict before anything is received (NOTE [ Python wire ], point 1).
  TORCH_ARG(std::optional<TensorDict>, expect) = std::nullopt;
};

// One tensor leaf as the Python protocol sends it.
struct PythonWireLeaf {
  NestedKey key;
  at::Tensor tensor;  // the TensorDict's leaf (not copied)
  int tag = 0;        // its message's tag (leaf by leaf); 0 for consolidated
  int64_t offset = 0;  // consolidated: byte offset in the storage; leaf by leaf: 0
  int64_t nbytes = 0;  // its bytes (without padding)
};

// The leaves of `td` in the order and with the tags `options` give them on the wire (leaf by
// leaf: sorted keys; consolidated: insertion order with storage offsets).
std::vector<PythonWireLeaf> python_wire_plan(const TensorDict& td, const PythonWire& options = {});
// Bytes of Python's consolidated storage for `td` (every leaf padded to a multiple of 8).
int64_t python_consolidated_nbytes(const TensorDict& td);
// tensordict.utils.int_generator(seed): numpy.random.default_rng(seed) (SeedSequence, PCG64), 8
// bytes from Generator.bytes read as a big-endian integer, modulo 10000. seed >= 0.
int python_int_generator(int64_t seed);

// Sends `td` to `dst` as Python's td.send(dst, init_tag=, pseudo_rand=) (or consolidated=True)
// does. Blocks until sent. ValueError for a bad rank, a negative init_tag, a non-CPU leaf;
// TransportError when the transport fails or times out.
void send_py(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
             const PythonWire& options = {});
// Receives what Python's td.send(...) with the same options sends into the leaves of `td` (which
// holds the sender's keys, shapes and dtypes), written in place under no-grad once every message
// has arrived (NOTE [ Python wire ]). ValueError naming the key when `options.expect` differs
// from `td` or a leaf cannot be written in place; TransportError naming the awaited leaf when a
// message does not arrive.
void recv_py(const ProcessGroupPtr& pg, TensorDict& td, int src, const PythonWire& options = {});
void recv_py(const ProcessGroupPtr& pg, TensorDict&& td, int src, const PythonWire& options = {});
// Non-blocking forms (Python's isend / irecv: the same messages). isend_py copies the leaves
// before it returns; irecv_py writes `td` when wait() returns (every message has arrived).
Work isend_py(const ProcessGroupPtr& pg, const TensorDict& td, int dst,
              const PythonWire& options = {});
Work irecv_py(const ProcessGroupPtr& pg, TensorDict& td, int src, const PythonWire& options = {});

}  // namespace distributed
}  // namespace td
