"""Muscle functions: user code (a Python subset, or OpenCL C) translated to typed OpenCL C.

``Muscle(fn)`` parses once (and is cached per function); ``Muscle.specialise(kinds,
out_dtype, c_name)`` gives a :class:`TypedMuscle`: C source, C parameter list, NumPy result
dtype, the dtypes the caller passes for scalars, static features for the tuner and, for
stencils, the accessor offsets read (with the line of each read) and the loops with a
constant trip count (which a skeleton may unroll).

A Python muscle goes through these passes, one module each, read top to bottom:

==================  =========================================================================
``source.py``       the function's AST (lambdas found by line and bytecode positions)
``symbols.py``      what each name means: a parameter, a local, a captured constant or table,
                    a math/NumPy function, a cast, a helper function
``inference.py``    the typed body (``typed.py``): every expression annotated with its type,
                    constant value and meaning (``infer_exprs.py``, ``infer_calls.py``);
                    locals get one type, a fixed point; cached per parameter kinds
``definite.py``     every local read has a value on every path reaching it (else an error)
``weak.py``         which C type each weak (Python) value is computed in: the context every
                    operand is computed in, and a fixed point for weak variables
``cnames.py``       C names for parameters and locals
``emit.py``         the statements as C, in one pass (operations in ``c_ops.py``, NumPy's
                    semantics where C differs in ``clib.py``, features in ``features.py``)
``access.py``       which accessor elements the body reads (stencil shapes)
``assemble.py``     the C function and its :class:`TypedMuscle` (``typed_muscle.py``)
==================  =========================================================================

Reads may be checked at run time (``checks.py``: debug mode, and stencil offsets known only
at run time). ``translate.py`` runs the passes; ``muscle.py`` holds :class:`Muscle` (and
``captures.py`` what its translations captured); ``cmuscle.py`` handles OpenCL C source
muscles; ``params.py`` the parameter kinds skeletons describe; ``dtyping.py`` NumPy
promotion with weak scalars; ``funcs.py`` the callable functions. The passes reach called
functions through the :class:`Muscle` objects the typed body holds, never by importing
``muscle.py``: the package has no import cycle.

Semantics follow NumPy 2 (NEP 50) on NumPy scalars; where they cannot, or where we chose
speed or simplicity, the translator does the following (by design, not by accident):

- Weak (Python) values take the type of the strong value their expression finally meets:
  in ``x * (a + 1.0)`` with float32 ``x`` and a Python float ``a``, ``a + 1.0`` is computed in
  float32 (NumPy would compute it in double, then round).  A weak value that meets only weak
  values is float64/int64/bool.  Python ints are computed in 64 bits.
- Locals have one type for the whole body: the promotion of everything assigned to them.
- ``a and b`` / ``a or b`` give a bool (not one of the operands).
- ``math.*`` on NumPy values follows the NumPy ufunc's dtype rule (``math.sqrt(float32)`` is
  float32, ``math.floor(float32)`` is float32); on Python values it stays Python (weak).
  NumPy results of float16 (e.g. ``np.sqrt(int8)``) are computed in float32.
- Integer ``//``, ``%`` and ``np.fmod`` by zero give 0 (NumPy's value), also for Python ints;
  ``int ** negative int`` at run time gives 1/x truncated (a constant one is an error, as in
  NumPy); a weak int converted to a narrower dtype at run time wraps (NumPy would raise).
- Neighbourhood indices are offsets: ``nb[-1, 0]`` is the neighbour above, never Python's
  "last element". Indices into arrays and rows (extras, AllPairs rows) count from the end when
  they are negative constants (``t[-1]``), as in Python; computed indices must lie in range
  (checked in debug mode, ``checks.py``). Captured tuples/arrays wrap negative indices as
  Python does; a constant index out of their range is a TranslationError.
- Float-to-int conversion of NaN/out-of-range values is what the device does (as in C).
  The OpenCL compiler may contract ``a * b + c`` into an fma (OpenCL's default).
- Captured globals, closure values, module attributes and captured sequences are written
  into the translation; a changed one (``captures.py``) makes the next call translate again.
"""

from .muscle import Muscle
from .params import Accessor, IndexPoint, Scalar, global_array, scalar_arguments
from .typed_muscle import TypedMuscle

__all__ = ["Accessor", "IndexPoint", "Muscle", "Scalar", "TypedMuscle", "global_array",
           "scalar_arguments"]
