"""Python muscle -> typed OpenCL C.

Pipeline for one specialisation (muscle + parameter kinds):

1. **inference** (fixed point): every expression gets a :class:`~.dtyping.Ty` (NumPy dtype +
   NEP 50 weak flag); locals are *widened* to the promotion of everything assigned to them, so a
   variable has one C type for the whole body (declarations are hoisted).
2. **weak resolution** (fixed point over code generation): a weak value has no type of its own;
   it is computed in the type of the strong value it meets (``a * x`` with float32 ``x`` makes a
   weak ``a`` float32).  Weak *variables* (weak Scalar parameters, locals holding only Python
   floats, tuples of Python floats) get the promotion of all the contexts they are used in, or
   the default (float64/int64/bool) when they meet only weak values.  Weak ints are computed in
   ``long``.
3. **generation**: C with explicit casts everywhere, so C integer promotion never leaks (int8
   wraps as in NumPy) and no ``double`` appears unless a float64 value really exists.
4. **access analysis** (``access.py``) for Stencil shapes.
"""

from __future__ import annotations

import ast
import re
import threading
import types
import warnings
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import c_type, check_dtype, storage_c_type, storage_dtype
from ..errors import SkelpyError, TranslationError
from . import funcs as F
from .clib import CLib
from .dtyping import (
    BINOPS,
    BOOL,
    CMPOPS,
    FLOAT64,
    INT64,
    UNOPS,
    WEAK_FLOAT,
    WEAK_INT,
    Ty,
    c_literal,
    convert_constant,
    fits,
    python_result_kind,
    resolve_ufunc,
    result_type,
    ty_of_value,
    weak,
    weak_default,
)
from .features import FeatureCounter
from .params import Accessor, IndexPoint, Scalar, scalar_arguments
from .source import MISSING, PyFunction, parse_function

__all__ = ["Muscle", "TypedMuscle"]

MAX_CONST_ARRAY = 4096

_C_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SAFE_NAME = re.compile(r"[a-z][A-Za-z0-9_]*\Z")
RESERVED = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline
int long register restrict return short signed sizeof static struct switch typedef union unsigned
void volatile while bool true false half uchar ushort uint ulong size_t ptrdiff_t intptr_t
uintptr_t kernel global local constant private read_only write_only read_write image2d_t
image3d_t sampler_t event_t fabs abs sqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin
acos atan atan2 sinh cosh tanh asinh acosh atanh cbrt erf erfc tgamma lgamma floor ceil trunc
rint round pow pown powr hypot copysign fmod fmin fmax min max clamp isnan isinf isfinite signbit
select mix sign step smoothstep dot cross length distance normalize radians degrees mad fma
convert_int get_global_id get_local_id get_group_id barrier
""".split())  # noqa: SIM905


# ---------------------------------------------------------------------------------------------
# results
# ---------------------------------------------------------------------------------------------


@dataclass
class TypedMuscle:
    """A muscle specialised for parameter kinds: C source plus what a skeleton needs to call it.

    ``source`` defines ``static inline <out> c_name(<c_params>)`` after any helpers (all
    guarded with ``#ifndef`` so several muscles can share a program).
    """

    c_name: str
    source: str
    c_params: list[str]
    out_dtype: np.dtype
    scalar_dtypes: dict[int, np.dtype]
    uses_fp64: bool
    features: dict[str, float]
    accesses: dict[int, list[tuple[int, ...]] | None]
    access_bounds: dict[int, tuple[tuple[int, int], ...] | None]
    kinds: tuple = ()
    origin: str = ""
    name: str = ""
    param_names: list[str] = field(default_factory=list)

    @property
    def out_c_type(self) -> str:
        return c_type(self.out_dtype)

    def call(self, names: Sequence[str]) -> str:
        """The C call expression when the caller's variable for parameter i is ``names[i]``
        (named the same way as the parameter declarations: ``x``, ``x_n``, ``p_r``...)."""
        if len(names) != len(self.kinds):
            raise ValueError(f"{self.c_name} takes {len(self.kinds)} arguments, got {len(names)}")
        args: list[str] = []
        for kind, n in zip(self.kinds, names):
            args.extend(scalar_arguments(kind, n))
        return f"{self.c_name}({', '.join(args)})"


# ---------------------------------------------------------------------------------------------
# symbols (what a name in the muscle refers to, when it is not a plain value)
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class _Acc:
    index: int
    name: str
    kind: Accessor


@dataclass(frozen=True, eq=False)
class _Idx:
    index: int
    name: str


@dataclass(eq=False)
class _Arr:
    key: str
    values: list
    elem: Ty


@dataclass(frozen=True)
class _Func:
    spec: F.FuncSpec


@dataclass(frozen=True)
class _Cast:
    dtype: np.dtype | None  # None: a Python builtin (int/float/bool) -> weak result
    kind: str = ""


@dataclass(frozen=True, eq=False)
class _Helper:
    fn: types.FunctionType


@dataclass(frozen=True, eq=False)
class _Mod:
    module: types.ModuleType


@dataclass(frozen=True, eq=False)
class _Shape:
    base: object


@dataclass(frozen=True)
class _Builtin:
    name: str


@dataclass(frozen=True, eq=False)
class _ConstVal:
    value: object
    ty: Ty


class _Unknown(Exception):
    """A local read before any assignment typed it (during the inference fixed point)."""

    def __init__(self, node: ast.Name):
        super().__init__(node.id)
        self.node = node


class _Recursion(Exception):
    pass


_TLS = threading.local()


def _stack() -> list:
    s = getattr(_TLS, "stack", None)
    if s is None:
        s = _TLS.stack = []
    return s


_LIBRARIES = {"numpy", "scipy", "math", "builtins", "cmath", "random", "torch", "jax"}

_CONSTRUCTS = {
    "Lambda": "lambda", "ListComp": "list comprehension", "SetComp": "set comprehension",
    "DictComp": "dict comprehension", "GeneratorExp": "generator expression", "Dict": "dict",
    "Set": "set", "List": "list", "Tuple": "tuple value", "JoinedStr": "f-string",
    "FormattedValue": "f-string", "Yield": "yield", "YieldFrom": "yield", "Await": "await",
    "Starred": "starred expression", "Slice": "slicing",
    "NamedExpr": "assignment expression (:=)", "MatMult": "@ operator",
    "FunctionDef": "nested function definition",
    "AsyncFunctionDef": "nested function definition", "ClassDef": "class definition",
    "Import": "import", "ImportFrom": "import", "Global": "global statement",
    "Nonlocal": "nonlocal statement", "With": "with statement", "AsyncWith": "with statement",
    "Try": "try statement", "TryStar": "try statement", "Raise": "raise statement",
    "Assert": "assert statement", "Delete": "del statement", "Match": "match statement",
    "AsyncFor": "async for", "Is": "'is' comparison", "IsNot": "'is not' comparison",
    "In": "'in' operator", "NotIn": "'not in' operator",
}


def _c_ident(name: str) -> str:
    """An ASCII C identifier fragment for a Python name."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else f"u{ord(c):x}"
                  for c in name)
    return out or "f"


def _safe(name: str) -> str:
    if _SAFE_NAME.match(name) and name not in RESERVED and not name.startswith("skelpy"):
        return name
    return "v_" + _c_ident(name)


# ---------------------------------------------------------------------------------------------
# Muscle
# ---------------------------------------------------------------------------------------------

_BY_FN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_LOCK = threading.RLock()


class Muscle:
    """A user function (Python or OpenCL C source), parsed once, specialised per use."""

    name: str
    origin: str
    n_params: int
    param_names: list[str]
    is_c: bool

    def __new__(cls, fn):
        if isinstance(fn, Muscle):
            return fn
        if isinstance(fn, str):
            from .cmuscle import CFunction

            self = object.__new__(cls)
            self._c = CFunction(fn)
            self._py = None
            self.is_c = True
            self.name, self.origin = self._c.name, self._c.origin
            self.param_names = list(self._c.param_names)
            self.n_params = len(self.param_names)
            self._cache = {}
            self._ret_cache = {}
            return self
        fn = _builtin_as_function(fn)
        key = _closure_key(fn) if isinstance(fn, types.FunctionType) else None
        if isinstance(fn, types.FunctionType):
            with _LOCK:
                hit = _BY_FN.get(fn)
                if hit is not None and hit._key == key:
                    return hit
        self = object.__new__(cls)
        self._py = parse_function(fn)
        self._c = None
        self._key = key
        self.is_c = False
        self.name = self._py.name
        self.origin = self._py.origin
        self.param_names = list(self._py.param_names)
        self.n_params = len(self.param_names)
        self._cache = {}
        self._ret_cache = {}
        with _LOCK:
            _BY_FN[fn] = self
        return self

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
                   c_name: str = "skelpy_f") -> TypedMuscle:
        """Translate for these parameter kinds; cached per (kinds, out_dtype, c_name)."""
        kinds = self._check_kinds(kinds)
        if not _C_IDENT.match(c_name):
            raise ValueError(f"c_name {c_name!r} is not a C identifier")
        out = None if out_dtype is None else check_dtype(out_dtype, "out_dtype")
        key = (kinds, out, c_name)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        if self.is_c:
            tm = self._c.specialise(kinds, out, c_name)
        else:
            tm = self._translate(kinds, out, c_name)
        self._cache[key] = tm
        return tm

    def _translate(self, kinds, out, c_name) -> TypedMuscle:
        stack = _stack()
        code = self._py.code
        if code in stack:
            raise _Recursion(self.name)
        stack.append(code)
        try:
            return _PyTranslator(self, kinds, out, c_name).translate()
        finally:
            stack.pop()

    def _result_ty(self, kinds) -> Ty:
        """The (possibly weak) type a call with these kinds returns (for helper calls)."""
        kinds = self._check_kinds(kinds)
        hit = self._ret_cache.get(kinds)
        if hit is not None:
            return hit
        if self.is_c:
            t = Ty(self._c.specialise(kinds, None, "skelpy_probe").out_dtype)
        else:
            stack = _stack()
            code = self._py.code
            if code in stack:
                raise _Recursion(self.name)
            stack.append(code)
            try:
                tr = _PyTranslator(self, kinds, None, "skelpy_probe")
                tr.infer()
                t = tr.ret_ty
            finally:
                stack.pop()
        self._ret_cache[kinds] = t
        return t


def _closure_key(fn: types.FunctionType) -> tuple:
    cells = fn.__closure__ or ()
    out = []
    for c in cells:
        try:
            out.append(id(c.cell_contents))
        except ValueError:
            out.append(None)
    return (fn.__code__, tuple(out))


_SYNTH: dict[object, types.FunctionType] = {}


def _builtin_as_function(fn):
    """Let ``np.add``, ``max``, ``operator.mul``, ``math.sqrt``... be whole muscles by wrapping
    them in a tiny generated Python function (registered in linecache so it has source)."""
    if isinstance(fn, types.FunctionType):
        return fn
    try:
        hit = _SYNTH.get(fn)
    except TypeError:
        return fn
    if hit is not None:
        return hit
    expr = None
    try:
        expr = F.OPERATOR_SOURCES.get(fn)
    except TypeError:
        expr = None
    spec = F.lookup(fn)
    if expr is None and spec is not None:
        n = 2 if spec.canonical in ("pymin", "pymax") else spec.nargs[0]
        expr = "f(" + ", ".join("abc"[:n]) + ")"
    if expr is None:
        return fn
    import linecache

    nparams = sorted(set(re.findall(r"\b[abc]\b", expr)))
    label = getattr(fn, "__name__", "f")
    filename = f"<skelpy builtin {label}>"
    src = f"def {_c_ident(label)}({', '.join(nparams)}):\n    return {expr}\n"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"f": fn}
    exec(compile(src, filename, "exec"), ns)
    out = ns[_c_ident(label)]
    _SYNTH[fn] = out
    return out


# ---------------------------------------------------------------------------------------------
# the translator
# ---------------------------------------------------------------------------------------------


class _PyTranslator:
    def __init__(self, muscle: Muscle, kinds: tuple, out: np.dtype | None, c_name: str):
        self.m = muscle
        self.pf: PyFunction = muscle._py
        self.kinds = kinds
        self.out_override = out
        self.c_name = c_name
        self.acc: dict[str, _Acc] = {}
        self.idx: dict[str, _Idx] = {}
        self.sparams: dict[str, int] = {}
        for i, (name, k) in enumerate(zip(self.pf.param_names, kinds)):
            if isinstance(k, Accessor):
                self.acc[name] = _Acc(i, name, k)
            elif isinstance(k, IndexPoint):
                self.idx[name] = _Idx(i, name)
            else:
                self.sparams[name] = i
        self.locals = self._collect_locals()
        # inference state
        self.var_types: dict[str, Ty] = {}
        self.ty: dict[ast.AST, Ty] = {}
        self.const: dict[ast.AST, object] = {}
        self.info: dict[object, object] = {}
        self.synth: dict[ast.AST, ast.AST] = {}
        self.arrays: dict[int, _Arr] = {}
        self.returns: list[tuple[ast.AST, Ty]] = []
        self.strict = False
        self.skipped = False
        self.ret_ty: Ty | None = None
        # generation state
        self.resolved: dict[str, np.dtype | None] = {}
        self.helper_names: dict[tuple, str] = {}

    # -- errors --------------------------------------------------------------------------------

    def err(self, node, message: str, construct: str | None = None) -> TranslationError:
        return self.pf.error(node, message, construct)

    def unsupported(self, node, what: str | None = None) -> TranslationError:
        what = what or _CONSTRUCTS.get(type(node).__name__, type(node).__name__)
        return self.err(node, f"{what} is not supported in a muscle", what)

    # -- names ---------------------------------------------------------------------------------

    def _collect_locals(self) -> set[str]:
        names: set[str] = set(self.sparams)

        def targets(t):
            if isinstance(t, ast.Name):
                if t.id in self.acc or t.id in self.idx:
                    raise self.err(t, f"cannot assign to parameter '{t.id}' (accessor and index "
                                      "parameters are read-only)", "assignment to parameter")
                names.add(t.id)
            elif isinstance(t, (ast.Tuple, ast.List)):
                for e in t.elts:
                    targets(e)
            elif isinstance(t, ast.Starred):
                targets(t.value)

        for stmt in self.pf.body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        targets(t)
                elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)):
                    targets(n.target)
        return names

    def classify(self, obj, node, label: str):
        """What a global/closure object is to the translator."""
        if obj is MISSING:
            raise self.err(node, f"name '{label}' is not defined", "unknown name")
        if isinstance(obj, types.ModuleType):
            return _Mod(obj)
        spec = F.lookup(obj)
        if spec is not None:
            return _Func(spec)
        if obj is int or obj is float or obj is bool:
            return _Cast(None, {int: "i", float: "f", bool: "b"}[obj])
        if isinstance(obj, type) and issubclass(obj, np.generic):
            try:
                return _Cast(check_dtype(obj, label))
            except SkelpyError as e:
                raise self.err(node, str(e), "dtype") from None
        if obj is len or obj is range:
            return _Builtin(obj.__name__)
        t = ty_of_value(obj)
        if t is not None:
            return _ConstVal(obj, t)
        if isinstance(obj, (tuple, list, np.ndarray)):
            return self._array(obj, node, label)
        library = (getattr(obj, "__module__", None) or "").split(".")[0] in _LIBRARIES
        if isinstance(obj, types.FunctionType) and not library:
            return _Helper(obj)
        if callable(obj):
            raise self.err(node, f"function '{label}' is not supported in a muscle (use math/"
                                 "numpy functions, casts, or plain Python functions)",
                           "unsupported function")
        raise self.err(node, f"'{label}' is a {type(obj).__name__}, which a muscle cannot use",
                       "unsupported object")

    def _array(self, obj, node, label: str) -> _Arr:
        hit = self.arrays.get(id(obj))
        if hit is not None:
            return hit
        if isinstance(obj, np.ndarray):
            if obj.ndim != 1:
                raise self.err(node, f"captured array '{label}' must be 1-D (it is {obj.ndim}-D)",
                               "captured array")
            try:
                dt = check_dtype(obj.dtype, label)
            except SkelpyError as e:
                raise self.err(node, str(e), "captured array") from None
            values = obj.tolist()
            elem = Ty(dt)
        else:
            values = list(obj)
            tys = [ty_of_value(v) for v in values]
            if not values or any(t is None for t in tys):
                raise self.err(node, f"captured {type(obj).__name__} '{label}' must hold numbers "
                                     "only", "captured sequence")
            elem = result_type(*tys)
            values = [v.item() if isinstance(v, np.generic) else v for v in values]
        if len(values) > MAX_CONST_ARRAY:
            raise self.err(node, f"captured array '{label}' has {len(values)} elements (at most "
                                 f"{MAX_CONST_ARRAY} become constants; pass it as an argument)",
                           "captured array")
        if not values:
            raise self.err(node, f"captured array '{label}' is empty", "captured array")
        if elem.kind == "i" and elem.weak and not all(fits(int(v), INT64) for v in values):
            raise self.err(node, f"captured '{label}' holds integers beyond int64",
                           "captured sequence")
        arr = _Arr(f"{_c_ident(label)}{len(self.arrays)}", values, elem)
        self.arrays[id(obj)] = arr
        return arr

    def sym(self, node):
        """The symbol a Name/Attribute refers to, or None for plain values (locals, numbers)."""
        if isinstance(node, ast.Name):
            n = node.id
            if n in self.acc:
                return self.acc[n]
            if n in self.idx:
                return self.idx[n]
            if n in self.locals:
                return None
            return self.classify(self.pf.lookup(n), node, n)
        if isinstance(node, ast.Attribute):
            base = self.sym(node.value)
            if isinstance(base, _Mod):
                obj = getattr(base.module, node.attr, MISSING)
                if obj is MISSING:
                    raise self.err(node, f"module '{base.module.__name__}' has no attribute "
                                         f"'{node.attr}'", "unknown name")
                return self.classify(obj, node, ast.unparse(node))
            if node.attr == "shape" and isinstance(base, (_Acc, _Arr)):
                return _Shape(base)
            return None
        return None

    # -- inference: expressions ----------------------------------------------------------------

    def t(self, node) -> Ty:
        m = getattr(self, "t_" + type(node).__name__, None)
        if m is None:
            raise self.unsupported(node)
        t = m(node)
        self.ty[node] = t
        return t

    def t_Constant(self, node):
        v = node.value
        t = ty_of_value(v) if not isinstance(v, np.generic) else None
        if t is None:
            what = {str: "string literal", bytes: "bytes literal", complex: "complex number",
                    type(None): "None", type(...): "Ellipsis"}.get(type(v), "literal")
            raise self.unsupported(node, what)
        self.const[node] = v
        return t

    def t_Name(self, node):
        n = node.id
        if n in self.locals:
            t = self.var_types.get(n)
            if t is None:
                raise _Unknown(node)
            return t
        s = self.sym(node)
        return self._value_of_sym(s, node, n)

    def _value_of_sym(self, s, node, label):
        if isinstance(s, _ConstVal):
            self.const[node] = s.value
            return s.ty
        what = {_Acc: "an accessor parameter (index it)", _Idx: "an index parameter (use "
                f"{label}[0]/{label}[1] or unpack it)", _Arr: "a captured array (index it)",
                _Func: "a function", _Cast: "a type", _Helper: "a function", _Mod: "a module",
                _Builtin: "a builtin function", _Shape: "a shape (index it)"}
        raise self.err(node, f"'{label}' is {what.get(type(s), 'not a value')}, not a value",
                       "non-value")

    def t_Attribute(self, node):
        base = self.sym(node.value)
        label = f"{ast.unparse(node.value)}.{node.attr}"
        if isinstance(base, _Mod):
            return self._value_of_sym(self.sym(node), node, label)
        if isinstance(base, _Acc):
            key = {"size": "size"}.get(node.attr)
            if node.attr == "ndim":
                self.const[node] = base.kind.ndim
                return WEAK_INT
            if key is None or key not in base.kind.attrs:
                raise self.err(node, f"attribute '{node.attr}' of parameter '{base.name}' is not "
                                     "available (use len(), .size, .shape[k] or indexing)",
                               "attribute")
            self.info[node] = ("accattr", base, key)
            return WEAK_INT
        if isinstance(base, _Idx):
            comp = {"row": 0, "y": 0, "col": 1, "x": 1}.get(node.attr)
            if comp is None:
                raise self.err(node, f"index parameter '{base.name}' has no attribute "
                                     f"'{node.attr}' (use .row/.col, .y/.x or [0]/[1])",
                               "attribute")
            self.info[node] = ("idx", base, comp)
            return Ty(INT64)
        if isinstance(base, _Arr):
            if node.attr == "size":
                self.const[node] = len(base.values)
                return WEAK_INT
            if node.attr == "ndim":
                self.const[node] = 1
                return WEAK_INT
        if base is None and isinstance(node.value, (ast.Name, ast.Attribute)):
            self.t(node.value)
            raise self.err(node, f"attribute '{node.attr}' of a value is not supported in a "
                                 "muscle", "attribute")
        raise self.err(node, f"attribute '{label}' is not supported in a muscle", "attribute")

    def _indices(self, node: ast.Subscript) -> list[ast.AST]:
        s = node.slice
        idx = list(s.elts) if isinstance(s, ast.Tuple) else [s]
        for i in idx:
            if isinstance(i, ast.Slice):
                raise self.unsupported(i, "slicing")
        return idx

    def _int_index(self, i) -> Ty:
        t = self.t(i)
        if t.kind != "i":
            raise self.err(i, f"an index must be an integer, not {t}", "index type")
        return t

    def t_Subscript(self, node):
        idx = self._indices(node)
        base_node = node.value
        # p[i][j] on a 2-D accessor
        if isinstance(base_node, ast.Subscript):
            inner = self.sym(base_node.value)
            if isinstance(inner, _Acc) and inner.kind.ndim == 2:
                first = self._indices(base_node)
                if len(first) == 1 and len(idx) == 1:
                    for i in first + idx:
                        self._int_index(i)
                    self.info[node] = ("read", inner, first + idx)
                    return Ty(inner.kind.dtype)
        base = self.sym(base_node)
        if isinstance(base, _Acc):
            if len(idx) != base.kind.ndim:
                raise self.err(node, f"'{base.name}' is {base.kind.ndim}-D and needs "
                                     f"{base.kind.ndim} index(es), got {len(idx)}", "indexing")
            for i in idx:
                self._int_index(i)
            self.info[node] = ("read", base, idx)
            return Ty(base.kind.dtype)
        if isinstance(base, _Idx):
            if len(idx) != 1:
                raise self.err(node, f"index parameter '{base.name}' takes one index (0 or 1)",
                               "indexing")
            self.t(idx[0])
            c = self.const.get(idx[0])
            if c not in (0, 1, -1, -2) or isinstance(c, bool):
                raise self.err(node, f"index parameter '{base.name}' must be indexed with a "
                                     "constant 0 (row) or 1 (column)", "indexing")
            self.info[node] = ("idx", base, int(c) % 2)
            return Ty(INT64)
        if isinstance(base, _Shape):
            if len(idx) != 1:
                raise self.err(node, "shape takes one index", "indexing")
            self.t(idx[0])
            c = self.const.get(idx[0])
            b = base.base
            nd = b.kind.ndim if isinstance(b, _Acc) else 1
            if not isinstance(c, (int, np.integer)) or not -nd <= int(c) < nd:
                raise self.err(node, f"shape index must be a constant in range for a {nd}-D "
                                     "parameter", "indexing")
            c = int(c) % nd
            if isinstance(b, _Arr):
                self.const[node] = len(b.values)
                return WEAK_INT
            key = f"shape{c}"
            if key not in b.kind.attrs:
                raise self.err(node, f"'{b.name}.shape[{c}]' is not available for this "
                                     "parameter", "attribute")
            self.info[node] = ("accattr", b, key)
            return WEAK_INT
        if isinstance(base, _Arr):
            if len(idx) != 1:
                raise self.err(node, "a captured sequence takes one index", "indexing")
            self._int_index(idx[0])
            c = self.const.get(idx[0])
            n = len(base.values)
            if c is not None:
                c = int(c)
                if not -n <= c < n:
                    raise self.err(node, f"index {c} is out of range for a captured sequence of "
                                         f"length {n}", "indexing")
                v = base.values[c]
                if not base.elem.weak:
                    v = base.elem.dtype.type(v)
                self.const[node] = v
            self.info[node] = ("arr", base, idx[0])
            return base.elem
        if base is None or isinstance(base, _ConstVal):
            t = self.t(base_node)
            raise self.err(node, f"cannot index a {t} value", "indexing")
        raise self.err(node, f"cannot index '{ast.unparse(base_node)}'", "indexing")

    def t_BinOp(self, node):
        op = type(node.op).__name__
        if op not in BINOPS:
            raise self.unsupported(node, _CONSTRUCTS.get(op, f"operator {op}"))
        a = self.t(node.left)
        b = self.t(node.right)
        return self._binop_type(node, op, a, b, node.left, node.right)

    def _binop_type(self, node, op, a: Ty, b: Ty, left, right) -> Ty:
        pyop, uf, sym = BINOPS[op]
        ca, cb = self.const.get(left, MISSING), self.const.get(right, MISSING)
        if a.weak and b.weak:
            try:
                kind = python_result_kind(pyop, (a.kind, b.kind))
            except TypeError:
                raise self.err(node, f"operator '{sym}' is not supported for {a} and {b}",
                               f"operator {sym}") from None
            if op == "Pow" and kind == "i" and cb is not MISSING and cb < 0:
                kind = "f"
            t = weak(kind)
            if (ca is not MISSING and cb is not MISSING
                    and not (op == "Pow" and abs(cb) > 4096)):
                try:
                    v = pyop(ca, cb)
                except ZeroDivisionError:
                    raise self.err(node, "division by zero in a constant expression",
                                   "constant expression") from None
                except (OverflowError, ValueError) as e:
                    raise self.err(node, f"constant expression fails: {e}",
                                   "constant expression") from None
                t = ty_of_value(v) or t
                self.const[node] = v
            return t
        try:
            ins, out = resolve_ufunc(uf, (a, b))
        except TypeError:
            raise self.err(node, f"operator '{sym}' is not supported for {a} and {b}",
                           f"operator {sym}") from None
        if op == "Pow" and ins[1].kind in "iu" and cb is not MISSING and int(cb) < 0:
            raise self.err(node, "integers to negative integer powers are not allowed (as in "
                                 "NumPy)", "operator **")
        self.info[node] = ("loop", ins)
        if ca is not MISSING and cb is not MISSING and not (a.weak or b.weak):
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                try:
                    v = uf(ca, cb)
                    if isinstance(v, np.generic) and v.dtype == out:
                        self.const[node] = v
                except Exception:  # pragma: no cover - folding is optional
                    pass
        return Ty(out)

    def t_UnaryOp(self, node):
        a = self.t(node.operand)
        op = type(node.op).__name__
        c = self.const.get(node.operand, MISSING)
        if op == "Not":
            t = Ty(BOOL, a.weak)
            if c is not MISSING:
                self.const[node] = not c if a.weak else np.bool_(not c)
            return t
        pyop, uf, sym = UNOPS[op]
        if a.weak:
            try:
                kind = python_result_kind(pyop, (a.kind,))
            except TypeError:
                raise self.err(node, f"operator '{sym}' is not supported for {a}",
                               f"operator {sym}") from None
            if c is not MISSING:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    self.const[node] = pyop(c)
            return weak(kind)
        try:
            ins, out = resolve_ufunc(uf, (a,))
        except TypeError:
            raise self.err(node, f"operator '{sym}' is not supported for {a}",
                           f"operator {sym}") from None
        self.info[node] = ("loop", ins)
        if c is not MISSING:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                v = uf(c)
            if isinstance(v, np.generic) and v.dtype == out:
                self.const[node] = v
        return Ty(out)

    def t_BoolOp(self, node):
        tys = [self.t(v) for v in node.values]
        consts = [self.const.get(v, MISSING) for v in node.values]
        if all(c is not MISSING for c in consts):
            v = all(consts) if isinstance(node.op, ast.And) else any(consts)
            self.const[node] = v if all(t.weak for t in tys) else np.bool_(v)
        return Ty(BOOL, all(t.weak for t in tys))

    def t_Compare(self, node):
        operands = [node.left] + list(node.comparators)
        tys = [self.t(o) for o in operands]
        modes = []
        for i, op in enumerate(node.ops):
            name = type(op).__name__
            if name not in CMPOPS:
                raise self.unsupported(node, _CONSTRUCTS.get(name, name))
            a, b = tys[i], tys[i + 1]
            sym = CMPOPS[name][2]
            if a.weak and b.weak:
                modes.append(("weak", max(a.kind, b.kind, key="bif".index)))
                continue
            if a.weak and a.kind == "i" and b.dtype.kind in "iu" or (
                    b.weak and b.kind == "i" and a.dtype.kind in "iu"):
                s = b if a.weak else a
                if s.dtype == np.uint64:
                    modes.append(("mixed", not a.weak))  # unsigned on the left?
                else:
                    modes.append(("loop", (INT64, INT64)))
                continue
            try:
                ins, _ = resolve_ufunc(CMPOPS[name][1], (a, b))
            except TypeError:
                raise self.err(node, f"comparison '{sym}' is not supported for {a} and {b}",
                               f"operator {sym}") from None
            if {ins[0], ins[1]} == {np.dtype(np.uint64), INT64}:
                modes.append(("mixed", ins[0] == np.uint64))
            else:
                modes.append(("loop", ins))
        self.info[node] = modes
        consts = [self.const.get(o, MISSING) for o in operands]
        if all(c is not MISSING for c in consts):
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                v = all(CMPOPS[type(op).__name__][0](consts[i], consts[i + 1])
                        for i, op in enumerate(node.ops))
            self.const[node] = v if all(t.weak for t in tys) else np.bool_(v)
        return Ty(BOOL, all(t.weak for t in tys))

    def static_test(self, test):
        """True/False for a condition that is a compile-time constant, else None.  Python never
        evaluates the other branch, so it neither types nor errors (``x if DEBUG else y``)."""
        c = self.const.get(test, MISSING)
        if c is MISSING:
            return None
        return bool(c)

    def t_IfExp(self, node):
        self.t(node.test)
        taken = self.static_test(node.test)
        if taken is not None:
            return self.t(node.body if taken else node.orelse)
        a = self.t(node.body)
        b = self.t(node.orelse)
        return result_type(a, b)

    def t_Call(self, node):
        for k in node.keywords:
            raise self.err(k.value if k.arg is None else node,
                           f"keyword argument '{k.arg}' is not supported in a muscle call",
                           "keyword argument")
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.unsupported(a)
        if isinstance(node.func, ast.Attribute):
            base = self.sym(node.func.value)
            if not isinstance(base, _Mod):
                raise self.err(node, f"method call '.{node.func.attr}()' is not supported in a "
                                     "muscle (only functions of math/numpy)", "method call")
        ref = self.sym(node.func)
        label = ast.unparse(node.func)
        if isinstance(ref, _Func):
            return self._t_func(node, ref.spec, label)
        if isinstance(ref, _Cast):
            return self._t_cast(node, ref, label)
        if isinstance(ref, _Builtin):
            if ref.name == "len":
                if len(node.args) != 1:
                    raise self.err(node, "len() takes one argument", "len")
                s = self.sym(node.args[0]) if isinstance(node.args[0], (ast.Name, ast.Attribute)) \
                    else None
                if isinstance(s, _Arr):
                    self.const[node] = len(s.values)
                    return WEAK_INT
                if isinstance(s, _Acc):
                    if "len" not in s.kind.attrs:
                        raise self.err(node, f"len() is not available for parameter '{s.name}'",
                                       "len")
                    self.info[node] = ("accattr", s, "len")
                    return WEAK_INT
                raise self.err(node, "len() needs an accessor parameter or a captured sequence",
                               "len")
            raise self.err(node, "range() may only be used in a for loop", "range")
        if isinstance(ref, _Helper):
            return self._t_helper(node, ref.fn, label)
        if ref is None:
            if not isinstance(node.func, (ast.Name, ast.Attribute)):
                self.t(node.func)  # reports the construct (a lambda, a subscript...)
            raise self.err(node, f"cannot call '{label}' (not a function)", "call")
        raise self.err(node, f"'{label}' cannot be called in a muscle", "call")

    def _t_cast(self, node, ref: _Cast, label):
        if len(node.args) != 1:
            raise self.err(node, f"{label}() takes one argument in a muscle", "cast")
        arg = node.args[0]
        if (ref.kind == "f" and isinstance(arg, ast.Constant) and isinstance(arg.value, str)
                and arg.value.strip().lower() in ("nan", "inf", "-inf", "+inf", "infinity",
                                                  "-infinity")):
            self.const[node] = float(arg.value)
            return WEAK_FLOAT
        self.t(arg)
        c = self.const.get(arg, MISSING)
        if ref.dtype is not None:
            if c is not MISSING:
                if (type(c) is int and ref.dtype.kind in "iu" and not fits(c, ref.dtype)):
                    raise self.err(node, f"Python integer {c} out of bounds for {ref.dtype} (as "
                                         "in NumPy)", "integer overflow")
                self.const[node] = convert_constant(c, ref.dtype)
            return Ty(ref.dtype)
        if c is not MISSING:
            try:
                self.const[node] = {"i": int, "f": float, "b": bool}[ref.kind](c)
            except (ValueError, OverflowError) as e:
                raise self.err(node, f"{label}() of a constant fails: {e}", "cast") from None
        return weak(ref.kind)

    def _t_func(self, node, spec: F.FuncSpec, label: str) -> Ty:
        args = node.args
        if len(args) not in spec.nargs:
            want = " or ".join(str(n) for n in spec.nargs[:3])
            if len(spec.nargs) > 3:
                want = f"{spec.nargs[0]} or more"
            raise self.err(node, f"{label}() takes {want} argument(s) in a muscle, got "
                                 f"{len(args)}", label)
        tys = [self.t(a) for a in args]
        canon = spec.canonical
        bad = f"{label}() is not supported for " + ", ".join(str(t) for t in tys)
        # arithmetic ufuncs called by name behave like the operators
        ops = {"add": "Add", "subtract": "Sub", "multiply": "Mult", "true_divide": "Div",
               "floor_divide": "FloorDiv", "remainder": "Mod", "power": "Pow",
               "bitwise_and": "BitAnd", "bitwise_or": "BitOr", "bitwise_xor": "BitXor"}
        if canon in ops:
            t = self._binop_type(node, ops[canon], tys[0], tys[1], args[0], args[1])
            self.const.pop(node, None)
            if spec.family == "numpy" and t.weak:
                t = Ty(weak_default(t))
                self.info[node] = ("loop", (t.dtype, t.dtype))
            self.info[("op", node)] = ops[canon]
            return t
        if canon == "negative":
            if tys[0].weak:
                t = Ty(weak_default(tys[0]))
                if t.kind == "b":
                    raise self.err(node, bad, label)
                self.info[node] = ("loop", (t.dtype,))
                return t
            try:
                ins, out = resolve_ufunc(np.negative, (tys[0],))
            except TypeError:
                raise self.err(node, bad, label) from None
            self.info[node] = ("loop", ins)
            return Ty(out)
        all_weak = all(t.weak for t in tys)
        if canon in ("pymin", "pymax"):
            t = result_type(*tys)
            self.info[node] = ("same", t)
            return t
        if canon == "round":
            self.info[node] = ("round", tys[0])
            return WEAK_INT
        if canon == "where":
            t = result_type(tys[1], tys[2])
            t = Ty(weak_default(t)) if t.weak else t
            self.info[node] = ("same", t)
            return t
        if canon == "clip":
            t = result_type(*tys)
            t = Ty(weak_default(t)) if t.weak else t
            self.info[node] = ("same", t)
            return t
        if all_weak and spec.family in ("math", "builtin"):
            kinds = tuple(t.kind for t in tys)
            if canon in ("floor", "ceil", "trunc"):
                rk = "i"
            elif canon in F.PREDICATES:
                rk = "b"
            elif canon == "abs":
                rk = "i" if kinds[0] == "b" else kinds[0]
            elif canon == "power":
                rk = python_result_kind(pow, kinds)
                cb = self.const.get(args[1], MISSING)
                if rk == "i" and cb is not MISSING and cb < 0:
                    rk = "f"
            else:
                rk = "f"
            self.info[node] = ("weak", rk)
            return weak(rk)
        if spec.ufunc is None:
            # math functions without a NumPy ufunc (erf, gamma...): float32 stays float32
            t = result_type(*tys)
            dt = t.dtype if (not t.weak and t.dtype == np.float32) else FLOAT64
            self.info[node] = ("loop", (dt,) * len(tys))
            return Ty(dt)
        uf = spec.ufunc
        if canon == "log" and len(tys) == 2:
            t = result_type(*tys)
            try:
                ins, out = resolve_ufunc(np.log, (t,))
            except TypeError:
                raise self.err(node, bad, label) from None
            self.info[node] = ("loop", (ins[0], ins[0]))
            return Ty(out)
        try:
            ins, out = resolve_ufunc(uf, tuple(tys))
        except TypeError:
            raise self.err(node, bad, label) from None
        if canon in ("mpow", "fmod") and spec.family == "math" and out.kind != "f":
            ins, out = (FLOAT64,) * len(ins), FLOAT64
        self.info[node] = ("loop", ins)
        return Ty(out)

    def _t_helper(self, node, fn, label) -> Ty:
        try:
            m = Muscle(fn)
        except TranslationError as e:
            raise self.err(node, f"cannot translate called function '{label}': {e}",
                           "call") from None
        kinds = []
        for a in node.args:
            s = self.sym(a) if isinstance(a, (ast.Name, ast.Attribute)) else None
            if isinstance(s, _Acc):
                kinds.append(s.kind)
                self.ty[a] = Ty(s.kind.dtype)
            elif isinstance(s, _Idx):
                kinds.append(IndexPoint())
                self.ty[a] = Ty(INT64)
            elif s is not None and not isinstance(s, _ConstVal):
                raise self.err(a, f"cannot pass '{ast.unparse(a)}' to '{label}'", "call argument")
            else:
                t = self.t(a)
                kinds.append(Scalar(t.dtype, weak=t.weak))
        if len(kinds) != m.n_params:
            raise self.err(node, f"'{label}' takes {m.n_params} argument(s), got {len(kinds)}",
                           "call")
        try:
            t = m._result_ty(tuple(kinds))
        except _Recursion:
            raise self.err(node, f"recursive call to '{label}' is not supported in a muscle",
                           "recursion") from None
        self.info[node] = ("helper", m, tuple(kinds))
        return t

    # -- inference: statements -----------------------------------------------------------------

    def assign(self, name: str, t: Ty) -> None:
        old = self.var_types.get(name)
        self.var_types[name] = t if old is None else result_type(old, t)

    def expr_safe(self, node) -> Ty | None:
        try:
            return self.t(node)
        except _Unknown as u:
            if self.strict:
                raise self.err(u.node, f"local variable '{u.node.id}' is used before it is "
                                       "assigned", "unassigned variable") from None
            self.skipped = True
            return None

    def i_block(self, stmts) -> None:
        for s in stmts:
            m = getattr(self, "i_" + type(s).__name__, None)
            if m is None:
                raise self.unsupported(s)
            m(s)

    def i_Assign(self, s):
        for tgt in s.targets:
            if isinstance(tgt, (ast.Tuple, ast.List)):
                self._i_unpack(s, tgt, s.value)
            elif isinstance(tgt, ast.Name):
                t = self.expr_safe(s.value)
                if t is not None:
                    self.assign(tgt.id, t)
            else:
                raise self._bad_target(tgt)

    def _bad_target(self, tgt):
        if isinstance(tgt, ast.Subscript):
            return self.err(tgt, f"writing to '{ast.unparse(tgt.value)}' (item assignment) is "
                                 "not supported: muscles return their result", "item assignment")
        if isinstance(tgt, ast.Attribute):
            return self.err(tgt, "attribute assignment is not supported in a muscle",
                            "attribute assignment")
        return self.unsupported(tgt)

    def _i_unpack(self, s, tgt, value):
        for e in tgt.elts:
            if not isinstance(e, ast.Name):
                if isinstance(e, (ast.Tuple, ast.List, ast.Starred)):
                    raise self.unsupported(e, "nested or starred unpacking")
                raise self._bad_target(e)
        if isinstance(value, (ast.Tuple, ast.List)):
            if len(value.elts) != len(tgt.elts):
                raise self.err(s, f"cannot unpack {len(value.elts)} values into "
                                  f"{len(tgt.elts)} names", "tuple assignment")
            tys = [self.expr_safe(v) for v in value.elts]
            for e, t in zip(tgt.elts, tys):
                if t is not None:
                    self.assign(e.id, t)
            return
        src = self.sym(value) if isinstance(value, ast.Name) else None
        if isinstance(src, _Idx):
            if len(tgt.elts) != 2:
                raise self.err(s, f"index parameter '{src.name}' unpacks into 2 names",
                               "tuple assignment")
            for e in tgt.elts:
                self.assign(e.id, Ty(INT64))
            return
        raise self.err(s, "tuple assignment needs a tuple of values or an index parameter on the "
                          "right", "tuple assignment")

    def i_AugAssign(self, s):
        if not isinstance(s.target, ast.Name):
            raise self._bad_target(s.target)
        b = self.synth.get(s)
        if b is None:
            b = ast.BinOp(left=ast.Name(id=s.target.id, ctx=ast.Load()), op=s.op, right=s.value)
            ast.copy_location(b, s)
            ast.copy_location(b.left, s.target)
            self.synth[s] = b
        t = self.expr_safe(b)
        if t is not None:
            self.assign(s.target.id, t)

    def i_AnnAssign(self, s):
        if s.value is None:
            return
        if not isinstance(s.target, ast.Name):
            raise self._bad_target(s.target)
        t = self.expr_safe(s.value)
        if t is not None:
            self.assign(s.target.id, t)

    def i_Return(self, s):
        if s.value is None:
            raise self.err(s, "a muscle must return a value ('return' without a value)",
                           "return")
        if isinstance(s.value, ast.Tuple):
            raise self.err(s, "returning several values (a tuple) is not supported", "tuple value")
        t = self.expr_safe(s.value)
        if t is not None:
            self.returns.append((s, t))

    def i_If(self, s):
        self.expr_safe(s.test)
        taken = self.static_test(s.test)
        if taken is not False:
            self.i_block(s.body)
        if taken is not True:
            self.i_block(s.orelse)

    def i_While(self, s):
        if s.orelse:
            raise self.unsupported(s, "while-else")
        self.expr_safe(s.test)
        if self.static_test(s.test) is not False:
            self.i_block(s.body)

    def i_For(self, s):
        if s.orelse:
            raise self.unsupported(s, "for-else")
        if not isinstance(s.target, ast.Name):
            raise self.err(s.target, "a for loop needs one loop variable (for i in range(...))",
                           "for target")
        it = s.iter
        ok = (isinstance(it, ast.Call) and isinstance(it.func, (ast.Name, ast.Attribute)))
        ref = self.sym(it.func) if ok else None
        if not (isinstance(ref, _Builtin) and ref.name == "range"):
            raise self.err(s.iter, "for loops may only iterate over range(...) in a muscle",
                           "for loop over non-range")
        if it.keywords or not 1 <= len(it.args) <= 3:
            raise self.err(it, "range() takes 1 to 3 positional arguments", "range")
        for a in it.args:
            t = self.expr_safe(a)
            if t is not None and t.kind != "i":
                raise self.err(a, f"range() needs integer arguments, not {t}", "range")
        if len(it.args) == 3 and self.const.get(it.args[2], None) == 0:
            raise self.err(it, "range() step must not be zero", "range")
        self.assign(s.target.id, WEAK_INT)
        self.i_block(s.body)

    def i_Break(self, s):
        pass

    i_Continue = i_Pass = i_Break

    def i_Expr(self, s):
        if isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            return  # docstring / comment string
        self.expr_safe(s.value)

    # -- inference driver ----------------------------------------------------------------------

    def infer(self) -> None:
        for name, i in self.sparams.items():
            k = self.kinds[i]
            self.var_types[name] = Ty(k.dtype, k.weak)
        self.param_types = dict(self.var_types)
        for _ in range(64):
            before = dict(self.var_types)
            self.skipped = False
            self.returns = []
            self.i_block(self.pf.body)
            if self.var_types == before:
                if not self.skipped:
                    break
                self.strict = True
        else:  # pragma: no cover - the lattice is finite
            raise self.err(None, "type inference did not converge", "types")
        if _falls_through(self.pf.body, self.static_test):
            last = self.pf.body[-1] if self.pf.body else None
            raise self.err(last, "the function can reach its end without returning a value",
                           "missing return")
        if not self.returns:
            raise self.err(None, "the function never returns a value", "missing return")
        rt = result_type(*(t for _, t in self.returns))
        self.ret_ty = rt
        out = self.out_override
        if out is None:
            out = rt.dtype if not rt.weak else weak_default(rt)
        self.out_dtype = out
        if not rt.weak:
            self.ret_mat = rt.dtype
        elif rt.kind == "f" and out.kind == "f":
            self.ret_mat = out
        else:
            self.ret_mat = weak_default(rt)

    # -- weak resolution -----------------------------------------------------------------------

    def _weak_keys(self) -> dict[str, Ty]:
        keys = {n: t for n, t in self.var_types.items() if t.weak}
        for a in self.arrays.values():
            if a.elem.weak:
                keys["@" + a.key] = a.elem
        return keys

    def _is_direct_param(self, name: str) -> bool:
        return name in self.sparams and self.var_types[name] == self.param_types[name]

    def storage(self, name: str) -> np.dtype:
        t = self.var_types[name]
        return self._storage(name, t)

    def _storage(self, key: str, t: Ty) -> np.dtype:
        if not t.weak:
            return t.dtype
        r = self.resolved.get(key)
        if t.kind == "f":
            return r if r is not None else FLOAT64
        if t.kind == "i":
            return r if r is not None else INT64
        return BOOL

    def _resolve(self) -> dict:
        new = {}
        for key, t in self._weak_keys().items():
            ctx = self.ctx.get(key, ())
            if t.kind == "f":
                fl = [d for d in ctx if d.kind == "f"]
                new[key] = result_type(*(Ty(d) for d in fl)).dtype if fl else None
            elif t.kind == "i" and self._is_direct_param(key):
                ints = [d for d in ctx if d.kind in "iu"]
                if ints:
                    r = np.result_type(*ints)
                    new[key] = r if r.kind in "iu" else INT64
                else:
                    new[key] = None
            else:
                new[key] = None
        return new

    def natural(self, node) -> np.dtype | None:
        """Float type of the weak float variables in ``node`` (weak values with no outer
        context are computed in the type of the weak variables they combine)."""
        dts = []
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and n.id in self.var_types:
                t = self.var_types[n.id]
                r = self.resolved.get(n.id)
                if t.weak and t.kind == "f" and r is not None:
                    dts.append(r)
            elif isinstance(n, ast.Subscript):
                inf = self.info.get(n)
                if inf and inf[0] == "arr" and inf[1].elem.weak and inf[1].elem.kind == "f":
                    r = self.resolved.get("@" + inf[1].key)
                    if r is not None:
                        dts.append(r)
        if not dts:
            return None
        return result_type(*(Ty(d) for d in dts)).dtype

    def fmat(self, node, mat) -> np.dtype:
        """The float type a weak float expression is computed in."""
        return self.fctx(node, mat) or FLOAT64

    def fctx(self, node, mat) -> np.dtype | None:
        """The *context* a weak float expression passes to its weak variables: a real one (an
        outer strong type, or the type its weak variables were resolved to), never the float64
        default, so that a default does not pin variables that later meet float32."""
        if mat is not None and mat.kind == "f":
            return mat
        return self.natural(node)

    def assign_mat(self, name: str) -> np.dtype | None:
        t = self.var_types[name]
        return t.dtype if not t.weak else self.resolved.get(name)

    def emit_in(self, node, d: np.dtype, ctx) -> str:
        """``node`` computed with context ``ctx`` and converted to ``d``."""
        return self.cast(*self.emit(node, ctx), d)

    # -- generation: expressions ---------------------------------------------------------------

    def note(self, dt) -> None:
        if dt == FLOAT64:
            self.fp64 = True

    def cast(self, code: str, src: np.dtype, dst: np.dtype) -> str:
        if src == dst:
            return code
        self.note(dst)
        return f"(({c_type(dst)}){code})"

    def emit_as(self, node, dst: np.dtype) -> str:
        code, dt = self.emit(node, dst)
        return self.cast(code, dt, dst)

    def emit(self, node, mat) -> tuple[str, np.dtype]:
        if node in self.const:
            code, dt = self.literal(node, self.const[node], self.ty[node], mat)
        else:
            m = getattr(self, "e_" + type(node).__name__)
            code, dt = m(node, mat)
        self.note(dt)
        return code, dt

    def literal(self, node, value, t: Ty, mat) -> tuple[str, np.dtype]:
        if not t.weak:
            return c_literal(value, t.dtype), t.dtype
        if t.kind == "b":
            return c_literal(value, BOOL), BOOL
        if t.kind == "i":
            v = int(value)
            if mat is not None and mat.kind in "iu":
                if not fits(v, mat):
                    raise self.err(node, f"Python integer {v} out of bounds for {mat} (as in "
                                         "NumPy)", "integer overflow")
                return c_literal(v, mat), mat
            if mat is not None and mat.kind == "f":
                return c_literal(float(v), mat), mat
            if not fits(v, INT64):
                raise self.err(node, f"integer constant {v} does not fit in int64",
                               "integer constant")
            return c_literal(v, INT64), INT64
        dt = mat if (mat is not None and mat.kind == "f") else FLOAT64
        return c_literal(float(value), dt), dt

    def truthy(self, node) -> str:
        code, dt = self.emit(node, None)
        if dt == BOOL:
            return code
        return f"({code} != 0)"

    def e_Name(self, node, mat):
        n = node.id
        if n in self.var_types:
            t = self.var_types[n]
            if t.weak and mat is not None:
                self.ctx.setdefault(n, set()).add(mat)
            return self.cname[n], self.storage(n)
        raise self.err(node, f"'{n}' is not a value", "non-value")  # pragma: no cover

    def e_Attribute(self, node, mat):
        return self._e_info(node)

    def _e_info(self, node):
        inf = self.info[node]
        if inf[0] == "accattr":
            acc = inf[1]
            code = acc.kind.attrs[inf[2]].format(name=self.cname[acc.name],
                                                 ctype=c_type(acc.kind.dtype),
                                                 stype=storage_c_type(acc.kind.dtype))
            return f"((long)({code}))", INT64
        if inf[0] == "idx":
            names = scalar_arguments(IndexPoint(), self.cname[inf[1].name])
            return names[inf[2]], INT64
        raise AssertionError(inf)  # pragma: no cover

    def e_Subscript(self, node, mat):
        inf = self.info[node]
        if inf[0] != "read" and inf[0] != "arr":
            return self._e_info(node)
        if inf[0] == "arr":
            arr: _Arr = inf[1]
            key = "@" + arr.key
            if arr.elem.weak and mat is not None:
                self.ctx.setdefault(key, set()).add(mat)
            dt = self._storage(key, arr.elem)
            self.used_arrays[arr.key] = arr
            i = self.emit_as(inf[2], INT64)
            self.clib.widx()
            code = f"{self.arr_cname(arr)}[skelpy_widx({i}, {len(arr.values)}L)]"
            if dt == BOOL:
                code = f"((bool){code})"
            return code, dt
        acc: _Acc = inf[1]
        idx = [f"({self.emit_as(i, INT64)})" for i in inf[2]]
        k = acc.kind
        fmt = {"name": self.cname[acc.name], "ctype": c_type(k.dtype),
               "stype": storage_c_type(k.dtype)}
        for j, c in enumerate(idx):
            fmt[f"i{j}"] = c
        self.feat.op("reads")
        return k.read.format(**fmt), k.dtype

    def arr_cname(self, arr: _Arr) -> str:
        return f"{self.c_name}_k_{arr.key}"

    def e_BinOp(self, node, mat):
        op = type(node.op).__name__
        return self._e_binop(node, op, node.left, node.right, mat)

    def _e_binop(self, node, op, left, right, mat):
        t = self.ty[node]
        if t.weak:
            if t.kind == "f":
                d = self.fmat(node, mat)
            elif t.kind == "i":
                d = INT64
            else:
                d = BOOL
            a = self.emit_in(left, d, self._sub(left, t, node, mat))
            b = self.emit_in(right, d, self._sub(right, t, node, mat))
            return self.arith(node, op, a, b, d, d, right, wrap=False), d
        ins = self.info[node][1]
        a = self.emit_as(left, ins[0])
        b = self.emit_as(right, ins[1])
        return self.arith(node, op, a, b, ins[0], t.dtype, right, wrap=True), t.dtype

    def _sub(self, operand, t: Ty, node, mat):
        """Context for an operand of weak operation ``node`` of type ``t``: float contexts
        pass down; weak ints compute in long but still tell weak int parameters an outer
        integer context (literals there stay long: Python ints do not wrap)."""
        if t.kind == "f":
            return self.fctx(node, mat)
        if t.kind == "i" and operand not in self.const and mat is not None and mat.kind in "iu":
            return mat
        return None

    def arith(self, node, op, a, b, d: np.dtype, out: np.dtype, right, wrap: bool) -> str:
        """C for ``a op b`` computed in dtype ``d`` giving ``out``."""
        T = c_type(d)
        k = d.kind
        fp64 = d == FLOAT64
        fk = "f" if k == "f" else "i"
        if op in ("Add", "Sub", "Mult"):
            sym = BINOPS[op][2]
            self.feat.op("ops_mul" if op == "Mult" else "ops_add", fk, fp64)
            if k == "f":
                code = f"({a} {sym} {b})"
            elif k == "b":
                code = f"((bool)({a} {sym} {b}))"
            elif not wrap or (k == "u" and d.itemsize >= 4):
                code = f"({a} {sym} {b})"
            else:
                u = "ulong" if d.itemsize == 8 else "uint"
                code = f"(({T})(({u}){a} {sym} ({u}){b}))"
        elif op == "Div":
            self.feat.op("ops_div", fk, fp64)
            code = f"({a} / {b})"
        elif op == "FloorDiv":
            self.feat.op("ops_div", fk, fp64)
            code = f"{self.clib.floordiv(d)}({a}, {b})"
        elif op == "Mod":
            self.feat.op("ops_div", fk, fp64)
            code = f"{self.clib.mod(d)}({a}, {b})"
        elif op == "Pow":
            code = self._pow(a, b, d, right)
        elif op in ("LShift", "RShift"):
            self.feat.op("ops_logic", fk)
            code = f"{self.clib.shift(d, op == 'LShift')}({a}, {b})"
        else:
            sym = BINOPS[op][2]
            self.feat.op("ops_logic", fk)
            code = f"(({T})({a} {sym} {b}))"
        if out != d:
            code = self.cast(code, d, out)
        return code

    def _pow(self, a, b, d, right) -> str:
        c = self.const.get(right, MISSING) if right is not None else MISSING
        fk = "f" if d.kind == "f" else "i"
        fp64 = d == FLOAT64
        if c is not MISSING and not isinstance(c, bool):
            cv = float(c)
            # NumPy's fast paths: x**0, x**1, x**2 (square), x**0.5 (sqrt), x**-1 (reciprocal);
            # other float exponents go through pow() as in NumPy; ints are exact either way
            if cv.is_integer() and 0 <= cv <= (8 if d.kind != "f" else 2):
                n = int(cv)
                if n == 0:
                    return c_literal(1, d)
                if n == 1:
                    return a
                self.feat.op("ops_mul", fk, fp64, n - 1)
                return f"{self.clib.small_pow(d, n)}({a})"
            if d.kind == "f" and cv == 0.5:
                self.feat.op("ops_math", fk, fp64)
                return f"sqrt({a})"
            if d.kind == "f" and cv == -1.0:
                self.feat.op("ops_div", fk, fp64)
                return f"({c_literal(1, d)} / {a})"
        if d.kind == "f":
            self.feat.op("ops_math", fk, fp64)
            return f"pow({a}, {b})"
        self.feat.op("ops_mul", fk, n=4)
        if d.kind == "b":
            return f"((bool)({b} ? {a} : true))"
        return f"{self.clib.ipow(d)}({a}, {b})"

    def e_UnaryOp(self, node, mat):
        op = type(node.op).__name__
        t = self.ty[node]
        if op == "Not":
            self.feat.op("ops_logic", "b")
            return f"(!{self.truthy(node.operand)})", BOOL
        if t.weak:
            d = self.fmat(node, mat) if t.kind == "f" else (INT64 if t.kind == "i" else BOOL)
            a = self.emit_in(node.operand, d, self._sub(node.operand, t, node, mat))
        else:
            d = self.info[node][1][0]
            a = self.emit_as(node.operand, d)
        return self._unary(op, a, d, t.dtype if not t.weak else d, wrap=not t.weak), (
            t.dtype if not t.weak else d)

    def _unary(self, op, a, d, out, wrap=True) -> str:
        T = c_type(d)
        fk = "f" if d.kind == "f" else "i"
        if op == "UAdd":
            return self.cast(a, d, out)
        if op == "USub":
            self.feat.op("ops_add", fk, d == FLOAT64)
            if d.kind == "f" or not wrap:
                code = f"(-{a})"
            else:
                u = "ulong" if d.itemsize == 8 else "uint"
                code = f"(({T})(-({u}){a}))"
        else:  # Invert
            self.feat.op("ops_logic", fk)
            code = f"(!{a})" if d.kind == "b" else f"(({T})(~{a}))"
        return self.cast(code, d, out)

    def e_BoolOp(self, node, mat):
        sym = " && " if isinstance(node.op, ast.And) else " || "
        self.feat.op("ops_logic", "b", n=len(node.values) - 1)
        return "(" + sym.join(self.truthy(v) for v in node.values) + ")", BOOL

    def e_Compare(self, node, mat):
        operands = [node.left] + list(node.comparators)
        parts = []
        for i, op in enumerate(node.ops):
            sym = CMPOPS[type(op).__name__][2]
            mode = self.info[node][i]
            a, b = operands[i], operands[i + 1]
            if mode[0] == "weak":
                k = mode[1]
                d = self.fmat(node, None) if k == "f" else (INT64 if k == "i" else BOOL)
                ctx = self.fctx(node, None) if k == "f" else None
                ca, cb = self.emit_in(a, d, ctx), self.emit_in(b, d, ctx)
            elif mode[0] == "mixed":
                ul = mode[1]
                ca = self.emit_as(a, np.dtype(np.uint64) if ul else INT64)
                cb = self.emit_as(b, INT64 if ul else np.dtype(np.uint64))
                parts.append(f"{self.clib.cmp_mixed(sym, ul)}({ca}, {cb})")
                self.feat.op("ops_cmp", "i")
                continue
            else:
                d = mode[1][0]
                ca, cb = self.emit_as(a, mode[1][0]), self.emit_as(b, mode[1][1])
            self.feat.op("ops_cmp", "f" if d.kind == "f" else "i", d == FLOAT64)
            parts.append(f"({ca} {sym} {cb})")
        if len(parts) == 1:
            return parts[0], BOOL
        self.feat.op("ops_logic", "b", n=len(parts) - 1)
        return "(" + " && ".join(parts) + ")", BOOL

    def e_IfExp(self, node, mat):
        taken = self.static_test(node.test)
        if taken is not None:
            return self.emit(node.body if taken else node.orelse, mat)
        t = self.ty[node]
        if t.weak:
            d = self.fmat(node, mat) if t.kind == "f" else (INT64 if t.kind == "i" else BOOL)
            a = self.emit_in(node.body, d, self._sub(node.body, t, node, mat))
            b = self.emit_in(node.orelse, d, self._sub(node.orelse, t, node, mat))
        else:
            d = t.dtype
            a, b = self.emit_as(node.body, d), self.emit_as(node.orelse, d)
        self.feat.op("branches")
        return f"({self.truthy(node.test)} ? {a} : {b})", d

    def e_Call(self, node, mat):
        ref = self.sym(node.func)
        if isinstance(ref, _Func):
            return self._e_func(node, ref.spec, mat)
        if isinstance(ref, _Cast):
            return self._e_cast(node, ref, mat)
        if isinstance(ref, _Builtin):  # len
            return self._e_info(node)
        if isinstance(ref, _Helper):
            return self._e_helper(node, mat)
        raise AssertionError(ref)  # pragma: no cover

    def _e_cast(self, node, ref: _Cast, mat):
        arg = node.args[0]
        if ref.dtype is not None:
            d = ref.dtype
            code, dt = self.emit(arg, d if self.ty[arg].kind != "i" or d.kind in "iu" else None)
            if d == BOOL and dt != BOOL:
                return f"({code} != 0)", BOOL
            return self.cast(code, dt, d), d
        if ref.kind == "b":
            return self.truthy(arg), BOOL
        if ref.kind == "i":
            code, dt = self.emit(arg, None)
            return self.cast(code, dt, INT64), INT64
        d = self.fmat(node, mat)
        return self.emit_in(arg, d, self.fctx(node, mat)), d

    def _e_func(self, node, spec: F.FuncSpec, mat):
        inf = self.info[node]
        canon = spec.canonical
        args = node.args
        t = self.ty[node]
        if ("op", node) in self.info:
            op = self.info[("op", node)]
            if t.weak:
                return self._e_binop(node, op, args[0], args[1], mat)
            ins = inf[1]
            a, b = self.emit_as(args[0], ins[0]), self.emit_as(args[1], ins[1])
            return self.arith(node, op, a, b, ins[0], t.dtype, args[1], wrap=True), t.dtype
        if canon == "negative":
            d = inf[1][0]
            return self._unary("USub", self.emit_as(args[0], d), d, t.dtype), t.dtype
        if inf[0] == "same":
            rt: Ty = inf[1]
            if rt.weak:
                d = self.fmat(node, mat) if rt.kind == "f" else (INT64 if rt.kind == "i" else BOOL)
            else:
                d = rt.dtype
            def conv(a):
                return self.emit_in(a, d, self._sub(a, rt, node, mat) if rt.weak else d)
            if canon == "where":
                c = self.truthy(args[0])
                a, b = conv(args[1]), conv(args[2])
                self.feat.op("branches")
                return f"({c} ? {a} : {b})", d
            codes = [conv(a) for a in args]
            fk = "f" if d.kind == "f" else "i"
            if canon == "clip":
                self.feat.op("ops_cmp", fk, d == FLOAT64, 2)
                return f"{self.clib.clip(d)}({codes[0]}, {codes[1]}, {codes[2]})", d
            fn = self.clib.minmax(d, canon)
            code = codes[0]
            for c in codes[1:]:
                self.feat.op("ops_cmp", fk, d == FLOAT64)
                code = f"{fn}({code}, {c})"
            return code, d
        if inf[0] == "round":
            at: Ty = inf[1]
            if at.kind == "f":
                d = self.fmat(args[0], None) if at.weak else at.dtype
                ctx = self.fctx(args[0], None) if at.weak else d
                self.feat.op("ops_math", "f", d == FLOAT64)
                return f"((long)rint({self.emit_in(args[0], d, ctx)}))", INT64
            return self.cast(*self.emit(args[0], None), INT64), INT64
        if inf[0] == "weak":
            rk = inf[1]
            if canon == "abs" and rk == "i":
                a = self.cast(*self.emit(args[0], None), INT64)
                return self._c_func("abs", [a], INT64, INT64), INT64
            d = self.fmat(node, mat if rk == "f" else None)
            ctx = self.fctx(node, mat if rk == "f" else None)
            codes = [self.emit_in(a, d, ctx) for a in args]
            if rk == "i":  # floor/ceil/trunc of a Python float -> Python int
                return f"((long){self._c_func(canon, codes, d, d)})", INT64
            if rk == "b":
                return self._c_func(canon, codes, d, BOOL), BOOL
            return self._c_func(canon, codes, d, d), d
        ins = inf[1]
        codes = [self.emit_as(a, d) for a, d in zip(args, ins)]
        return self._c_func(canon, codes, ins[0], t.dtype), t.dtype

    def _c_func(self, canon: str, codes: list[str], d: np.dtype, out: np.dtype) -> str:
        """C for a math function with arguments already in dtype ``d``."""
        T = c_type(d)
        k = d.kind
        fp64 = d == FLOAT64
        fk = "f" if k == "f" else "i"
        a = codes[0]
        if canon in F.UNARY_FLOAT_C and canon != "fabs" or canon == "log":
            self.feat.op("ops_math", fk, fp64)
            if canon == "log" and len(codes) == 2:
                code = f"(log({a}) / log({codes[1]}))"
            else:
                code = f"{F.UNARY_FLOAT_C[canon]}({a})"
        elif canon in F.BINARY_FLOAT_C:
            self.feat.op("ops_math", fk, fp64)
            code = f"{F.BINARY_FLOAT_C[canon]}({a}, {codes[1]})"
        elif canon in ("deg2rad", "rad2deg"):
            self.feat.op("ops_mul", fk, fp64)
            f = np.pi / 180 if canon == "deg2rad" else 180 / np.pi
            code = f"({a} * {c_literal(f, d)})"
        elif canon in F.ROUNDING:
            if k == "f":
                self.feat.op("ops_math", fk, fp64)
                code = f"{canon}({a})"
            else:
                code = a
        elif canon == "fabs":
            self.feat.op("ops_math", fk, fp64)
            code = f"fabs({a})"
        elif canon == "abs":
            self.feat.op("ops_math", fk, fp64)
            if k == "f":
                code = f"fabs({a})"
            elif k == "i":
                code = f"(({T})abs({a}))"
            else:
                code = a
        elif canon == "sign":
            self.feat.op("ops_cmp", fk, fp64, 2)
            code = f"{self.clib.sign(d)}({a})"
        elif canon == "square":
            self.feat.op("ops_mul", fk, fp64)
            code = f"{self.clib.small_pow(d, 2)}({a})" if k != "b" else a
        elif canon == "fmod":
            self.feat.op("ops_div", fk, fp64)
            code = f"{self.clib.fmod(d)}({a}, {codes[1]})"
        elif canon in ("power", "mpow"):
            code = self._pow(a, codes[1], d, None)
        elif canon in ("minimum", "maximum"):
            self.feat.op("ops_cmp", fk, fp64)
            if k == "b":
                code = f"({a} {'&&' if canon == 'minimum' else '||'} {codes[1]})"
            else:
                code = f"{self.clib.minmax(d, canon)}({a}, {codes[1]})"
        elif canon in ("fmin", "fmax"):
            self.feat.op("ops_cmp", fk, fp64)
            if k == "b":
                code = f"({a} {'&&' if canon == 'fmin' else '||'} {codes[1]})"
            elif k == "f":
                code = f"{canon}({a}, {codes[1]})"
            else:
                code = f"{canon[1:]}({a}, {codes[1]})"
        elif canon in F.PREDICATES:
            self.feat.op("ops_cmp", fk, fp64)
            if k == "f":
                code = f"((bool){canon}({a}))"
            elif canon == "signbit":
                code = f"({a} < 0)" if k == "i" else "false"
            else:
                code = "true" if canon == "isfinite" else "false"
        elif canon in ("logical_and", "logical_or", "logical_xor", "logical_not"):
            self.feat.op("ops_logic", "b")
            bs = [c if d == BOOL else f"({c} != 0)" for c in codes]
            if canon == "logical_not":
                code = f"(!{bs[0]})"
            else:
                sym = {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}[canon]
                code = f"({bs[0]} {sym} {bs[1]})"
            return code
        else:  # pragma: no cover - every canonical name is handled above
            raise AssertionError(canon)
        return self.cast(code, d, out) if out != BOOL or d == BOOL else code

    def _e_helper(self, node, mat):
        _, m, kinds = self.info[node]
        t = self.ty[node]
        out = None
        if t.weak and t.kind == "f" and mat is not None and mat.kind == "f":
            out = mat
        key = (id(m), kinds, out)
        cname = self.helper_names.get(key)
        if cname is None:
            cname = f"{self.c_name}_{_c_ident(m.name.strip('<>'))}"
            if cname in self.helper_names.values():
                cname = f"{cname}{len(self.helper_names)}"
            self.helper_names[key] = cname
        try:
            tm = m.specialise(kinds, out_dtype=out, c_name=cname)
        except _Recursion:
            raise self.err(node, f"recursive call to '{m.name}' is not supported in a muscle",
                           "recursion") from None
        args = []
        for j, (a, k) in enumerate(zip(node.args, kinds)):
            if isinstance(k, Scalar):
                args.append(self.emit_as(a, tm.scalar_dtypes[j]))
            else:
                args.extend(scalar_arguments(k, self.cname[a.id]))
        self.helper_src[cname] = tm
        self.feat.add(tm.features)
        if tm.uses_fp64:
            self.fp64 = True
        return f"{cname}({', '.join(args)})", tm.out_dtype

    # -- generation: statements ----------------------------------------------------------------

    def line(self, ind: int, text: str) -> None:
        self.out.append("    " * ind + text)

    def tmp(self, what: str) -> str:
        self.ntmp += 1
        return f"_sk_{what}{self.ntmp}"

    def assigned(self, value, name: str) -> str:
        return self.emit_in(value, self.storage(name), self.assign_mat(name))

    def g_block(self, stmts, ind: int) -> None:
        for s in stmts:
            getattr(self, "g_" + type(s).__name__)(s, ind)

    def g_Assign(self, s, ind):
        for tgt in s.targets:
            if isinstance(tgt, ast.Name):
                self.line(ind, f"{self.cname[tgt.id]} = "
                               f"{self.assigned(s.value, tgt.id)};")
                continue
            value = s.value
            if isinstance(value, (ast.Tuple, ast.List)):
                self.line(ind, "{")
                tmps = []
                for e, v in zip(tgt.elts, value.elts):
                    dt = self.storage(e.id)
                    tv = self.tmp("t")
                    tmps.append(tv)
                    self.line(ind + 1, f"{c_type(dt)} {tv} = {self.assigned(v, e.id)};")
                for e, tv in zip(tgt.elts, tmps):
                    self.line(ind + 1, f"{self.cname[e.id]} = {tv};")
                self.line(ind, "}")
            else:
                names = scalar_arguments(IndexPoint(), self.cname[value.id])
                for e, src in zip(tgt.elts, names):
                    self.line(ind, f"{self.cname[e.id]} = "
                                   f"{self.cast(src, INT64, self.storage(e.id))};")

    def g_AugAssign(self, s, ind):
        n = s.target.id
        self.line(ind, f"{self.cname[n]} = {self.assigned(self.synth[s], n)};")

    def g_AnnAssign(self, s, ind):
        if s.value is not None:
            n = s.target.id
            self.line(ind, f"{self.cname[n]} = {self.assigned(s.value, n)};")

    def g_Return(self, s, ind):
        code = self.emit_as(s.value, self.ret_mat)
        self.line(ind, f"return {self.cast(code, self.ret_mat, self.out_dtype)};")

    def g_If(self, s, ind):
        taken = self.static_test(s.test)
        if taken is not None:
            self.g_block(s.body if taken else s.orelse, ind)
            return
        self.feat.op("branches")
        self.line(ind, f"if ({self.truthy(s.test)}) {{")
        self.g_block(s.body, ind + 1)
        orelse = s.orelse
        while (len(orelse) == 1 and isinstance(orelse[0], ast.If)
               and self.static_test(orelse[0].test) is None):
            e = orelse[0]
            self.feat.op("branches")
            self.line(ind, f"}} else if ({self.truthy(e.test)}) {{")
            self.g_block(e.body, ind + 1)
            orelse = e.orelse
        if orelse:
            self.line(ind, "} else {")
            self.g_block(orelse, ind + 1)
        self.line(ind, "}")

    def g_While(self, s, ind):
        if self.static_test(s.test) is False:
            return
        self.feat.enter_loop(None)
        self.line(ind, f"while ({self.truthy(s.test)}) {{")
        self.g_block(s.body, ind + 1)
        self.line(ind, "}")
        self.feat.exit_loop()

    def g_For(self, s, ind):
        args = s.iter.args
        consts = [self.const.get(a, MISSING) for a in args]
        codes = [self.emit_as(a, INT64) for a in args]
        if len(args) == 1:
            start, stop, step = "0L", codes[0], "1L"
            cvals = [0, consts[0], 1]
        else:
            start, stop = codes[0], codes[1]
            step = codes[2] if len(args) == 3 else "1L"
            cvals = list(consts) + ([1] if len(args) == 2 else [])
        trip = None
        if all(c is not MISSING for c in cvals):
            trip = len(range(*(int(c) for c in cvals)))
        self.line(ind, "{")
        i = self.tmp("i")
        if cvals[1] is MISSING:
            e = self.tmp("e")
            self.line(ind + 1, f"const long {e} = {stop};")
            stop = e
        if cvals[2] is MISSING:
            st = self.tmp("s")
            self.line(ind + 1, f"const long {st} = {step};")
            step = st
            cond = f"({st} > 0) ? ({i} < {stop}) : ({i} > {stop})"
        else:
            cond = f"{i} < {stop}" if int(cvals[2]) > 0 else f"{i} > {stop}"
        self.feat.enter_loop(trip)
        self.line(ind + 1, f"for (long {i} = {start}; {cond}; {i} += {step}) {{")
        n = s.target.id
        self.line(ind + 2, f"{self.cname[n]} = {self.cast(i, INT64, self.storage(n))};")
        self.g_block(s.body, ind + 2)
        self.line(ind + 1, "}")
        self.line(ind, "}")
        self.feat.exit_loop()

    def g_Break(self, s, ind):
        self.line(ind, "break;")

    def g_Continue(self, s, ind):
        self.line(ind, "continue;")

    def g_Pass(self, s, ind):
        pass

    def g_Expr(self, s, ind):
        if isinstance(s.value, ast.Constant):
            return
        code, _ = self.emit(s.value, None)
        self.line(ind, f"(void)({code});")

    # -- generation driver ---------------------------------------------------------------------

    def _names(self) -> None:
        taken = set(RESERVED) | {self.c_name}
        self.cname: dict[str, str] = {}
        self.param_decl: list[str] = []

        def fresh(base: str, suffixes=("",)) -> str:
            while any(base + s in taken for s in suffixes):
                base += "_"
            for s in suffixes:
                taken.add(base + s)
            return base

        for i, name in enumerate(self.pf.param_names):
            k = self.kinds[i]
            base = _safe(name)
            if isinstance(k, Accessor):
                probe = [d[len(base):] for d in k.arguments(base)]
                self.cname[name] = fresh(base, tuple(probe))
            elif isinstance(k, IndexPoint):
                self.cname[name] = fresh(base, ("_r", "_c"))
            else:
                self.cname[name] = fresh(base)
        for name in sorted(self.var_types):
            if name not in self.cname:
                self.cname[name] = fresh(_safe(name))
        self.in_names = {}
        for name in self.sparams:
            if not self._is_direct_param(name):
                self.in_names[name] = fresh(self.cname[name] + "_in")

    def _generate(self) -> None:
        self.out: list[str] = []
        self.ctx: dict[str, set] = {}
        self.clib = CLib()
        self.feat = FeatureCounter()
        self.fp64 = False
        self.ntmp = 0
        self.used_arrays: dict[str, _Arr] = {}
        self.helper_src: dict[str, TypedMuscle] = {}
        self.g_block(self.pf.body, 1)

    def _param_dtype(self, name: str) -> np.dtype:
        """The C type of Scalar parameter ``name`` (what the caller passes)."""
        k = self.kinds[self.sparams[name]]
        if not k.weak:
            return k.dtype
        if self._is_direct_param(name):
            return self.storage(name)
        local = self.storage(name)
        kind = Ty(k.dtype, True).kind
        if kind == "f":
            return local if local.kind == "f" else FLOAT64
        if kind == "i":
            return local if local.kind in "iu" else INT64
        return BOOL

    def translate(self) -> TypedMuscle:
        self.infer()
        self._names()
        for _ in range(32):
            self._generate()
            new = self._resolve()
            if new == self.resolved:
                break
            self.resolved = new
        else:  # pragma: no cover - resolution only widens, so this converges quickly
            self._generate()
        return self._assemble()

    def _assemble(self) -> TypedMuscle:
        decls = []
        c_params = []
        scalar_dtypes: dict[int, np.dtype] = {}
        for i, name in enumerate(self.pf.param_names):
            k = self.kinds[i]
            cn = self.cname[name]
            if isinstance(k, Accessor):
                c_params.extend(k.declarations(cn))
                if k.dtype == FLOAT64:
                    self.fp64 = True
            elif isinstance(k, IndexPoint):
                c_params.extend(t.format(name=cn) for t in k.c_params)
            else:
                dt = self._param_dtype(name)
                self.note(dt)
                scalar_dtypes[i] = dt
                if name in self.in_names:
                    c_params.append(f"{c_type(dt)} {self.in_names[name]}")
                    local = self.storage(name)
                    decls.append(f"    {c_type(local)} {cn} = "
                                 f"{self.cast(self.in_names[name], dt, local)};")
                else:
                    c_params.append(f"{c_type(dt)} {cn}")
        for name in sorted(self.var_types):
            if name in self.sparams:
                continue
            dt = self.storage(name)
            self.note(dt)
            decls.append(f"    {c_type(dt)} {self.cname[name]} = {c_literal(0, dt)};")
        out_t = c_type(self.out_dtype)
        self.note(self.out_dtype)
        parts = []
        arrays = []
        for arr in self.used_arrays.values():
            dt = self._storage("@" + arr.key, arr.elem)
            self.note(dt)
            sdt = storage_dtype(dt)
            vals = ", ".join(c_literal(convert_constant(v, dt), sdt) for v in arr.values)
            name = self.arr_cname(arr)
            arrays.append(f"#ifndef SKELPY_CONST_{name}\n#define SKELPY_CONST_{name}\n"
                          f"__constant {c_type(sdt)} {name}[{len(arr.values)}] = {{{vals}}};\n"
                          "#endif\n")
        if self.fp64:
            parts.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n")
        parts.append(self.clib.source())
        parts.extend(arrays)
        for cname, tm in self.helper_src.items():
            parts.append(f"#ifndef SKELPY_FN_{cname}\n#define SKELPY_FN_{cname}\n{tm.source}"
                         "#endif\n")
        # Python muscles compute operation by operation, as NumPy does: no a*b+c -> fma. The
        # pragma sits inside the body so that it does not reach the skeleton's own code.
        body = "\n".join(["#pragma OPENCL FP_CONTRACT OFF"] + decls + self.out)
        parts.append(f"static inline {out_t} {self.c_name}({', '.join(c_params) or 'void'}) {{\n"
                     f"{body}\n}}\n")
        from .access import analyse

        accesses, bounds = analyse(self)
        return TypedMuscle(
            c_name=self.c_name, source="".join(parts), c_params=c_params, out_dtype=self.out_dtype,
            scalar_dtypes=scalar_dtypes, uses_fp64=self.fp64, features=self.feat.result(),
            accesses=accesses, access_bounds=bounds, kinds=self.kinds, origin=self.pf.origin,
            name=self.pf.name, param_names=list(self.pf.param_names))


def _falls_through(stmts, static_test) -> bool:
    """Whether control can reach the end of ``stmts`` (conservative, for 'missing return')."""
    for s in stmts:
        if isinstance(s, ast.Return):
            return False
        if isinstance(s, ast.If):
            taken = static_test(s.test)
            body = _falls_through(s.body, static_test)
            orelse = _falls_through(s.orelse, static_test)
            if (taken is True and not body) or (taken is False and not orelse) or (
                    not body and not orelse):
                return False
        if (isinstance(s, ast.While) and static_test(s.test) is True
                and not _has_break(s.body)):
            return False
    return True


def _has_break(stmts) -> bool:
    for s in stmts:
        if isinstance(s, ast.Break):
            return True
        if isinstance(s, ast.If) and (_has_break(s.body) or _has_break(s.orelse)):
            return True
    return False
