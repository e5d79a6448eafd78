"""Containers: Vector and Matrix (data that moves between host and device only when needed)
and index spaces (indices without storage).

- :mod:`.container`: Vector, Matrix, and the helpers skeletons use;
- :mod:`.host_access`: element and slice reads and writes from the host, a Matrix's row;
- :mod:`.device_side`: the device buffer skeletons launch with, where the data is valid;
- :mod:`.array_surface`: their NumPy operators, protocols and reductions (forwarded to
  ``skelpy.array``);
- :mod:`.storage`: the host/device state of one container's data;
- :mod:`.selection`: which part of a container an index touches;
- :mod:`.index_spaces`: IndexVector and IndexMatrix;
- :mod:`.distributions`: how data is spread over a device group (single, block, copy, Overlap).
"""

from .array_surface import array_backend, set_array_backend
from .container import (
    Container,
    Matrix,
    Vector,
    as_container,
    empty_like_shape,
    storage_and_layout,
)
from .distributions import Distribution, Overlap, as_distribution
from .host_access import MatrixRow
from .index_spaces import IndexMatrix, IndexSpace, IndexVector

__all__ = ["Container", "Distribution", "IndexMatrix", "IndexSpace", "IndexVector", "Matrix",
           "MatrixRow", "Overlap", "Vector", "array_backend", "as_container", "as_distribution",
           "empty_like_shape", "set_array_backend", "storage_and_layout"]
