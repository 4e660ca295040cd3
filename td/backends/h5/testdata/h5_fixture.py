"""HDF5 files as Python tensordict's PersistentTensorDict writes and reads them, with h5py.

Provenance: follows pytorch/tensordict's tensordict/persistent.py (PersistentTensorDict.from_dict,
which to_h5 calls, and from_h5 / _set_max_batch_size): a nested key is a group path, a tensor is
`create_dataset(key, data=tensor.numpy(), **kwargs)`, a string non-tensor is a scalar string
dataset, and from_h5 infers each level's batch size as the longest prefix its datasets' shapes and
sub-groups' batch sizes share. Other non-tensor data follows v0.14.0's _H5Backend.encode_non_tensor
(`np.array(value).astype(h5py.opaque_dtype(...))`: numpy's bytes in an HDF5 opaque type tagged
"NUMPY:<dtype.str>", e.g. the int 5 as "NUMPY:<i8") and _is_non_tensor_h5 / read_non_tensor
(strings, vlen, enum and opaque datasets are non-tensor data, read as `node[()]`). infer_batch
leaves all of them out, as _check_batch_size does; v0.14's _set_max_batch_size leaves out strings
but counts opaque data (its metadata takes numpy's dtype for an array's), which we do not follow.
v0.14 cannot store None, dicts or other objects numpy makes an object array of (h5py: "Cannot
store numpy object arrays as opaque data"). Python tensordict itself is not needed; h5py and numpy
are (Debian: python3-h5py).

Usage: h5_fixture.py write <file>   # the expected content, as upstream's to_h5 writes it, plus
                                    # the attributes robomimic-style files carry
       h5_fixture.py check <file>   # read as upstream's from_h5 reads it, compare with expected
       h5_fixture.py robomimic <file> <demos> <steps>   # /data/demo_i/{obs/...,actions,...}
"""
import json
import sys

import h5py
import numpy as np


def expected():
    """Nested dict: key -> numpy array (a tensor) | dict (a group) | other (non-tensor data)."""
    return {
        "a": np.arange(12, dtype=np.float32).reshape(3, 4),
        "b": np.arange(3, dtype=np.int64) * 7,
        "n": {
            "x": np.arange(30, dtype=np.float64).reshape(3, 2, 5) / 4,
            "h": np.full((3, 3), 1.5, dtype=np.float16),
        },
        "flag": np.array([True, False, True]),
        "pix": np.arange(6, dtype=np.uint8).reshape(3, 2),
        "odd": np.arange(3, dtype=np.int16),
        "note": "hello",
        # non-tensor data v0.14 stores as tagged opaque data (NUMPY:<i8, <f8, |b1, <U2, <c16)
        "count": 5,
        "neg": -3,
        "ratio": 1.5,
        "done": True,
        "ids": [1, 2, 3],
        "grid": [[1, 2], [3, 4]],
        "names": ["a", "bc"],
        "z": [1 + 2j, -0.5j],  # complex: no JSON form; read here as its description
    }


def is_non_tensor(node):
    """upstream's _is_non_tensor_h5."""
    dt = node.dtype
    return bool(h5py.check_string_dtype(dt) or h5py.check_vlen_dtype(dt)
                or h5py.check_enum_dtype(dt) or h5py.check_opaque_dtype(dt))


def write_level(group, content):
    for key, value in content.items():
        if isinstance(value, dict):
            write_level(group.create_group(key), value)
        elif isinstance(value, (np.ndarray, str)):
            # upstream: file.create_dataset(key, data=value, **kwargs); a str is stored as is.
            group.create_dataset(key, data=value)
        else:
            # upstream's _H5Backend.encode_non_tensor for a non-string
            out = np.array(value)
            group.create_dataset(key, data=out.astype(h5py.opaque_dtype(out.dtype)))


def write(path):
    with h5py.File(path, "w") as f:
        write_level(f, expected())
        f.attrs["env_args"] = json.dumps({"env_name": "Lift", "type": 1})
        f.attrs["total"] = 3
        f["n"].attrs["scale"] = 0.25
        f["a"].attrs["ids"] = np.array([4, 5, 6])


def check_level(group, content, where):
    assert sorted(group.keys()) == sorted(content.keys()), (where, list(group.keys()))
    for key, want in content.items():
        node = group[key]
        if isinstance(want, dict):
            assert isinstance(node, h5py.Group), (where, key)
            check_level(node, want, f"{where}/{key}")
        elif isinstance(want, str):
            # upstream's non-tensor read: node[()] is the string (bytes from h5py 3).
            got = node[()]
            got = got.decode() if isinstance(got, bytes) else got
            assert got == want, (where, key, got)
        elif not isinstance(want, np.ndarray):
            # upstream's read_non_tensor: node[()], numpy's value of the opaque data
            assert h5py.check_opaque_dtype(node.dtype), (where, key, node.dtype)
            got, want = node[()], np.array(want)
            assert got.dtype == want.dtype, (where, key, got.dtype, want.dtype)
            assert np.shape(got) == want.shape, (where, key, np.shape(got), want.shape)
            assert np.array_equal(got, want), (where, key, got, want)
        else:
            got = node[()]
            assert got.dtype == want.dtype, (where, key, got.dtype, want.dtype)
            assert got.shape == want.shape, (where, key, got.shape, want.shape)
            assert np.array_equal(got, want), (where, key, got, want)


def infer_batch(group):
    """upstream's _set_max_batch_size for one level (sub-groups inferred first)."""
    shapes = []
    for key in group.keys():
        node = group[key]
        if isinstance(node, h5py.Group):
            shapes.append(infer_batch(node))
        elif not is_non_tensor(node):
            shapes.append(list(node.shape))
    if not shapes:
        return []
    batch = []
    for dim in range(min(len(s) for s in shapes)):
        if any(s[dim] != shapes[0][dim] for s in shapes):
            break
        batch.append(shapes[0][dim])
    return batch


def check(path):
    with h5py.File(path, "r") as f:
        check_level(f, expected(), "")
        # the batch size our files record, and what upstream's from_h5 would infer
        meta = json.loads(f.attrs["__tensordict__"])
        assert meta["batch_size"] == [3], meta
        assert infer_batch(f) == [3], infer_batch(f)
        assert json.loads(f["n"].attrs["__tensordict__"])["batch_size"] == [3]
        assert f.attrs["env"] == "Lift", dict(f.attrs)


def robomimic(path, demos, steps):
    """/data/demo_i with obs/{pos, img}, actions, rewards, dones; num_samples attributes."""
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        data = f.create_group("data")
        total = 0
        for i in range(demos):
            n = steps + 3 * i  # demos differ in length, as recorded ones do
            demo = data.create_group(f"demo_{i}")
            demo.create_dataset("obs/pos", data=rng.standard_normal((n, 3)).astype(np.float32))
            demo.create_dataset("obs/img", data=rng.integers(0, 255, (n, 4, 4), dtype=np.uint8))
            demo.create_dataset("actions", data=np.full((n, 2), i, dtype=np.float64))
            demo.create_dataset("rewards", data=np.arange(n, dtype=np.float64))
            dones = np.zeros(n, dtype=np.int64)
            dones[-1] = 1
            demo.create_dataset("dones", data=dones)
            demo.attrs["num_samples"] = n
            total += n
        data.attrs["total"] = total
        data.attrs["env_args"] = json.dumps({"env_name": "Lift"})
        f.create_dataset("mask/train", data=np.array([f"demo_{i}" for i in range(demos)], dtype="S"))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "write":
        write(sys.argv[2])
    elif cmd == "check":
        check(sys.argv[2])
    elif cmd == "robomimic":
        robomimic(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        sys.exit(f"unknown command {cmd}")
