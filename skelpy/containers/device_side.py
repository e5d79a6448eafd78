"""What skeletons and the cost model ask of a container on the device side: its device buffer
(uploading or gathering a view's elements first), whether one exists, where the data is valid
now, and the note that a kernel wrote it.

This is the interface a skeleton launches through, apart from how users build and read
containers (:mod:`.container`, :mod:`.host_access`). :class:`DeviceSide` is a base of
:class:`~skelpy.containers.Container`.
"""

from __future__ import annotations

from .. import runtime as _rt
from . import layout as _layout
from .array_surface import array_backend


class DeviceSide:
    """The device-side interface of a container (a base of Container)."""

    __slots__ = ()

    def base_buffer(self, rt: _rt.Runtime | None = None):
        """The device buffer of the block a view reads (see :attr:`layout`)."""
        s = self._storage
        if s.device_valid and s.runtime is rt:
            return s.buffer
        return s.device_buffer(rt or _rt.current())

    def device_buffer(self, rt: _rt.Runtime | None = None):
        """The device buffer, uploading the host data first if it is newer (a view's
        elements are first copied into a block of their own, on the device)."""
        s = self._storage
        if self._layout is None:
            if s.device_valid and s.runtime is rt:
                return s.buffer
            return s.device_buffer(rt or _rt.current())
        if _layout.is_whole(self._layout, self._shape, s.shape):
            return self.base_buffer(rt)
        return array_backend().gather(self, rt or _rt.current())

    @property
    def has_device_buffer(self) -> bool:
        """Whether a device buffer exists (valid or not)."""
        return self._storage.buffer is not None

    @property
    def residence(self) -> tuple[bool, _rt.Runtime | None]:
        """Where the data is valid now: (on the host, the runtime of a valid device copy or
        None). The cost model prices a call's transfers from it."""
        s = self._storage
        return s.host is not None, (s.runtime if s.device_valid else None)

    def host_read_probe(self):
        """A function telling whether this container's data is valid on the host, that
        works after the container is gone (the cost model learns whether a caller read a
        result it dropped at once, as in ``f(a).to_numpy()``). It holds the data: drop it
        with the container."""
        s = self._storage
        return lambda: s.host is not None

    def mark_device_written(self) -> None:
        """A kernel wrote the device buffer: the host copy is now stale."""
        self._storage.device_written()
