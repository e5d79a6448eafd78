"""What a skeleton call's arguments are, as kernels see them: inputs and extras.

*Inputs* are what a skeleton applies its muscle to element by element (Map, Zip, MapReduce):
a container, an ``IndexVector`` or an ``IndexMatrix``. Each kind is a small frozen type (one
object per kind, from :func:`input_kind`, compared by identity: a call's signature is cheap) that
says, once, how the muscle sees it (its parameter kinds), how the kernel declares it, how an
element is read (:meth:`read`, the one place a kernel's read of an input is written, so that a
future lazily fused expression can be read the same way) and which kernel arguments carry it.

*Extras* follow the inputs: numbers (Python ones are weak, NEP 50), NumPy scalars, or
containers the muscle reads by index.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..containers import Container, IndexMatrix, IndexSpace, IndexVector, as_container
from ..containers.index_spaces import IndexMatrixPart, IndexVectorPart
from ..containers.layout import is_contiguous
from ..dtypes import c_type, check_dtype, storage_c_type
from ..errors import DTypeError, DTypeOverflowError, ShapeError
from ..muscle.params import IndexPoint, Scalar, global_array

_INT64 = np.dtype(np.int64)

# -- inputs ------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class ContainerInput:
    """A Vector, Matrix or ndarray: the muscle sees one element (a scalar of its dtype)."""

    dtype: np.dtype
    ndim: int

    def muscle_kinds(self, split_index: bool = False) -> list:
        return [Scalar(self.dtype)]

    def declarations(self, k: int) -> list[str]:
        return [f"__global const {storage_c_type(self.dtype)}* restrict in{k}"]

    def read(self, k: int, index: str) -> str:
        """The C argument(s) of the muscle for element ``index`` of input ``k``."""
        return f"(({c_type(self.dtype)})in{k}[{index}])"

    def vector_load(self, k: int) -> str:
        """Declarations loading chunk ``j`` of SKP_VW elements (Map's vector path)."""
        st = storage_c_type(self.dtype)
        return f"{st} va{k}[SKP_VW]; SKP_VSTOREN(SKP_VLOADN(j, in{k}), 0, va{k});"

    def vector_read(self, k: int, index: str, component: str) -> str:
        """The muscle argument(s) for component ``component`` of the loaded chunk."""
        return f"(({c_type(self.dtype)})va{k}[{component}])"

    def kernel_args(self, value, rt) -> list:
        return [value.device_buffer(rt)]

    @property
    def data_dtype(self) -> np.dtype | None:
        """The element type the kernel loads (None for index spaces)."""
        return self.dtype


@dataclass(frozen=True, eq=False)
class IndexVectorInput:
    """``IndexVector(n)``: the muscle sees the index (int64), as over ``np.arange``."""

    def muscle_kinds(self, split_index: bool = False) -> list:
        return [Scalar(_INT64)]

    def declarations(self, k: int) -> list[str]:
        return []

    def read(self, k: int, index: str) -> str:
        return f"((long)({index}))"

    def vector_load(self, k: int) -> str:
        return ""

    def vector_read(self, k: int, index: str, component: str) -> str:
        return self.read(k, index)

    def kernel_args(self, value, rt) -> list:
        return []

    data_dtype = None


@dataclass(frozen=True, eq=False)
class IndexMatrixInput:
    """``IndexMatrix((rows, cols))``: the muscle sees ``row, col`` (two int64 parameters,
    when ``split_index``) or one index point."""

    def muscle_kinds(self, split_index: bool = False) -> list:
        return [Scalar(_INT64), Scalar(_INT64)] if split_index else [IndexPoint()]

    def declarations(self, k: int) -> list[str]:
        return ["const long idx_cols"]

    def read(self, k: int, index: str) -> str:
        row, col = self.row_col(index)
        return f"{row}, {col}"

    @staticmethod
    def row_col(index: str) -> tuple[str, str]:
        """C expressions of the row and column of a linear index: a 32-bit division where the
        index and cols fit (a 64-bit one is a long software routine on GPUs), the column from
        the row rather than from a second division."""
        i = f"((long)({index}))"
        row = (f"((((ulong){i} | (ulong)idx_cols) >> 32) == 0 "
               f"? (long)((uint){i} / (uint)idx_cols) : {i} / idx_cols)")
        return row, f"({i} - {row} * idx_cols)"

    def vector_load(self, k: int) -> str:
        return ""

    def vector_read(self, k: int, index: str, component: str) -> str:
        return self.read(k, index)

    def kernel_args(self, value, rt) -> list:
        return [np.int64(value.shape[1])]

    data_dtype = None


@dataclass(frozen=True, eq=False)
class IndexVectorPartInput(IndexVectorInput):
    """Part of an IndexVector on one device of a group: the index plus the part's start."""

    def declarations(self, k: int) -> list[str]:
        return [f"const long idx_start{k}"]

    def read(self, k: int, index: str) -> str:
        return f"((long)({index}) + idx_start{k})"

    def vector_read(self, k: int, index: str, component: str) -> str:
        return self.read(k, index)

    def kernel_args(self, value, rt) -> list:
        return [np.int64(value.start)]


@dataclass(frozen=True, eq=False)
class IndexMatrixPartInput(IndexMatrixInput):
    """Rows of an IndexMatrix on one device of a group: rows counted from the part's start."""

    def declarations(self, k: int) -> list[str]:
        return ["const long idx_cols", f"const long idx_start{k}"]

    def read(self, k: int, index: str) -> str:
        row, col = self.row_col(index)
        return f"{row} + idx_start{k}, {col}"

    def vector_read(self, k: int, index: str, component: str) -> str:
        return self.read(k, index)

    def kernel_args(self, value, rt) -> list:
        return [np.int64(value.shape[1]), np.int64(value.start)]


@dataclass(frozen=True, eq=False)
class ViewInput:
    """A view (``v[a:b]``, ``v[::2]``, ``m[:, j]``, ``m.T``, a broadcast row or column,
    ``containers.layout``): the muscle sees one element, read from the base's buffer at
    ``offset + row * s0 + col * s1``. ``dense``: the elements are consecutive (an offset
    alone), so vector loads still work; kernel arguments carry offset and strides, so one
    kernel serves every view of a kind."""

    dtype: np.dtype
    ndim: int
    dense: bool

    def muscle_kinds(self, split_index: bool = False) -> list:
        return [Scalar(self.dtype)]

    def declarations(self, k: int) -> list[str]:
        decls = [f"__global const {storage_c_type(self.dtype)}* restrict in{k}",
                 f"const long in{k}_o"]
        if not self.dense:
            decls.append(f"const long in{k}_s0")
            if self.ndim == 2:
                decls += [f"const long in{k}_s1", f"const long in{k}_c"]
        return decls

    def read(self, k: int, index: str) -> str:
        ct = c_type(self.dtype)
        if self.dense:
            return f"(({ct})in{k}[in{k}_o + ({index})])"
        if self.ndim == 1:
            return f"(({ct})in{k}[in{k}_o + ({index}) * in{k}_s0])"
        return (f"(({ct})in{k}[in{k}_o + (({index}) / in{k}_c) * in{k}_s0"
                f" + (({index}) % in{k}_c) * in{k}_s1])")

    def vector_load(self, k: int) -> str:
        if not self.dense:
            return ""
        st = storage_c_type(self.dtype)
        return f"{st} va{k}[SKP_VW]; SKP_VSTOREN(SKP_VLOADN(j, in{k} + in{k}_o), 0, va{k});"

    def vector_read(self, k: int, index: str, component: str) -> str:
        if not self.dense:
            return self.read(k, index)
        return f"(({c_type(self.dtype)})va{k}[{component}])"

    def kernel_args(self, value, rt) -> list:
        lay = value.layout
        args = [value.base_buffer(rt), np.int64(lay.offset)]
        if not self.dense:
            args.append(np.int64(lay.strides[0]))
            if self.ndim == 2:
                args += [np.int64(lay.strides[1]), np.int64(value.shape[1])]
        return args

    @property
    def data_dtype(self) -> np.dtype | None:
        return self.dtype


Input = (ContainerInput | IndexVectorInput | IndexMatrixInput | IndexVectorPartInput
         | IndexMatrixPartInput | ViewInput)


_INDEX_VECTOR = IndexVectorInput()
_INDEX_MATRIX = IndexMatrixInput()
_INDEX_VECTOR_PART = IndexVectorPartInput()
_INDEX_MATRIX_PART = IndexMatrixPartInput()
_CONTAINER_KINDS: dict[tuple, ContainerInput] = {}
_VIEW_KINDS: dict[tuple, ViewInput] = {}


def input_kind(value) -> Input:
    """The kind of an input (a container or an index space); one object per kind, so that a
    repeated call's signature hashes and compares fast."""
    if isinstance(value, IndexVector):
        return _INDEX_VECTOR_PART if isinstance(value, IndexVectorPart) else _INDEX_VECTOR
    if isinstance(value, IndexMatrix):
        return _INDEX_MATRIX_PART if isinstance(value, IndexMatrixPart) else _INDEX_MATRIX
    if isinstance(value, IndexSpace):
        raise DTypeError(f"unsupported index space {value!r}")
    key = (value.dtype, value.ndim)
    lay = getattr(value, "layout", None)
    if lay is not None:
        key = (*key, is_contiguous(lay, value.shape))
        kind = _VIEW_KINDS.get(key)
        if kind is None:
            kind = _VIEW_KINDS[key] = ViewInput(*key)
        return kind
    kind = _CONTAINER_KINDS.get(key)
    if kind is None:
        kind = _CONTAINER_KINDS[key] = ContainerInput(value.dtype, value.ndim)
    return kind


def input_muscle_kinds(inputs: Sequence[Input], extras: Sequence, n_params: int
                       ) -> tuple[list, int]:
    """The muscle's parameter kinds for ``inputs`` then ``extras``, and how many of them the
    inputs give. An IndexMatrix gives ``row, col`` when the muscle takes exactly two
    parameters besides the extras and the other inputs' elements, else one index point."""
    split = n_params == 2 + len(extras) + len(inputs) - 1
    kinds: list = []
    for inp in inputs:
        kinds += inp.muscle_kinds(split)
    n_from_inputs = len(kinds)
    kinds += [e.kind() for e in extras]
    return kinds, n_from_inputs


# -- extras ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalarArg:
    """A number passed by value; ``weak`` for Python numbers (NEP 50)."""

    dtype: np.dtype
    weak: bool

    def kind(self):
        return Scalar(self.dtype, weak=self.weak)


@dataclass(frozen=True)
class ArrayArg:
    """A container the muscle reads by index."""

    dtype: np.dtype
    ndim: int

    def kind(self):
        return global_array(self.dtype, self.ndim)


def classify_extra(value, origin: str, position: int):
    """Describe an extra (non-input) argument: (ScalarArg or ArrayArg, the value to pass)."""
    if isinstance(value, (bool, int, float)) and not isinstance(value, np.generic):
        if isinstance(value, bool):
            return ScalarArg(np.dtype(np.bool_), True), value
        if isinstance(value, int):
            return ScalarArg(np.dtype(np.int64), True), value
        return ScalarArg(np.dtype(np.float64), True), value
    if isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        dt = check_dtype(value.dtype, f"{origin}: extra argument {position}")
        return ScalarArg(dt, False), value
    if isinstance(value, (list, tuple)):
        value = np.asarray(value)
    if isinstance(value, (Container, np.ndarray)):
        what = f"{origin}: extra argument {position}"
        try:
            c = as_container(value, what)
        except (DTypeError, ShapeError) as exc:
            message = str(exc)
            raise type(exc)(message if message.startswith(origin) else f"{what}: {message}"
                            ) from None
        return ArrayArg(c.dtype, c.ndim), c
    if isinstance(value, IndexSpace):
        raise DTypeError(f"{origin}: extra argument {position} is an index space; index "
                         "spaces can only be the input of Map")
    raise DTypeError(f"{origin}: extra argument {position} has unsupported type "
                     f"{type(value).__name__} (use a number, NumPy scalar, Vector, Matrix "
                     "or ndarray)")


def classify_extras(values: Sequence, origin: str) -> tuple[list, list]:
    """:func:`classify_extra` over every extra argument: (descriptions, values)."""
    descs, vals = [], []
    for k, value in enumerate(values):
        d, v = classify_extra(value, origin, k + 1)
        descs.append(d)
        vals.append(v)
    return descs, vals


def scalar_value(value, dtype: np.dtype, origin: str = ""):
    """A Python/NumPy scalar as the kernel argument of ``dtype`` (bool travels as uchar)."""
    if dtype == np.bool_:
        return np.uint8(bool(value))
    if type(value) is int and dtype.kind in "iu" and not (
            np.iinfo(dtype).min <= value <= np.iinfo(dtype).max):
        # a Python int meets this integer type in the muscle: NumPy raises there (NEP 50)
        where = f"{origin}: " if origin else ""
        raise DTypeOverflowError(f"{where}Python integer {value} out of bounds for {dtype}, "
                                 "the type the muscle computes it in (as in NumPy)")
    try:
        with np.errstate(all="ignore"):
            return np.asarray(value).astype(dtype)[()]
    except (OverflowError, ValueError, TypeError) as exc:
        where = f"{origin}: " if origin else ""
        raise DTypeError(f"{where}cannot pass {value!r} as {dtype}: {exc}") from None


def scalar_converter(value, param_dtypes: Mapping[int, np.dtype], param: int, origin: str):
    """What :func:`scalar_value` does for an extra like ``value`` at muscle parameter
    ``param``, as one call of a NumPy type (repeat-call paths run it on every call)."""
    dt = param_dtypes.get(param)
    if dt is None:
        dt = classify_extra(value, origin, param)[0].dtype
    return _as_uchar if dt == np.bool_ else dt.type


def _as_uchar(v) -> np.uint8:
    return np.uint8(bool(v))


def extra_kernel_params(extras: Sequence, tm, first_param: int, prefix: str = "e"):
    """Kernel parameter declarations and the muscle call arguments for the extras.

    Returns (declarations, call arguments) where scalars arrive in their storage type and
    are cast to the muscle's type at the call."""
    decls, call = [], []
    for k, ex in enumerate(extras):
        name = f"{prefix}{k}"
        idx = first_param + k
        if isinstance(ex, ScalarArg):
            dt = tm.scalar_dtypes.get(idx, ex.dtype)
            decls.append(f"const {storage_c_type(dt)} {name}")
            call.append(f"(({c_type(dt)}){name})")
        else:
            acc = ex.kind()
            decls.extend(acc.declarations(name))
            call.extend(acc.arguments(name))
    return decls, call


def extra_kernel_args(extras: Sequence, values: Sequence, tm, first_param: int, rt,
                      origin: str = ""):
    """The kernel argument values matching :func:`extra_kernel_params` (Python ints computed
    from Python-int extras checked first, as NumPy would: ``TypedMuscle.check_python_ints``)."""
    tm.check_python_ints({first_param + k: v for k, v in enumerate(values)})
    out = []
    for k, (ex, v) in enumerate(zip(extras, values, strict=True)):
        if isinstance(ex, ScalarArg):
            out.append(scalar_value(v, tm.scalar_dtypes.get(first_param + k, ex.dtype), origin))
        else:
            out.append(v.device_buffer(rt))
            out.extend(np.int64(s) for s in v.shape)
    return out


def array_extra_dtypes(extras: Sequence) -> list[np.dtype]:
    """The element types of the extras read by index (the kernel loads them)."""
    return [e.dtype for e in extras if isinstance(e, ArrayArg)]
