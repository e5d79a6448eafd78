"""A pending value read by ``Stencil`` at each neighbour, in the stencil's own kernel.

``Stencil(f)(a * x + y)`` does not compute ``a * x + y`` first: the expression's leaves
become the stencil's input matrices (the first is its input, the others extra matrices, all
read around the same cell with the stencil's border rule), and ``f`` is rewritten so that
each neighbour read ``nb[dr, dc]`` evaluates the expression there::

    def skp_stencil(skp_l0, skp_l1, ..., *f's extras, skp_c0, ...):   # leaves, extras, consts
        ... f's body, with nb[dr, dc] -> skp_at(skp_l0[dr, dc], skp_l1[dr, dc], skp_c0, ...)

(``skp_at`` is the expression's fused muscle, :mod:`.fusion`). Reads outside the matrix are
exact: with ``nearest``/``reflect``/``mirror``/``wrap`` every leaf is read at the remapped
cell, so the expression there is the materialised value there; with ``constant`` the value
outside must be the constant itself, not the expression of constants, so one more input, an
*indicator* matrix filled with ``v`` (a value the constant is not), is read at the same
neighbour: ``skp_at_c(ind, ...) = ind if ind != v else expression`` (``ind`` is the constant
outside, exactly as the unfused stencil reads it).

Recomputing the expression at every neighbour read is worth it only while it is cheap
(``inputs.worth_fusing``, with ``reuse`` the number of neighbour reads in ``f`` and each read
costing one load per input more than a stored value would, :data:`INPUT_COST`: on a GPU
``2 * x + y`` with a 5-point stencil is fused, an expression over three inputs or with a
transcendental is not; on a CPU only one-input expressions such as ``x * 0.5``); otherwise,
and for anything the rewrite does not cover (``nb`` used other than subscripted, a muscle
in OpenCL C, a closure or ``params=``), the value is computed first, as before. With
``iterations=k`` only the first step reads the expression; the other k - 1 run on its result.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import linecache
import threading
import weakref

import numpy as np

from .. import runtime
from ..containers import Container, Matrix
from ..errors import SkelpyError
from ..skeletons import Stencil
from ..skeletons.stencil_launch import merge_launches
from . import expression, fusion, inputs

_LOCK = threading.Lock()
#: user Stencil -> {(structure key, constant mode, extras' kinds): (muscle version, fused
#: Stencil or None)}
_FUSED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: (shape, dtype, v) -> the indicator matrix of the constant mode (a few kept)
_INDICATORS: dict[tuple, Matrix] = {}
#: neighbour reads assumed for a read inside a loop of ``f`` when the shape is not given
LOOP_READS = 25
#: What each neighbour read costs per input of the expression beyond the first (the stored
#: value would be one load), by device kind. On a CPU these loads are not hidden behind
#: memory bandwidth: PoCL, 2048^2, a 5-point heat stencil of ``x * 0.5`` fused ran 1.25x
#: faster than computing it first, of ``0.5 * x + y`` 1.25x slower; so there an expression
#: over two inputs is computed first. On a GPU the stencil is bandwidth-bound and fusing
#: saves a matrix written and read back.
INPUT_COST = {"cpu": 8, "gpu": 1}


class _Unfusable(Exception):
    """The muscle's neighbourhood is used in a way the rewrite does not cover."""


def fused_stencil(skel: Stencil, x: Container, extras: tuple, iterations: int, out_dtype):
    """``skel(x, *extras, iterations=...)`` with x's expression read at each neighbour
    inside the stencil's kernel, or None to compute x first (see the module docstring)."""
    if not isinstance(x, Matrix) or x.layout is not None or not isinstance(iterations, int) \
            or iterations < 1 or skel.muscle.is_c or runtime.current().group is not None:
        return None
    node = expression.node_of(x)
    program = fusion.linearise(node, x.shape)
    if not program.leaves:
        return None
    constant = skel.border == "constant"
    # the extras' kinds too: a call whose extras are wrong is not fused (the unfused call
    # raises the user's error), which must not stop calls with the right ones
    kinds = tuple((type(e), getattr(e, "dtype", None), getattr(e, "shape", None))
                  for e in extras)
    key, version = (program.key, constant, kinds), skel.muscle.version()
    fused = _fused_for(skel, program, node, key, version)
    if fused is None:
        return None
    args = list(program.leaves)
    if constant:
        args.append(_indicator(x.shape, x.dtype, _outside_value(skel.cval, x.dtype)))
    args += list(extras) + list(program.consts)
    if constant:
        args.append(x.dtype.type(_outside_value(skel.cval, x.dtype)))
    try:
        out = fused(*args, out_dtype=out_dtype)
    except SkelpyError:
        # e.g. the constant cannot be represented in a leaf's dtype: from now on this
        # structure is computed first, and the unfused call raises what is the user's
        _remember(skel, key, version, None)
        return None
    launch = fused.last_launch
    fusion.LAST.skeleton = fused
    if iterations > 1:
        out = skel(out, *extras, iterations=iterations - 1, out_dtype=out_dtype)
        launch = merge_launches(skel.kind, [launch, skel.last_launch])
        launch.iterations = iterations
    skel.last_launch = launch
    return out


def _outside_value(cval, dtype: np.dtype):
    """A value of ``dtype`` that the constant is not (the indicator's inside value)."""
    try:
        with np.errstate(all="ignore"):
            c = np.asarray(cval).astype(dtype)[()]
    except OverflowError:   # an int beyond dtype: the fused call raises the user's DTypeError
        return 0
    return 0 if c == 1 else 1


def _indicator(shape: tuple[int, ...], dtype: np.dtype, v) -> Matrix:
    key = (shape, dtype, v)
    m = _INDICATORS.get(key)
    if m is None:
        m = Matrix(np.full(shape, v, dtype))
        with _LOCK:
            if len(_INDICATORS) >= 8:
                _INDICATORS.clear()
            _INDICATORS[key] = m
    return m


def _fused_for(skel: Stencil, program: fusion.Program, node, key, version) -> Stencil | None:
    """The fused Stencil of ``skel`` for ``program``'s structure (made once per version of
    ``skel``'s muscle), or None when fusing is not worth it or not possible."""
    with _LOCK:
        hit = _FUSED.setdefault(skel, {}).get(key)
    if hit is not None and hit[0] == version:
        return hit[1]
    fused = None
    try:
        reads = _neighbour_reads(skel)
        kind = runtime.current().device.kind
        per_read = INPUT_COST.get(kind, 1) * (len(program.leaves) - 1)
        if inputs.worth_fusing(node, reads, per_read=per_read):
            fused = _make(skel, program, key[1])
    except (_Unfusable, SkelpyError, SyntaxError):
        fused = None
    _remember(skel, key, version, fused)
    return fused


def _remember(skel: Stencil, key, version: int, fused: Stencil | None) -> None:
    with _LOCK:
        table = _FUSED.setdefault(skel, {})
        if len(table) > fusion.MAX_CACHED_SKELETONS:
            table.clear()
        table[key] = (version, fused)


def _neighbour_reads(skel: Stencil) -> int:
    """How many neighbour reads one cell of ``skel``'s muscle makes (``nb[..]`` in its
    source; one inside a loop counts as the whole shape)."""
    pf = skel.muscle.function
    nb = pf.param_names[0]
    count, looped = 0, False
    for stmt in pf.body:
        for n in ast.walk(stmt):
            if isinstance(n, (ast.For, ast.While, ast.comprehension)):
                looped = looped or any(_reads(s, nb) for s in ast.walk(n))
            if _reads(n, nb):
                count += 1
    if looped:
        s = skel.shape
        count = max(count, LOOP_READS if s is None else
                    (s.north + s.south + 1) * (s.east + s.west + 1))
    return max(count, 1)


def _reads(n: ast.AST, nb: str) -> bool:
    return isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == nb


class _Rewrite(ast.NodeTransformer):
    """``nb[i]`` -> ``skp_at(<ind[i]>, skp_l0[i], ..., consts)``; any other use of ``nb``
    makes the muscle unfusable."""

    def __init__(self, nb: str, leaves: list[str], head: list[str], tail: list[str]):
        self.nb, self.leaves, self.head, self.tail = nb, leaves, head, tail

    def visit_Subscript(self, n: ast.Subscript):                    # noqa: N802 - ast's
        if isinstance(n.value, ast.Name) and n.value.id == self.nb:
            index = self.visit(n.slice)
            reads = [ast.Subscript(value=ast.Name(id=name, ctx=ast.Load()),
                                   slice=copy.deepcopy(index),
                                   ctx=ast.Load()) for name in self.head + self.leaves]
            return ast.Call(func=ast.Name(id="skp_at", ctx=ast.Load()),
                            args=reads + [ast.Name(id=c, ctx=ast.Load()) for c in self.tail],
                            keywords=[])
        return self.generic_visit(n)

    def visit_Name(self, n: ast.Name):                              # noqa: N802 - ast's
        if n.id == self.nb:
            raise _Unfusable(f"{self.nb} is used other than as nb[dr, dc]")
        return n


def _make(skel: Stencil, program: fusion.Program, constant: bool) -> Stencil:
    """The rewritten muscle (module docstring) as a Stencil with ``skel``'s shape, border,
    cval and output dtype."""
    pf = skel.muscle.function
    nb, rest = pf.param_names[0], pf.param_names[1:]
    if pf.code.co_freevars:
        raise _Unfusable("a closure")          # its cells are not ours to copy
    leaves = [f"skp_l{k}" for k in range(len(program.leaves))]
    consts = [f"skp_c{k}" for k in range(len(program.consts))]
    head, tail = (["skp_ind"], consts + ["skp_v"]) if constant else ([], consts)
    if any(name.startswith("skp_") for name in rest) or \
            any(isinstance(g, str) and g.startswith("skp_") for g in pf.globals):
        raise _Unfusable("names that clash with the rewrite's")
    # on copies: the parsed body is the user's muscle's own (cached) tree
    body = [_Rewrite(nb, leaves, head, tail).visit(copy.deepcopy(stmt)) for stmt in pf.body]
    params = leaves + head + rest + tail
    expr_fn = fusion.muscle_for(program)._skelpy_fn
    digest = hashlib.sha1(repr((program.key, id(pf.code), constant)).encode()).hexdigest()[:12]
    filename = f"<skelpy fused stencil {digest}>"
    lines = [f"def skp_stencil({', '.join(params)}):",
             f"    # {pf.name}(nb) with nb = {program.text}"]
    lines += ["    " + line for stmt in body
              for line in ast.unparse(ast.fix_missing_locations(stmt)).splitlines()]
    src = "\n".join(lines) + "\n"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = dict(pf.globals)
    if constant:
        at_src = (f"def skp_at(skp_ind, {', '.join(leaves + consts)}, skp_v):\n"
                  f"    return skp_ind if skp_ind != skp_v else "
                  f"skp_expr({', '.join(leaves + consts)})\n")
        at_name = filename[:-1] + " at>"
        linecache.cache[at_name] = (len(at_src), None, at_src.splitlines(True), at_name)
        ns_at = {"np": np, "skp_expr": expr_fn}
        exec(compile(at_src, at_name, "exec"), ns_at)  # noqa: S102 - our own source
        ns["skp_at"] = ns_at["skp_at"]
    else:
        ns["skp_at"] = expr_fn
    exec(compile(src, filename, "exec"), ns)  # noqa: S102 - our own generated source
    out = Stencil(ns["skp_stencil"], shape=skel.shape, border=skel.border, cval=skel.cval,
                  out_dtype=skel.out_dtype)
    out._skelpy_keep = ns["skp_stencil"]      # muscles cache their function weakly
    return out
