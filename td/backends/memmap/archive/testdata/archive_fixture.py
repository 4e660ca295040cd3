"""Memmap archives on the Python side, for the tests of //td/backends/memmap/archive (standard
library only).

  archive_fixture.py write PATH            writes the archive Python tensordict 0.14's save(...)
                                           lays out: STORED entries written by zipfile with
                                           force_zip64, each .memmap payload padded to 64 bytes by
                                           an extra block of id 0x6474 (NOTE [ Memmap archive
                                           format ] in td/backends/memmap/archive/archive.h)
  archive_fixture.py write_unaligned PATH  the same entries without padding (what `zip -0 -r`
                                           gives: payloads at arbitrary offsets)
  archive_fixture.py write_deflated PATH   what save(..., compression="deflate") writes: the
                                           .memmap entries ZIP_DEFLATED (zipfile's default level,
                                           unaligned: _write_entry pads STORED entries only),
                                           meta.json entries STORED
  archive_fixture.py write_bzip2 PATH      the same with compression="bzip2" (ZIP_BZIP2)
  archive_fixture.py check PATH            checks an archive the C++ side wrote: CRCs (testzip),
                                           entry order, 64-byte aligned payloads, the values
  archive_fixture.py write_stack PATH      the archive of a lazy stack (below) as upstream lays it
                                           out: the stack's meta.json (_type, stack_dim), then one
                                           TensorDict level per member under 0/, 1/, 2/
  archive_fixture.py check_stack PATH      checks such an archive the C++ side wrote (a
                                           lazy stack loaded from disk, saved again)

The content: batch [4]; "obs" float32 [4, 3] = 0..11; "next" / "r" int64 [4] = 10, 20, 30, 40;
"note" the string "hi".

The lazy stack: 3 members stacked along batch dim 1 (batch [2, 3]), member i of batch [2]
holding "x" float32 [2] = 10 i, 10 i + 1 and "n" / "y" int64 [2, 3] = 6 i .. 6 i + 5.

Provenance: the layout follows upstream tensordict 0.14.0's archive writer (tensordict/_archive.py:
pack_memmap, _pack_dir, _iter_memmap_dir, _padding_extra) over the memmap directories of
TensorDict._memmap_ (tensordict/_td.py) and LazyStackedTensorDict._memmap_ (tensordict/_lazy.py,
meta.json {"_type", "stack_dim"}, members under "0", "1", ...). Written with the standard
library only; no tensordict import.
"""
import json
import struct
import sys
import zipfile

TD_TYPE = "<class 'tensordict._td.TensorDict'>"
NT_TYPE = "<class 'tensordict.tensorclass.NonTensorData'>"
LAZY_TYPE = "<class 'tensordict._lazy.LazyStackedTensorDict'>"


def tensor_meta(shape, dtype):
    return {"device": "cpu", "shape": shape, "dtype": dtype, "is_nested": False}


def files():
    root = {
        "obs": tensor_meta([4, 3], "torch.float32"),
        "next": {"type": "TensorDict"},
        "note": {"type": "NonTensorData"},
        "shape": [4],
        "device": "cpu",
        "_type": TD_TYPE,
    }
    nxt = {"r": tensor_meta([4], "torch.int64"), "shape": [4], "device": "cpu", "_type": TD_TYPE}
    note = {"_type": NT_TYPE, "data": "hi", "_metadata": None, "_is_non_tensor": True}
    return [
        ("meta.json", json.dumps(root).encode()),
        ("obs.memmap", struct.pack("<12f", *range(12))),
        ("next/meta.json", json.dumps(nxt).encode()),
        ("next/r.memmap", struct.pack("<4q", 10, 20, 30, 40)),
        ("note/meta.json", json.dumps(note).encode()),
    ]


def stack_files():
    out = [("meta.json", json.dumps({"_type": LAZY_TYPE, "stack_dim": 1}).encode())]
    for i in range(3):
        member = {"x": tensor_meta([2], "torch.float32"), "n": {"type": "TensorDict"},
                  "shape": [2], "device": "cpu", "_type": TD_TYPE}
        n = {"y": tensor_meta([2, 3], "torch.int64"), "shape": [2], "device": "cpu",
             "_type": TD_TYPE}
        out += [
            (f"{i}/meta.json", json.dumps(member).encode()),
            (f"{i}/x.memmap", struct.pack("<2f", 10 * i, 10 * i + 1)),
            (f"{i}/n/meta.json", json.dumps(n).encode()),
            (f"{i}/n/y.memmap", struct.pack("<6q", *range(6 * i, 6 * i + 6))),
        ]
    return out


def write(path, align, entries=None, compress_type=zipfile.ZIP_STORED):
    """_pack_dir / _write_entry of tensordict/_archive.py (0.14.0): `compress_type` for the
    .memmap entries, STORED for the others; only STORED .memmap payloads are aligned."""
    with zipfile.ZipFile(path, "w", allowZip64=True) as zf:
        for name, data in entries or files():
            info = zipfile.ZipInfo(name, date_time=(2024, 1, 1, 0, 0, 0))
            memmap = name.endswith(".memmap")
            info.compress_type = compress_type if memmap else zipfile.ZIP_STORED
            info.file_size = len(data)
            align = align and info.compress_type == zipfile.ZIP_STORED
            if align and name.endswith(".memmap"):
                # header (30) + name + this block (4 + pad) + zipfile's zip64 block (20)
                start = zf.start_dir + 30 + len(name.encode()) + 4 + 20
                pad = -start % 64
                info.extra = struct.pack("<HH", 0x6474, pad) + b"\0" * pad
            with zf.open(info, "w", force_zip64=True) as f:
                if align and name.endswith(".memmap"):
                    assert zf.fp.tell() % 64 == 0, "payload not aligned"
                f.write(data)


def check(path):
    with zipfile.ZipFile(path) as zf:
        assert zf.testzip() is None, "bad CRC"
        names = zf.namelist()
        # Non-tensor data's level also holds _tensordict/meta.json (its batch shape), as
        # Python's writer leaves it.
        assert names == ["meta.json", "obs.memmap", "next/meta.json", "next/r.memmap",
                         "note/meta.json", "note/_tensordict/meta.json"], names
        raw = open(path, "rb").read()
        for info in zf.infolist():
            assert info.compress_type == zipfile.ZIP_STORED, info.filename
            n, x = struct.unpack_from("<HH", raw, info.header_offset + 26)
            payload = info.header_offset + 30 + n + x
            if info.filename.endswith(".memmap"):
                assert payload % 64 == 0, (info.filename, payload)
        assert struct.unpack("<12f", zf.read("obs.memmap")) == tuple(float(i) for i in range(12))
        assert struct.unpack("<4q", zf.read("next/r.memmap")) == (10, 20, 30, 40)
        meta = json.loads(zf.read("meta.json"))
        assert meta["shape"] == [4] and meta["obs"]["dtype"] == "torch.float32", meta
        assert json.loads(zf.read("note/meta.json"))["data"] == "hi"


def check_layout(zf, raw):
    assert zf.testzip() is None, "bad CRC"
    for info in zf.infolist():
        assert info.compress_type == zipfile.ZIP_STORED, info.filename
        n, x = struct.unpack_from("<HH", raw, info.header_offset + 26)
        if info.filename.endswith(".memmap"):
            assert (info.header_offset + 30 + n + x) % 64 == 0, info.filename


def check_stack(path):
    with zipfile.ZipFile(path) as zf:
        check_layout(zf, open(path, "rb").read())
        names = zf.namelist()
        want = [name for name, _ in stack_files()]
        assert names == want, names
        meta = json.loads(zf.read("meta.json"))
        assert meta == {"_type": LAZY_TYPE, "stack_dim": 1}, meta
        for i in range(3):
            member = json.loads(zf.read(f"{i}/meta.json"))
            assert member["_type"] == TD_TYPE and member["shape"] == [2], member
            assert member["x"]["shape"] == [2] and member["x"]["dtype"] == "torch.float32"
            got = struct.unpack("<2f", zf.read(f"{i}/x.memmap"))
            assert got == (10.0 * i, 10.0 * i + 1), (i, got)
            got = struct.unpack("<6q", zf.read(f"{i}/n/y.memmap"))
            assert got == tuple(range(6 * i, 6 * i + 6)), (i, got)


if __name__ == "__main__":
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "write":
        write(path, align=True)
    elif mode == "write_unaligned":
        write(path, align=False)
    elif mode == "write_deflated":
        write(path, align=True, compress_type=zipfile.ZIP_DEFLATED)
    elif mode == "write_bzip2":
        write(path, align=True, compress_type=zipfile.ZIP_BZIP2)
    elif mode == "check":
        check(path)
    elif mode == "write_stack":
        write(path, align=True, entries=stack_files())
    elif mode == "check_stack":
        check_stack(path)
    else:
        sys.exit("unknown mode " + mode)
