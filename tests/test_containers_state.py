"""A hypothesis state machine for the container coherence model (issue 10).

It interleaves container construction (from arrays, from containers, from rows, from index
spaces, zero-filled), host writes through every public path (``c[i] = x`` with ints, slices,
lists and masks, a Matrix's row proxy, ``host_edit``), attempts to write through what reads
hand out (which must fail loudly, or be copies that change nothing), skeleton calls (Map,
Zip, Reduce, Stencil, a container as an extra argument, plain ndarrays) and reads, against a
NumPy model of every container. No step may make a container show, or a skeleton compute
from, anything but the model.

``make test`` runs a few hundred steps; ``SKELPY_STATEFUL_EXAMPLES=N`` runs N sequences of
up to ``SKELPY_STATEFUL_STEPS`` (default 50) steps each.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
)

import skelpy as sk

DTYPES = [np.dtype(t) for t in (np.int32, np.float32, np.int8, np.bool_, np.int64)]
SHAPES = [(0,), (1,), (5,), (13,), (0, 3), (1, 1), (3, 4), (4, 7)]

inc = sk.Map(lambda x: x + 1)
same = sk.Map(lambda x: x)
add = sk.Zip(lambda x, y: x + y)
plus_first = sk.Map(lambda x, t: x + t[0])
largest = sk.Reduce(lambda a, b: max(a, b), identity=-128)
up = sk.Stencil(lambda nb: nb[0, 0] + nb[-1, 0], border="wrap")
codes = sk.Map(lambda i: i % 7)
grid = sk.Map(lambda r, c: r * 10 + c)

STEPS = {"count": 0}


def values(dtype: np.dtype, shape) -> st.SearchStrategy:
    """Arrays of small exact values (so that float sums are exact and int8 rarely wraps)."""
    lo, hi = (0, 1) if dtype == np.bool_ else (-40, 40)
    return st.lists(st.integers(lo, hi), min_size=int(np.prod(shape)),
                    max_size=int(np.prod(shape))).map(
        lambda xs: np.array(xs, dtype=np.int64).reshape(shape).astype(dtype))


def scalar(dtype: np.dtype) -> st.SearchStrategy:
    if dtype == np.bool_:
        return st.booleans()
    return st.integers(-40, 40).map(lambda x: dtype.type(x) if x % 3 == 0 else x)


def index(n: int) -> st.SearchStrategy:
    return st.integers(-n, n - 1)


def slices(n: int) -> st.SearchStrategy:
    bound = st.none() | st.integers(-n - 2, n + 2)
    step = st.none() | st.sampled_from([1, 2, 3, -1, -2, 5])
    return st.builds(slice, bound, bound, step)


class Pair:
    """A container and the NumPy array it must show."""

    def __init__(self, c, model: np.ndarray):
        self.c = c
        self.model = np.array(model)
        assert c.shape == self.model.shape and c.dtype == self.model.dtype

    def __repr__(self) -> str:
        return f"Pair({self.c!r}, {self.model.tolist()})"


class ContainerMachine(RuleBasedStateMachine):
    pairs = Bundle("pairs")

    def __init__(self):
        super().__init__()
        self.all: list[Pair] = []
        self.snapshots: list[tuple[np.ndarray, np.ndarray]] = []
        self.finished_edits: list[np.ndarray] = []

    def _new(self, c, model) -> Pair:
        p = Pair(c, model)
        self.all.append(p)
        return p

    @staticmethod
    def _on_device(p: Pair, data) -> None:
        """Often swap in a container that holds the same data on the device only (a skeleton
        result), so that element and slice access takes its device paths too."""
        if data.draw(st.booleans()):
            p.c = same(p.c)

    def _check(self, got, want, what: str) -> None:
        got = np.asarray(got)
        assert got.shape == np.shape(want), what
        np.testing.assert_array_equal(got, want, err_msg=what)

    # -- construction -----------------------------------------------------------------------
    @rule(target=pairs, data=st.data(), dtype=st.sampled_from(DTYPES),
          shape=st.sampled_from(SHAPES))
    def from_array(self, data, dtype, shape):
        arr = data.draw(values(dtype, shape))
        model = arr.copy()
        c = (sk.Vector if len(shape) == 1 else sk.Matrix)(arr)
        arr[...] = 1                                   # the container took a snapshot
        return self._new(c, model)

    @rule(target=pairs, p=pairs, how=st.sampled_from(["constructor", "copy", "row"]),
          data=st.data())
    def from_container(self, p, how, data):
        if how == "row":
            if p.c.ndim != 2 or p.c.shape[0] == 0:
                return multiple()
            i = data.draw(index(p.c.shape[0]))
            return self._new(sk.Vector(p.c[i]), p.model[i])
        c = type(p.c)(p.c) if how == "constructor" else p.c.copy()
        return self._new(c, p.model)

    @rule(target=pairs, n=st.integers(0, 12), cols=st.integers(0, 5),
          how=st.sampled_from(["vector", "map", "matrix"]))
    def from_index_space(self, n, cols, how):
        if how == "vector":
            return self._new(sk.Vector(sk.IndexVector(n)), np.arange(n))
        if how == "map":
            return self._new(codes(sk.IndexVector(n)), np.arange(n) % 7)
        r, c = np.indices((n, cols))
        return self._new(grid(sk.IndexMatrix((n, cols))), r * 10 + c)

    @rule(target=pairs, dtype=st.sampled_from(DTYPES), shape=st.sampled_from(SHAPES))
    def zeros(self, dtype, shape):
        cls = sk.Vector if len(shape) == 1 else sk.Matrix
        return self._new(cls(shape=shape, dtype=dtype), np.zeros(shape, dtype))

    # -- skeletons --------------------------------------------------------------------------
    @rule(target=pairs, p=pairs, plain=st.booleans(), check=st.booleans())
    def map_inc(self, p, plain, check):
        out = inc(np.array(p.model) if plain else p.c)
        q = self._new(out, p.model + 1)
        if check:
            self._check(out, q.model, "Map result")
        return q

    @rule(target=pairs, p=pairs, q=pairs, plain=st.booleans())
    def zip_add(self, p, q, plain):
        if q.c.shape != p.c.shape or q.c.dtype != p.c.dtype:
            q = self._new(type(p.c)(p.c), p.model)
        other = np.array(q.model) if plain else q.c
        return self._new(add(p.c, other), p.model + q.model)

    @rule(target=pairs, p=pairs, q=pairs)
    def map_with_extra(self, p, q):
        if p.c.dtype == np.bool_:
            return multiple()
        if q.c.ndim != 1 or q.c.size == 0 or q.c.dtype != p.c.dtype:
            if p.c.ndim != 1 or p.c.size == 0:
                return multiple()
            q = p                                      # reads itself by index
        return self._new(plus_first(p.c, q.c), p.model + q.model[0])

    @rule(target=pairs, p=pairs, plain=st.booleans(), iterations=st.sampled_from([0, 1, 2]))
    def stencil(self, p, plain, iterations):
        if p.c.ndim != 2:
            return multiple()
        arg = np.array(p.model) if plain else p.c
        out = up(arg, iterations=iterations)
        if plain:
            arg[...] = 1                               # what a skeleton returned is its own
        want = p.model
        for _ in range(iterations):
            want = want + np.roll(want, 1, axis=0)
        return self._new(out, want)

    @rule(p=pairs)
    def reduce_max(self, p):
        if p.c.dtype == np.bool_:
            return
        got = largest(p.c)
        want = max(-128, p.model.max()) if p.model.size else -128
        assert got == want, (got, want)

    # -- host writes ------------------------------------------------------------------------
    def _write(self, p, key, value) -> None:
        """``c[key] = value`` must do what NumPy does to the model, or fail and change
        nothing, as NumPy would."""
        trial = p.model.copy()
        try:
            trial[key] = value
        except (IndexError, ValueError, TypeError, OverflowError) as exc:
            expected = IndexError if isinstance(exc, IndexError) else sk.SkelpyError
            with pytest.raises(expected):
                p.c[key] = value
            return
        p.c[key] = value
        p.model = trial

    @rule(p=pairs, data=st.data())
    def set_element(self, p, data):
        self._on_device(p, data)
        if p.c.size == 0:
            return
        key = tuple(data.draw(index(n)) for n in p.c.shape)
        self._write(p, key if len(key) > 1 else key[0], data.draw(scalar(p.c.dtype)))

    @rule(p=pairs, data=st.data(), wrong=st.integers(0, 9))
    def set_slice(self, p, data, wrong):
        self._on_device(p, data)
        key = tuple(data.draw(slices(n) | index(n)) if n else data.draw(slices(n))
                    for n in p.c.shape)
        key = key if len(key) > 1 else key[0]
        shape = p.model[key].shape
        if wrong == 0:                                 # a value of the wrong shape
            shape = (*shape[:-1], shape[-1] + 1) if shape else (2,)
        value = data.draw(values(p.c.dtype, shape) | scalar(p.c.dtype))
        self._write(p, key, value)

    @rule(p=pairs, data=st.data(), mask=st.booleans())
    def set_fancy(self, p, data, mask):
        self._on_device(p, data)
        n = p.c.shape[0]
        if mask:
            key = data.draw(values(np.dtype(np.bool_), (n,)))
        else:
            key = data.draw(st.lists(index(n), unique_by=lambda i: i % n, max_size=4)) \
                if n else []
        self._write(p, key, data.draw(scalar(p.c.dtype)))

    @rule(p=pairs, data=st.data())
    def set_through_row(self, p, data):
        self._on_device(p, data)
        if p.c.ndim != 2 or p.c.shape[0] == 0 or p.c.shape[1] == 0:
            return
        i = data.draw(index(p.c.shape[0]))
        row = p.c[i]
        key = data.draw(index(p.c.shape[1]) | slices(p.c.shape[1]))
        shape = p.model[i][key].shape
        value = data.draw(values(p.c.dtype, shape) | scalar(p.c.dtype))
        p.model[i][key] = value
        row[key] = value                               # m[i][j] = x writes through

    @rule(p=pairs, data=st.data(), call_inside=st.booleans())
    def host_edit(self, p, data, call_inside):
        with p.c.host_edit() as a:
            for _ in range(2 if call_inside else 1):
                if a.size:
                    key = tuple(data.draw(index(n)) for n in a.shape)
                    value = data.draw(scalar(p.c.dtype))
                    a[key] = value
                    p.model[key] = value
                if call_inside:                        # skeletons see the edits so far
                    self._check(inc(p.c), p.model + 1, "Map inside host_edit")
        self.finished_edits.append(a)

    @rule(p=pairs, data=st.data())
    def write_through_reads(self, p, data):
        """What reads hand out is read-only, or a copy that changes nothing."""
        for arr in (p.c.to_numpy(), np.asarray(p.c)):
            if arr.size:
                with pytest.raises(ValueError):
                    arr.flat[0] = 1
        if p.c.size:
            key = data.draw(slices(p.c.shape[0]))
            view = p.c[key]                   # a slice is a view (issue 15) ...
            part = view.to_numpy()            # ... whose reads are read-only snapshots
            if part.size:
                with pytest.raises(ValueError):
                    part[...] = 1
                # ... and writes through it reach the container, as through NumPy's views
                value = data.draw(scalar(p.c.dtype))
                trial = p.model.copy()
                try:
                    trial[key] = value
                except (ValueError, TypeError, OverflowError):
                    with pytest.raises(sk.SkelpyError):
                        view[...] = value
                else:
                    view[...] = value
                    p.model = trial
        copy = np.array(p.c)
        copy[...] = 1
        for arr in (p.c.to_numpy(), np.asarray(p.c)):
            self.snapshots.append((arr, arr.copy()))
        del self.snapshots[:-30]
        if p.c.size and data.draw(st.booleans()):      # a write right after: the arrays
            key = tuple(data.draw(index(n)) for n in p.c.shape)      # handed out stay
            self._write(p, key, data.draw(scalar(p.c.dtype)))

    # -- reads ------------------------------------------------------------------------------
    @rule(p=pairs, data=st.data())
    def read_part(self, p, data):
        self._on_device(p, data)
        if p.c.size and data.draw(st.booleans()):
            key = tuple(data.draw(index(n)) for n in p.c.shape)
        else:
            key = tuple(data.draw(slices(n) | index(n)) if n else data.draw(slices(n))
                        for n in p.c.shape)
        key = key if len(key) > 1 else key[0]
        self._check(p.c[key], p.model[key], f"read {key}")

    @rule(p=pairs, data=st.data())
    def read_fancy_or_row(self, p, data):
        self._on_device(p, data)
        n = p.c.shape[0]
        if not n:
            return
        if p.c.ndim == 2 and data.draw(st.booleans()):
            i = data.draw(index(n))
            self._check(p.c[i], p.model[i], "row")
            return
        key = data.draw(st.lists(index(n), max_size=5))
        self._check(p.c[key], p.model[key], f"read {key}")

    @rule(p=pairs, through=st.sampled_from(["to_numpy", "skeleton", "iterate"]))
    def read_all(self, p, through):
        if through == "to_numpy":
            self._check(p.c.to_numpy(), p.model, "to_numpy")
        elif through == "skeleton":
            self._check(same(p.c), p.model, "what a skeleton reads")
        else:
            self._check(np.array([np.asarray(x) for x in p.c]).reshape(p.model.shape),
                        p.model, "iteration")

    # -- always ------------------------------------------------------------------------------
    @invariant()
    def handed_out_arrays_never_change(self):
        STEPS["count"] += 1
        for arr, was in self.snapshots:
            np.testing.assert_array_equal(arr, was)
        for a in self.finished_edits[-10:]:
            assert not a.flags.writeable

    @precondition(lambda self: bool(self.all))
    @invariant()
    def newest_container_agrees(self):
        p = self.all[-1]
        assert p.c.shape == p.model.shape and p.c.dtype == p.model.dtype

    def teardown(self):
        for p in self.all:
            self._check(same(p.c), p.model, f"teardown skeleton read of {p!r}")
            self._check(p.c.to_numpy(), p.model, f"teardown read of {p!r}")


ContainerMachine.TestCase.settings = settings(
    max_examples=int(os.environ.get("SKELPY_STATEFUL_EXAMPLES", "12")),
    stateful_step_count=int(os.environ.get("SKELPY_STATEFUL_STEPS", "50")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                           HealthCheck.filter_too_much],
)
TestContainerMachine = ContainerMachine.TestCase
