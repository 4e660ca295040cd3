"""A small TensorDict-shaped Python class for testing //td/python without Python tensordict.

Written for this project (no code taken from Python tensordict). It mimics only the attributes
of Python tensordict v0.4.0 that td/python/caster.cc reads and calls:
  * TensorDict (tensordict/_td.py): `batch_size` (torch.Size), `device` (torch.device or None),
    `_tensordict` (the dict of entries, str keys), `items()`, `keys()`, `is_locked`, `lock_()`,
    `set_non_tensor(key, value)`, `get_non_tensor(key)`, the constructor
    `TensorDict(source, batch_size=..., device=...)`, `clone(recurse)` and `apply(fn)`;
  * LazyStackedTensorDict (tensordict/_lazy.py): `tensordicts`, `stack_dim`, the constructor
    `LazyStackedTensorDict(*tds, stack_dim=d)`;
  * NonTensorData (tensordict/tensorclass.py): the class flag `_is_non_tensor` and `.data`;
  * a tensorclass (tensordict/tensorclass.py): the class flag `_is_tensorclass`, `_tensordict`
    (tensors and nested TensorDicts), `_non_tensordict` (the other fields) and the classmethod
    `_from_tensordict(tensordict, non_tensordict)`.
"""

import torch


def _device(device):
    return None if device is None else torch.device(device)


class NonTensorData:
    _is_non_tensor = True
    _is_tensorclass = True

    def __init__(self, data, batch_size=(), device=None):
        self.data = data
        self.batch_size = torch.Size(batch_size)
        self.device = _device(device)

    def __repr__(self):
        return "NonTensorData(data=%r)" % (self.data,)


class TensorDict:
    def __init__(self, source=None, batch_size=(), device=None):
        self.batch_size = torch.Size(batch_size)
        self.device = _device(device)
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
            value = TensorDict(value, self.batch_size, self.device)
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
        return value.data if getattr(type(value), "_is_non_tensor", False) else value

    def keys(self):
        return self._tensordict.keys()

    def items(self):
        return self._tensordict.items()

    def set_non_tensor(self, key, value):
        self._tensordict[key] = NonTensorData(value, self.batch_size, self.device)
        return self

    def get_non_tensor(self, key):
        return self._tensordict[key].data

    def lock_(self):
        self.is_locked = True
        for v in self._tensordict.values():
            if isinstance(v, (TensorDict, LazyStackedTensorDict)):
                v.lock_()
        return self

    def _map(self, tensor_fn, recurse_fn):
        out = TensorDict(None, self.batch_size, self.device)
        for key, value in self._tensordict.items():
            if isinstance(value, torch.Tensor):
                out._tensordict[key] = tensor_fn(value)
            elif getattr(type(value), "_is_non_tensor", False):
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
        first = self.tensordicts[0].batch_size
        self.batch_size = torch.Size(
            first[:stack_dim] + (len(self.tensordicts),) + first[stack_dim:]
        )
        self.device = self.tensordicts[0].device

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


class TensorClass:
    """Base of fake tensorclasses: subclasses list their field names in `fields`."""

    _is_tensorclass = True
    fields = ()

    @classmethod
    def _from_tensordict(cls, tensordict, non_tensordict=None):
        obj = cls.__new__(cls)
        obj._tensordict = tensordict
        obj._non_tensordict = dict(non_tensordict or {})
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
