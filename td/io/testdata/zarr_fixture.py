"""Zarr stores on the Python side, for //td/io:zarr_compat_test (zarr-python 2 or 3, numpy).

Follows upstream tensordict's to_zarr / from_zarr (pytorch/tensordict a1a061e,
tensordict/persistent.py, _ZarrBackend and PersistentTensorDict.from_dict / from_zarr): a group per
TensorDict level with the attribute __tensordict__ = {"batch_size": [...], "version": 1}, one
uncompressed chunk per array (compressors=None), non-tensor data as a 1-D uint8 array of its
JSON text with the attribute __tensordict_non_tensor__ = {"encoding": "json"}, consolidated
metadata at the end. Upstream requires zarr-python 3 (Debian 13's python3-zarr), which writes
format 3: with it, `write` makes upstream's own calls (open_group, create_array, attrs,
consolidate_metadata). Debian 12's python3-zarr is zarr-python 2, which writes format 2 through
the same layout (create_dataset); `write_v3` then lays out by hand the format 3 files
zarr-python 3 writes for the same content (zarr.json per node, chunk keys "c/i/j", the "bytes"
codec), so both formats are read on both systems.

  zarr_fixture.py write DIR      DIR/td.zarr: the upstream layout (content below);
                                 DIR/foreign.zarr: a format 2 store of another tool (no batch
                                 metadata, several chunks with edge chunks, Fortran order,
                                 big-endian, a missing chunk read as the fill value, "/"
                                 separators); DIR/strings.zarr: numpy string arrays (fixed-size
                                 with zarr-python 2 and 3.1+, variable-length "vlen-utf8" /
                                 "vlen-bytes" filters with 3.0); DIR/compressed.zarr: one
                                 compressed array (Blosc with 2, Zstd with 3); DIR/pickled.zarr:
                                 non-tensor data encoded with pickle
  zarr_fixture.py write_v3 DIR   DIR/v3.zarr: td.zarr's content in format 3
  zarr_fixture.py write_compressed DIR
                                 what zarr-python writes by default, compressed:
                                 DIR/default.zarr: td.zarr's content with zarr-python's default
                                 compressor (zarr-python 2: format 2, Blosc lz4 with byte
                                 shuffle; 3: format 3, zstd level 0); DIR/codecs2.zarr: format 2
                                 arrays of several chunks (edge chunks) with each numcodecs
                                 compressor read (Zstd, GZip, Zlib, Blosc with bit shuffle);
                                 DIR/v3c.zarr: td.zarr's content in format 3 whose chunks this
                                 script compresses with numcodecs as zarr-python 3's codecs do
                                 (zarr/codecs/zstd.py, gzip.py, blosc.py of zarr-python 3.1:
                                 ZstdCodec -> numcodecs.Zstd(level, checksum), GzipCodec ->
                                 numcodecs.GZip(level), BloscCodec -> numcodecs.Blosc(cname,
                                 clevel, shuffle, blocksize) with the dtype's typesize), each
                                 after the "bytes" codec
  zarr_fixture.py check PATH     reads a store the C++ side wrote (td.zarr's content) with zarr
                                 and checks the values, dtypes, chunks and attributes

td.zarr's content: batch [4]; "obs" float32 [4, 3] = 0..11; "next" / "r" int64 [4] = 10, 20, 30,
40; "next" / "done" bool [4] = T, F, T, F; "note" the string "hi"; "cfg" the JSON object
{"lr": 0.5, "layers": [1, 2]}; "pair" (batch [4, 2]) / "m" float64 [4, 2] = 0..7 / 2.
"""
import json
import os
import pickle
import sys

import numpy as np
import zarr

ZARR3 = int(zarr.__version__.split(".")[0]) >= 3
META = "__tensordict__"
NON_TENSOR = "__tensordict_non_tensor__"


def batch_attr(batch):
    return {"batch_size": list(batch), "version": 1}


def new_group(path, zarr_format=None):
    if ZARR3:
        kwargs = {"use_consolidated": False}
        if zarr_format:
            kwargs["zarr_format"] = zarr_format
        return zarr.open_group(path, mode="w", **kwargs)
    return zarr.open_group(path, mode="w")


def array(group, name, value, chunks=None, order="C", fill_value=None, separator=None,
          compressed=False, write=True):
    """upstream's try_create_dataset: one chunk (the array's shape) unless chunks are given."""
    if chunks is None and value.ndim:
        chunks = value.shape
    if ZARR3:
        kwargs = {"shape": value.shape, "dtype": value.dtype}
        if chunks is not None:
            kwargs["chunks"] = chunks
        if not compressed:
            kwargs["compressors"] = None
        if order != "C":
            kwargs["order"] = order
        if fill_value is not None:
            kwargs["fill_value"] = fill_value
        if separator:
            kwargs["chunk_key_encoding"] = {"name": "v2", "separator": separator}
        a = group.create_array(name, **kwargs)
    else:
        kwargs = {"shape": value.shape, "dtype": value.dtype, "chunks": chunks, "order": order}
        if not compressed:
            kwargs["compressor"] = None
        if fill_value is not None:
            kwargs["fill_value"] = fill_value
        if separator:
            kwargs["dimension_separator"] = separator
        a = group.create_dataset(name, **kwargs)
    if write and value.size:
        a[...] = value
    return a


def non_tensor(group, name, value, encoding="json"):
    payload = json.dumps(value).encode() if encoding == "json" else pickle.dumps(value)
    a = array(group, name, np.frombuffer(payload, dtype=np.uint8))
    a.attrs[NON_TENSOR] = {"encoding": encoding}


def content():
    return {
        "obs": np.arange(12, dtype=np.float32).reshape(4, 3),
        "r": np.array([10, 20, 30, 40], dtype=np.int64),
        "done": np.array([True, False, True, False]),
        "m": np.arange(8, dtype=np.float64).reshape(4, 2) / 2,
    }


def write(out):
    c = content()
    root = new_group(os.path.join(out, "td.zarr"))
    array(root, "obs", c["obs"])
    nxt = root.require_group("next")
    array(nxt, "r", c["r"])
    array(nxt, "done", c["done"])
    non_tensor(root, "note", "hi")
    non_tensor(root, "cfg", {"lr": 0.5, "layers": [1, 2]})
    pair = root.require_group("pair")
    array(pair, "m", c["m"])
    root.attrs[META] = batch_attr([4])
    nxt.attrs[META] = batch_attr([4])
    pair.attrs[META] = batch_attr([4, 2])
    zarr.consolidate_metadata(root.store)

    foreign = new_group(os.path.join(out, "foreign.zarr"), zarr_format=2)
    array(foreign, "x", np.arange(30, dtype=np.int16).reshape(5, 2, 3), chunks=(2, 2, 2))
    y = (np.arange(10, dtype=np.float64).reshape(5, 2) * 1.5).astype(">f8")
    array(foreign, "y", y, chunks=(2, 1), order="F")
    z = array(foreign, "z", np.zeros(5, dtype="<i4"), chunks=(2,), fill_value=7, write=False)
    z[0:2] = [1, 2]
    sub = foreign.require_group("sub")
    array(sub, "w", np.arange(20, dtype=np.uint8).reshape(5, 4), chunks=(3, 3), separator="/")

    strings = new_group(os.path.join(out, "strings.zarr"), zarr_format=2)
    array(strings, "names", np.array(["ab", "c", "d\u00e9f"]))
    array(strings, "raw", np.array([b"xy", b"z"]))

    compressed = new_group(os.path.join(out, "compressed.zarr"))
    array(compressed, "a", np.arange(4, dtype=np.float32), compressed=True)

    pickled = new_group(os.path.join(out, "pickled.zarr"))
    non_tensor(pickled, "obj", {1, 2}, encoding="pickle")
    pickled.attrs[META] = batch_attr([])


def write_v3(out, store="v3.zarr", codecs=None):
    root = os.path.join(out, store)
    codecs = codecs or {}

    def node(path, meta):
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "zarr.json"), "w") as f:
            json.dump(meta, f)

    def group(path, batch):
        node(path, {"zarr_format": 3, "node_type": "group",
                    "attributes": {META: batch_attr(batch)}})

    names = {"float32": "float32", "int64": "int64", "bool": "bool", "float64": "float64",
             "uint8": "uint8"}

    def arr(path, value, attributes=None):
        codec = codecs.get(os.path.basename(path))
        fill = False if value.dtype == np.bool_ else 0
        node(path, {
            "zarr_format": 3, "node_type": "array", "shape": list(value.shape),
            "data_type": names[value.dtype.name],
            "chunk_grid": {"name": "regular",
                           "configuration": {"chunk_shape": list(value.shape)}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": fill,
            "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}] + (
                [{"name": codec[0], "configuration": codec[1]}] if codec else []),
            "attributes": attributes or {}, "dimension_names": None})
        key = os.path.join(path, "c", *["0"] * value.ndim)
        os.makedirs(os.path.dirname(key), exist_ok=True)
        with open(key, "wb") as f:
            if codec:
                f.write(v3_compress(codec, value))
            else:
                f.write(np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<")).tobytes())

    c = content()
    group(root, [4])
    arr(os.path.join(root, "obs"), c["obs"])
    group(os.path.join(root, "next"), [4])
    arr(os.path.join(root, "next", "r"), c["r"])
    arr(os.path.join(root, "next", "done"), c["done"])
    for name, value in (("note", "hi"), ("cfg", {"lr": 0.5, "layers": [1, 2]})):
        arr(os.path.join(root, name), np.frombuffer(json.dumps(value).encode(), dtype=np.uint8),
            {NON_TENSOR: {"encoding": "json"}})
    group(os.path.join(root, "pair"), [4, 2])
    arr(os.path.join(root, "pair", "m"), c["m"])


def write_compressed(out):
    import numcodecs

    c = content()
    root = new_group(os.path.join(out, "default.zarr"))
    array(root, "obs", c["obs"], compressed=True)
    nxt = root.require_group("next")
    array(nxt, "r", c["r"], compressed=True)
    array(nxt, "done", c["done"], compressed=True)
    pair = root.require_group("pair")
    array(pair, "m", c["m"], compressed=True)
    root.attrs[META] = batch_attr([4])
    nxt.attrs[META] = batch_attr([4])
    pair.attrs[META] = batch_attr([4, 2])

    g = new_group(os.path.join(out, "codecs2.zarr"), zarr_format=2)
    value = np.arange(60, dtype=np.float32).reshape(5, 12)
    compressors = {
        "zstd": numcodecs.Zstd(level=3),
        "gzip": numcodecs.GZip(level=5),
        "zlib": numcodecs.Zlib(level=1),
        "blosc": numcodecs.Blosc(cname="zstd", clevel=5, shuffle=numcodecs.Blosc.BITSHUFFLE),
    }
    for name, comp in compressors.items():
        if ZARR3:
            a = g.create_array(name, shape=value.shape, dtype=value.dtype, chunks=(2, 5),
                               compressors=comp)
        else:
            a = g.create_dataset(name, shape=value.shape, dtype=value.dtype, chunks=(2, 5),
                                 compressor=comp)
        a[...] = value
    g.attrs[META] = batch_attr([5])

    write_v3(out, "v3c.zarr", {
        "obs": ("zstd", {"level": 0, "checksum": False}),
        "r": ("gzip", {"level": 5}),
        "done": ("blosc", {"typesize": 1, "cname": "lz4", "clevel": 5, "shuffle": "shuffle",
                           "blocksize": 0}),
        "m": ("zstd", {"level": 3, "checksum": False}),
        "note": ("blosc", {"typesize": 1, "cname": "zstd", "clevel": 5, "shuffle": "bitshuffle",
                           "blocksize": 0}),
    })


def v3_compress(codec, value):
    """zarr-python 3's bytes-to-bytes codec `codec` = (name, configuration) over raw bytes."""
    import numcodecs

    name, conf = codec
    raw = np.ascontiguousarray(value).astype(value.dtype.newbyteorder("<"))
    if name == "zstd":
        if conf["checksum"]:  # numcodecs 0.13 and later (Debian 12 has 0.11)
            return numcodecs.Zstd(level=conf["level"], checksum=True).encode(raw)
        return numcodecs.Zstd(level=conf["level"]).encode(raw)
    if name == "gzip":
        return numcodecs.GZip(level=conf["level"]).encode(raw)
    shuffle = {"noshuffle": numcodecs.Blosc.NOSHUFFLE, "shuffle": numcodecs.Blosc.SHUFFLE,
               "bitshuffle": numcodecs.Blosc.BITSHUFFLE}[conf["shuffle"]]
    blosc = numcodecs.Blosc(cname=conf["cname"], clevel=conf["clevel"], shuffle=shuffle,
                            blocksize=conf["blocksize"])
    return blosc.encode(raw)


def expect(cond, what):
    if not cond:
        print("zarr_fixture check failed:", what, file=sys.stderr)
        sys.exit(1)


def check(path):
    c = content()
    root = zarr.open_group(path, mode="r")
    expect(dict(root.attrs[META]) == batch_attr([4]), f"root attrs {dict(root.attrs)}")
    expect(sorted(root.group_keys()) == ["next", "pair"], f"groups {list(root.group_keys())}")
    expect(sorted(root.array_keys()) == ["cfg", "note", "obs"], f"arrays {list(root.array_keys())}")
    for key, want in (("obs", c["obs"]), ("next/r", c["r"]), ("next/done", c["done"]),
                      ("pair/m", c["m"])):
        a = root[key]
        expect(a.dtype == want.dtype, f"{key} dtype {a.dtype}")
        compressors = a.compressors if ZARR3 else [c for c in [a.compressor] if c is not None]
        expect(len(compressors) == 0, f"{key} compressors {compressors}")
        expect(tuple(a.chunks) == want.shape, f"{key} chunks {a.chunks}")
        expect(np.array_equal(a[...], want), f"{key} values {a[...]}")
    expect(dict(root["next"].attrs[META]) == batch_attr([4]), "next attrs")
    expect(dict(root["pair"].attrs[META]) == batch_attr([4, 2]), "pair attrs")
    for key, want in (("note", "hi"), ("cfg", {"lr": 0.5, "layers": [1, 2]})):
        a = root[key]
        expect(a.dtype == np.uint8 and a.ndim == 1, f"{key} is not a 1-D uint8 array")
        expect(dict(a.attrs[NON_TENSOR]) == {"encoding": "json"}, f"{key} attrs {dict(a.attrs)}")
        expect(json.loads(a[...].tobytes().decode()) == want, f"{key} payload")
    # The consolidated metadata lists every node, and opens.
    with open(os.path.join(path, ".zmetadata")) as f:
        listed = json.load(f)["metadata"]
    for node in ("obs", "next/r", "next/done", "note", "cfg", "pair/m"):
        expect(node + "/.zarray" in listed, f"{node} not in .zmetadata")
    cons = zarr.open_consolidated(path, mode="r")
    expect(np.array_equal(cons["pair/m"][...], c["m"]), "consolidated pair/m")


if __name__ == "__main__":
    mode, target = sys.argv[1], sys.argv[2]
    {"write": write, "write_v3": write_v3, "write_compressed": write_compressed,
     "check": check}[mode](target)
