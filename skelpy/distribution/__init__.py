"""Skeletons on several devices at once (SkelCL's distributions), in one process.

- :mod:`.exchange`: the one interface through which parts talk (moves of rows, small
  collectives, host gathers), and its in-process implementation over pinned host memory;
- :mod:`.pinned`: that pinned memory and its pool (the MPI exchange's too);
- :mod:`.parts`: a container's data spread over a group, and redistribution;
- :mod:`.elementwise`, :mod:`.reduce`, :mod:`.scan`, :mod:`.allpairs`, :mod:`.stencil`: each
  skeleton's run on a group.

The distributions themselves are a property of containers (:mod:`skelpy.containers.
distributions`). Skeletons call here when the runtime in use belongs to a group.
"""

from ..containers import Container
from .exchange import exchange_of
from .parts import Part, Parts, distributed


def _redistribute(container: Container, group, dist) -> Parts:
    """``container.redistribute(dist)`` on ``group``: one call of the group's exchange (under
    MPI every rank redistributes together, and a failure or a different distribution on one
    rank raises on all)."""
    with exchange_of(group).call("redistribute", (container, dist)):
        return distributed(container, group, dist)


# Container.redistribute() spreads a container through this (containers do not import us).
Container.distributor = staticmethod(_redistribute)

__all__ = ["Part", "Parts", "distributed"]
