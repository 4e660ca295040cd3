"""The Python side of //td/distributed:python_wire_test and examples/python_learner.

Speaks Python tensordict's c10d protocol on a nested dict of tensors (PlainTD, a TensorDict-shaped
class written here), with nothing but torch and numpy, so that it runs where the tensordict package
is not installed (Debian's python3-torch). What each function mirrors, upstream
(https://github.com/pytorch/tensordict):

* PlainTD.sorted_keys: tensordict/base.py, TensorDictBase.sorted_keys (v0.4.0 and main):
  sorted(self.keys()) at each level.
* PlainTD._send / _recv / _isend / _irecv: tensordict/base.py, TensorDictBase._send, _recv,
  _isend, _irecv (v0.4.0 and main, a1a061e3d): sorted keys, depth first; `_tag` starts at
  init_tag - 1 and, before each tensor leaf, becomes _tag + 1 or, with pseudo_rand,
  int_generator(_tag + 1); one c10d send / recv per leaf on that tag; nested tensordicts pass the
  running tag on. Upstream's `group_dst=` / `group_src=` form (main) calls the backend directly,
  `group.send([value], group_dst, _tag).wait()`, as we do here on a raw ProcessGroupGloo (the C++
  side's group is not registered with torch.distributed).
* int_generator: tensordict/utils.py, int_generator (v0.4.0 and main): default_rng(seed), 8
  bytes read big-endian, modulo 10_000.
* PlainTD.consolidated_storage: tensordict/base.py, TensorDictBase._reduce_vals_and_metadata and
  consolidate() (v0.12.0 .. main): leaves in insertion order depth first, each padded with zeros
  to a multiple of 8 bytes (consolidate() passes dtype=None, so padding is always on).
* send(consolidated=True) / recv(consolidated=True): tensordict/base.py, TensorDictBase.send /
  recv (v0.12.0 .. main): one dist.send / dist.recv of the uint8 storage on the default tag 0.

Usage: python_peer.py <store file> <rank> <world size> <case> [key=value ...]
Exit status 0 when the case passed; a failed check prints why and exits 1.
"""

import datetime
import sys

import numpy as np
import torch
import torch.distributed as dist


def int_generator(seed):
    rng = np.random.default_rng(seed)
    return int.from_bytes(rng.bytes(8), "big") % 10_000


class PlainTD:
    """Insertion-ordered nested dict of tensors."""

    def __init__(self):
        self.entries = {}

    def set(self, key, value):
        node = self
        for part in key[:-1]:
            node = node.entries.setdefault(part, PlainTD())
        node.entries[key[-1]] = value

    def get(self, key):
        node = self
        for part in key:
            node = node.entries[part]
        return node

    def sorted_keys(self):
        return sorted(self.entries.keys())

    def leaves(self, prefix=()):
        """(full key, tensor) in insertion order, depth first."""
        for k, v in self.entries.items():
            if isinstance(v, PlainTD):
                yield from v.leaves(prefix + (k,))
            else:
                yield prefix + (k,), v

    def _next_tag(self, tag, pseudo_rand):
        return int_generator(tag + 1) if pseudo_rand else tag + 1

    def _send(self, pg, dst, tag, pseudo_rand):
        for key in self.sorted_keys():
            value = self.entries[key]
            if isinstance(value, PlainTD):
                tag = value._send(pg, dst, tag, pseudo_rand)
                continue
            tag = self._next_tag(tag, pseudo_rand)
            pg.send([value], dst, tag).wait()
        return tag

    def _recv(self, pg, src, tag, pseudo_rand):
        for key in self.sorted_keys():
            value = self.entries[key]
            if isinstance(value, PlainTD):
                tag = value._recv(pg, src, tag, pseudo_rand)
                continue
            tag = self._next_tag(tag, pseudo_rand)
            pg.recv([value], src, tag).wait()
        return tag

    def _isend(self, pg, dst, tag, pseudo_rand, works):
        for key in self.sorted_keys():
            value = self.entries[key]
            if isinstance(value, PlainTD):
                tag = value._isend(pg, dst, tag, pseudo_rand, works)
                continue
            tag = self._next_tag(tag, pseudo_rand)
            works.append(pg.send([value], dst, tag))
        return tag

    def _irecv(self, pg, src, tag, pseudo_rand, works):
        for key in self.sorted_keys():
            value = self.entries[key]
            if isinstance(value, PlainTD):
                tag = value._irecv(pg, src, tag, pseudo_rand, works)
                continue
            tag = self._next_tag(tag, pseudo_rand)
            works.append(pg.recv([value], src, tag))
        return tag

    # The public calls, with upstream's keyword arguments.
    def send(self, pg, dst, init_tag=0, pseudo_rand=False, consolidated=False):
        if consolidated:
            pg.send([self.consolidated_storage()], dst, 0).wait()
            return
        self._send(pg, dst, init_tag - 1, pseudo_rand)

    def recv(self, pg, src, init_tag=0, pseudo_rand=False, consolidated=False):
        if consolidated:
            storage = torch.empty(self.consolidated_nbytes(), dtype=torch.uint8)
            pg.recv([storage], src, 0).wait()
            self.load_consolidated(storage)
            return
        self._recv(pg, src, init_tag - 1, pseudo_rand)

    def isend(self, pg, dst, init_tag=0, pseudo_rand=False):
        works = []
        self._isend(pg, dst, init_tag - 1, pseudo_rand, works)
        for w in works:
            w.wait()

    def irecv(self, pg, src, init_tag=0, pseudo_rand=False):
        works = []
        self._irecv(pg, src, init_tag - 1, pseudo_rand, works)
        for w in works:
            w.wait()

    # Consolidated storage.
    def _spans(self):
        start = 0
        for key, t in self.leaves():
            n = t.numel() * t.element_size()
            pad = (8 - n % 8) % 8
            yield key, t, start, n
            start += n + pad

    def consolidated_nbytes(self):
        total = 0
        for _, t in self.leaves():
            n = t.numel() * t.element_size()
            total += n + (8 - n % 8) % 8
        return total

    def consolidated_storage(self):
        storage = torch.zeros(self.consolidated_nbytes(), dtype=torch.uint8)
        for _, t, start, n in self._spans():
            if n:
                storage[start:start + n].copy_(t.contiguous().view(-1).view(torch.uint8))
        return storage

    def load_consolidated(self, storage):
        for key, t, start, n in self._spans():
            if n:
                t.view(-1).view(torch.uint8).copy_(storage[start:start + n])


# The test structure, in insertion order (not sorted, so that the two orders differ); the C++
# test (python_wire_test.cc, kSpec) lists the same.
SPEC = [
    (("z",), torch.float32, [4, 3]),
    (("b", "y"), torch.int64, [4]),
    (("b", "x"), torch.bool, [4, 2]),
    (("b", "n", "deep"), torch.float64, [4, 1, 2]),
    (("a",), torch.uint8, [4, 5]),
    (("i8",), torch.int8, [4]),
    (("i16",), torch.int16, [4, 3]),
    (("i32",), torch.int32, [4]),
    (("f16",), torch.float16, [4, 2]),
    (("bf16",), torch.bfloat16, [4, 2]),
    (("c64",), torch.complex64, [4]),
    (("empty",), torch.float32, [4, 0]),
]


def leaf_value(k, dtype, shape, step=0):
    """Leaf k's content (ValueOf in python_wire_test.cc computes the same)."""
    n = int(np.prod(shape))
    base = (torch.arange(n, dtype=torch.int64) * 3 + 7 * k + step) % 61
    if dtype == torch.bool:
        v = base % 2 == 1
    elif dtype == torch.uint8:
        v = base.to(torch.uint8)
    elif dtype == torch.complex64:
        v = torch.complex((base - 20).float(), torch.ones(n))
    else:
        v = (base - 20).to(dtype)
    return v.reshape(shape)


def make_td(fill=None, skip=(), step=0):
    td = PlainTD()
    for k, (key, dtype, shape) in enumerate(SPEC):
        if key in skip:
            continue
        if fill is None:
            td.set(key, leaf_value(k, dtype, shape, step))
        else:
            td.set(key, torch.full(shape, fill, dtype=dtype))
    return td


def check_td(td, step=0):
    ok = True
    for k, (key, dtype, shape) in enumerate(SPEC):
        got = td.get(key)
        want = leaf_value(k, dtype, shape, step)
        if got.dtype != dtype or list(got.shape) != shape or not torch.equal(got, want):
            print(f"python_peer: key {key}: got {got} want {want}", file=sys.stderr)
            ok = False
    return ok


def connect(store_path, rank, world_size, timeout_s=60.0):
    store = dist.FileStore(store_path, world_size)
    timeout = datetime.timedelta(seconds=timeout_s)
    return dist.ProcessGroupGloo(store, rank, world_size, timeout)


def main(argv):
    store_path, rank, world_size, case = argv[1], int(argv[2]), int(argv[3]), argv[4]
    opts = dict(a.split("=", 1) for a in argv[5:])
    peer = int(opts.get("peer", "0"))
    init_tag = int(opts.get("init_tag", "0"))
    pseudo_rand = opts.get("pseudo_rand", "0") == "1"
    mode = opts.get("mode", "sync")  # sync | async | consolidated
    barrier = opts.get("barrier", "1") == "1"
    pg = connect(store_path, rank, world_size)
    ok = True
    if case == "send":
        skip = tuple(tuple(k.split(".")) for k in opts.get("skip", "").split(",") if k)
        td = make_td(skip=skip)
        if mode == "async":
            td.isend(pg, peer, init_tag=init_tag, pseudo_rand=pseudo_rand)
        else:
            td.send(pg, peer, init_tag=init_tag, pseudo_rand=pseudo_rand,
                    consolidated=mode == "consolidated")
    elif case == "recv":
        td = make_td(fill=0)
        if mode == "async":
            td.irecv(pg, peer, init_tag=init_tag, pseudo_rand=pseudo_rand)
        else:
            td.recv(pg, peer, init_tag=init_tag, pseudo_rand=pseudo_rand,
                    consolidated=mode == "consolidated")
        ok = check_td(td)
    elif case == "intgen":
        # int_generator over a range of seeds, sent as one leaf (the C++ side compares with its
        # own python_int_generator).
        seeds = list(range(0, 2001)) + [10_000, 65_535, 2**31 - 1, 2**32, 2**32 + 5, 2**40 + 3]
        td = PlainTD()
        td.set(("seeds",), torch.tensor(seeds, dtype=torch.int64))
        td.set(("values",), torch.tensor([int_generator(s) for s in seeds], dtype=torch.int64))
        td.send(pg, peer)
    else:
        print(f"python_peer: unknown case {case}", file=sys.stderr)
        return 2
    if barrier:
        pg.barrier().wait()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
