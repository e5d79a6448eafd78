"""Map and Zip on a device group: each device applies the muscle to its block of the inputs.

Inputs take the block distribution (an input distributed otherwise is redistributed, on the
device side where it can be); index spaces split by rows; containers among the extras (read by
index) are copied to every device. Each device's part runs the same kernel as on one device,
tuned for that device and that part's size; the result is block-distributed. No exchange.
"""

from __future__ import annotations

import math

from .. import runtime as _rt
from ..containers import Matrix, Vector
from ..containers.distributions import BLOCK
from .common import block_inputs, collective, copied_extras, group_launch, input_view, named
from .parts import Part, Parts

__all__ = ["run"]


@collective
def run(skel, args, params, out_dtype):
    """``skel(*args)`` (a Map or Zip) on the device group in use."""
    group = _rt.current().group
    inputs, shape, extras = skel.classify(args, out_dtype)
    with skel._naming_errors():
        in_parts = block_inputs(group, inputs)
        extra_args = copied_extras(group, extras)
    n = math.prod(shape)
    if n == 0:              # nothing to spread: the first device makes the empty result
        return named(skel.run_on(_rt.current(), list(args), params, out_dtype), BLOCK)
    out_shape = shape if len(shape) in (1, 2) else (n,)
    ranges = BLOCK.ranges(out_shape[0], group.size)
    parts, launches, odt = [], [], None
    for rank, (rt, (lo, hi)) in enumerate(zip(group.runtimes, ranges, strict=True)):
        part = Part(rank, rt, lo, hi)
        if hi > lo and rt is not None:      # (None: a device of another process)
            views = [input_view(v, p, part) for v, p in zip(inputs, in_parts, strict=True)]
            res = skel.run_on(rt, [*views, *extra_args[rank]], params, out_dtype)
            part.buffer = res.storage.buffer
            odt = res.dtype
            launches.append(skel.last_launch)
        parts.append(part)
    if odt is None:                 # no part here (MPI): the dtype the parts elsewhere have
        odt = skel._describe(list(args), out_dtype)[0].out_dtype
    skel.last_launch = group_launch(skel.kind, launches)
    cls = Vector if len(out_shape) == 1 else Matrix
    return cls.from_parts(Parts(group, BLOCK, out_shape, odt, parts))
