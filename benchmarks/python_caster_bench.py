"""Timings of //td/python's caster, each against the same work in pure Python in the same run.

  tools/bazelw run -c opt //benchmarks:python_caster             fake_tensordict.py's classes
  ... //benchmarks:python_caster -- --upstream                   Python tensordict's (importable)

Cases (the median of --repeat runs of --number calls each, per call):
  round_trip  ext.identity(td): Python -> C++ -> Python of a nested TensorDict with 10 leaves
              (5 at the top, 5 in a sub-TensorDict, batch [32]), vs td.clone(False) — Python's
              own shallow copy of the same structure (new TensorDict objects, same tensors).
  apply_100   ext.scale(td, 2.0): td::TensorDict::apply over 100 leaves (10 sub-TensorDicts of
              10 leaves, batch [32], [32, 4] floats) called from Python, conversion both ways
              included, vs td.apply(lambda x: x * 2.0) in Python.
Prints `<case>: ours <us>/call, python <us>/call, ratio ours/python <r>`.
"""

import argparse
import statistics
import sys
import timeit

import torch

import td_python_test_ext as ext

parser = argparse.ArgumentParser()
parser.add_argument("--upstream", action="store_true")
parser.add_argument("--number", type=int, default=200)
parser.add_argument("--repeat", type=int, default=15)
args = parser.parse_args()

if args.upstream:
    import tensordict
    from tensordict import TensorDict as TD

    label = "Python tensordict %s" % (getattr(tensordict, "__version__", None) or "(no version)")
else:
    import fake_tensordict as fake
    from fake_tensordict import TensorDict as TD

    ext.set_tensordict_type(fake.TensorDict, fake.LazyStackedTensorDict)
    label = "fake_tensordict.py"

torch.set_num_threads(1)


def per_call_us(fn):
    times = timeit.repeat(fn, number=args.number, repeat=args.repeat)
    return statistics.median(times) / args.number * 1e6


def compare(name, ours, python):
    o, p = per_call_us(ours), per_call_us(python)
    print("%-10s ours %8.1f us/call, python %8.1f us/call, ratio ours/python %.2f" % (name, o, p, o / p))


small = TD(
    {
        **{"k%d" % i: torch.randn(32, 4) for i in range(5)},
        "n": TD({"k%d" % i: torch.randn(32, 4) for i in range(5)}, batch_size=[32]),
    },
    batch_size=[32],
)
assert ext.data_ptr(small, ["n", "k0"]) == small["n"]["k0"].data_ptr()

wide = TD(
    {
        "g%d" % g: TD({"k%d" % i: torch.randn(32, 4) for i in range(10)}, batch_size=[32])
        for g in range(10)
    },
    batch_size=[32],
)
check_ours = ext.scale(wide, 2.0)
check_py = wide.apply(lambda x: x * 2.0)
assert torch.equal(check_ours["g3"]["k7"], check_py["g3"]["k7"])

print("classes: %s; torch %s; %d threads" % (label, torch.__version__, torch.get_num_threads()))
compare("round_trip", lambda: ext.identity(small), lambda: small.clone(False))
compare("apply_100", lambda: ext.scale(wide, 2.0), lambda: wide.apply(lambda x: x * 2.0))
