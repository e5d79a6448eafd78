"""C identifiers for the names of a Python muscle.

Python names become C names unchanged where that is safe; names that are C keywords, OpenCL
builtins, non-ASCII or that could clash with skelpy's own names get a ``v_`` prefix, and a name
whose C spelling is taken (by the function itself, another parameter, or the extra C names
an accessor parameter brings, such as ``x_n``) is extended with ``_`` until it is free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from .params import Accessor, IndexPoint

C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
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


def c_ident(name: str) -> str:
    """An ASCII C identifier fragment for a Python name."""
    out = "".join(c if (c.isascii() and (c.isalnum() or c == "_")) else f"u{ord(c):x}"
                  for c in name)
    return out or "f"


def safe_name(name: str) -> str:
    """``name`` itself where it is a safe C name, else ``v_`` + its ASCII spelling."""
    if _SAFE_NAME.match(name) and name not in RESERVED and not name.startswith("skelpy"):
        return name
    return "v_" + c_ident(name)


def c_names(c_name: str, param_names: list[str], kinds: tuple, local_names: Iterable[str],
            renamed_params: Iterable[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(C name of every parameter and local, C name of the incoming value of each parameter in
    ``renamed_params``: a Scalar parameter whose local copy has another type than the value
    passed, so the function declares ``<name>_in`` and converts it once)."""
    taken = {c_name}
    names: dict[str, str] = {}

    def fresh(base: str, suffixes=("",)) -> str:
        while any(base + s in taken or base + s in RESERVED for s in suffixes):
            base += "_"
        for s in suffixes:
            taken.add(base + s)
        return base

    for name, k in zip(param_names, kinds):
        base = safe_name(name)
        if isinstance(k, Accessor):
            probe = [d[len(base):] for d in k.arguments(base)]
            names[name] = fresh(base, tuple(probe))
        elif isinstance(k, IndexPoint):
            names[name] = fresh(base, ("_r", "_c"))
        else:
            names[name] = fresh(base)
    for name in sorted(local_names):
        if name not in names:
            names[name] = fresh(safe_name(name))
    incoming = {name: fresh(names[name] + "_in") for name in renamed_params}
    return names, incoming
