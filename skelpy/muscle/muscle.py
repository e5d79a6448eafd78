"""A muscle: a user function (Python, or OpenCL C source), parsed once, specialised per use.

``Muscle(fn)`` parses once and is cached per function object. ``specialise(kinds, out_dtype,
c_name, checks)`` gives a :class:`TypedMuscle`, cached; the typed body of each parameter-kinds
combination is cached too, as calls from other muscles need it (their return type, and what
they read). The translations hold captured values (globals, closure values, module attributes,
tables): :meth:`Muscle.version` drops them when one changed (``captures.py``), and skeletons
compare it on every call.
"""

from __future__ import annotations

import threading
import types
import weakref
from collections.abc import Sequence
from contextlib import contextmanager

from ..dtypes import check_dtype
from ..errors import TranslationError
from .captures import Capture
from .checks import LEVELS
from .cmuscle import CFunction
from .cnames import C_IDENTIFIER
from .definite import check_definite_assignment
from .dtyping import Ty
from .inference import infer
from .params import Accessor, IndexPoint, Scalar
from .source import PyFunction, as_function, parse_function
from .symbols import Scope
from .translate import translate
from .typed import RecursiveMuscle, TypedBody
from .typed_muscle import TypedMuscle

__all__ = ["Muscle", "TypedMuscle"]

_BY_FN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.RLock()
_TLS = threading.local()


@contextmanager
def _translating(muscle: Muscle):
    """Mark ``muscle`` as being translated on this thread (a muscle that needs itself while
    being translated calls itself: RecursiveMuscle)."""
    stack = getattr(_TLS, "stack", None)
    if stack is None:
        stack = _TLS.stack = []
    code = muscle.function.code
    if code in stack:
        raise RecursiveMuscle(muscle.name)
    stack.append(code)
    try:
        yield
    finally:
        stack.pop()


class Muscle:
    """A user function (Python or OpenCL C source), parsed once, specialised per use."""

    name: str
    origin: str
    n_params: int
    param_names: list[str]
    is_c: bool
    function: PyFunction | None   # the parsed Python function (None for C source)

    def __new__(cls, fn):
        if isinstance(fn, Muscle):
            return fn
        if isinstance(fn, str):
            self = object.__new__(cls)
            self._c = CFunction(fn)
            self.function = None
            self.is_c = True
            self.name, self.origin = self._c.name, self._c.origin
            self.param_names = list(self._c.param_names)
            self.n_params = len(self.param_names)
            self._cache = {}
            self._result_types = {}
            self.generation = 0
            self._watch = self._watch_called = ()
            return self
        fn = as_function(fn)
        if isinstance(fn, types.FunctionType):
            with _LOCK:
                hit = _BY_FN.get(fn)
            if hit is not None:
                hit.version()           # translated again if a captured value changed
                return hit
        self = object.__new__(cls)
        self.function = parse_function(fn)
        self._c = None
        self.is_c = False
        self.name = self.function.name
        self.origin = self.function.origin
        self.param_names = list(self.function.param_names)
        self.n_params = len(self.param_names)
        self.generation = 0
        self._forget()
        with _LOCK:
            _BY_FN[fn] = self
        return self

    # -- captured values -------------------------------------------------------------------
    def _forget(self) -> None:
        """Drop every translation (and what they captured)."""
        self._cache: dict[tuple, TypedMuscle] = {}
        self._bodies: dict[tuple, TypedBody] = {}
        self._captures: dict[tuple, Capture] = {}
        self._called: dict[Muscle, int] = {}        # helper muscle -> its generation then
        self._watch: tuple[Capture, ...] = ()       # the two above as tuples (stale())
        self._watch_called: tuple = ()

    def stale(self) -> bool:
        """Whether a value the translations captured (here or in a called function) changed
        since (``captures.py``). Runs on every skeleton call: kept to a loop of look-ups."""
        for capture in self._watch:
            now = capture.read()
            # the same immutable object needs no call of holds()
            if (now is not capture.obj or capture.content is not None) \
                    and not capture.holds(now):
                return True
        for helper, generation in self._watch_called:  # noqa: SIM110 - no generator per call
            if helper.version() != generation:
                return True
        return False

    def version(self) -> int:
        """The generation of this muscle's translations: translations are dropped, and the
        generation grows, when a captured value changed. Skeletons compare it on every call,
        so a changed global, closure value or captured array is picked up by the next call."""
        if self.stale():
            with _LOCK:
                self._forget()
                self.generation += 1
        return self.generation


    def __repr__(self) -> str:
        return f"<Muscle {self.name} at {self.origin}>"

    def _check_kinds(self, kinds) -> tuple:
        kinds = tuple(kinds)
        if len(kinds) != self.n_params:
            raise TranslationError(
                f"the muscle takes {self.n_params} parameter(s) "
                f"({', '.join(self.param_names)}) but is called with {len(kinds)}",
                origin=self.origin, construct="arity")
        for k in kinds:
            if not isinstance(k, (Scalar, Accessor, IndexPoint)):
                raise TypeError(f"parameter kinds are Scalar, Accessor or IndexPoint, not {k!r}")
        return kinds

    def specialise(self, kinds: Sequence[Scalar | Accessor | IndexPoint], out_dtype=None,
                   c_name: str = "skelpy_f", checks: str | None = None) -> TypedMuscle:
        """Translate for these parameter kinds; cached per (kinds, out_dtype, c_name,
        checks). ``checks`` (None, ``"offsets"`` or ``"all"``): which reads are checked at
        run time (see checks.py)."""
        kinds = self._check_kinds(kinds)
        if not C_IDENTIFIER.match(c_name):
            raise ValueError(f"c_name {c_name!r} is not a C identifier")
        if checks not in LEVELS:
            raise ValueError(f"checks must be one of {LEVELS}, not {checks!r}")
        out = None if out_dtype is None else check_dtype(out_dtype, "out_dtype")
        key = (kinds, out, c_name, checks)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if self.is_c:
            tm = self._c.specialise(kinds, out, c_name, checks)
        else:
            with _translating(self):
                tm = translate(self._typed_body(kinds), out, c_name, checks)
        self._cache[key] = tm
        return tm

    def typed_body(self, kinds: tuple) -> TypedBody:
        """The body of a Python muscle typed for these parameter kinds (cached)."""
        kinds = self._check_kinds(kinds)
        hit = self._bodies.get(kinds)
        if hit is not None:
            return hit
        with _translating(self):
            return self._typed_body(kinds)

    def _typed_body(self, kinds: tuple) -> TypedBody:
        body = self._bodies.get(kinds)
        if body is None:
            scope = Scope.of(self.function, kinds)
            called: dict[Muscle, int] = {}

            def muscle_of(fn) -> Muscle:     # a called function: its changes are ours too
                m = Muscle(fn)
                called[m] = m.generation
                return m

            body = infer(scope, kinds, muscle_of)
            check_definite_assignment(body)
            self._bodies[kinds] = body
            for key, capture in scope.captures.items():
                self._captures.setdefault(key, capture)
            self._called.update(called)
            self._watch = tuple(self._captures.values())
            self._watch_called = tuple(self._called.items())
        return body

    def result_type(self, kinds: tuple) -> Ty:
        """The (possibly weak) type a call with these kinds returns (for helper calls)."""
        if not self.is_c:
            return self.typed_body(kinds).ret_ty
        kinds = self._check_kinds(kinds)
        hit = self._result_types.get(kinds)
        if hit is None:
            hit = self._result_types[kinds] = Ty(
                self._c.specialise(kinds, None, "skelpy_probe").out_dtype)
        return hit
