// Helpers shared by td/distributed's .cc files (not part of the public API): the c10d work type,
// the one wrapper every c10d call goes through (transport failures become TransportError), bounded
// waits, peer checks.
//
// NOTE [ Transport errors ]
// c10d reports a lost peer, a closed connection or a timeout in several ways: c10::Error or
// gloo::IoException (a std::exception) from work->wait(), and the same exceptions straight from
// the posting call (pg->send / recv / allreduce / broadcast / ...) when the peer is already gone
// by the time the work is posted. Which of the two a test sees depends on timing, so every c10d
// call of //td/distributed, post and wait alike, runs inside internal::Transport(what, ...),
// which rethrows any of them as ONE td::distributed::TransportError "<what>: <c10d's message>".
// `what` names the call and the peer: "td::distributed::recv (source rank 1)" for point to point,
// "td::distributed::broadcast (source rank 0; rank 1 of 4)" / "td::distributed::all_reduce (rank
// 1 of 4)" for collectives (Gloo's own message then names the peer's address when it knows it).
// No other code of the package catches c10d's exceptions.
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "td/core/errors.h"
#include "td/distributed/distributed.h"
#include "td/distributed/group.h"

namespace td {
namespace distributed {

// What a Work runs in wait() (p2p.cc, python_wire.cc).
struct Work::Impl {
  std::function<void()> finish;
  bool done = false;
};

namespace internal {

// c10d::ProcessGroup::Work in LibTorch 1.x, c10d::Work in 2.x.
using WorkPtr = decltype(std::declval<ProcessGroup&>().send(
    std::declval<std::vector<at::Tensor>&>(), 0, 0));

[[noreturn]] void FailTransport(const std::string& what, const std::string& message);

// Runs `post_or_wait` (one c10d call) and returns its result; see NOTE [ Transport errors ].
//   WorkPtr w = Transport(what, [&] { return pg->send(bufs, dst, tag); });
template <class F>
decltype(auto) Transport(const std::string& what, F&& post_or_wait) {
  try {
    return post_or_wait();
  } catch (const TransportError&) {
    throw;
  } catch (const c10::Error& e) {
    FailTransport(what, e.what_without_backtrace());
  } catch (const std::exception& e) {
    FailTransport(what, e.what());
  }
}

// Waits for `work` (at most `timeout`, else the group's timeout) inside Transport(what, ...).
void Wait(const WorkPtr& work, const std::optional<std::chrono::milliseconds>& timeout,
          const std::string& what);

// The devices a structure from another process may put leaves on (ValidateStructure in wire.h):
// the CPU, and CUDA in a CUDA build.
bool DeviceAvailable(const c10::Device& d);

// Throws ValueError naming `what` unless `timeout` is unset or positive: c10d would read 0 and
// -1 ms as "the group's timeout" and other negative values as "already expired".
void CheckTimeout(const std::optional<std::chrono::milliseconds>& timeout,
                  const std::string& what);

// Throws ValueError unless 0 <= peer < world size (and, for point to point, peer != own rank).
// Waits for each of `works`, ignoring their errors: used before rethrowing a failure, so that
// the buffers of work already posted are not released while c10d still uses them.
void WaitQuietly(const std::vector<WorkPtr>& works,
                 const std::optional<std::chrono::milliseconds>& timeout);

void CheckPeer(const ProcessGroupPtr& pg, int peer, const char* call, const char* role,
               bool allow_self);

}  // namespace internal
}  // namespace distributed
}  // namespace td
