"""What every status collective under MPI carries besides the failure flag: what each rank is
doing (so that ranks doing different things raise together, see :class:`Call`), and how a
failure on one rank is raised again on the others (:func:`describe`, :func:`rebuild`).

A status record (:meth:`skelpy.mpi.exchange.MPIExchange.check`) holds ``op`` (an exchange, or
a host write) and a 64-bit token: for an exchange, a digest of the call the rank is in (high
half: what is called, the skeleton's class and muscles, and which step of it; low half: the
skeleton's settings, the call's arguments and the step's layout); for a host write, a digest
of the write. Ranks whose records differ are not doing the same thing: each raises the same
:class:`~skelpy.errors.CollectiveError`, whose message (:func:`mismatch`) names what every
rank does.

Everything that changes a call's result is in the digest: a skeleton's muscles (their code),
its settings (:data:`SETTINGS`: a stencil's border, cval and
shape, a reduction's identity, an ``out_dtype``...), and the numbers among the arguments (a
stencil's halo rows are computed by both neighbours for ``k - 1`` steps, so numbers that
differ by rank would make the result depend on the tuned ``k``).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import weakref
import zlib

import numpy as np

from .. import errors
from ..containers.distributions import Distribution

__all__ = ["EXCHANGE", "HOST_WRITE", "FINISHED", "READ", "STEPS", "SETTINGS", "Call", "token",
           "signature", "identity", "mismatch", "describe", "rebuild"]

# what a rank does at a collective (see MPIExchange.check); FINISHED: its program has ended
# (its exit hook), and it makes no collective any more
EXCHANGE, HOST_WRITE, FINISHED = 0, 1, 2
READ = "a read of a distributed container"     # a Call's label for a gather outside a call
COLLECTIVE_READS = ("reads of distributed containers (to_numpy(), x[i], x[a:b], m[r, c]...) "
                    "are collective: every rank must make them, at the same point "
                    "of the program (local_numpy() reads this rank's rows alone)")
# what each step of a call does, as a message names it (MPIExchange.check's ``step``)
STEPS = {"end": "ending the call", "move": "exchanging rows", "agree": "agreeing on a decision",
         "gather": "gathering a container to every rank (to_numpy)",
         "upload": "uploading host data", "scatter": "scattering data from one rank",
         "values": "gathering per-rank values", "share": "sharing a folded value",
         "objects": "comparing arguments"}


# a skeleton's attributes that change its results, when it has them (None: not set)
SETTINGS = ("out_dtype", "shape", "border", "cval", "identity", "axis", "inclusive",
            "commutative", "generic", "inputs")
MUSCLES = ("muscle", "map_muscle", "zip_muscle")


class Call:
    """What this rank is doing: ``label`` (a skeleton, or words) over ``args``. Its digests
    (``kind``: what is called, the skeleton's class and muscles; ``sig``: its settings, the
    containers' shapes and dtypes, the integer arguments and the numbers among the others)
    go into every status record the call's steps send (:meth:`MPIExchange.check`)."""

    __slots__ = ("label", "args", "kind", "sig", "settings", "where")

    def __init__(self, label, args: tuple, where=None):
        self.label, self.args, self.where = label, args, where   # where: the user's line
        if isinstance(label, (str, type(None))):
            name, self.settings = label or "", ()
        else:
            name, self.settings = identity(label)
        self.kind = zlib.crc32(name.encode())
        self.sig = zlib.crc32(repr((self.settings, signature(args))).encode())

    def describe(self) -> str:
        if self.label is None:                # a collective outside any skeleton call
            return ""
        label = self.label if isinstance(self.label, str) else \
            getattr(self.label, "origin", type(self.label).__name__)
        shown = signature(self.args)
        return label + _shown_settings(self.settings) + \
            (" on (" + ", ".join(map(_shown, shown)) + ")" if shown else "") + \
            (f" at {self.where}" if self.where is not None else "")


def identity(skeleton) -> tuple[str, tuple]:
    """(what is called: the class, kind and muscles of ``skeleton``; its settings, as
    ``(name, value)`` pairs) -- a :class:`~skelpy.StencilSequence` by its stages'."""
    stages = getattr(skeleton, "stages", None)
    if isinstance(stages, tuple):
        each = [identity(st) for st in stages]
        return (f"{type(skeleton).__name__}[" + "; ".join(n for n, _ in each) + "]",
                tuple(("stage", k + 1, st) for k, (_, st) in enumerate(each) if st))
    muscles = ", ".join(_muscle_id(m) for a in MUSCLES
                        if (m := getattr(skeleton, a, None)) is not None)
    settings = []
    for name in SETTINGS:
        value = getattr(skeleton, name, None)
        if value is None or isinstance(value, (dict, list)) or callable(value):
            continue
        if name == "cval" and getattr(skeleton, "border", "constant") != "constant":
            continue                          # no border reads it
        settings.append((name, np.dtype(value) if name == "out_dtype" else value))
    return (f"{type(skeleton).__name__}/{getattr(skeleton, 'kind', '')}({muscles})",
            tuple(settings))


_MUSCLE_IDS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _muscle_id(muscle) -> str:
    """A digest of a muscle's code, the same on every rank for the same code wherever it is
    defined (a Python muscle: its syntax tree, no line numbers; the fused muscles of array
    expressions are named differently by each process), so two muscles on one line differ;
    a C muscle: where it is made. Cached per muscle."""
    try:
        return _MUSCLE_IDS[muscle]
    except (KeyError, TypeError):
        pass
    node = getattr(getattr(muscle, "function", None), "node", None)
    code = ast.dump(node) if node is not None else getattr(muscle, "origin", repr(muscle))
    out = f"{zlib.crc32(code.encode()):08x}"
    with contextlib.suppress(TypeError):      # (not weakly referable: not cached)
        _MUSCLE_IDS[muscle] = out
    return out


def _shown_settings(settings) -> str:
    if not settings:
        return ""
    words = []
    for item in settings:
        if item[0] == "stage":
            words.append(f"stage {item[1]}:" + _shown_settings(item[2]).strip())
        else:
            name, value = item
            words.append(f"{name}={value}" if isinstance(value, np.dtype) else
                         f"{name}={value!r}")
    return " [" + ", ".join(words) + "]"


def token(call: Call | None, step: str, detail) -> int:
    """An exchange's status token: high half what is called (``call``'s kind, None outside
    any skeleton call) and the ``step`` of it, low half the call's arguments and the step's
    ``detail`` (the layout of what it then sends)."""
    kind, sig = (call.kind, call.sig) if call is not None else (0, 0)
    high = zlib.crc32(step.encode(), kind) & 0x7FFFFFFF
    low = sig if detail is None else zlib.crc32(repr(detail).encode(), sig)
    return high << 32 | low


def signature(args, depth: int = 0) -> tuple:
    """What must agree across the ranks among a call's arguments: containers' and arrays'
    kinds, shapes and dtypes (also inside lists of extras), the numbers among the muscle's
    extra arguments (type and value: ``1``, ``1.0`` and ``np.float32(1)`` give different
    kernels), and at the top level integers (``iterations``), dtypes, names and
    distributions."""
    out: list = []
    for x in args:
        if isinstance(x, (type, np.dtype)):                  # an out_dtype
            if depth == 0:
                out.append(_dtype_name(x))
        elif isinstance(getattr(x, "shape", None), tuple) and not isinstance(x, np.generic):
            dt = getattr(x, "dtype", None)
            out.append((type(x).__name__, tuple(x.shape), None if dt is None else
                        _dtype_name(dt)))
        elif isinstance(x, (list, tuple)) and depth < 2 and len(x) <= 64:
            inner = signature(x, depth + 1)
            if inner:
                out.append(inner)
        elif depth == 0 and isinstance(x, (int, np.integer)) and not isinstance(x, bool):
            out.append(int(x))
        elif depth == 0 and isinstance(x, (str, Distribution)):
            out.append(str(x))
        elif depth > 0 and isinstance(x, (bool, int, float, complex, np.generic)):
            out.append(_Number(x))
    return tuple(out)


class _Number:
    """A number among the extras: its repr names its type and value exactly (``nan`` and
    ``-0.0`` too), the same on every rank for the same number."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        v = self.value
        return repr(v) if type(v) in (bool, int, float, complex) else \
            f"{type(v).__name__}({v.item()!r})"


def _dtype_name(dt) -> str:
    try:
        return np.dtype(dt).str
    except TypeError:
        return getattr(dt, "__name__", repr(dt))


def _shown(item) -> str:
    if isinstance(item, tuple) and len(item) == 3 and isinstance(item[0], str) \
            and isinstance(item[1], tuple):             # a container's (kind, shape, dtype)
        cls, shape, dt = item
        return f"{cls}{list(shape)}" + (f" {np.dtype(dt)}" if dt and dt[0] in "<>|=" else
                                        f" {dt}" if dt else "")
    if isinstance(item, tuple):
        return "[" + ", ".join(map(_shown, item)) + "]"
    return repr(item)


def mismatch(every: np.ndarray, whats: list[str]) -> str:
    """The message every rank raises when the ranks are not doing the same."""
    ops, tokens = every[:, 1].tolist(), every[:, 2].tolist()
    reads = COLLECTIVE_READS + "; " if any(READ in w for w in whats) else ""
    if FINISHED in ops:
        doing = "; ".join(f"rank {r} " + ("has finished the program" if op == FINISHED else
                                          f"still waits for it in {whats[r] or 'a collective'}")
                          for r, op in enumerate(ops))
        return ("under MPI every rank makes the same skeleton calls and collective container "
                f"operations; {reads}here some ranks finished the program while others "
                f"still wait for them in a collective: {doing}")
    if HOST_WRITE in ops:
        doing = []
        for r, (op, token) in enumerate(zip(ops, tokens, strict=True)):
            if op == HOST_WRITE:
                doing.append(f"rank {r} writes {whats[r]} (digest {token & 0xffffffff:08x})")
            else:
                doing.append(f"rank {r} is in a skeleton call or collective" +
                             (f" ({whats[r]})" if whats[r] else ""))
        return ("under MPI a write through a container (v[i] = x, host_edit) is collective: "
                "every rank makes the same write at the same point of the program, or the "
                "ranks' copies would differ; " + reads + "here " + "; ".join(doing))
    doing = "; ".join(f"rank {r}: {w}" for r, w in enumerate(whats))
    if all(READ in w for w in whats):
        return ("under MPI " + reads + "here the ranks read different containers (or other "
                "parts of one): " + doing)
    if len({t >> 32 for t in tokens}) == 1:
        return ("under MPI every rank makes the same skeleton call: the same settings "
                "(border, cval, shape, identity, out_dtype...), containers of the same "
                "shapes, dtypes and distributions, the same numbers among the extra "
                "arguments, the same iterations and forced launch parameters such as k; "
                "here the ranks' arguments or the rows they exchange differ: " + doing +
                ("" if not reads else "; " + reads.rstrip("; ")))
    return ("under MPI every rank makes the same skeleton calls and collective container "
            "operations (construction, to_numpy, redistribute, writes) in the same order; "
            + reads + "here the ranks are at different points: " + doing)


def describe(exc: BaseException) -> tuple:
    """What another rank needs to raise ``exc`` again: class, message, simple attributes."""
    attrs = {k: v for k, v in vars(exc).items()
             if isinstance(v, (str, int, float, bool, type(None), dict, tuple, list))}
    return type(exc).__module__, type(exc).__name__, str(exc), attrs


def rebuild(info: tuple) -> BaseException:
    """The exception ``describe`` described: the same skelpy (or builtin) class and message."""
    module, name, message, attrs = info
    cls = getattr(errors, name, None) if module == errors.__name__ else None
    if cls is None and module == "builtins":
        cls = getattr(builtins, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Exception)):
        cls = errors.SkelpyError
    exc = cls.__new__(cls)
    Exception.__init__(exc, message)
    vars(exc).update(attrs)
    exc._skelpy_shared = True
    return exc
