"""Containers: Vector and Matrix (data that moves between host and device only when needed)
and index spaces (indices without storage).

- :mod:`.container`: Vector, Matrix, a Matrix's row, and the helpers skeletons use;
- :mod:`.array_surface`: their NumPy operators, protocols and reductions (forwarded to
  ``skelpy.array``);
- :mod:`.storage`: the host/device state of one container's data;
- :mod:`.selection`: which part of a container an index touches;
- :mod:`.index_spaces`: IndexVector and IndexMatrix.
"""

from .array_surface import array_backend, set_array_backend
from .container import (
    Container,
    Matrix,
    MatrixRow,
    Vector,
    as_container,
    empty_like_shape,
)
from .index_spaces import IndexMatrix, IndexSpace, IndexVector

__all__ = ["Container", "IndexMatrix", "IndexSpace", "IndexVector", "Matrix", "MatrixRow",
           "Vector", "array_backend", "as_container", "empty_like_shape", "set_array_backend"]
