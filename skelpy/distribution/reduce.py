"""Reduce and MapReduce on a device group.

All elements: each device folds its block (the same kernel as on one device, tuned for that
device and size) and leaves one partial value; the exchange folds the partials in device
order with the same muscle, so the result does not depend on timing: a sum or product on the
host as they arrive (one small download per device into pinned memory; the device's bits,
see ``host_fold.py``), any other muscle on a device (so that an OpenCL C muscle folds exactly
as on the device). ``axis=1``
of a row-block Matrix: each device folds its own rows, no exchange, a block-distributed Vector.
``axis=0``: each device folds its rows' columns into a partial row; the partial rows meet on
the first device, which folds them in order (the result has the single distribution).
"""

from __future__ import annotations

import numpy as np

from .. import runtime as _rt
from ..containers import Vector
from ..containers.distributions import BLOCK, SINGLE
from ..dtypes import storage_dtype
from .common import block_inputs, collective, copied_extras, group_launch, input_view, named
from .exchange import Move, Span, exchange_of
from .parts import Part, Parts

__all__ = ["run"]


@collective
def run(skel, inputs, extras, params):
    """``skel`` (a Reduce or MapReduce) over ``inputs`` on the device group in use."""
    group = _rt.current().group
    plan, shape, axis = skel.classify(inputs, extras)
    acc = plan.out_dtype
    with skel._naming_errors():
        in_parts = block_inputs(group, inputs)
        extra_args = copied_extras(group, extras)
    ranges = BLOCK.ranges(shape[0], group.size)
    results, launches = {}, []
    for rank, (rt, (lo, hi)) in enumerate(zip(group.runtimes, ranges, strict=True)):
        if hi > lo and rt is not None:      # (None: a device of another process)
            part = Part(rank, rt, lo, hi)
            views = [input_view(v, p, part) for v, p in zip(inputs, in_parts, strict=True)]
            results[rank] = skel.reduce_on(rt, views, extra_args[rank], params)
            launches.append(skel.last_launch)
    skel.last_launch = group_launch(skel.kind, launches)
    holders = [r for r, (lo, hi) in enumerate(ranges) if hi > lo]
    if not holders:                          # an empty input: as on one device
        res = skel.reduce_on(_rt.current(), inputs, extras, params)
        return named(res, BLOCK if axis == 1 else SINGLE) if axis is not None else res[0]
    if axis == 1:
        parts = [Part(r, rt, lo, hi, buffer=results[r].device_buffer(rt) if r in results
                      else None)
                 for r, (rt, (lo, hi)) in enumerate(zip(group.runtimes, ranges, strict=True))]
        return Vector.from_parts(Parts(group, BLOCK, (shape[0],), acc, parts))
    st = storage_dtype(acc)
    values = {r: Span(r, res.device_buffer(group.runtimes[r])) for r, res in results.items()}
    ex = exchange_of(group)
    if axis is None:        # the last thing this call does: under MPI it closes the call
        host = ex.allreduce(values, st.itemsize,
                            lambda rt, buf, count: skel.fold_on(rt, buf, count, acc),
                            host=skel.host_fold(acc), closes_call=True)
        return _scalar(host, acc)
    # axis 0: the partial rows meet on the first device with one, in rank order
    cols = shape[1]
    root = holders[0]
    rt0 = group.runtimes[root]              # None where another process drives it (MPI)
    rows = rt0.allocate(len(holders) * cols * st.itemsize) if rt0 is not None else None
    ex.move([Move(values.get(r, Span(r, None)), Span(root, rows, k * cols * st.itemsize),
                  cols * st.itemsize) for k, r in enumerate(holders)])
    out = None
    if rt0 is not None:
        out = skel.fold_on(rt0, rows, len(holders), acc, axis=0, cols=cols)
    parts = [Part(r, rt, *((0, cols) if r == root else (cols, cols)),
                  buffer=out if r == root else None)
             for r, rt in enumerate(group.runtimes)]
    return Vector.from_parts(Parts(group, SINGLE, (cols,), acc, parts))


def _scalar(host: np.ndarray, acc: np.dtype):
    """A downloaded accumulator value as a NumPy scalar."""
    return host.view(storage_dtype(acc)).view(acc)[0]
