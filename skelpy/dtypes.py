"""NumPy dtypes <-> OpenCL C types.

bool is stored as ``uchar`` on the device (OpenCL forbids ``bool`` in buffers and kernel
arguments) but is computed with as a C ``bool`` inside muscles.
"""

from __future__ import annotations

import numpy as np

from .errors import DTypeError

_C_NAMES = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "char",
    np.dtype(np.uint8): "uchar",
    np.dtype(np.int16): "short",
    np.dtype(np.uint16): "ushort",
    np.dtype(np.int32): "int",
    np.dtype(np.uint32): "uint",
    np.dtype(np.int64): "long",
    np.dtype(np.uint64): "ulong",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
}

SUPPORTED_DTYPES: tuple[np.dtype, ...] = tuple(_C_NAMES)


def check_dtype(dtype, what: str = "data") -> np.dtype:
    """Return ``dtype`` as a supported ``np.dtype`` or raise :class:`DTypeError`."""
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise DTypeError(f"{what}: {dtype!r} is not a NumPy dtype") from exc
    dt = dt.newbyteorder("=") if dt.byteorder not in "=|" else dt
    if dt not in _C_NAMES:
        names = ", ".join(str(d) for d in SUPPORTED_DTYPES)
        raise DTypeError(f"{what}: dtype {dt} is not supported (supported: {names})")
    return dt


def c_type(dtype) -> str:
    """The C type used for values of ``dtype`` inside kernels and muscles."""
    return _C_NAMES[check_dtype(dtype)]


def storage_dtype(dtype) -> np.dtype:
    """The dtype of the device buffer holding ``dtype`` (bool -> uint8)."""
    dt = check_dtype(dtype)
    return np.dtype(np.uint8) if dt == np.bool_ else dt


def storage_c_type(dtype) -> str:
    """The C type of buffer elements and kernel arguments for ``dtype``."""
    return _C_NAMES[storage_dtype(dtype)]


def is_fp64(dtype) -> bool:
    return np.dtype(dtype) == np.float64


def is_float(dtype) -> bool:
    return np.dtype(dtype).kind == "f"


def is_integer(dtype) -> bool:
    return np.dtype(dtype).kind in "iu"
