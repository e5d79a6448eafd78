"""The devices' partial values folded on the host, where that gives the device's bits.

A Reduce on a device group leaves one partial value per device, a Scan one total per device:
P values. Each is downloaded anyway (for the result, or to cross processes under MPI); folding
them where they arrive saves what a fold on a device costs on top: the values' trip to one
device, a kernel launch with its tuning decision, and a second download (on PoCL 160 us of a
233 us Reduce of 2^10 floats over two devices; on an H200 pair ~40 us of round trips).

On the host the fold must give the bits the device's fold gives. It does exactly when the
muscle is a sum or a product (``fold_muscle.arithmetic_kind``, the same test that picks NumPy's
accumulator) and the accumulator is bool, an integer or float32/float64: one IEEE operation (or
one wrapping integer operation) per pair, in any language. Every other muscle (a max, whose
NaN rule is the translator's, a muscle calling ``exp``, an OpenCL C muscle) is folded on a
device as before (:class:`HostFold.of` returns None).

Order, as on the device (``kernels/reduce.cl``): a fold of P values no more than a work-group
combines each value with the identity, then pairs of neighbours, then pairs of pairs (the
group fold); the exclusive scan of the totals runs from the identity left to right. So the
result does not depend on timing, and a group of two or three devices gives what the device
fold gave, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["HostFold"]

_OPS = {"add": np.add, "multiply": np.multiply}
_EXACT_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@dataclass(frozen=True)
class HostFold:
    """A sum or product over values of ``dtype`` (the accumulator; stored as ``storage``),
    ``identity`` its neutral element. Values travel as bytes, back to back in rank order."""

    op: np.ufunc
    dtype: np.dtype
    storage: np.dtype
    identity: np.ndarray          # 0-d, of dtype

    @classmethod
    def of(cls, kind: str | None, dtype, storage, identity) -> HostFold | None:
        """The host fold for a muscle of arithmetic ``kind`` ("add", "multiply" or None) over
        ``dtype``, or None when only a device gives the device's bits."""
        dt, st = np.dtype(dtype), np.dtype(storage)
        if kind not in _OPS or not (dt.kind in "biu" or dt in _EXACT_FLOATS):
            return None
        ident = np.asarray(identity).astype(st).reshape(()).view(dt)
        return cls(_OPS[kind], dt, st, ident)

    def _values(self, data: np.ndarray, count: int) -> np.ndarray:
        return np.frombuffer(np.ascontiguousarray(data).data, self.storage,
                             count).view(self.dtype)

    def _bytes(self, values: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(values, self.dtype).reshape(-1).view(np.uint8)

    def fold(self, data: np.ndarray, count: int) -> np.ndarray:
        """The bytes of the fold of ``count`` values (``data``: their bytes, rank order)."""
        with np.errstate(all="ignore"):
            v = self.op(self.identity, self._values(data, count))
            if count == 0:
                v = self.identity.reshape(1)
            while v.size > 1:          # pairs of neighbours, an odd last one carried up
                even = v.size & ~1
                v = np.concatenate([self.op(v[0:even:2], v[1:even:2]), v[even:]])
        return self._bytes(v)

    def exclusive(self, data: np.ndarray, count: int) -> np.ndarray:
        """The bytes of the ``count`` exclusive prefix folds (value k: the fold of values
        0..k-1, the identity for k = 0), each from the identity, left to right."""
        values = self._values(data, count)
        out = np.empty(count, self.dtype)
        acc = self.identity
        with np.errstate(all="ignore"):
            for k in range(count):
                out[k] = acc
                acc = self.op(acc, values[k])
        return self._bytes(out)
