"""Index spaces: indices without storage; the kernel computes each index (Mandelbrot style)."""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError


class IndexSpace:
    """Indices without storage; Map over it sees each index (int64), as over ``np.arange``."""

    ndim = 0

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(np.int64)

    @property
    def size(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    def __len__(self) -> int:
        return self._shape[0]


class IndexVector(IndexSpace):
    ndim = 1

    def __init__(self, n: int):
        n = _as_size(n, "IndexVector")
        self._shape = (n,)

    def to_numpy(self) -> np.ndarray:
        return np.arange(self._shape[0], dtype=np.int64)

    def __repr__(self) -> str:
        return f"IndexVector({self._shape[0]})"

    def rows(self, lo: int, hi: int) -> IndexVectorPart:
        """Indices lo..hi-1 of this space (its part on one device of a group)."""
        return IndexVectorPart(lo, hi - lo)


class IndexMatrix(IndexSpace):
    """Map over it calls the muscle with (row, col), or with one index point ``p``
    (``p[0]``/``p.row``, ``p[1]``/``p.col``)."""

    ndim = 2

    def __init__(self, shape: tuple[int, int]):
        try:
            rows, cols = shape
        except (TypeError, ValueError):
            raise ShapeError(f"IndexMatrix needs (rows, cols), got {shape!r}") from None
        self._shape = (_as_size(rows, "IndexMatrix"), _as_size(cols, "IndexMatrix"))

    def to_numpy(self) -> np.ndarray:
        r, c = np.indices(self._shape, dtype=np.int64)
        return np.stack([r, c], axis=-1)

    def __repr__(self) -> str:
        return f"IndexMatrix({self._shape})"

    def rows(self, lo: int, hi: int) -> IndexMatrixPart:
        """Rows lo..hi-1 of this space (its part on one device of a group)."""
        return IndexMatrixPart(lo, (hi - lo, self._shape[1]))


class IndexVectorPart(IndexVector):
    """Indices ``start``.. ``start + n - 1``: part of an IndexVector on one device of a group
    (Map sees the indices of the whole space)."""

    def __init__(self, start: int, n: int):
        super().__init__(n)
        self.start = int(start)

    def to_numpy(self) -> np.ndarray:
        return np.arange(self.start, self.start + self._shape[0], dtype=np.int64)

    def __repr__(self) -> str:
        return f"IndexVector({self.start}:{self.start + self._shape[0]})"


class IndexMatrixPart(IndexMatrix):
    """Rows ``start``.. of an IndexMatrix: its part on one device of a group."""

    def __init__(self, start: int, shape: tuple[int, int]):
        super().__init__(shape)
        self.start = int(start)

    def to_numpy(self) -> np.ndarray:
        out = super().to_numpy()
        out[..., 0] += self.start
        return out

    def __repr__(self) -> str:
        return f"IndexMatrix(rows {self.start}:{self.start + self._shape[0]}, {self._shape[1]})"


def _as_size(n, what: str) -> int:
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ShapeError(f"{what}: size must be a non-negative int, got {n!r}")
    return int(n)
