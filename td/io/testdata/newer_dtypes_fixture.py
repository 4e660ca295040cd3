"""uint16/32/64 and float8 leaves in every file format, as Python tensordict 0.14 writes them,
from raw bytes with numpy (and h5py for HDF5), so that LibTorch 1.13's Python (which has none of
these dtypes) writes them too. For //td/io:newer_dtypes_test.

Provenance (pytorch/tensordict v0.14.0, torch 2.14): a dtype is named as str(torch dtype)
("torch.uint16") by the memmap writer (TensorDict._memmap_ -> meta.json, tensordict/_td.py) and
by consolidate(filename=) (_reduce_vals_and_metadata in tensordict/base.py, through
_DTYPE_TO_STR_DTYPE in tensordict/utils.py); to_zarr and to_h5 go through tensor.numpy()
(tensordict/persistent.py, _to_numpy), so Zarr holds numpy's "uint16" (format 3, zarr-python 3)
and HDF5 h5py's native unsigned types. Element bytes are the tensor's, little-endian. What 0.14
does with float8: the memmap writer stores it (named "torch.float8_e4m3fn" and so on; its loader's
_STR_DTYPE_TO_DTYPE has no float8, so 0.14 cannot load it back); consolidate(filename=), to_zarr
and to_h5 raise (no float8 in _DTYPE_TO_STR_DTYPE; numpy has no float8). Checked by hand against
tensordict 0.14.0 (docs/io.md). Each store holds one leaf "x" of shape [2, 3] under batch [2].

Usage: newer_dtypes_fixture.py write DIR          DIR/memmap/<dtype>/ (every dtype of DTYPES),
                                                  DIR/<dtype>.td, DIR/<dtype>.zarr (format 3),
                                                  DIR/<dtype>.v2.zarr, DIR/<dtype>.h5 (uint only)
       newer_dtypes_fixture.py check DIR          reads what the C++ side wrote under the same
                                                  names (those present; Zarr in format 2, as
                                                  we write it) and compares
"""
import json
import os
import sys

import numpy as np

# name, element size, numpy dtype (None: numpy has none), the formats upstream 0.14 writes it in
DTYPES = [
    ("uint16", 2, "<u2", ("memmap", "consolidated", "zarr", "h5")),
    ("uint32", 4, "<u4", ("memmap", "consolidated", "zarr", "h5")),
    ("uint64", 8, "<u8", ("memmap", "consolidated", "zarr", "h5")),
    ("float8_e5m2", 1, None, ("memmap",)),
    ("float8_e4m3fn", 1, None, ("memmap",)),
    ("float8_e5m2fnuz", 1, None, ("memmap",)),
    ("float8_e4m3fnuz", 1, None, ("memmap",)),
    ("float8_e8m0fnu", 1, None, ("memmap",)),
]
SHAPE = [2, 3]
TD_TYPE = "<class 'tensordict._td.TensorDict'>"


def payload(index, size):
    """The leaf's bytes: every byte differs and most have the high bit set (sign, byte order)."""
    return bytes((0x81 + 37 * i + 11 * index) & 0xFF for i in range(6 * size))


def write_memmap(path, name, data):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "x.memmap"), "wb") as f:
        f.write(data)
    meta = {"x": {"device": "cpu", "shape": SHAPE, "dtype": "torch." + name, "is_nested": False},
            "shape": [2], "device": "cpu", "_type": TD_TYPE}
    with open(os.path.join(path, "meta.json"), "w") as f:
        json.dump(meta, f)


def write_consolidated(path, name, data):
    pad = (8 - len(data) % 8) % 8
    meta = {"cls": "TensorDict", "non_tensors": {},
            "leaves": {"x": ["torch." + name, SHAPE, 0, len(data) + pad, pad]},
            "cls_metadata": {"device": None, "names": [None], "batch_size": [2],
                             "is_locked": False}}
    text = json.dumps(meta).encode("utf-8")
    with open(path, "wb") as f:
        f.write(data + bytes(pad) + text + len(text).to_bytes(8, "little"))


def write_zarr(path, name, data):
    """zarr-python 3's files for upstream's to_zarr (format 3, one chunk, "bytes" codec)."""
    def node(p, meta):
        os.makedirs(p, exist_ok=True)
        with open(os.path.join(p, "zarr.json"), "w") as f:
            json.dump(meta, f)

    node(path, {"zarr_format": 3, "node_type": "group",
                "attributes": {"__tensordict__": {"batch_size": [2], "version": 1}}})
    node(os.path.join(path, "x"), {
        "zarr_format": 3, "node_type": "array", "shape": SHAPE, "data_type": name,
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": SHAPE}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
        "attributes": {}, "storage_transformers": []})
    chunk = os.path.join(path, "x", "c", "0", "0")
    os.makedirs(os.path.dirname(chunk), exist_ok=True)
    with open(chunk, "wb") as f:
        f.write(data)


def write_zarr_v2(path, numpy_dtype, data):
    """The format 2 layout (zarr-python 2), dtype as a numpy string such as "<u2"."""
    os.makedirs(os.path.join(path, "x"), exist_ok=True)
    for rel, meta in ((".zgroup", {"zarr_format": 2}),
                      (".zattrs", {"__tensordict__": {"batch_size": [2], "version": 1}}),
                      ("x/.zarray", {"zarr_format": 2, "shape": SHAPE, "chunks": SHAPE,
                                     "dtype": numpy_dtype, "compressor": None, "fill_value": 0,
                                     "filters": None, "order": "C"})):
        with open(os.path.join(path, rel), "w") as f:
            json.dump(meta, f)
    with open(os.path.join(path, "x", "0.0"), "wb") as f:
        f.write(data)


def write_h5(path, numpy_dtype, data):
    import h5py
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.frombuffer(data, dtype=numpy_dtype).reshape(SHAPE))


def write(out):
    for index, (name, size, numpy_dtype, formats) in enumerate(DTYPES):
        data = payload(index, size)
        write_memmap(os.path.join(out, "memmap", name), name, data)
        if "consolidated" in formats:
            write_consolidated(os.path.join(out, name + ".td"), name, data)
        if "zarr" in formats:
            write_zarr(os.path.join(out, name + ".zarr"), name, data)
            write_zarr_v2(os.path.join(out, name + ".v2.zarr"), numpy_dtype, data)
        if "h5" in formats:
            write_h5(os.path.join(out, name + ".h5"), numpy_dtype, data)


def expect(cond, what):
    if not cond:
        print("newer_dtypes_fixture check failed:", what, file=sys.stderr)
        sys.exit(1)


def check(out):
    """Reads as upstream's readers do (memmap: meta.json and the raw file; consolidated:
    _rebuild_tensordict_files_consolidated's slicing; Zarr format 2 as our writer writes it:
    .zarray and its one chunk; HDF5 with h5py) and compares the bytes and the dtype names."""
    seen = 0
    for index, (name, size, numpy_dtype, formats) in enumerate(DTYPES):
        want = payload(index, size)
        d = os.path.join(out, "memmap", name)
        if os.path.isdir(d):
            with open(os.path.join(d, "meta.json")) as f:
                meta = json.load(f)
            expect(meta["x"]["dtype"] == "torch." + name, f"{d}: dtype {meta['x']['dtype']}")
            expect(meta["x"]["shape"] == SHAPE, f"{d}: shape {meta['x']['shape']}")
            with open(os.path.join(d, "x.memmap"), "rb") as f:
                expect(f.read() == want, f"{d}: bytes")
            seen += 1
        p = os.path.join(out, name + ".td")
        if os.path.exists(p):
            with open(p, "rb") as f:
                blob = f.read()
            n = int.from_bytes(blob[-8:], "little")
            meta = json.loads(blob[-8 - n:-8])
            dtype, shape, start, stop, pad = meta["leaves"]["x"]
            expect(dtype == "torch." + name and shape == SHAPE, f"{p}: leaf {meta['leaves']}")
            expect(blob[start:stop - pad] == want, f"{p}: bytes")
            seen += 1
        p = os.path.join(out, name + ".zarr")
        if os.path.isdir(p):
            with open(os.path.join(p, "x", ".zarray")) as f:
                meta = json.load(f)
            expect(meta["dtype"] == numpy_dtype, f"{p}: dtype {meta['dtype']}")
            expect(meta["shape"] == SHAPE and meta["compressor"] is None, f"{p}: {meta}")
            with open(os.path.join(p, "x", "0.0"), "rb") as f:
                expect(f.read() == want, f"{p}: bytes")
            seen += 1
        p = os.path.join(out, name + ".h5")
        if os.path.exists(p):
            import h5py
            with h5py.File(p, "r") as f:
                x = f["x"]
                expect(x.dtype == np.dtype(numpy_dtype), f"{p}: dtype {x.dtype}")
                expect(list(x.shape) == SHAPE, f"{p}: shape {x.shape}")
                expect(x[()].astype(numpy_dtype).tobytes() == want, f"{p}: bytes")
            seen += 1
    expect(seen > 0, f"nothing to check under {out}")
    print("checked", seen)


if __name__ == "__main__":
    {"write": write, "check": check}[sys.argv[1]](sys.argv[2])
