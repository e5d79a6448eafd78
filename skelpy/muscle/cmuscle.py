"""OpenCL C source muscles (SkelCL style): ``"float func(float x) { return x * x; }"``.

We do not parse C; a small scanner finds the top-level function definitions, the entry (named
``func``, else the last one) and its parameter list.  The entry is renamed to the caller's
``c_name`` and every other function in the string is prefixed with it, so two C muscles can
live in one program.  Accessor parameters get their declarations from the skeleton, and reads
go through ``SKELPY_GET(p, i)`` / ``SKELPY_GET2(p, i, j)`` macros defined per parameter (plain
``p[i]`` also works when the accessor is a plain global pointer).
"""

from __future__ import annotations

import os
import re
import sys

import numpy as np

from ..dtypes import c_type, storage_c_type
from ..errors import DTypeError, TranslationError
from .checks import ALL, DEBUG_PARAM, OFFSETS, Site, check_call, redirect, register
from .clib import CLib
from .dtyping import FLOAT64
from .features import FeatureCounter
from .params import Accessor, IndexPoint, Scalar
from .source import short_path
from .typed_muscle import TypedMuscle

_CHECKED_GET = ("#ifndef SKELPY_GET_AT_DEFINED\n#define SKELPY_GET_AT_DEFINED\n"
                "#define SKELPY_GET_AT(p, s0, s1, i) SKELPY_GETC_##p(s0, s1, i, 0)\n"
                "#define SKELPY_GET2_AT(p, s0, s1, i, j) SKELPY_GETC_##p(s0, s1, i, j)\n"
                "#endif\n")
_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_C_TYPES = {
    "bool": np.bool_, "char": np.int8, "signed char": np.int8, "uchar": np.uint8,
    "unsigned char": np.uint8, "short": np.int16, "signed short": np.int16,
    "short int": np.int16, "ushort": np.uint16, "unsigned short": np.uint16,
    "unsigned short int": np.uint16, "int": np.int32, "signed": np.int32, "signed int": np.int32,
    "uint": np.uint32, "unsigned": np.uint32, "unsigned int": np.uint32, "long": np.int64,
    "signed long": np.int64, "long int": np.int64, "ulong": np.uint64,
    "unsigned long": np.uint64, "unsigned long int": np.uint64, "float": np.float32,
    "double": np.float64, "size_t": np.uint64,
}
_QUALIFIERS = {"const", "__private", "private", "restrict", "volatile", "register", "static",
               "inline", "__inline", "extern"}
_ADDRESS_SPACES = {"__global", "global", "__local", "local", "__constant", "constant"}
_FUNC_HEAD = re.compile(r"([A-Za-z_][\w\s\*]*?)\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*\{")
_MATH = re.compile(r"\b(sqrt|rsqrt|exp|exp2|exp10|expm1|log|log2|log10|log1p|sin|cos|tan|asin|"
                   r"acos|atan|atan2|sinh|cosh|tanh|pow|pown|powr|hypot|fabs|floor|ceil|"
                   r"trunc|round|rint|fmin|fmax|fmod|native_\w+|half_\w+|mad|fma|erf|erfc|"
                   r"cbrt|tgamma|lgamma)\s*\(")


def _strip_comments(src: str) -> str:
    """Blank out comments but keep line numbers and offsets."""
    def blank(m):
        return re.sub(r"[^\n]", " ", m.group(0))
    return re.sub(r"/\*.*?\*/|//[^\n]*|\"(?:\\.|[^\"\\])*\"", blank, src, flags=re.S)


def _caller_origin() -> tuple[str, int]:
    f = sys._getframe(1)
    while f is not None and os.path.abspath(f.f_code.co_filename).startswith(_PKG_DIR):
        f = f.f_back
    if f is None:
        return "<opencl-c>", 1
    return short_path(f.f_code.co_filename), f.f_lineno


def _norm_type(text: str) -> tuple[str, bool]:
    """(scalar C type name with qualifiers removed, is a pointer/address-space type)."""
    pointer = "*" in text or "[" in text
    words = [w for w in re.findall(r"[A-Za-z_]\w*", text)]
    if any(w in _ADDRESS_SPACES for w in words):
        pointer = True
    words = [w for w in words if w not in _QUALIFIERS and w not in _ADDRESS_SPACES]
    return " ".join(words), pointer


class _Func:
    def __init__(self, name, head, params_text, start, head_start, body_start, body_end):
        self.name = name
        self.head = head
        self.params_text = params_text
        self.start = start
        self.head_start = head_start
        self.body_start = body_start
        self.body_end = body_end


class CFunction:
    """A parsed OpenCL C muscle."""

    def __init__(self, src: str):
        self.src = src
        file, line = _caller_origin()
        self.file, self.line = file, line
        self.clean = _strip_comments(src)
        self.funcs = self._scan()
        if not self.funcs:
            raise TranslationError("no function definition found in the OpenCL C muscle",
                                   origin=f"{file}:{line} (<opencl-c>)", construct="C source")
        named = [f for f in self.funcs if f.name == "func"]
        self.entry = named[0] if named else self.funcs[-1]
        self.name = self.entry.name
        self.origin = f"{file}:{line} ({self.name})"
        ret, ptr = _norm_type(self.entry.head)
        if ptr or ret not in _C_TYPES:
            raise self.error(self.entry.head_start, f"unsupported return type '{ret}'",
                             "C return type")
        self.ret_dtype = np.dtype(_C_TYPES[ret])
        self.params = self._params()
        self.param_names = [p[0] for p in self.params]

    def error(self, offset: int, message: str, construct: str) -> TranslationError:
        cline = self.src.count("\n", 0, offset) + 1
        return TranslationError(message, origin=f"{self.file}:{self.line} ({self.name}, C line "
                                                f"{cline})", construct=construct)

    def _scan(self) -> list[_Func]:
        s = self.clean
        out = []
        depth = 0
        i = 0
        n = len(s)
        while i < n:
            ch = s[i]
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif depth == 0 and (ch.isalpha() or ch == "_") and (i == 0 or not (
                    s[i - 1].isalnum() or s[i - 1] == "_")):
                m = _FUNC_HEAD.match(s, i)
                if m and m.group(2) not in ("if", "for", "while", "switch", "return"):
                    body_start = m.end() - 1
                    d = 0
                    j = body_start
                    while j < n:
                        if s[j] == "{":
                            d += 1
                        elif s[j] == "}":
                            d -= 1
                            if d == 0:
                                break
                        j += 1
                    head = m.group(1)
                    if "#" not in head and "=" not in head:
                        out.append(_Func(m.group(2), head, m.group(3), m.start(), m.start(),
                                         body_start, j))
                    i = j + 1
                    continue
                # skip the identifier
                while i < n and (s[i].isalnum() or s[i] == "_"):
                    i += 1
                continue
            i += 1
        return out

    def _params(self) -> list[tuple[str, str, str, bool]]:
        """[(name, declaration text, scalar type name, is pointer)]."""
        text = self.entry.params_text.strip()
        if not text or text == "void":
            return []
        out = []
        for decl in text.split(","):
            decl = decl.strip()
            m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*$", decl)
            if not m:
                raise self.error(self.entry.head_start, f"cannot parse parameter '{decl}'",
                                 "C parameter")
            name = m.group(1)
            tname, ptr = _norm_type(decl[: m.start(1)] + (m.group(2) or ""))
            out.append((name, decl, tname, ptr))
        return out

    # -- specialisation ------------------------------------------------------------------------

    def specialise(self, kinds, out, c_name: str, checks: str | None = None) -> TypedMuscle:
        c_params: list[str] = []
        checked_reads: dict[str, Accessor] = {}       # accessors whose reads are checked
        scalar_dtypes: dict[int, np.dtype] = {}
        prologue: list[str] = []
        macros: list[str] = []
        undefs: list[str] = []
        fp64 = False
        for i, ((name, decl, tname, ptr), k) in enumerate(zip(self.params, kinds)):
            if isinstance(k, Scalar):
                if ptr or tname not in _C_TYPES:
                    raise self.error(self.entry.head_start, f"parameter '{name}' is passed a "
                                     f"value but is declared '{decl}'", "C parameter")
                dt = np.dtype(_C_TYPES[tname])
                self._check_type(name, decl, dt, k)
                scalar_dtypes[i] = dt
                fp64 |= dt == FLOAT64
                c_params.append(f"{c_type(dt)} {name}")
            elif isinstance(k, IndexPoint):
                c_params.extend(t.format(name=name) for t in k.c_params)
                prologue.append(f"    const skelpy_index_point {name} = "
                                f"{{{name}_r, {name}_c, {name}_r, {name}_c}};")
            else:
                acc: Accessor = k
                if ptr and tname in _C_TYPES:
                    self._check_type(name, decl, np.dtype(_C_TYPES[tname]), acc)
                fp64 |= acc.dtype == FLOAT64
                c_params.extend(acc.declarations(name))
                fmt = {"name": name, "ctype": c_type(acc.dtype),
                       "stype": storage_c_type(acc.dtype),
                       "i0": "((long)(i0))", "i1": "((long)(i1))"}
                macros.append(f"#define SKELPY_GET_{name}(i0, i1) {acc.read.format(**fmt)}")
                undefs.append(f"#undef SKELPY_GET_{name}")
                bounds = acc.index_bounds(name)
                if bounds is not None and (checks == ALL or (checks == OFFSETS and acc.offsets)):
                    checked_reads[name] = acc
                    macros.append(_checked_macro(name, acc, fmt, bounds))
                    undefs.append(f"#undef SKELPY_GETC_{name}")
                for key, mac in (("len", "LEN"), ("shape0", "ROWS"), ("shape1", "COLS")):
                    if key in acc.attrs:
                        macros.append(f"#define SKELPY_{mac}_{name} "
                                      f"({acc.fill(acc.attrs[key], name)})")
                        undefs.append(f"#undef SKELPY_{mac}_{name}")
        out_dtype = out if out is not None else self.ret_dtype
        # rename functions: entry -> c_name, others -> c_name_<name>
        s = self.clean
        e = self.entry
        body = s[e.body_start: e.body_end + 1]
        if checked_reads:
            body = self._checked_body(body, checked_reads)
        checked = "SKELPY_GET_AT" in body or "SKELPY_GET2_AT" in body
        if checked:
            c_params.insert(0, DEBUG_PARAM)
        if prologue:
            body = "{\n" + "\n".join(prologue) + body[1:]
        entry_src = (f"static inline {c_type(out_dtype)} {c_name}({', '.join(c_params) or 'void'}) "
                     f"{body}")
        text = s[: e.start] + "\x00ENTRY\x00" + s[e.body_end + 1:]
        names = {f.name for f in self.funcs}
        for f in sorted(names, key=len, reverse=True):
            new = c_name if f == e.name else f"{c_name}_{f}"
            pat = re.compile(rf"\b{re.escape(f)}\b(?=\s*\()")
            text = pat.sub(new, text)
            entry_src = pat.sub(new, entry_src)
        if checked:
            entry_src += "\n" + redirect(c_name, len(c_params) - 1)
        text = text.replace("\x00ENTRY\x00", entry_src)
        fp64 |= out_dtype == FLOAT64 or bool(re.search(r"\bdouble\b", text))
        parts = []
        if fp64 and "cl_khr_fp64" not in text:
            parts.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n")
        if any(isinstance(k, IndexPoint) for k in kinds):
            parts.append("#ifndef SKELPY_INDEX_POINT\n#define SKELPY_INDEX_POINT\n"
                         "typedef struct { long row, col, y, x; } skelpy_index_point;\n#endif\n")
        if macros:
            parts.append("#ifndef SKELPY_GET\n#define SKELPY_GET(p, i) SKELPY_GET_##p(i, 0)\n"
                         "#define SKELPY_GET2(p, i, j) SKELPY_GET_##p(i, j)\n"
                         "#define SKELPY_LEN(p) SKELPY_LEN_##p\n"
                         "#define SKELPY_ROWS(p) SKELPY_ROWS_##p\n"
                         "#define SKELPY_COLS(p) SKELPY_COLS_##p\n#endif\n")
            if checked:
                clib = CLib()
                clib.check()
                parts.append(clib.source() + _CHECKED_GET)
            parts.append("\n".join(macros) + "\n")
        parts.append(text.strip() + "\n")
        if undefs:
            parts.append("\n".join(undefs) + "\n")
        accesses, bounds = self._accesses(kinds)
        return TypedMuscle(
            c_name=c_name, source="".join(parts), c_params=c_params, out_dtype=out_dtype,
            scalar_dtypes=scalar_dtypes, uses_fp64=fp64, features=self._features(kinds),
            accesses=accesses, access_bounds=bounds, kinds=tuple(kinds), origin=self.origin,
            name=self.name, param_names=list(self.param_names), checked=checked)

    def _checked_body(self, body: str, accessors: dict[str, Accessor]) -> str:
        """The entry's body with each ``SKELPY_GET(p, ...)``/``SKELPY_GET2(p, ...)`` of a
        checked accessor ``p`` rewritten to carry the sites of its indices (checks.py)."""
        out, last = [], 0
        pattern = re.compile(r"\bSKELPY_GET(2?)\s*\(\s*([A-Za-z_]\w*)\s*,")
        for m in pattern.finditer(body):
            acc = accessors.get(m.group(2))
            if acc is None:
                continue
            args = _macro_args(body, m.end())
            n_idx = min(acc.ndim, len(args)) if m.group(1) else 1
            text = f"SKELPY_GET{m.group(1)}({m.group(2)}, {', '.join(a.strip() for a in args)})"
            cline = self.src.count("\n", 0, self.entry.body_start + m.start()) + 1
            where = f"{self.file}:{self.line} ({self.name}, C line {cline})"
            labels = ("row offset", "column offset") if acc.offsets else (
                ("index",) if acc.ndim == 1 else ("row index", "column index"))
            what = f"the neighbourhood '{m.group(2)}'" if acc.offsets else f"'{m.group(2)}'"
            sites = [register(Site(where, text, labels[j], what, acc.offsets))
                     for j in range(n_idx)] + [0] * (2 - n_idx)
            out.append(body[last:m.start()])
            out.append(f"SKELPY_GET{m.group(1)}_AT({m.group(2)}, {sites[0]}L, {sites[1]}L,")
            last = m.end()
        out.append(body[last:])
        return "".join(out)

    def _check_type(self, name: str, decl: str, declared: np.dtype, kind) -> None:
        """C never converts behind the user's back here: a parameter declared with another
        type than the values it receives is a DTypeError naming both (a float64 array given
        to ``float func(float x)`` would otherwise be rounded to float32 silently). Python
        numbers (weak, NEP 50) may go to any parameter of their kind or wider: bool to any,
        int to an integer or float, float to a float. Element pointers of bool data may be
        declared ``bool*`` or ``uchar*`` (its storage)."""
        got = np.dtype(kind.dtype)
        if getattr(kind, "weak", False):
            ok = got.kind == "b" or declared.kind == "f" or (
                got.kind == "i" and declared.kind in "iu")
        else:
            ok = declared == got or (isinstance(kind, Accessor) and got == np.bool_
                                     and declared == np.uint8)
        if ok:
            return
        if getattr(kind, "weak", False):
            py = {"f": "float", "i": "int"}.get(got.kind, "bool")
            fix = (f"pass a value of its type (np.{declared.name}(...)) or declare it "
                   f"'{c_type(got)}'")
            what = f"a Python {py}"
        else:
            what = f"{got} {'elements' if isinstance(kind, Accessor) else 'values'}"
            fix = (f"declare it '{c_type(got)}{'*' if isinstance(kind, Accessor) else ''}', "
                   f"or convert the data first (x.astype(np.{declared.name}))")
        raise DTypeError(
            f"{self.origin}: parameter '{name}' is declared '{decl.strip()}' ({declared}) but "
            f"receives {what}; OpenCL C muscles are not converted implicitly: {fix}")

    def _accesses(self, kinds):
        accesses: dict = {}
        bounds: dict = {}
        s = self.clean
        for i, ((name, *_), k) in enumerate(zip(self.params, kinds)):
            if not isinstance(k, Accessor):
                continue
            uses = len(re.findall(rf"\b{re.escape(name)}\b", s)) - 1  # minus the declaration
            calls = list(re.finditer(rf"\bSKELPY_GET(2?)\s*\(\s*{re.escape(name)}\s*,", s))
            reads = []
            ok = len(calls) == uses
            for m in calls:
                args = _macro_args(s, m.end())
                vals = []
                for a in args:
                    try:
                        vals.append(int(a.replace("(", "").replace(")", "").replace(" ", "")))
                    except ValueError:
                        ok = False
                        vals.append(None)
                if not m.group(1):
                    vals = vals[:1] + ([0] if k.ndim == 2 else [])
                reads.append(tuple(vals[: k.ndim]))
            if ok and all(None not in r and len(r) == k.ndim for r in reads):
                accesses[i] = list(dict.fromkeys(reads))
                bounds[i] = (tuple((min(r[d] for r in reads), max(r[d] for r in reads))
                                   for d in range(k.ndim)) if reads else ((0, 0),) * k.ndim)
            else:
                accesses[i], bounds[i] = None, None
        return accesses, bounds

    def _features(self, kinds) -> dict[str, float]:
        body = self.clean
        fc = FeatureCounter()
        cnt = {
            "ops_add": len(re.findall(r"(?<![+\-=<>!&|*/%^])[+\-](?![+\-=])", body)),
            "ops_mul": len(re.findall(r"(?<![/*])\*(?![=/*])", body)),
            "ops_div": len(re.findall(r"[/%](?![=/*])", body)),
            "ops_cmp": len(re.findall(r"==|!=|<=|>=|(?<![<-])<(?![<=])|(?<![>-])>(?![>=])",
                                      body)),
            "ops_logic": len(re.findall(r"&&|\|\||!(?!=)", body)),
            "ops_math": len(_MATH.findall(body)),
            "branches": len(re.findall(r"\bif\b|\?", body)),
            "reads": len(re.findall(r"\bSKELPY_GET2?\s*\(", body)),
        }
        for key, n in cnt.items():
            fc.op(key, None, n=n)
        isf = any(getattr(k, "dtype", np.dtype(np.int32)).kind == "f" for k in kinds
                  if not isinstance(k, IndexPoint)) or self.ret_dtype.kind == "f"
        arith = cnt["ops_add"] + cnt["ops_mul"] + cnt["ops_div"] + cnt["ops_math"]
        fc.c["ops_float" if isf else "ops_int"] += arith
        loops = len(re.findall(r"\b(for|while)\b", body))
        for _ in range(loops):
            fc.enter_loop(None)
            fc.exit_loop()
        return fc.result()


def _checked_macro(name: str, acc: Accessor, fmt: dict, bounds) -> str:
    """``SKELPY_GETC_<name>(s0, s1, i0, i1)``: the read with its indices checked at sites
    s0, s1 (an array that may be empty reads 0 instead)."""
    fmt = dict(fmt)
    calls = []
    for j, (lo, hi) in enumerate(bounds):
        calls.append(check_call(f"((long)(i{j}))", lo, hi, f"(s{j})"))
        fmt[f"i{j}"] = f"({calls[-1]})"
    read = acc.read.format(**fmt)
    if not acc.offsets:
        nonempty = " && ".join(f"({hi}) > ({lo})" for lo, hi in bounds)
        read = f"(({nonempty}) ? {read} : ({', '.join(calls)}, ({c_type(acc.dtype)})0))"
    return f"#define SKELPY_GETC_{name}(s0, s1, i0, i1) {read}"


def _macro_args(s: str, pos: int) -> list[str]:
    """The remaining comma-separated arguments of a macro call whose first argument ended at pos."""
    args = []
    depth = 0
    cur = []
    i = pos
    while i < len(s):
        ch = s[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                args.append("".join(cur).strip())
                return args
            depth -= 1
        elif ch == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    return args
