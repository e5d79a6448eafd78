"""The same skeleton programs under MPI: ``mpiexec -n P python prog.py`` with ``sk.use("mpi")``.

One rank per process, each driving one device (chosen by its node-local rank), the ranks of
``MPI.COMM_WORLD`` forming one device group: the skeletons on groups
(:mod:`skelpy.distribution`) run unchanged on it, each process doing its own rank's part, and
everything between ranks goes through :class:`~.exchange.MPIExchange`, the MPI implementation
of the group's exchange interface. Containers are built collectively (:mod:`.containers`).

mpi4py is imported only by :func:`open_group`, so a program that never says ``mpi`` does not
need it (``pip install 'skelpy[mpi]'`` installs it with an MPI from PyPI).
"""

from __future__ import annotations

from .group import MPIGroup, RemoteDevice, open_group

__all__ = ["MPIGroup", "RemoteDevice", "open_group"]
