// td::distributed calls on TensorClasses: the same calls as for TensorDicts (td/distributed/
// distributed.h, where each is documented), taking and returning the class. A class travels as
// its TensorDict: its tensor fields, nested classes' included, in one message. Link
// //td/tensorclass:distributed (it brings //td/tensorclass and //td/distributed).
//
//   namespace dist = td::distributed;
//   if (rank == 1) {
//     dist::init_remote(pg, rollout, 0);                       // structure, data, text fields
//     dist::send(pg, next_rollout, 0);
//   } else {
//     Transition got = dist::from_remote_init<Transition>(pg, 1);
//     dist::recv(pg, got, 1);                                  // written in place
//   }
//   dist::broadcast(pg, td::nn::from_module(*policy), 0);     // weights: a TensorDict
//
// What travels is what travels for the class's TensorDict: send / recv / isend / irecv and the
// collectives move tensor fields only, and the receiver keeps its own non-tensor fields
// (strings, numbers, JSON); init_remote / from_remote_init and scatter ship them too. A receiver
// must hold the same fields set (an optional field unset on one side only is a difference: the
// ValueError names it); all_gather and gather return classes with this rank's non-tensor fields.
#pragma once

#include <type_traits>
#include <utility>
#include <vector>

#include "td/core/tensordict.h"
#include "td/distributed/distributed.h"
#include "td/tensorclass/tensorclass.h"

namespace td {
namespace distributed {
namespace internal {
template <class D>
using IfClass = std::enable_if_t<::td::internal::tensorclass::kIsTensorClass<std::decay_t<D>>, int>;
}  // namespace internal

// ---- point to point ----------------------------------------------------------------------------
// send(pg, d, dst): the tensor fields of `d` to rank `dst`.
template <class D, internal::IfClass<D> = 0>
void send(const ProcessGroupPtr& pg, const D& d, int dst, const P2POptions& options = {}) {
  send(pg, d.tensordict(), dst, options);
}
// recv(pg, d, src): into the tensor fields of `d`, in place (a class is a handle: a temporary
// writes through too). Throws as recv of a TensorDict (ValueError naming the first differing
// field, `d` untouched).
template <class D, internal::IfClass<D> = 0>
void recv(const ProcessGroupPtr& pg, D&& d, int src, const P2POptions& options = {}) {
  recv(pg, TensorDict(d.tensordict()), src, options);
}
template <class D, internal::IfClass<D> = 0>
Work isend(const ProcessGroupPtr& pg, const D& d, int dst, const P2POptions& options = {}) {
  return isend(pg, d.tensordict(), dst, options);
}
// irecv(pg, d, src): the fields of `d` are written when wait() returns (the Work holds `d`'s
// fields, so `d` may be a temporary).
template <class D, internal::IfClass<D> = 0>
Work irecv(const ProcessGroupPtr& pg, D&& d, int src, const P2POptions& options = {}) {
  TensorDict fields = d.tensordict();
  return irecv(pg, fields, src, options);
}
// init_remote(pg, d, dst): the whole class (fields, non-tensor ones included, batch size, device)
// to `dst`, whose from_remote_init<D> returns it; later send / recv pairs reuse the structure.
template <class D, internal::IfClass<D> = 0>
void init_remote(const ProcessGroupPtr& pg, const D& d, int dst, const P2POptions& options = {}) {
  init_remote(pg, d.tensordict(), dst, options);
}
// The class that rank `src` sent with init_remote. Throws as from_remote_init of a TensorDict,
// and KeyError / TypeError (as D::from_tensordict) when what arrived is not a D.
//   Transition got = td::distributed::from_remote_init<Transition>(pg, 1);
template <class D, internal::IfClass<D> = 0>
D from_remote_init(const ProcessGroupPtr& pg, int src, const P2POptions& options = {}) {
  return D::from_tensordict(from_remote_init(pg, src, options));
}

// ---- collectives -------------------------------------------------------------------------------
template <class D, internal::IfClass<D> = 0>
void broadcast(const ProcessGroupPtr& pg, D&& d, int src, const CollectiveOptions& options = {}) {
  broadcast(pg, TensorDict(d.tensordict()), src, options);
}
template <class D, internal::IfClass<D> = 0>
void reduce(const ProcessGroupPtr& pg, D&& d, int dst, ReduceOp op = ReduceOp::kSum,
            const CollectiveOptions& options = {}) {
  reduce(pg, TensorDict(d.tensordict()), dst, op, options);
}
template <class D, internal::IfClass<D> = 0>
void all_reduce(const ProcessGroupPtr& pg, D&& d, ReduceOp op = ReduceOp::kSum,
                const CollectiveOptions& options = {}) {
  all_reduce(pg, TensorDict(d.tensordict()), op, options);
}
// Every rank's class, in rank order (tensor fields from each rank, non-tensor fields this
// rank's).
template <class D, internal::IfClass<D> = 0>
std::vector<D> all_gather(const ProcessGroupPtr& pg, const D& d,
                          const CollectiveOptions& options = {}) {
  std::vector<D> out;
  for (TensorDict& t : all_gather(pg, d.tensordict(), options)) {
    out.push_back(D::wrap(std::move(t)));
  }
  return out;
}
// On `dst`: every rank's class in rank order (as all_gather); elsewhere an empty vector.
template <class D, internal::IfClass<D> = 0>
std::vector<D> gather(const ProcessGroupPtr& pg, const D& d, int dst,
                      const CollectiveOptions& options = {}) {
  std::vector<D> out;
  for (TensorDict& t : gather(pg, d.tensordict(), dst, options)) {
    out.push_back(D::wrap(std::move(t)));
  }
  return out;
}
// On `src`, `ds` holds one class per rank; other ranks pass an empty vector
// (`scatter<Transition>(pg, {}, 0)`). Returns this rank's class (non-tensor fields included).
template <class D, internal::IfClass<D> = 0>
D scatter(const ProcessGroupPtr& pg, const std::vector<D>& ds, int src,
          const CollectiveOptions& options = {}) {
  std::vector<TensorDict> tds;
  tds.reserve(ds.size());
  for (const D& d : ds) tds.push_back(d.tensordict());
  return D::from_tensordict(scatter(pg, tds, src, options));
}

}  // namespace distributed
}  // namespace td
