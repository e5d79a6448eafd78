"""One module per skeleton; ``base`` holds what they share."""

from .allpairs import AllPairs
from .elementwise import Map, Zip
from .reduce import MapReduce, Reduce
from .scan import Scan
from .stencil import Shape, Stencil, StencilSequence

__all__ = ["Map", "Zip", "Reduce", "MapReduce", "Scan", "AllPairs",
           "Stencil", "StencilSequence", "Shape"]
