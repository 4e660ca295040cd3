"""A small TensorDict-shaped Python class for testing //td/python without Python tensordict.

Written for this project (no code taken from Python tensordict). It mimics only the attributes
of Python tensordict that td/python/caster.cc reads and calls (NOTE [ Upstream attribute
layouts ] there), in the layout of v0.4.0 or of v0.14.0: `set_layout("0.4")` (the default) or
`set_layout("0.14")`, called before any object is made. The two differ in
  * where a tensorclass keeps a set non-tensor field (tensorclass.py, `_set`): 0.4 as the plain
    value in `_non_tensordict`; 0.14 as NonTensorData in `_tensordict` (only None fields stay in
    `_non_tensordict`);
  * NonTensorData's `data` (tensorclass.py): an attribute in 0.4; in 0.14 held in the object's
    own `_non_tensordict` behind a `data` property, and MetaData (a NonTensorData kind) exists.
What both have:
  * TensorDict (tensordict/_td.py): `batch_size` (torch.Size), `device` (torch.device or None),
    `names` (a list, None for an unnamed dim), `_tensordict` (the dict of entries, str keys),
    `items()`, `keys()`, `is_locked`, `lock_()`, `set_non_tensor(key, value)`,
    `get_non_tensor(key)`, the constructor `TensorDict(source, batch_size=..., device=...,
    names=...)`, `clone(recurse)` and `apply(fn)`;
  * LazyStackedTensorDict (tensordict/_lazy.py): `tensordicts`, `stack_dim`, `names` (the
    members' names with the stack dim's inserted; ValueError when the members' names differ),
    its setter, the constructor `LazyStackedTensorDict(*tds, stack_dim=d)`;
  * NonTensorData and NonTensorStack (tensordict/tensorclass.py): the class flag
    `_is_non_tensor`, `.data`; NonTensorStack is a lazy stack of NonTensorData with `tolist()`;
  * a tensorclass (tensordict/tensorclass.py): the class flag `_is_tensorclass`, `_tensordict`,
    `_non_tensordict` and the classmethod `_from_tensordict(tensordict, non_tensordict)`.
"""

import torch

LAYOUTS = ("0.4", "0.14")
LAYOUT = "0.4"


def set_layout(layout):
    """Which upstream version's layout the classes below mimic: "0.4" or "0.14"."""
    global LAYOUT
    if layout not in LAYOUTS:
        raise ValueError("layout %r is not one of %r" % (layout, LAYOUTS))
    LAYOUT = layout


def _device(device):
    return None if device is None else torch.device(device)


def _is_non_tensor(value):
    return getattr(type(value), "_is_non_tensor", False)


class NonTensorData:
    _is_non_tensor = True
    _is_tensorclass = True

    def __init__(self, data, batch_size=(), device=None):
        if LAYOUT == "0.14":
            self._non_tensordict = {"data": data}
        else:
            self.__dict__["data"] = data
        self.batch_size = torch.Size(batch_size)
        self.device = _device(device)

    def __getattr__(self, name):  # 0.14: `data` read from _non_tensordict
        if name == "data" and "_non_tensordict" in self.__dict__:
            return self.__dict__["_non_tensordict"]["data"]
        raise AttributeError(name)

    def __repr__(self):
        return "%s(data=%r)" % (type(self).__name__, self.data)


class MetaData(NonTensorData):
    """0.14 only: a NonTensorData kind."""

    def __init__(self, *args, **kwargs):
        if LAYOUT != "0.14":
            raise TypeError("MetaData is not in tensordict " + LAYOUT)
        super().__init__(*args, **kwargs)


class TensorDict:
    def __init__(self, source=None, batch_size=(), device=None, names=None):
        self.batch_size = torch.Size(batch_size)
        self.device = _device(device)
        self.names = list(names) if names is not None else [None] * len(self.batch_size)
        if len(self.names) != len(self.batch_size):
            raise ValueError("names %r for batch size %r" % (self.names, self.batch_size))
        self._tensordict = {}
        self.is_locked = False
        for key, value in (source or {}).items():
            self[key] = value

    def _check(self, key, value):
        n = len(self.batch_size)
        shape = value.batch_size if not isinstance(value, torch.Tensor) else value.shape
        if tuple(shape[:n]) != tuple(self.batch_size):
            raise RuntimeError(
                "batch size mismatch for %r: %s vs %s" % (key, tuple(shape), tuple(self.batch_size))
            )

    def __setitem__(self, key, value):
        if isinstance(key, tuple):
            node = self
            for part in key[:-1]:
                node = node._tensordict[part]
            node[key[-1]] = value
            return
        if self.is_locked and key not in self._tensordict:
            raise RuntimeError("locked")
        if isinstance(value, dict):
            value = TensorDict(value, self.batch_size, self.device, self.names)
        elif isinstance(value, torch.Tensor) and self.device is not None:
            value = value.to(self.device)
        self._check(key, value)
        self._tensordict[key] = value

    def __getitem__(self, key):
        if isinstance(key, tuple):
            node = self
            for part in key:
                node = node[part]
            return node
        value = self._tensordict[key]
        return value.data if _is_non_tensor(value) else value

    def keys(self):
        return self._tensordict.keys()

    def items(self):
        return self._tensordict.items()

    def set_non_tensor(self, key, value):
        self._tensordict[key] = NonTensorData(value, self.batch_size, self.device)
        return self

    def get_non_tensor(self, key):
        value = self._tensordict[key]
        return value.tolist() if isinstance(value, NonTensorStack) else value.data

    def lock_(self):
        self.is_locked = True
        for v in self._tensordict.values():
            if isinstance(v, (TensorDict, LazyStackedTensorDict)):
                v.lock_()
        return self

    def _map(self, tensor_fn, recurse_fn):
        out = TensorDict(None, self.batch_size, self.device, self.names)
        for key, value in self._tensordict.items():
            if isinstance(value, torch.Tensor):
                out._tensordict[key] = tensor_fn(value)
            elif _is_non_tensor(value):
                out._tensordict[key] = value
            else:
                out._tensordict[key] = recurse_fn(value)
        return out

    def clone(self, recurse=True):
        return self._map(
            (lambda t: t.clone()) if recurse else (lambda t: t), lambda v: v.clone(recurse)
        )

    def apply(self, fn):
        return self._map(fn, lambda v: v.apply(fn))


class LazyStackedTensorDict:
    def __init__(self, *tensordicts, stack_dim=0):
        self.tensordicts = list(tensordicts)
        self.stack_dim = stack_dim
        self.is_locked = False
        self._td_dim_name = None
        first = self.tensordicts[0].batch_size
        self.batch_size = torch.Size(
            first[:stack_dim] + (len(self.tensordicts),) + first[stack_dim:]
        )
        self.device = self.tensordicts[0].device

    @property
    def names(self):
        names = list(self.tensordicts[0].names)
        for td in self.tensordicts[1:]:
            if list(td.names) != names:
                raise ValueError("Not all dim names match, got %r and %r" % (names, td.names))
        names.insert(self.stack_dim, self._td_dim_name)
        return names

    @names.setter
    def names(self, value):
        value = list(value)
        self._td_dim_name = value.pop(self.stack_dim)
        for td in self.tensordicts:
            td.names = list(value)

    def lock_(self):
        self.is_locked = True
        for td in self.tensordicts:
            td.lock_()
        return self

    def clone(self, recurse=True):
        return LazyStackedTensorDict(
            *[td.clone(recurse) for td in self.tensordicts], stack_dim=self.stack_dim
        )

    def apply(self, fn):
        return LazyStackedTensorDict(
            *[td.apply(fn) for td in self.tensordicts], stack_dim=self.stack_dim
        )


class NonTensorStack(LazyStackedTensorDict):
    _is_non_tensor = True

    def tolist(self):
        return [td.tolist() if isinstance(td, NonTensorStack) else td.data
                for td in self.tensordicts]


class TensorClass:
    """Base of fake tensorclasses: subclasses list their field names in `fields`.

    `Cls(batch_size=..., device=None, **fields)` stores tensors (and TensorDicts) in
    `_tensordict`, None in `_non_tensordict`, and any other value where the layout puts it.
    """

    _is_tensorclass = True
    fields = ()

    def __init__(self, batch_size=(), device=None, **values):
        self.__dict__["_tensordict"] = TensorDict(None, batch_size, device)
        self.__dict__["_non_tensordict"] = {}
        for name in type(self).fields:
            value = values.pop(name, None)
            if isinstance(value, torch.Tensor) or hasattr(value, "batch_size"):
                self._tensordict[name] = value
            elif value is None or LAYOUT == "0.4":
                self._non_tensordict[name] = value
            else:
                self._tensordict.set_non_tensor(name, value)
        if values:
            raise TypeError("unexpected fields %r" % sorted(values))

    @classmethod
    def _from_tensordict(cls, tensordict, non_tensordict=None):
        obj = cls.__new__(cls)
        obj.__dict__["_tensordict"] = tensordict
        obj.__dict__["_non_tensordict"] = dict(non_tensordict or {})
        return obj

    @property
    def batch_size(self):
        return self._tensordict.batch_size

    @property
    def device(self):
        return self._tensordict.device

    def __getattr__(self, name):
        if name in type(self).fields:
            if name in self._tensordict._tensordict:
                return self._tensordict[name]
            return self._non_tensordict.get(name)
        raise AttributeError(name)
