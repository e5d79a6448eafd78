"""The C function around an emitted body, and the :class:`TypedMuscle` that describes it.

The source is, in order: the ``cl_khr_fp64`` pragma (when a float64 value exists), the C
helpers of ``clib.py`` the body uses, the ``__constant`` tables of captured sequences, the
called functions (each a complete specialisation of its own), and the function itself:
its parameters (after the check buffer, when reads are checked: see checks.py), the
declarations of every local (initialised to 0; ``definite.py`` made sure no path reads one
before assigning it), the body, and for a checked function the macro that passes the check
buffer on. Helpers and tables are guarded with ``#ifndef`` so that several muscles
can share one program.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import c_type, storage_dtype
from . import checks
from .access import Accesses
from .dtyping import FLOAT64, c_literal, convert_constant
from .emit import EmitContext
from .params import Accessor, IndexPoint
from .typed import TypedBody
from .typed_muscle import ConstantLoop, TypedMuscle

FP64_PRAGMA = "#pragma OPENCL EXTENSION cl_khr_fp64 : enable\n"
# Python muscles compute operation by operation, as NumPy does: no a*b+c -> fma. The pragma
# sits inside the body so that it does not reach the skeleton's own code.
NO_CONTRACTION = "#pragma OPENCL FP_CONTRACT OFF"


def assemble(body: TypedBody, emitted: EmitContext, incoming: dict[str, str],
             accesses: Accesses) -> TypedMuscle:
    """The TypedMuscle of an emitted body (``incoming``: see :func:`.cnames.c_names`)."""
    weak, code, names = emitted.weak, emitted.code, emitted.names
    c_name, out_dtype = emitted.c_name, emitted.out_dtype
    function = body.function
    decls = []
    c_params = []
    scalar_dtypes: dict[int, np.dtype] = {}
    for i, name in enumerate(function.param_names):
        k = body.kinds[i]
        cn = names[name]
        if isinstance(k, Accessor):
            c_params.extend(k.declarations(cn))
            if k.dtype == FLOAT64:
                code.fp64 = True
        elif isinstance(k, IndexPoint):
            c_params.extend(t.format(name=cn) for t in k.c_params)
        else:
            dt = weak.param_dtype(name)
            code.note(dt)
            scalar_dtypes[i] = dt
            if name in incoming:
                c_params.append(f"{c_type(dt)} {incoming[name]}")
                local = weak.storage(name)
                decls.append(f"    {c_type(local)} {cn} = {code.cast(incoming[name], dt, local)};")
            else:
                c_params.append(f"{c_type(dt)} {cn}")
    for name in sorted(body.var_types):
        if name in body.scope.scalar_params:
            continue
        dt = weak.storage(name)
        code.note(dt)
        decls.append(f"    {c_type(dt)} {names[name]} = {c_literal(0, dt)};")
    code.note(out_dtype)
    arrays = []
    for arr in emitted.used_arrays.values():
        dt = weak.array_dtype(arr)
        code.note(dt)
        sdt = storage_dtype(dt)
        vals = ", ".join(c_literal(convert_constant(v, dt), sdt) for v in arr.values)
        name = emitted.array_name(arr)
        arrays.append(f"#ifndef SKELPY_CONST_{name}\n#define SKELPY_CONST_{name}\n"
                      f"__constant {c_type(sdt)} {name}[{len(arr.values)}] = {{{vals}}};\n"
                      "#endif\n")
    parts = [FP64_PRAGMA] if code.fp64 else []
    parts.append(code.clib.source())
    parts.extend(arrays)
    loops: list[ConstantLoop] = []
    at = sum(len(p) for p in parts)
    for cname, tm in emitted.helpers.items():
        guard = f"#ifndef SKELPY_FN_{cname}\n#define SKELPY_FN_{cname}\n"
        _shift_loops(loops, tm.constant_loops, at + len(guard))
        part = f"{guard}{tm.source}#endif\n"
        parts.append(part)
        at += len(part)
    redirect = ""
    if emitted.checked:                 # reads checked: the check buffer comes first
        redirect = checks.redirect(c_name, len(c_params))
        c_params.insert(0, checks.DEBUG_PARAM)
    head = f"static inline {c_type(out_dtype)} {c_name}({', '.join(c_params) or 'void'}) {{\n"
    lines = [NO_CONTRACTION] + decls + emitted.lines
    starts = [at + len(head)]
    for ln in lines:
        starts.append(starts[-1] + len(ln) + 1)
    first = len(loops)
    skipped = 1 + len(decls)
    for rec in emitted.loops:
        loops.append(ConstantLoop(starts[skipped + rec.line], rec.trips,
                                  None if rec.parent is None else first + rec.parent))
    parts.append(head + "\n".join(lines) + "\n}\n" + redirect)
    return TypedMuscle(
        c_name=c_name, source="".join(parts), c_params=c_params, out_dtype=out_dtype,
        scalar_dtypes=scalar_dtypes, uses_fp64=code.fp64, features=code.features.result(),
        accesses=accesses.offsets, access_bounds=accesses.bounds, kinds=body.kinds,
        origin=function.origin, name=function.name, param_names=list(function.param_names),
        constant_loops=tuple(loops), read_sites=accesses.sites, checked=emitted.checked)


def _shift_loops(loops: list[ConstantLoop], inner: tuple[ConstantLoop, ...], at: int) -> None:
    """Append a called function's loops, placed at offset ``at`` of the source."""
    first = len(loops)
    for lp in inner:
        loops.append(ConstantLoop(lp.offset + at, lp.trips,
                                  None if lp.parent is None else first + lp.parent))
