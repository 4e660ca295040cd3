// Process-group setup for td::distributed: a Gloo process group from explicit options or from
// the environment that torchrun and other launchers set, and the one alias for the process-group
// type every call of //td/distributed takes.
//
//   auto pg = td::distributed::init_process_group(
//       td::distributed::GroupOptions().rank(r).world_size(2).file_store_path("/tmp/x/store"));
//   td::distributed::send(pg, data, /*dst=*/1);
//
// Users with their own c10d setup pass their own process group (any backend: Gloo on CPU, NCCL
// with CUDA builds) to the calls instead.
#pragma once

#include <c10/util/Exception.h>
#include <torch/arg.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "td/compat/c10d.h"

namespace td {
namespace distributed {

// The process-group type of every call: c10d::ProcessGroup on LibTorch 1.x, c10d::Backend on 2.x
// (td/compat/c10d.h); ProcessGroupGloo derives from it on both.
using ProcessGroup = compat::ProcessGroupBase;
using ProcessGroupPtr = c10::intrusive_ptr<ProcessGroup>;

// The transport failed: a peer died or closed its connection, a wait timed out, the group was
// shut down. Thrown by every call of //td/distributed, whether c10d reported the failure when the
// operation was posted or while it was awaited; the message names the call, the peer (or the
// root and this rank's place in the group) and c10d's own message, e.g.
//   "td::distributed::recv (source rank 1): transport failure: Connection closed by peer ..."
// Derives from c10::Error, like every td error.
class TransportError : public c10::Error {
 public:
  using c10::Error::Error;
};

// How to set up a Gloo process group. Exactly one rendezvous: a FileStore when
// `file_store_path` is set (every rank passes the same path on a shared file system; the file
// must not exist before the group's first use), else a TCPStore served by rank 0 at
// master_addr:master_port.
struct GroupOptions {
  TORCH_ARG(int, rank) = 0;
  TORCH_ARG(int, world_size) = 1;
  TORCH_ARG(std::string, master_addr) = "127.0.0.1";
  TORCH_ARG(int, master_port) = 29500;
  TORCH_ARG(std::string, file_store_path) = "";
  // Rendezvous and every later operation of the group (a lost peer makes the waiting call throw
  // after at most this long).
  TORCH_ARG(std::chrono::milliseconds, timeout) = std::chrono::milliseconds(300000);
  // Where this rank's Gloo connections go (docs/distributed.md, "Multi-host"). The rendezvous
  // (master_addr) and the data may use different networks: on a host with several NICs, pick
  // the data network's by address or by interface name. At most one of the two:
  // Address (or host name) this rank's Gloo device binds to; peers connect to it.
  TORCH_ARG(std::string, device_hostname) = "";
  // Interface whose IPv4 address the Gloo device binds to ("eth1"); several, comma-separated
  // ("eth1,eth2"), give one device each (Gloo spreads the traffic over them), as PyTorch's
  // GLOO_SOCKET_IFNAME (which options_from_env reads into it). Both empty: 127.0.0.1 when
  // master_addr is a loopback address, else the address this machine's hostname resolves to
  // (Gloo's default device; often the wrong NIC, or 127.0.1.1 on Debian-style /etc/hosts).
  TORCH_ARG(std::string, device_interface) = "";
  // Gloo worker threads of the group.
  TORCH_ARG(int, threads) = 2;
  // From LOCAL_RANK (informational: the rank on this machine, for picking a device).
  TORCH_ARG(int, local_rank) = 0;
};

// Options from MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK and GLOO_SOCKET_IFNAME
// (into device_interface, clearing device_hostname); unset ones keep `defaults`' values. Throws
// td::ValueError naming the variable when one is not a number or out of range (rank >=
// world_size, port outside 1..65535).
//   auto pg = init_process_group(options_from_env());
GroupOptions options_from_env(const GroupOptions& defaults = {});

// Creates the store and a ProcessGroupGloo; blocks until every rank joined (at most
// options.timeout). Throws td::ValueError for invalid options, TransportError when the rendezvous
// fails or times out, naming the store and the rank.
ProcessGroupPtr init_process_group(const GroupOptions& options);

}  // namespace distributed
}  // namespace td
