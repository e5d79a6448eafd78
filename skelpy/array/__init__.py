"""Containers as device arrays: NumPy operators, ufuncs, views and broadcasting, fused
lazily into single kernels.

``a * x + y``, ``np.sin(v)``, ``v == w``, ``sk.where(c, a, b)`` on Vectors and Matrices build a
*pending* value (``expression``: dtypes, errors and broadcasting checked at once, as NumPy
does); the graph of pending values (``graph``) is compiled into ONE kernel (``fusion``) when its
value is needed: read, passed to a skeleton, reduced (``reductions``: the expression becomes
the map of a MapReduce), or ``sk.evaluate(z)``. Views (``m.T``, ``m[3:20, 2:11]``,
``v[::2]``, ``reshape``) are read in place by kernels; writes through them run on the device
(``views``). ``protocol`` is the backend the containers call, including NumPy's
``__array_ufunc__``/``__array_function__`` and the host fallback (with a
:class:`HostFallbackWarning`) for what has no device version. ``chains``: inside
``with sk.lazy():`` Map/Zip results are pending too, and ``Reduce`` of a pending value is
one MapReduce kernel.
"""

from __future__ import annotations

from ..containers import set_array_backend
from . import fusion
from .chains import lazy
from .expression import evaluate
from .protocol import ArrayBackend, HostFallbackWarning

set_array_backend(ArrayBackend())


def where(condition, x, y):
    """``np.where(condition, x, y)`` elementwise on the device (a pending value)."""
    from .protocol import _where
    return _where(condition, x, y)


def last_skeleton():
    """The skeleton that ran (or was built for) the latest array expression: its
    ``last_launch`` and ``source(*args)`` show what ran, which nodes fused included (the
    fused muscle's first line is the expression)."""
    return fusion.LAST.skeleton


__all__ = ["HostFallbackWarning", "evaluate", "last_skeleton", "lazy", "where"]
