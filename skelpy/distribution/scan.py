"""Scan on a device group.

Each device folds its block to a total (the same fold kernel as Reduce), the exchange gives
every device the fold of the totals of the devices before it (an exclusive scan of the
per-device totals with the scan's own muscle: for a sum or product on the host, where the
totals arrive by one small download each, the device's bits; otherwise on each device), and
each device scans its block from that carry-in (``SKP_CARRY_IN`` in ``kernels/scan.cl``): a
block is read twice and written once, and no device waits for another's whole scan. (SkelCL's
scan-then-add-offsets would read and write every block after the first twice, and the last
device could only start adding once the first had finished.) The result is block-distributed;
a Matrix is scanned in row-major order.
"""

from __future__ import annotations

from .. import runtime as _rt
from ..containers.distributions import BLOCK
from ..dtypes import storage_dtype
from .common import collective, group_launch, here, named
from .exchange import Span, exchange_of
from .parts import Part, Parts, distributed

__all__ = ["run"]


@collective
def run(skel, c, params):
    """``skel(c)`` (a Scan) on the device group in use."""
    group = _rt.current().group
    acc = skel.accumulator(c)
    with skel._naming_errors():
        parts = distributed(c, group, BLOCK)     # (an empty input too: it takes block)
    if c.size == 0:
        return named(skel.scan_on(_rt.current(), c, params), BLOCK)
    item = storage_dtype(acc).itemsize
    views, totals = {}, {}
    for p in parts.parts:
        if p.rows and here(p):
            views[p.rank] = parts.local_view(p)
            total = skel.total_on(p.rt, views[p.rank])
            totals[p.rank] = Span(p.rank, total.device_buffer(p.rt))
    carries = exchange_of(group).exscan(
        totals, item, lambda rt, buf, count: skel.scan_values_on(rt, buf, count, acc),
        host=skel.host_fold(acc))
    out, launches = [], []
    for p in parts.parts:
        part = Part(p.rank, p.rt, p.lo, p.hi)
        if p.rows and here(p):
            carry = carries[p.rank]
            res = skel.scan_on(p.rt, views[p.rank], params,
                               carry=(carry.buffer, carry.offset // item))
            part.buffer = res.storage.buffer
            launches.append(skel.last_launch)
        out.append(part)
    skel.last_launch = group_launch(skel.kind, launches)
    return type(c).from_parts(Parts(group, BLOCK, c.shape, acc, out))
