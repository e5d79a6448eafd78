"""Finding the AST of a Python muscle: functions, and lambdas anywhere on a line.

We parse the whole source file (cached) rather than ``inspect.getsource``'s fragment, because a
lambda is usually in the middle of an expression (``sk.Map(lambda x: x * x)``) and several
lambdas may share a line.  The lambda is identified by its line, its parameter names and the
source positions of its bytecode (``co_positions``), which lie inside exactly one lambda body.
Builtins and NumPy/operator functions used as a whole muscle (``sk.Reduce(max)``) get a tiny
generated Python function with registered source (:func:`as_function`).
"""

from __future__ import annotations

import ast
import builtins
import functools
import hashlib
import inspect
import linecache
import os
import re
import textwrap
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from ..errors import TranslationError
from . import funcs as F
from .cnames import c_ident

_PARSED: dict[tuple[str, str], _ParsedFile] = {}


def short_path(filename: str) -> str:
    """``filename`` relative to the working directory when it lies below it."""
    return _short_path(filename, os.getcwd())


@functools.lru_cache(maxsize=512)
def _short_path(filename: str, cwd: str) -> str:
    try:
        rel = os.path.relpath(filename, cwd)
    except ValueError:
        return filename
    return filename if rel.startswith("..") else rel


class _ParsedFile:
    """A parsed source file, with its lambdas by line and its functions by name (in
    ``ast.walk`` order), so that finding one function does not walk the whole file."""

    def __init__(self, tree: ast.Module):
        self.lambdas: dict[int, list[ast.Lambda]] = {}
        self.defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for n in ast.walk(tree):
            if isinstance(n, ast.Lambda):
                self.lambdas.setdefault(n.lineno, []).append(n)
            elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs.setdefault(n.name, []).append(n)


def _parse_file(filename: str, lines: list[str]) -> _ParsedFile | None:
    text = "".join(lines)
    key = (filename, hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest())
    parsed = _PARSED.get(key)
    if parsed is None:
        try:
            parsed = _ParsedFile(ast.parse(text, filename))
        except SyntaxError:
            return None
        if len(_PARSED) > 64:
            _PARSED.clear()
        _PARSED[key] = parsed
    return parsed


def _arg_names(node: ast.Lambda | ast.FunctionDef) -> list[str]:
    a = node.args
    return [x.arg for x in a.posonlyargs + a.args]


def _span(node: ast.AST) -> tuple[tuple[int, int], tuple[int, int]]:
    return ((node.lineno, node.col_offset), (node.end_lineno, node.end_col_offset))


def _positions(code: types.CodeType) -> list[tuple[int, int, int, int]]:
    out = []
    for p in getattr(code, "co_positions", lambda: [])():
        if None in p:
            continue
        line, end_line, col, end_col = p
        if (line, col) == (end_line, end_col):
            continue  # zero-width bookkeeping instructions (RESUME)
        out.append(p)
    return out


def _find_lambda(parsed: _ParsedFile, code: types.CodeType) -> ast.Lambda | None:
    names = list(code.co_varnames[: code.co_argcount])
    cands = [n for n in parsed.lambdas.get(code.co_firstlineno, ()) if _arg_names(n) == names]
    if len(cands) <= 1:
        return cands[0] if cands else None
    pos = _positions(code)

    def contains(n: ast.Lambda) -> bool:
        (l0, c0), (l1, c1) = _span(n.body)
        return all((l0, c0) <= (a, c) and (b, d) <= (l1, c1) for a, b, c, d in pos)

    inside = [n for n in cands if contains(n)]
    if pos and inside:
        # the innermost lambda whose body holds every instruction position is the one
        return min(inside, key=lambda n: (n.end_lineno - n.lineno, n.end_col_offset - n.col_offset))
    # last resort: compile each candidate and compare bytecode
    same = []
    for n in cands:
        try:
            c = compile(ast.Expression(n), "<lambda>", "eval").co_consts
        except Exception:  # pragma: no cover - defensive
            continue
        inner = [k for k in c if isinstance(k, types.CodeType)]
        if inner and inner[0].co_code == code.co_code:
            same.append(n)
    return same[0] if len(same) == 1 else None


def _find_def(parsed: _ParsedFile, code: types.CodeType) -> ast.FunctionDef | None:
    for n in parsed.defs.get(code.co_name, ()):
        first = min([n.lineno] + [d.lineno for d in n.decorator_list])
        if code.co_firstlineno in (first, n.lineno):
            return n
    return None


@dataclass
class PyFunction:
    """A Python function with its parsed AST and the namespaces its names resolve in.

    It holds the code object, globals and closure cells, not the function itself, so that
    caching a muscle per function (weakly keyed) does not keep the function alive. Names are
    looked up when asked (:meth:`lookup`), so a later look-up sees the values of that moment
    (``captures.py`` tells whether they changed)."""

    code: types.CodeType
    globals: dict
    node: ast.FunctionDef | ast.Lambda
    name: str
    filename: str
    firstline: int
    param_names: list[str]
    body: list[ast.stmt]
    closure: dict[str, object] = field(default_factory=dict)    # name -> its cell

    def where(self, node: ast.AST | None = None) -> str:
        line = getattr(node, "lineno", None) or self.firstline
        return f"{short_path(self.filename)}:{line} ({self.name})"

    @property
    def origin(self) -> str:
        return self.where(None)

    def error(self, node: ast.AST | None, message: str, construct: str | None = None):
        return TranslationError(message, origin=self.where(node), construct=construct)

    @functools.cached_property
    def assigned(self) -> list[ast.Name]:
        """Every name the body assigns to (``=``, ``op=``, annotated, ``for`` targets, with
        tuple targets unpacked), in ``ast.walk`` order."""
        names: list[ast.Name] = []

        def targets(t):
            if isinstance(t, ast.Name):
                names.append(t)
            elif isinstance(t, (ast.Tuple, ast.List)):
                for e in t.elts:
                    targets(e)
            elif isinstance(t, ast.Starred):
                targets(t.value)

        for stmt in self.body:
            for n in ast.walk(stmt):
                if isinstance(n, ast.Assign):
                    for t in n.targets:
                        targets(t)
                elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.For)):
                    targets(n.target)
        return names

    def reader(self, name: str) -> Callable[[], object]:
        """A cheap callable giving ``lookup(name)`` again later (for ``captures.py``): one
        dictionary look-up, in the namespace the name was found in. (A builtin shadowed by a
        new global, or a closure cell emptied, is seen as a change.)"""
        cell = self.closure.get(name)
        if cell is not None:
            return partial(_cell_value, cell)
        g = self.globals
        if name in g:
            return partial(g.get, name, MISSING)
        return partial(g.get, name, self.lookup(name))

    def lookup(self, name: str):
        """The object a free name refers to (closure, then globals, then builtins)."""
        cell = self.closure.get(name)
        if cell is not None:
            try:
                return cell.cell_contents
            except ValueError:
                return MISSING
        g = self.globals
        if name in g:
            return g[name]
        b = g.get("__builtins__", builtins)
        b = b if isinstance(b, dict) else vars(b)
        if name in b:
            return b[name]
        return MISSING


def _cell_value(cell) -> object:
    try:
        return cell.cell_contents
    except ValueError:
        return MISSING


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


MISSING = _Missing()


def parse_function(fn) -> PyFunction:
    """Parse ``fn``'s source into a :class:`PyFunction`; TranslationError when impossible."""
    if not isinstance(fn, types.FunctionType):
        raise TranslationError(
            f"a muscle must be a Python function or OpenCL C source, not {type(fn).__name__}")
    code = fn.__code__
    name = code.co_name
    origin = f"{short_path(code.co_filename)}:{code.co_firstlineno} ({name})"
    if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS):
        raise TranslationError("*args/**kwargs parameters are not supported in a muscle",
                               origin=origin, construct="varargs")
    if code.co_kwonlyargcount:
        raise TranslationError("keyword-only parameters are not supported in a muscle",
                               origin=origin, construct="keyword-only parameter")
    if fn.__defaults__ or fn.__kwdefaults__:
        raise TranslationError("parameters with default values are not supported in a muscle",
                               origin=origin, construct="default value")
    if code.co_flags & (inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR):
        raise TranslationError("generators and coroutines are not supported in a muscle",
                               origin=origin, construct="yield")
    filename = code.co_filename
    lines = linecache.getlines(filename, fn.__globals__)
    node = None
    if lines:
        parsed = _parse_file(filename, lines)
        if parsed is not None:
            node = _find_lambda(parsed, code) if name == "<lambda>" else _find_def(parsed, code)
        if node is None and name != "<lambda>":
            node = _fallback_def(fn, code)
    if node is None:
        raise TranslationError(
            "cannot find the source of this function (muscles must be defined in a file or "
            "notebook cell, not typed at a bare interpreter or built with exec); pass OpenCL C "
            "source instead", origin=origin, construct="source")
    closure = dict(zip(code.co_freevars, fn.__closure__ or ()))
    if isinstance(node, ast.Lambda):
        body: list[ast.stmt] = [ast.Return(value=node.body, lineno=node.body.lineno,
                                           col_offset=node.body.col_offset,
                                           end_lineno=node.body.end_lineno,
                                           end_col_offset=node.body.end_col_offset)]
    else:
        body = list(node.body)
    return PyFunction(code=code, globals=fn.__globals__, node=node, name=name, filename=filename,
                      firstline=code.co_firstlineno,
                      param_names=list(code.co_varnames[: code.co_argcount]), body=body,
                      closure=closure)


def _fallback_def(fn, code: types.CodeType) -> ast.FunctionDef | None:
    """``inspect.getsource`` + dedent, line numbers shifted back to the file's."""
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        return None
    ast.increment_lineno(tree, code.co_firstlineno - 1)
    for n in tree.body:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == code.co_name:
            return n
    return None


# -- builtins as muscles ----------------------------------------------------------------------

_SYNTH: dict[object, types.FunctionType] = {}


def as_function(fn):
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
    nparams = sorted(set(re.findall(r"\b[abc]\b", expr)))
    label = getattr(fn, "__name__", "f")
    filename = f"<skelpy builtin {label}>"
    src = f"def {c_ident(label)}({', '.join(nparams)}):\n    return {expr}\n"
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    ns = {"f": fn}
    exec(compile(src, filename, "exec"), ns)
    out = ns[c_ident(label)]
    _SYNTH[fn] = out
    return out
