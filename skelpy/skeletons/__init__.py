"""The skeletons: one module per skeleton, and the pieces they share.

- ``base``: the :class:`~.base.Skeleton` class (muscle, plans, launching through the tuner,
  ``source()``, signature errors).
- ``plan``: the plan a skeleton builds per call signature (``Plan``; each skeleton declares
  its subclass: ``ElementwisePlan``, ``StencilPlan``, ...).
- ``kernel_source``: the one builder of program texts (``SourceBuilder`` -> frozen
  ``KernelSource``: text, fp64 need, cache key).
- ``arguments``: input kinds (container, index vector, index matrix) and extra arguments.
- ``limits``: the rules that make a launch point legal, skelpy's documented maxima, output
  size checks.
- ``elementwise`` (Map, Zip), ``reduce`` (Reduce, MapReduce) with ``reduce_plan``, ``scan``
  (Scan), ``allpairs`` (AllPairs); the folds share ``fold_common`` (identities, device limits
  of their work-groups) and ``fold_muscle`` (accumulator dtypes, what a fold muscle computes).
- ``stencil`` (Stencil) with ``stencil_shape`` (reach, borders), ``stencil_plan`` (its plan
  and launch space), ``stencil_launch`` (launching, iterations, repeats) and
  ``stencil_temporal`` (iterations in passes of several steps, on ``stencil_stream``);
  ``stencil_sequence`` (StencilSequence, ``a >> b``: staged, or fused into one kernel by
  ``stencil_fused``).
"""

from .allpairs import AllPairs
from .elementwise import Map, Zip
from .reduce import MapReduce, Reduce
from .scan import Scan
from .stencil import Stencil, StencilSequence
from .stencil_shape import Shape

__all__ = ["Map", "Zip", "Reduce", "MapReduce", "Scan", "AllPairs",
           "Stencil", "StencilSequence", "Shape"]
