"""Run tests/mpi/mpi_cases.py and hunt_cases.py on every rank of ``mpiexec -n P python tests/mpi/run.py``: each
rank one PoCL CPU device. Rank 0 reports; the others write to a log file and show its tail
when they fail (any rank's failure fails the run). Then, with the real exit hook, the other
ranks end while rank 0 reads a distributed container alone: it must raise, not wait."""

import os
import sys
import tempfile

os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", "1")     # P ranks share a few cores
import pytest  # noqa: E402
from mpi4py import MPI  # noqa: E402

rank = MPI.COMM_WORLD.rank


def end_apart() -> None:
    """The other ranks end (their exit hooks tell rank 0) while rank 0 reads a distributed
    container alone: it raises CollectiveError instead of waiting forever (a watchdog ends
    it with its traceback if it waits)."""
    import faulthandler

    import numpy as np

    import skelpy as sk
    size = MPI.COMM_WORLD.size
    sk.use("mpi:cpu")
    v = sk.Map(lambda x: x + 1)(sk.Vector(np.arange(5 * size, dtype=np.float32)))
    if rank != 0 or size == 1:
        return
    faulthandler.dump_traceback_later(30, exit=True)
    try:
        v.to_numpy()
    except sk.errors.CollectiveError as exc:
        assert "has finished the program" in str(exc), exc
    else:
        raise AssertionError("a read on rank 0 alone after the others ended did not raise")
    faulthandler.cancel_dump_traceback_later()
    print("rank 0 reading alone after the others ended: CollectiveError, as it should")


here = os.path.dirname(os.path.abspath(__file__))
args = [os.path.join(here, "mpi_cases.py"), os.path.join(here, "hunt_cases.py"), "-p", "no:cacheprovider", "-o", "addopts=", "-q",
        "-x", *sys.argv[1:]]
if rank == 0:
    code = int(pytest.main(args))
    if code:
        MPI.COMM_WORLD.Abort(code)    # the other ranks may wait for this one: end them
    end_apart()
    sys.exit(code)
log = os.path.join(tempfile.gettempdir(), f"skelpy-mpi-rank{rank}-{os.getpid()}.log")
real_err = os.dup(2)
with open(log, "w") as f:
    os.dup2(f.fileno(), 1)
    os.dup2(f.fileno(), 2)
    code = int(pytest.main([*args, "--color=no"]))
    sys.stdout.flush()
    sys.stderr.flush()
if code:
    with open(log) as f:
        os.write(real_err, f"--- rank {rank} failed (log {log}) ---\n".encode()
                 + "".join(f.readlines()[-40:]).encode())
    MPI.COMM_WORLD.Abort(code)
os.remove(log)
end_apart()
sys.exit(code)
