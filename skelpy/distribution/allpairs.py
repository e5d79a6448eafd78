"""AllPairs on a device group, as in SkelCL: A takes the block distribution by rows, B the copy
distribution (every device needs all of B), and each device computes its rows of C with the
same kernel as on one device, tuned for its part. C is block-distributed by rows; no exchange
beyond copying B (once: B keeps the copy distribution for the next call)."""

from __future__ import annotations

from .. import runtime as _rt
from ..containers import Matrix
from ..containers.distributions import BLOCK, COPY
from .common import collective, copied_extras, group_launch, here, named
from .parts import Part, Parts, distributed

__all__ = ["run"]


@collective
def run(skel, a, b, extras, params):
    """``skel(a, b, *extras)`` (an AllPairs) on the device group in use."""
    group = _rt.current().group
    n, m = a.shape[0], b.shape[0]
    with skel._naming_errors():             # (empty inputs too: they take A block, B copy)
        a_parts = distributed(a, group, BLOCK)
        b_parts = distributed(b, group, COPY)
        extra_args = copied_extras(group, extras)
    if n == 0 or m == 0:
        return named(skel.run_on(_rt.current(), a, b, *extras, params=params), BLOCK)
    out, launches, dtype = [], [], None
    for p in a_parts.parts:
        part = Part(p.rank, p.rt, p.lo, p.hi)
        if p.rows and here(p):
            res = skel.run_on(p.rt, a_parts.local_view(p),
                              b_parts.whole_view(b_parts.parts[p.rank]), *extra_args[p.rank],
                              params=params)
            part.buffer, dtype = res.storage.buffer, res.dtype
            launches.append(skel.last_launch)
        out.append(part)
    if dtype is None:               # no part here (MPI): the dtype the parts elsewhere have
        dtype = skel._signature(a, b, extras)[3].out_dtype
    skel.last_launch = group_launch(skel.kind, launches)
    return Matrix.from_parts(Parts(group, BLOCK, (n, m), dtype, out))
