"""The exception hierarchy.

Every misuse surfaces as a :class:`SkelpyError` subclass, and the message names the muscle
(function name and ``file:line``) so that the user can find the offending code quickly.
Subclasses also derive from the matching builtin (``TypeError``/``ValueError``) where that
helps code that already catches those.
"""

from __future__ import annotations


class SkelpyError(Exception):
    """Base class of every error skelpy raises on purpose."""


class TranslationError(SkelpyError):
    """A Python muscle uses a construct the translator cannot turn into OpenCL C."""

    def __init__(self, message: str, *, origin: str | None = None, construct: str | None = None):
        self.origin = origin
        self.construct = construct
        super().__init__(f"{origin}: {message}" if origin else message)


def numbered(source: str) -> str:
    """``source`` with line numbers, as compiler logs refer to them."""
    return "\n".join(f"{i + 1:5d} | {line}" for i, line in enumerate(source.splitlines()))


def build_report(message: str, source: str, log: str, options: str) -> str:
    """A message followed by the build options, the compiler's log and the numbered source."""
    return (f"{message}\n--- build options ---\n{options}\n--- build log ---\n{log.strip()}\n"
            f"--- generated source ---\n{numbered(source)}")


class BuildError(SkelpyError):
    """The OpenCL compiler rejected generated source; carries the numbered source and log."""

    def __init__(self, message: str, *, source: str = "", log: str = "", options: str = ""):
        self.source = source
        self.log = log
        self.options = options
        super().__init__(build_report(message, source, log, options))


class BuildWarning(UserWarning):
    """The OpenCL compiler accepted generated source with warnings (or, in debug mode, with
    any log): the warning's text carries the log and the numbered source."""


class LaunchError(SkelpyError):
    """A kernel launch failed for a reason other than a refused launch parameter."""


class ShapeError(SkelpyError, ValueError):
    """Containers of incompatible shapes, or a stencil access outside its declared shape."""


class DTypeError(SkelpyError, TypeError):
    """An unsupported dtype or argument type."""


class DTypeOverflowError(DTypeError, OverflowError):
    """A Python int outside the range of the dtype it meets (``int8_vector + 300``): NumPy's
    OverflowError, also a DTypeError."""


class DTypeValueError(DTypeError, ValueError):
    """A value NumPy rejects with ValueError for its dtype (NaN written into integers,
    integers to negative integer powers): also a DTypeError."""


class DTypeZeroDivisionError(DTypeError, ZeroDivisionError):
    """A Python int divided by zero in a muscle (``x8 + s // 0``): Python's
    ZeroDivisionError, also a DTypeError."""


def dtype_error_like(exc: BaseException) -> type[DTypeError]:
    """The DTypeError subclass that is also the builtin class of NumPy's error ``exc`` (so
    code catching NumPy's OverflowError or ValueError catches skelpy's)."""
    if isinstance(exc, OverflowError):
        return DTypeOverflowError
    if isinstance(exc, ValueError) and not isinstance(exc, TypeError):
        return DTypeValueError
    return DTypeError


class DeviceError(SkelpyError):
    """No usable OpenCL device, or the device lacks a needed capability (such as fp64)."""


class ParameterError(SkelpyError, ValueError):
    """Launch parameters (or ``iterations``) that are malformed, over a documented maximum,
    or illegal for this device and kernel; the message names the limit."""


class CallError(SkelpyError, TypeError):
    """A skeleton called with arguments its signature does not take (too many, too few, an
    unknown keyword)."""


class BoundsError(SkelpyError, IndexError):
    """An index outside what it indexes: a container index out of range, or (in debug mode,
    and for stencil offsets that are not compile-time constants) a read of a muscle outside
    its array or stencil shape; the message names the muscle's line, the read and the
    offending index."""


class RefusedParameters(LaunchError):
    """The runtime refused a launch because of its parameters (work-group size, resources)."""

    def __init__(self, message: str, *, params: dict | None = None, code: int | None = None):
        self.params = params
        self.code = code
        super().__init__(message)


class CollectiveError(SkelpyError):
    """Under MPI, ranks that did not do the same at a collective point: a write through a
    container on some ranks only, or different writes (every rank raises it)."""
