"""Consolidated files as Python tensordict writes and reads them, with plain PyTorch.

Provenance: follows pytorch/tensordict's TensorDictBase.consolidate(filename) with
_reduce_vals_and_metadata (tensordict/base.py) and TensorDictBase.from_consolidated with
_rebuild_tensordict_files_consolidated (tensordict/_reductions.py), unchanged from v0.6.0 to
v0.14.0 for tensors (non-tensor entries gained a device field in v0.8). Python tensordict itself is
not needed.

Usage: consolidated_fixture.py write <file>   # the expected content, as Python writes it
       consolidated_fixture.py check <file>   # read as Python reads it, compare with expected
"""
import json
import os
import sys

import torch


def expected():
    """Nested dict: key -> tensor | dict | ("non-tensor", value); batch sizes alongside."""
    return {
        "a": torch.arange(12, dtype=torch.float32).view(3, 4),
        "b": torch.arange(3, dtype=torch.int64) * 7,
        "n": {
            "x": torch.arange(30, dtype=torch.float64).view(3, 2, 5) / 4,
            "h": torch.full((3, 3), 1.5, dtype=torch.float16),
        },
        "flag": torch.tensor([True, False, True]),
        "odd": torch.arange(3, dtype=torch.int16),  # 6 bytes: padded to 8
        "note": ("non-tensor", "hello"),
    }


BATCH = [3]


def write(path):
    flat = []
    flat_size = []
    start = 0

    def reduce(level):
        nonlocal start
        meta = {
            "cls": "TensorDict",
            "non_tensors": {},
            "leaves": {},
            "cls_metadata": {
                "device": None,
                "names": [None] * len(BATCH),
                "batch_size": list(BATCH),
                "is_locked": False,
            },
        }
        for key, value in level.items():
            if isinstance(value, tuple):
                meta["non_tensors"][key] = (value[1], list(BATCH), None)
            elif isinstance(value, dict):
                meta[key] = reduce(value)
            else:
                n = value.element_size() * value.numel()
                pad = n % 8
                if pad != 0:
                    pad = 8 - pad
                flat_size.append(n + pad)
                stop = start + flat_size[-1]
                meta["leaves"][key] = (str(value.dtype), list(value.shape), start, stop, pad)
                start = stop
                flat.append(value)
        return meta

    metadata = reduce(expected())
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
        assert cls == "TensorDict", cls
        cls_metadata = dict(metadata.pop("cls_metadata"))
        metadata.pop("size", None)
        d = {key: ("non-tensor", v[0]) for key, v in non_tensor.items()}
        for key, (dtype, shape, start, stop, pad) in leaves.items():
            dtype = getattr(torch, dtype.split(".")[1])
            value = storage[start:stop].view(dtype)
            if pad:
                value = value[: torch.Size(shape).numel()]
            d[key] = value.view(shape)
        for k, v in metadata.items():
            d[k] = from_metadata(v)
        d["__batch_size__"] = cls_metadata["batch_size"]
        return d

    return from_metadata(metadata)


def check(path):
    got = read(path)

    def compare(want, got, where):
        assert got.pop("__batch_size__")[: len(BATCH)] == BATCH, where
        assert set(want) == set(got), (where, sorted(want), sorted(got))
        for k, v in want.items():
            if isinstance(v, dict):
                compare(v, got[k], where + "/" + k)
            elif isinstance(v, tuple):
                assert got[k] == v, (where, k, got[k])
            else:
                g = got[k]
                assert g.dtype == v.dtype and g.shape == v.shape, (where, k, g.dtype, g.shape)
                assert torch.equal(g, v), (where, k, g, v)

    compare(expected(), got, "")
    print("python read", path, "ok")


if __name__ == "__main__":
    {"write": write, "check": check}[sys.argv[1]](sys.argv[2])
