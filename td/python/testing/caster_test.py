"""Drives td_python_test_ext (td/python/testing/test_ext.cc) from Python: TensorDicts cross
into C++ and back through //td/python's caster.

  python3 caster_test.py [--layout=0.4|0.14]
                                     the classes of fake_tensordict.py in upstream v0.4's (the
                                     default) or v0.14's layout, registered with
                                     set_tensordict_type (no Python tensordict needed)
  python3 caster_test.py --upstream  Python tensordict's own classes (it must be importable)
"""

import importlib.util
import json
import sys
import unittest

import torch

import td_python_test_ext as ext

UPSTREAM = "--upstream" in sys.argv
if UPSTREAM:
    sys.argv.remove("--upstream")
    import tensordict
    from tensordict import LazyStackedTensorDict as Lazy
    from tensordict import NonTensorData, NonTensorStack
    from tensordict import TensorDict as TD
    from tensordict import tensorclass

    MetaData = getattr(tensordict, "MetaData", None)  # 0.14, not 0.4

    @tensorclass
    class Step:
        obs: torch.Tensor
        tag: str

    @tensorclass
    class Record:
        obs: torch.Tensor
        info: dict
        note: str
        unset: object = None

    def make_step(obs, tag):
        return Step(obs=obs, tag=tag, batch_size=[obs.shape[0]])

else:
    import fake_tensordict as fake

    for arg in list(sys.argv[1:]):
        if arg.startswith("--layout="):
            sys.argv.remove(arg)
            fake.set_layout(arg[len("--layout="):])
    print("fake_tensordict layout:", fake.LAYOUT, file=sys.stderr)
    from fake_tensordict import LazyStackedTensorDict as Lazy
    from fake_tensordict import NonTensorData, NonTensorStack
    from fake_tensordict import TensorDict as TD

    MetaData = fake.MetaData if fake.LAYOUT == "0.14" else None

    class Step(fake.TensorClass):
        fields = ("obs", "tag")

    class Record(fake.TensorClass):
        fields = ("obs", "info", "note", "unset")

    def make_step(obs, tag):
        return Step(obs=obs, tag=tag, batch_size=[obs.shape[0]])

    ext.set_tensordict_type(TD, Lazy)


def step_tag(step):
    return step.tag


ext.set_tensorclass_type("Step", Step)


def entry(td, *key):
    """The stored value at `key`, read the way both TensorDict classes store it."""
    for k in key:
        td = td._tensordict[k]
    return td


class Sample:
    """A nested TensorDict with batch [2, 3] on the CPU, non-tensor data and a lazy stack whose
    members' "obs" differ in shape when `ragged` (C++ lock_(), apply and in-place math read every
    leaf of a lazy stack as one stacked tensor, so those tests use the even stack)."""

    def __init__(self, device="cpu", ragged=False):
        self.a = torch.zeros(2, 3, 4)
        self.x = torch.arange(2 * 3 * 4 * 6, dtype=torch.float32).reshape(2, 3, 4, 6)
        self.obs0 = torch.zeros(3, 4)
        self.obs1 = torch.ones(3, 5 if ragged else 4)
        nested = TD({"x": self.x}, batch_size=[2, 3, 4])
        nested.set_non_tensor("meta", {"k": [1, 2.5, None, "s"], "ok": True})
        # The members carry the device, as Python tensordict's .to(device) leaves them (a member
        # without one would make the C++ parent move, i.e. stack, the ragged "obs").
        stack = Lazy(
            TD({"obs": self.obs0}, batch_size=[3], device=device),
            TD({"obs": self.obs1}, batch_size=[3], device=device),
            stack_dim=0,
        )
        self.td = TD({"a": self.a, "n": nested, "stack": stack}, batch_size=[2, 3], device=device)
        self.td.set_non_tensor("note", "hello")


class CasterTest(unittest.TestCase):
    def test_versions_match(self):
        self.assertEqual(ext.torch_version(), ".".join(torch.__version__.split(".")[:2]))

    def test_cpp_sees_structure_and_shares_tensors(self):
        s = Sample()
        self.assertEqual(ext.backend(s.td, []), "dense")
        self.assertEqual(ext.batch_size(s.td, []), [2, 3])
        self.assertEqual(ext.batch_size(s.td, ["n"]), [2, 3, 4])
        self.assertEqual(ext.device(s.td), "cpu")
        self.assertEqual(ext.backend(s.td, ["stack"]), "lazy_stack")
        self.assertEqual(ext.stack_info(s.td, ["stack"]), (2, 0))
        self.assertEqual(ext.data_ptr(s.td, ["a"]), s.a.data_ptr())
        self.assertEqual(ext.data_ptr(s.td, ["n", "x"]), s.x.data_ptr())
        self.assertEqual(ext.member_data_ptr(s.td, ["stack"], 0, "obs"), s.obs0.data_ptr())
        self.assertEqual(ext.member_data_ptr(s.td, ["stack"], 1, "obs"), s.obs1.data_ptr())
        ragged = Sample(ragged=True)
        self.assertEqual(ext.member_data_ptr(ragged.td, ["stack"], 1, "obs"), ragged.obs1.data_ptr())
        self.assertEqual(json.loads(ext.non_tensor(s.td, ["note"])), "hello")
        self.assertEqual(
            json.loads(ext.non_tensor(s.td, ["n", "meta"])),
            {"k": [1, 2.5, None, "s"], "ok": True},
        )
        # Writes in C++ land in the caller's tensors: nothing was copied.
        ext.add_one_(s.td)
        self.assertTrue(torch.equal(s.a, torch.ones(2, 3, 4)))
        self.assertTrue(torch.equal(s.obs1, torch.full((3, 4), 2.0)))

    def test_round_trip(self):
        s = Sample(ragged=True)
        out = ext.identity(s.td)
        self.assertIsInstance(out, TD)
        self.assertEqual(out.batch_size, torch.Size([2, 3]))
        self.assertEqual(out.device, torch.device("cpu"))
        self.assertEqual(entry(out, "a").data_ptr(), s.a.data_ptr())
        self.assertIsInstance(entry(out, "n"), TD)
        self.assertEqual(entry(out, "n").batch_size, torch.Size([2, 3, 4]))
        self.assertEqual(entry(out, "n", "x").data_ptr(), s.x.data_ptr())
        self.assertEqual(out.get_non_tensor("note"), "hello")
        self.assertEqual(
            entry(out, "n").get_non_tensor("meta"), {"k": [1, 2.5, None, "s"], "ok": True}
        )
        stack = entry(out, "stack")
        self.assertIsInstance(stack, Lazy)
        self.assertEqual(stack.stack_dim, 0)
        self.assertEqual(len(stack.tensordicts), 2)
        self.assertEqual(entry(stack.tensordicts[0], "obs").data_ptr(), s.obs0.data_ptr())
        self.assertEqual(entry(stack.tensordicts[1], "obs").data_ptr(), s.obs1.data_ptr())
        self.assertEqual(entry(stack.tensordicts[1], "obs").shape, torch.Size([3, 5]))
        # And back again.
        self.assertEqual(ext.member_data_ptr(out, ["stack"], 1, "obs"), s.obs1.data_ptr())

    def test_top_level_lazy_stack(self):
        a, b = torch.zeros(4, 2), torch.ones(4, 2)
        stack = Lazy(TD({"v": a}, batch_size=[4]), TD({"v": b}, batch_size=[4]), stack_dim=1)
        self.assertEqual(ext.batch_size(stack, []), [4, 2])
        out = ext.identity_lazy(stack)
        self.assertIsInstance(out, Lazy)
        self.assertEqual(out.stack_dim, 1)
        self.assertEqual(entry(out.tensordicts[1], "v").data_ptr(), b.data_ptr())
        with self.assertRaises(TypeError):  # a dense TensorDict is not a lazy stack
            ext.identity_lazy(TD({"v": a}, batch_size=[4]))

    def test_no_device(self):
        t = torch.ones(5)
        out = ext.identity(TD({"t": t}, batch_size=[5]))
        self.assertIsNone(ext.device(TD({"t": t}, batch_size=[5])))
        self.assertIsNone(out.device)
        self.assertEqual(entry(out, "t").data_ptr(), t.data_ptr())

    def test_lock_carried(self):
        s = Sample()
        self.assertFalse(ext.is_locked(s.td))
        s.td.lock_()
        self.assertTrue(ext.is_locked(s.td))
        self.assertTrue(ext.identity(s.td).is_locked)

    def test_made_in_cpp(self):
        out = ext.make()
        self.assertIsInstance(out, TD)
        self.assertEqual(out.batch_size, torch.Size([2, 3]))
        self.assertEqual(out.device, torch.device("cpu"))
        self.assertTrue(torch.equal(entry(out, "x"), torch.ones(2, 3)))
        self.assertEqual(entry(out, "nested").get_non_tensor("label"), "cpp")
        self.assertEqual(out.get_non_tensor("numbers"), {"n": 3, "l": [1, 2.5, "s", None, True]})
        stack = entry(out, "stack")
        self.assertIsInstance(stack, Lazy)
        self.assertEqual(
            [tuple(entry(m, "obs").shape) for m in stack.tensordicts], [(3, 4), (3, 5)]
        )

    def test_apply_in_cpp(self):
        s = Sample()
        out = ext.scale(s.td, 2.0)
        self.assertTrue(torch.equal(entry(out, "n", "x"), s.x * 2))
        self.assertTrue(torch.equal(entry(out, "a"), s.a * 2))
        stack = entry(out, "stack")  # td::TensorDict::apply returns lazy stacks dense
        obs = (
            torch.stack([entry(m, "obs") for m in stack.tensordicts], stack.stack_dim)
            if isinstance(stack, Lazy)
            else entry(stack, "obs")
        )
        self.assertTrue(torch.equal(obs, torch.stack([s.obs0, s.obs1]) * 2))
        self.assertEqual(out.get_non_tensor("note"), "hello")
        self.assertEqual(out.batch_size, torch.Size([2, 3]))

    def test_quacking_object(self):
        class ItemsOnly:
            batch_size = torch.Size([2])
            device = None

            def __init__(self, t):
                self.t = t

            def items(self):
                return [("t", self.t), ("tag", "plain str")]

        t = torch.ones(2, 3)
        obj = ItemsOnly(t)
        self.assertEqual(ext.data_ptr(obj, ["t"]), t.data_ptr())
        self.assertEqual(json.loads(ext.non_tensor(obj, ["tag"])), "plain str")

    def test_cpp_errors_are_python_exceptions(self):
        s = Sample()
        with self.assertRaises(KeyError) as cm:
            ext.get(s.td, ["n", "missing"])
        self.assertIn("missing", str(cm.exception))
        self.assertNotIn("Exception raised from", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            ext.set(s.td, ["a"], torch.zeros(5))
        self.assertIn("'a'", str(cm.exception))
        self.assertIn("batch size", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            ext.get(s.td, ["note"])
        self.assertIn("note", str(cm.exception))

    def test_bad_input_is_named(self):
        s = Sample()
        entry(s.td, "n")._tensordict["bad"] = {1, 2}
        with self.assertRaises(TypeError) as cm:
            ext.identity(s.td)
        self.assertIn("('n', 'bad')", str(cm.exception))
        self.assertIn("set", str(cm.exception))

        s = Sample()
        s.td.set_non_tensor("obj", object())
        with self.assertRaises(TypeError) as cm:
            ext.identity(s.td)
        self.assertIn("'obj'", str(cm.exception))

        s = Sample()
        s.td._tensordict["wrong"] = torch.zeros(5)  # bypasses the Python class's own check
        with self.assertRaises(ValueError) as cm:
            ext.identity(s.td)
        self.assertIn("'wrong'", str(cm.exception))

        with self.assertRaises(TypeError):  # not TensorDict-shaped at all
            ext.identity(3)

    def test_deep_json_from_cpp_is_refused_by_name(self):
        # JSON nested past the caster's limit (td::kMaxNestingDepth) raises instead of recursing
        # once per level on the C++ stack; a shallow one still converts. (Far deeper values,
        # ~10,000 levels, already exhaust the stack when td::Value copies its JSON, before the
        # caster sees them.)
        for depth in (129, 1000):
            with self.assertRaises(ValueError) as cm:
                ext.deep_json(depth)
            self.assertIn("('n', 'deep')", str(cm.exception))
            self.assertIn("nests deeper than 128", str(cm.exception))
        out = ext.deep_json(3)
        self.assertEqual(entry(out, "n").get_non_tensor("deep"), [[[None]]])

    def test_malformed_input_is_named(self):
        t = torch.ones(2, 3)

        class Items:
            batch_size = torch.Size([2])
            device = None

            def __init__(self, items):
                self._items = items

            def items(self):
                return self._items

        def nested(obj):
            s = TD({}, batch_size=[2])
            s._tensordict["inner"] = obj  # bypasses the Python class's own check
            return s

        with self.assertRaises(ValueError) as cm:
            ext.identity(nested(Items([("t", t, 3)])))
        self.assertIn("'inner'", str(cm.exception))
        self.assertIn("element #0 has length 3", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            ext.identity(nested(Items([("t", t), 5])))
        self.assertIn("'inner'", str(cm.exception))
        self.assertIn("element #1 is a int", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            ext.identity(nested(Items(7)))
        self.assertIn("'inner': items()", str(cm.exception))
        self.assertIn("not iterable", str(cm.exception))
        self.assertEqual(ext.data_ptr(nested(Items([["t", t]])), ["inner", "t"]), t.data_ptr())

        class Batch:
            device = None

            def __init__(self, batch_size):
                self.batch_size = batch_size

            def items(self):
                return []

        with self.assertRaises(OverflowError) as cm:
            ext.identity(nested(Batch([2, 2**70])))
        self.assertIn("'inner'", str(cm.exception))
        self.assertIn(str(2**70), str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            ext.identity(nested(Batch([2, -3])))
        self.assertIn("negative size -3", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            ext.identity(nested(Batch([2, 2**40, 2**40])))
        self.assertIn("does not fit in int64", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            ext.identity(nested(Batch([2, "x"])))
        self.assertIn("'x'", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            ext.identity(nested(Batch(3)))
        self.assertIn("batch_size 3", str(cm.exception))

        class Stack:
            batch_size = torch.Size([2, 2])
            device = None

            def __init__(self, stack_dim, tensordicts=None):
                self.stack_dim = stack_dim
                self.tensordicts = (
                    tensordicts
                    if tensordicts is not None
                    else [TD({"v": torch.zeros(2)}, batch_size=[2]) for _ in range(2)]
                )

        with self.assertRaises(TypeError) as cm:
            ext.identity(nested(Stack("x")))
        self.assertIn("'inner'", str(cm.exception))
        self.assertIn("stack_dim", str(cm.exception))
        with self.assertRaises(OverflowError) as cm:
            ext.identity(nested(Stack(2**70)))
        self.assertIn("stack_dim", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            ext.identity(nested(Stack(0, tensordicts=5)))
        self.assertIn("tensordicts", str(cm.exception))
        with self.assertRaises(IndexError) as cm:
            ext.identity(nested(Stack(5)))
        self.assertIn("'inner'", str(cm.exception))

    def test_tensorclass(self):
        obs = torch.zeros(3, 2)
        out = ext.shift_step(make_step(obs, "a"))
        self.assertIsInstance(out, Step)
        self.assertTrue(torch.equal(out.obs, torch.ones(3, 2)))
        self.assertEqual(step_tag(out), "a+1")
        self.assertEqual(out.batch_size, torch.Size([3]))
        # A TensorDict without the class's fields is refused by Step::from_tensordict.
        with self.assertRaises(KeyError) as cm:
            ext.shift_step(TD({"obs": obs}, batch_size=[3]))
        self.assertIn("tag", str(cm.exception))

    def test_tensorclass_non_tensor_fields(self):
        # 0.4 keeps a set non-tensor field in _non_tensordict, 0.14 as NonTensorData in
        # _tensordict (NOTE [ Upstream attribute layouts ] in caster.cc): both cross; an unset
        # (None) field is left out.
        obs = torch.zeros(3, 2)
        rec = Record(obs=obs, info={"k": [1, 2]}, note="n", batch_size=[3])
        self.assertEqual(ext.keys(rec), ["obs", "info", "note"])
        self.assertEqual(ext.data_ptr(rec, ["obs"]), obs.data_ptr())
        self.assertEqual(json.loads(ext.non_tensor(rec, ["info"])), {"k": [1, 2]})
        self.assertEqual(json.loads(ext.non_tensor(rec, ["note"])), "n")
        # Inside a TensorDict: a nested level.
        td = TD({"rec": rec}, batch_size=[3])
        self.assertEqual(json.loads(ext.non_tensor(td, ["rec", "note"])), "n")
        self.assertEqual(ext.data_ptr(td, ["rec", "obs"]), obs.data_ptr())
        # Back as the registered class, its fields readable.
        out = ext.shift_step(make_step(obs, "a"))
        self.assertEqual(out.tag, "a+1")
        self.assertEqual(ext.non_tensor(out, ["tag"]), '"a+1"')

    def test_non_tensor_stack_and_metadata(self):
        td = TD({"a": torch.zeros(2)}, batch_size=[2])
        td._tensordict["st"] = NonTensorStack(NonTensorData("x"), NonTensorData("y"), stack_dim=0)
        self.assertEqual(json.loads(ext.non_tensor(td, ["st"])), ["x", "y"])
        # One value per element in C++: indexing moves them.
        self.assertEqual(ext.non_tensor_kind(td, ["st"]), "NonTensorStack")
        self.assertEqual(ext.non_tensor(ext.index(td, 1), ["st"]), '"y"')
        back = ext.identity(td)
        self.assertIsInstance(back._tensordict["st"], NonTensorStack)
        self.assertEqual(back._tensordict["st"].tolist(), ["x", "y"])
        # Made in C++: back as a NonTensorStack of NonTensorData members.
        made = ext.make_with_stack(False)
        self.assertIsInstance(made._tensordict["task"], NonTensorStack)
        self.assertEqual(made._tensordict["task"].tolist(), ["walk", "run", {"k": 1}])
        self.assertEqual(made._tensordict["task"].stack_dim, 0)
        if MetaData is None:  # 0.4 has none: C++ MetaData cannot cross
            with self.assertRaises(TypeError):
                ext.make_with_stack(True)
            return
        td._tensordict["m"] = MetaData({"v": 1}, batch_size=[2])
        self.assertEqual(json.loads(ext.non_tensor(td, ["m"])), {"v": 1})
        self.assertEqual(ext.non_tensor_kind(td, ["m"]), "MetaData")
        back = ext.identity(td)
        self.assertIsInstance(back._tensordict["m"], MetaData)
        self.assertEqual(back.get_non_tensor("m"), {"v": 1})
        made = ext.make_with_stack(True)
        self.assertIsInstance(made._tensordict["robot"], MetaData)
        self.assertEqual(made._tensordict["robot"].data, "franka")

    def test_names(self):
        x = torch.zeros(2, 3, 4)
        td = TD({"a": torch.zeros(2, 3)}, batch_size=[2, 3], names=["env", "time"])
        td["n"] = TD({"x": x}, batch_size=[2, 3, 4], names=["env", "time", "obs"])
        self.assertEqual(ext.names(td, []), ["env", "time"])
        self.assertEqual(ext.names(td, ["n"]), ["env", "time", "obs"])
        out = ext.identity(td)
        self.assertEqual(list(out.names), ["env", "time"])
        self.assertEqual(list(entry(out, "n").names), ["env", "time", "obs"])
        self.assertEqual(entry(out, "n", "x").data_ptr(), x.data_ptr())
        # Unnamed stays unnamed (no names= given).
        self.assertEqual(ext.names(TD({}, batch_size=[2]), []), [None])
        self.assertEqual(list(ext.identity(TD({}, batch_size=[2])).names), [None])

    def test_names_of_lazy_stacks(self):
        def member(v):
            return TD({"v": v}, batch_size=[4], names=["x"])

        v0, v1 = torch.zeros(4), torch.ones(4)
        stack = Lazy(member(v0), member(v1), stack_dim=1)
        self.assertEqual(ext.names(stack, []), ["x", None])
        stack.names = ["x", "s"]  # the stack dim's own name
        self.assertEqual(ext.names(stack, []), ["x", "s"])
        out = ext.identity_lazy(stack)
        self.assertEqual(list(out.names), ["x", "s"])
        self.assertEqual(list(out.tensordicts[1].names), ["x"])
        self.assertEqual(entry(out.tensordicts[1], "v").data_ptr(), v1.data_ptr())
        # Members named differently: upstream's `names` raises; C++ reads the stack unnamed.
        odd = Lazy(member(v0), TD({"v": v1}, batch_size=[4], names=["y"]), stack_dim=0)
        self.assertEqual(ext.names(odd, []), [None, None])
        # Named in C++, the stack dim too.
        made = ext.make_named()
        self.assertEqual(list(made.names), ["env", "time"])
        self.assertEqual(list(entry(made, "nested").names), ["env", "time"])
        self.assertEqual(list(entry(made, "stack").names), ["env", "time"])
        self.assertEqual(list(entry(made, "stack").tensordicts[0].names), ["time"])

    def test_bad_names_are_named(self):
        class Named:
            batch_size = torch.Size([2, 3])
            device = None

            def __init__(self, names):
                self.names = names

            def items(self):
                return [("t", torch.zeros(2, 3))]

        def nested(names):
            td = TD({}, batch_size=[2])
            td._tensordict["n"] = Named(names)  # past the Python class's own checks
            return td

        self.assertEqual(ext.names(nested(["a", None]), ["n"]), ["a", None])
        with self.assertRaises(TypeError) as cm:
            ext.identity(nested(["a", 5]))
        self.assertIn("'n'", str(cm.exception))
        self.assertIn("a dim name is a str or None", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            ext.identity(nested(["a", "a"]))
        self.assertIn("'n'", str(cm.exception))
        self.assertIn("repeats", str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            ext.identity(nested(["a"]))
        self.assertIn("'n'", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            ext.identity(nested(7))
        self.assertIn("not iterable", str(cm.exception))

    @unittest.skipIf(
        importlib.util.find_spec("tensordict") is not None, "Python tensordict is importable"
    )
    def test_unregistered_without_tensordict(self):
        ext.set_tensordict_type(None)
        try:
            with self.assertRaises(ImportError) as cm:
                ext.make()
            self.assertIn("set_tensordict_type", str(cm.exception))
        finally:
            ext.set_tensordict_type(TD, Lazy)


if __name__ == "__main__":
    unittest.main(verbosity=2)
