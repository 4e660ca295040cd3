"""Consolidated files as Python tensordict writes and reads them, with plain PyTorch.

Provenance: follows pytorch/tensordict's TensorDictBase.consolidate(filename) with
_reduce_vals_and_metadata and _reduce_get_metadata (tensordict/base.py; the lazy stack's
_reduce_get_metadata in tensordict/_lazy.py) and TensorDictBase.from_consolidated with
_rebuild_tensordict_files_consolidated (tensordict/_reductions.py), unchanged from v0.6.0 to
v0.14.0 for tensors (non-tensor entries gained a device field in v0.8). Every level's
cls_metadata holds its dim names ("names": one string or null per batch dim). A
LazyStackedTensorDict level has cls "LazyStackedTensorDict", cls_metadata {stack_dim,
stack_dim_name, is_locked}, empty leaves and non_tensors and its members as sub-levels "0", "1",
...; a NonTensorStack the same with cls "NonTensorStack", its NonTensorData members in
non_tensors ([data, batch_size, device]) and NonTensorStack members as sub-levels. Checked
against the files tensordict 0.14.0 writes (docs/consolidate.md). Python tensordict itself is
not needed.

Usage: consolidated_fixture.py write <file> [<stacks file>]  # expected() [and stacks()]
       consolidated_fixture.py check <file>...                # read as Python reads, compare
       consolidated_fixture.py write-stacks <file>            # stacks(): lazy stack, NTS
(one process does several files: importing torch is the slow part)
"""
import json
import os
import sys

import torch


class Level:
    """A TensorDict level: batch size, dim names, entries (tensor | Level | LazyStack | NTS |
    ("non-tensor", value))."""

    def __init__(self, batch, names, entries):
        self.batch, self.names, self.entries = list(batch), list(names), entries


class LazyStack:
    """A LazyStackedTensorDict of member Levels."""

    def __init__(self, stack_dim, stack_dim_name, members):
        self.stack_dim, self.stack_dim_name, self.members = stack_dim, stack_dim_name, members


class NTS:
    """A NonTensorStack: members are (value, batch_size) NonTensorData or NTS."""

    def __init__(self, stack_dim, members, stack_dim_name=None):
        self.stack_dim, self.members, self.stack_dim_name = stack_dim, members, stack_dim_name


def expected():
    return Level([3], ["env"], {
        "a": torch.arange(12, dtype=torch.float32).view(3, 4),
        "b": torch.arange(3, dtype=torch.int64) * 7,
        "n": Level([3, 2], ["env", "agent"], {
            "x": torch.arange(30, dtype=torch.float64).view(3, 2, 5) / 4,
            "h": torch.full((3, 2), 1.5, dtype=torch.float16),
        }),
        "flag": torch.tensor([True, False, True]),
        "odd": torch.arange(3, dtype=torch.int16),  # 6 bytes: padded to 8
        "note": ("non-tensor", "hello"),
        # A NonTensorStack entry (NonTensorStack.from_list(["cat", "dog", None]) set in the
        # level): stack_dim 0, NonTensorData members of batch size [], the stack dim named as
        # its parent names that dim.
        "labels": NTS(0, [("cat", []), ("dog", []), (None, [])], "env"),
    })


def stacks():
    """What file_compat_test.cc's PythonStacksWeRead expects."""
    def member(i, width):
        return Level([3], ["t"], {
            "a": torch.arange(3, dtype=torch.float32) + 10 * i,
            "ragged": torch.ones(3, width, dtype=torch.int32) * i,
            "s": ("non-tensor", "xy"[i]),
        })
    return Level([3], ["t"], {
        "v": torch.arange(3, dtype=torch.int64),
        "ls": LazyStack(1, "env", [member(0, 2), member(1, 4)]),
        "nts": NTS(1, [("p", [3]), ("q", [3])]),
        # Under its parent's names, upstream names the stack dim of a NonTensorStack too.
        "nts2": NTS(0, [NTS(0, [(i, []), ({"k": [i]}, [])]) for i in range(3)], "t"),
    })


def cls_metadata(level):
    return {"device": None, "names": level.names, "batch_size": level.batch,
            "is_locked": False}


def write(path, root=None):
    root = expected() if root is None else root
    flat = []
    flat_size = []
    start = 0

    def leaf(meta, key, value):
        nonlocal start
        n = value.element_size() * value.numel()
        pad = n % 8
        if pad != 0:
            pad = 8 - pad
        flat_size.append(n + pad)
        stop = start + flat_size[-1]
        meta["leaves"][key] = (str(value.dtype), list(value.shape), start, stop, pad)
        start = stop
        flat.append(value)

    def stack_meta(cls, node):
        return {"cls": cls, "non_tensors": {}, "leaves": {},
                "cls_metadata": {"stack_dim": node.stack_dim,
                                 "stack_dim_name": node.stack_dim_name,
                                 "is_locked": False}}

    def reduce(node):
        if isinstance(node, LazyStack):
            meta = stack_meta("LazyStackedTensorDict", node)
            for i, m in enumerate(node.members):
                meta[str(i)] = reduce(m)
            return meta
        if isinstance(node, NTS):
            meta = stack_meta("NonTensorStack", node)
            for i, m in enumerate(node.members):
                if isinstance(m, NTS):
                    meta[str(i)] = reduce(m)
                else:
                    meta["non_tensors"][str(i)] = (m[0], m[1], None)
            return meta
        meta = {"cls": "TensorDict", "non_tensors": {}, "leaves": {},
                "cls_metadata": cls_metadata(node)}
        for key, value in node.entries.items():
            if isinstance(value, tuple):
                meta["non_tensors"][key] = (value[1], node.batch, None)
            elif isinstance(value, (Level, LazyStack, NTS)):
                meta[key] = reduce(value)
            else:
                leaf(meta, key, value)
        return meta

    metadata = reduce(root)
    filesize = sum(flat_size)
    metadata_json = torch.as_tensor(bytearray(json.dumps(metadata).encode("utf-8")), dtype=torch.uint8)
    len_metadata = torch.tensor([metadata_json.numel()], dtype=torch.int64).view(torch.uint8)
    suffix = len_metadata.numel() + metadata_json.numel()
    total = torch.from_file(path, size=filesize + suffix, dtype=torch.uint8, shared=True)
    total[-8:] = len_metadata
    total[-8 - metadata_json.numel() : -8] = metadata_json
    storage = total[:-suffix]
    items = []
    for v in flat:
        r = v.reshape(-1).view(torch.uint8)
        pad = r.numel() % 8
        if pad != 0:
            r = torch.cat([r, r.new_zeros(8 - pad)])
        items.append(r)
    if items:
        torch.cat(items, out=storage)


def read(path):
    file = torch.from_file(path, dtype=torch.uint8, size=os.path.getsize(path))
    metadata_size = int(file[-8:].clone().view(torch.int64))
    metadata = json.loads(bytes(file[-metadata_size - 8 : -8].tolist()))
    storage = file[: -metadata_size - 8]

    def from_metadata(metadata):
        metadata = dict(metadata)
        non_tensor = metadata.pop("non_tensors")
        leaves = metadata.pop("leaves")
        cls = metadata.pop("cls")
        cls_metadata = dict(metadata.pop("cls_metadata"))
        metadata.pop("size", None)
        if cls == "NonTensorStack":
            # _rebuild_tensordict_files_consolidated: members "0", "1", ... from non_tensors
            # (NonTensorData) or sub-levels (NonTensorStacks), stacked along stack_dim.
            keys = sorted(set(non_tensor) | set(metadata), key=int)
            members = [tuple(non_tensor[k][:2]) if k in non_tensor else from_metadata(metadata[k])
                       for k in keys]
            assert not leaves, leaves
            return NTS(cls_metadata["stack_dim"], members, cls_metadata.get("stack_dim_name"))
        assert cls == "TensorDict", cls
        d = {key: ("non-tensor", v[0]) for key, v in non_tensor.items()}
        for key, (dtype, shape, start, stop, pad) in leaves.items():
            dtype = getattr(torch, dtype.split(".")[1])
            value = storage[start:stop].view(dtype)
            if pad:
                value = value[: torch.Size(shape).numel()]
            d[key] = value.view(shape)
        for k, v in metadata.items():
            d[k] = from_metadata(v)
        # TensorDict._from_dict_validated(d, **cls_metadata) takes batch_size and names.
        return Level(cls_metadata["batch_size"], cls_metadata["names"], d)

    return from_metadata(metadata)


def check(path):
    got = read(path)

    def compare(want, got, where):
        if isinstance(want, NTS):
            assert isinstance(got, NTS), (where, got)
            assert (got.stack_dim, got.stack_dim_name) == (want.stack_dim, want.stack_dim_name), (
                where, got.stack_dim, got.stack_dim_name)
            assert len(got.members) == len(want.members), (where, len(got.members))
            for i, (w, g) in enumerate(zip(want.members, got.members)):
                if isinstance(w, NTS):
                    compare(w, g, where + "/" + str(i))
                else:
                    assert tuple(g) == (w[0], list(w[1])), (where, i, g, w)
            return
        assert got.batch == want.batch, (where, got.batch, want.batch)
        assert got.names == want.names, (where, "names", got.names, want.names)
        assert set(want.entries) == set(got.entries), (where, sorted(want.entries),
                                                       sorted(got.entries))
        for k, v in want.entries.items():
            g = got.entries[k]
            if isinstance(v, (Level, NTS)):
                compare(v, g, where + "/" + k)
            elif isinstance(v, tuple):
                assert g == v, (where, k, g)
            else:
                assert g.dtype == v.dtype and g.shape == v.shape, (where, k, g.dtype, g.shape)
                assert torch.equal(g, v), (where, k, g, v)

    compare(expected(), got, "")
    print("python read", path, "ok")


if __name__ == "__main__":
    command, paths = sys.argv[1], sys.argv[2:]
    if command == "write":
        write(paths[0])
        if len(paths) > 1:
            write(paths[1], stacks())
    elif command == "write-stacks":
        write(paths[0], stacks())
    else:
        assert command == "check", command
        for p in paths:
            check(p)
