"""One specialisation of a Python muscle, from its typed body to a :class:`TypedMuscle`.

The passes, in order (each in its own module, each reading what the previous one produced):

1. ``inference.py`` types the body for the parameter kinds (done once per kinds, by
   :class:`~.muscle.Muscle`, and handed in here as a :class:`~.typed.TypedBody`);
2. ``weak.py`` resolves the C type of every weak (Python) value for this output dtype
   (``host_ints.py`` keeps the Python ints computed from extras that a call checks);
3. ``cnames.py`` names every parameter and local in C;
4. ``emit.py`` writes the statements as C, once;
5. ``access.py`` finds what the accessor parameters read (for stencil shapes);
6. ``assemble.py`` puts the C function together and describes it.
"""

from __future__ import annotations

import numpy as np

from .access import analyse
from .assemble import assemble
from .cnames import c_names
from .emit import emit_body
from .host_ints import int_checks
from .inference import result_dtypes
from .typed import TypedBody
from .typed_muscle import TypedMuscle
from .weak import resolve_weak


def translate(body: TypedBody, out_override: np.dtype | None, c_name: str,
              checks: str | None = None) -> TypedMuscle:
    """C function ``c_name`` computing ``body`` (returning ``out_override`` if given), its
    reads checked at level ``checks`` (see checks.py)."""
    out_dtype, return_dtype = result_dtypes(body.ret_ty, out_override)
    weak = resolve_weak(body, c_name, return_dtype, checks)
    renamed = [n for n in body.scope.scalar_params if not body.is_direct_param(n)]
    names, incoming = c_names(c_name, body.function.param_names, body.kinds, body.var_types,
                              renamed)
    emitted = emit_body(body, weak, names, c_name, out_dtype, checks)
    tm = assemble(body, emitted, incoming, analyse(body))
    tm.int_checks = int_checks(body, weak.int_sites, weak.int_calls)
    return tm
