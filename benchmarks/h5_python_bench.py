"""The Python side of //benchmarks:h5, for scale: the same random batches of 256 rows from a
1M-row HDF5 file, read from Python.

  /usr/bin/python3 benchmarks/h5_python_bench.py              h5py by hand
  PYTHONPATH=<tensordict checkout> /usr/bin/python3 benchmarks/h5_python_bench.py --upstream
                                                             and Python tensordict's
                                                             PersistentTensorDict

The file has the layout of h5_bench.cc (obs float32 [1M, 16], action float32 [1M, 4], reward
float32 [1M]). Cases (median over --repeat runs of --number batches, per batch):
  h5py      each dataset read with h5py at the batch's sorted distinct rows (h5py wants them
            increasing), then put back in the batch's order: the by-hand C API reads of
            h5_bench.cc written in Python.
  upstream  PersistentTensorDict.from_h5(path)[rows].to_tensordict(): what a loader over
            upstream's PersistentTensorDict does per batch (tensordict/persistent.py; measured
            with v0.4.0, the newest release that runs on Debian 12's torch 1.13).
Prints `<case>: <ms>/batch`.
"""

import argparse
import os
import statistics
import tempfile
import timeit

import h5py
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--upstream", action="store_true")
parser.add_argument("--number", type=int, default=20)
parser.add_argument("--repeat", type=int, default=5)
args = parser.parse_args()

ROWS, BATCH, POOL = 1_000_000, 256, 64

with tempfile.TemporaryDirectory() as tmp:
    path = os.path.join(tmp, "data.h5")
    gen = torch.Generator().manual_seed(0)
    with h5py.File(path, "w") as f:
        f["obs"] = torch.randn(ROWS, 16, generator=gen).numpy()
        f["action"] = torch.randn(ROWS, 4, generator=gen).numpy()
        f["reward"] = torch.randn(ROWS, generator=gen).numpy()
    batches = [torch.randint(ROWS, (BATCH,), generator=gen) for _ in range(POOL)]
    cursor = [0]

    def next_rows():
        rows = batches[cursor[0] % POOL]
        cursor[0] += 1
        return rows

    def time_case(name, fn):
        per_run = timeit.repeat(fn, number=args.number, repeat=args.repeat)
        print(f"{name}: {statistics.median(per_run) / args.number * 1e3:.3f} ms/batch")

    f = h5py.File(path, "r")
    datasets = [f["obs"], f["action"], f["reward"]]

    def by_hand():
        rows = next_rows()
        distinct, inverse = torch.unique(rows, sorted=True, return_inverse=True)
        idx = distinct.numpy()
        return [torch.from_numpy(d[idx]).index_select(0, inverse) for d in datasets]

    time_case("h5py", by_hand)
    if args.upstream:
        from tensordict import PersistentTensorDict

        ptd = PersistentTensorDict.from_h5(path)
        time_case("upstream", lambda: ptd[next_rows()].to_tensordict())
        ptd.close()
    f.close()
