"""skelpy: algorithmic skeletons for OpenCL, with an embedded autotuner.

Write a small Python function (the *muscle*), hand it to a skeleton, and call the skeleton on
lazy :class:`Vector`/:class:`Matrix` containers; skelpy generates, compiles, tunes and
launches the OpenCL kernel. See the README for a tour.
"""

from __future__ import annotations

from .array import HostFallbackWarning, evaluate, lazy, where
from .containers import Distribution, IndexMatrix, IndexVector, Matrix, Overlap, Vector
from .debug import debug
from .errors import (
    BoundsError,
    BuildError,
    BuildWarning,
    CallError,
    DeviceError,
    DTypeError,
    LaunchError,
    ParameterError,
    RefusedParameters,
    ShapeError,
    SkelpyError,
    TranslationError,
)
from .runtime import Device, current_device, current_devices, devices, use
from .skeletons import (
    AllPairs,
    Map,
    MapReduce,
    Reduce,
    Scan,
    Shape,
    Stencil,
    StencilSequence,
    Zip,
)
from .tuner import tuning

__version__ = "0.1.0"

__all__ = [
    "Vector", "Matrix", "IndexVector", "IndexMatrix", "Overlap", "Distribution",
    "Map", "Zip", "Reduce", "MapReduce", "Scan", "AllPairs",
    "Stencil", "StencilSequence", "Shape",
    "devices", "use", "current_device", "current_devices", "Device", "tuning", "debug",
    "SkelpyError", "TranslationError", "BuildError", "LaunchError", "ShapeError",
    "DTypeError", "DeviceError", "ParameterError", "RefusedParameters", "CallError",
    "BoundsError", "BuildWarning",
    "evaluate", "lazy", "where", "HostFallbackWarning",
]
