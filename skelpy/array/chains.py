"""Chains of skeletons fused into one kernel: deferred Map/Zip calls, and a pending value as
the input of ``Reduce``.

Outside ``with sk.lazy():`` a Map or Zip call runs its kernel at once (timings, ``last_launch``
and the tuner see every call). Inside, a call whose muscle is a Python function, whose inputs
are containers and whose extras are scalars is checked as the call would be (translation,
dtypes, shapes: errors at the caller's line) and returns a *pending* container, like an array
expression: its graph node calls the muscle (``graph.Node("call")``), which the fused kernel
calls as a helper function. So ``Map(g)(Map(f)(x))``, ``Map(f)(x) * 2 + y``, ``np.sum(Map(f)(x))``
and ``Reduce(add, 0)(Map(f)(x))`` are each ONE kernel. A deferred call that nothing has fused
runs, when its value is needed, exactly as the eager call would have (same skeleton, same
kernel, its ``last_launch`` set then). Python scalar extras stay weak (NEP 50), as in a call.

``Reduce`` given any pending value runs a :class:`~skelpy.skeletons.MapReduce` whose map is
the value's fused muscle (cached per Reduce and graph structure); its ``last_launch`` then
shows that launch. ``Scan`` given one runs a :class:`~skelpy.skeletons.scan.MapScan` in the
same way (the expression is evaluated as the scan loads its tiles).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..containers import Container
from ..containers import array_surface as _surface
from ..skeletons import MapReduce
from ..skeletons.scan import MapScan
from . import expression, fusion, graph
from .graph import Node

_TLS = threading.local()
_LOCK = threading.Lock()
_REDUCERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SCANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@contextmanager
def lazy() -> Iterator[None]:
    """``with sk.lazy():`` Map and Zip calls in this thread return pending values that fuse
    with what consumes them (see the module docstring). Blocks nest."""
    with _LOCK:
        _surface.lazy_calls += 1
    _TLS.depth = getattr(_TLS, "depth", 0) + 1
    try:
        yield
    finally:
        _TLS.depth -= 1
        with _LOCK:
            _surface.lazy_calls -= 1


@contextmanager
def _eager() -> Iterator[None]:
    depth = getattr(_TLS, "depth", 0)
    _TLS.depth = 0
    try:
        yield
    finally:
        _TLS.depth = depth


def _scalar_node(value) -> Node | None:
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return graph.const(value, value.dtype)
    if isinstance(value, (bool, int, float)):
        try:
            return graph.weak(value)
        except (OverflowError, TypeError, ValueError):
            return None
    return None


def defer(skel, args: tuple) -> Container | None:
    """A Map/Zip call as a pending value, or None to run it now (not in a lazy block, an
    OpenCL C muscle, an index space or ndarray input, an extra read by index)."""
    if getattr(_TLS, "depth", 0) <= 0 or skel.function is None:
        return None
    n_in = skel.n_inputs
    if len(args) < n_in or not all(isinstance(c, Container) for c in args[:n_in]):
        return None
    extras = [_scalar_node(e) for e in args[n_in:]]
    if any(e is None for e in extras):
        return None
    out_dtype = skel.result_dtype(*args)          # the call's own checks and errors
    shape = args[0].shape
    nodes = expression.bounded(list(args), [expression.node_of(c) for c in args[:n_in]]
                               + extras)
    node = Node("call", tuple(nodes), out_dtype, shape, fn=skel.function)
    direct = None
    if all(n.op != "call" and n.n_ops == 0 for n in nodes):     # leaves and scalars only
        frozen = tuple(args)

        def direct():
            with _eager():
                return skel(*frozen), skel

    return fusion.pending_container(node, shape, direct)


def _fused_skeleton(table: weakref.WeakKeyDictionary, skel, program, make):
    """The fused skeleton of ``skel`` for ``program``'s structure, made once (at most
    MAX_CACHED_SKELETONS per consumer, so a loop of new structures cannot grow it)."""
    with _LOCK:
        per_skel = table.setdefault(skel, {})
        fused = per_skel.get(program.key)
        if fused is None:
            if len(per_skel) > fusion.MAX_CACHED_SKELETONS:
                per_skel.clear()
            fused = per_skel[program.key] = make()
        return fused


def fused_reduce(skel, x: Container):
    """``skel(x)`` (a Reduce) for a pending ``x`` as one MapReduce over x's graph's leaves,
    or None when x's graph reads nothing (a constant fill: computed first, as before)."""
    if x.layout is not None:
        return None
    program = fusion.linearise(expression.node_of(x), x.shape)
    if not program.leaves:
        return None
    mr = _fused_skeleton(_REDUCERS, skel, program, lambda: MapReduce(
        fusion.muscle_for(program), skel.function, skel.identity,
        dtype=skel.out_dtype, axis=skel.axis, commutative=skel.commutative,
        inputs=len(program.leaves)))
    out = mr(*program.leaves, *program.consts)
    skel.last_launch = mr.last_launch
    fusion.LAST.skeleton = mr
    return out


def fused_scan(skel, x: Container, params=None):
    """``skel(x)`` (a Scan) for a pending ``x`` as one :class:`MapScan` whose map is x's
    fused muscle, evaluated at each load of the scan's tiles (the levels method reads its
    input twice, so it evaluates the expression twice: still no temporary and one pass
    fewer). None when x's graph reads nothing or x is a view (computed first, as before)."""
    if x.layout is not None:
        return None
    program = fusion.linearise(expression.node_of(x), x.shape)
    if not program.leaves:
        return None
    ms = _fused_skeleton(_SCANS, skel, program, lambda: MapScan(
        fusion.muscle_for(program), skel.function, skel.identity,
        inputs=len(program.leaves), inclusive=skel.inclusive, dtype=skel.out_dtype))
    out = ms(*program.leaves, *program.consts, params=params)
    skel.last_launch = ms.last_launch
    fusion.LAST.skeleton = ms
    return out
