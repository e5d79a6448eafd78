"""The MPI device group: every rank of ``COMM_WORLD``, one device each, this process driving
its own rank's (the others' are :class:`RemoteDevice` descriptions, so that
``sk.current_devices()`` shows the whole group and the tuner can read the first rank's)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..containers import Container
from ..device_groups import Group
from ..errors import DeviceError

__all__ = ["MPIGroup", "RemoteDevice", "open_group"]

# what a RemoteDevice copies from the rank that has the device (Device's cached properties)
_DESCRIBED = ("name", "platform", "kind", "key", "short_key", "has_fp64", "max_work_group_size",
              "max_work_item_sizes", "local_mem_size", "max_alloc_size", "compute_units",
              "ordinal", "features")


@dataclass(eq=False)
class MPIGroup(Group):
    """A device group over MPI ranks: ``runtimes[r]`` is None for every rank but this
    process's ``rank``; ``comm`` is the communicator (COMM_WORLD); ``kind`` the spec's kind."""

    comm: Any = None
    rank: int = 0
    kind: str = ""

    def __repr__(self) -> str:
        return f"<skelpy.MPIGroup {self.size} ranks: " + ", ".join(
            f"{d.name} ({getattr(d, 'host', 'here')})" for d in self.devices) + ">"


class RemoteDevice:
    """The device of another rank, as that rank described it (name, kind, key, features...):
    enough to show it and to read tuning decisions, nothing to launch on."""

    cl_device = None

    def __init__(self, info: dict, rank: int):
        self.rank = rank
        self.host = info["host"]
        for k in _DESCRIBED:
            setattr(self, k, info[k])

    def __eq__(self, other) -> bool:
        return isinstance(other, RemoteDevice) and (other.rank, other.key) == (self.rank,
                                                                                self.key)

    def __hash__(self) -> int:
        return hash((self.rank, self.key))

    def __repr__(self) -> str:
        return f"<skelpy.Device {self.name!r} ({self.kind}, rank {self.rank} on {self.host})>"


_groups: dict[str, MPIGroup] = {}


def open_group(spec: str, candidates: Sequence, make_runtime: Callable[..., Any]):
    """The runtime of this rank's device in the MPI group ``spec`` names (``"mpi"``: GPUs if
    there are any, ``"mpi:gpu"``, ``"mpi:cpu"``): opened once per kind, collectively."""
    kind = spec.strip().lower().partition(":")[2].strip()
    if kind not in ("", "gpu", "cpu", "accelerator"):
        raise DeviceError(f"{spec!r}: use 'mpi', 'mpi:gpu' or 'mpi:cpu'")
    group = _groups.get(kind)
    if group is not None:
        return group.runtimes[group.rank]
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise DeviceError(f"sk.use({spec!r}) needs mpi4py and an MPI: pip install "
                          f"'skelpy[mpi]' ({exc})") from None
    from .containers import Collective
    from .exchange import MPIExchange

    comm = MPI.COMM_WORLD
    me = comm.rank
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=me)
    local_rank = node.rank
    node.Free()
    pool = [d for d in candidates if d.kind == kind] if kind else \
        ([d for d in candidates if d.kind == "gpu"] or list(candidates))
    rt, problem = None, None
    if not pool:
        problem = f"rank {me}: no {(kind or 'OpenCL').upper()} device here"
    else:
        try:
            rt = make_runtime(pool[local_rank % len(pool)])
        except DeviceError as exc:
            problem = f"rank {me}: {exc}"
    info = None
    if rt is not None:
        info = {k: getattr(rt.device, k) for k in _DESCRIBED}
        info["host"] = MPI.Get_processor_name()
    answers = comm.allgather((info, problem))
    problems = [p for _, p in answers if p]
    if problems:                                      # the same error on every rank
        raise DeviceError(f"sk.use({spec!r}): " + "; ".join(problems))
    devices = tuple(rt.device if r == me else RemoteDevice(i, r)
                    for r, (i, _) in enumerate(answers))
    runtimes = tuple(rt if r == me else None for r in range(comm.size))
    group = MPIGroup(devices, rt.context, runtimes, comm=comm, rank=me, kind=kind)
    rt.group, rt.rank = group, me
    group.exchange = MPIExchange(group, comm)
    Container.collective = Collective(group) if Container.collective is None else \
        Container.collective.add(group)
    _groups[kind] = group
    return rt
