"""Run tests/mpi/mpi_cases.py and hunt_cases.py on every rank of ``mpiexec -n P python tests/mpi/run.py``: each
rank one PoCL CPU device. Rank 0 reports; the others write to a log file and show its tail
when they fail (any rank's failure fails the run)."""

import os
import sys
import tempfile

os.environ.setdefault("POCL_MAX_PTHREAD_COUNT", "1")     # P ranks share a few cores
import pytest  # noqa: E402
from mpi4py import MPI  # noqa: E402

rank = MPI.COMM_WORLD.rank
here = os.path.dirname(os.path.abspath(__file__))
args = [os.path.join(here, "mpi_cases.py"), os.path.join(here, "hunt_cases.py"), "-p", "no:cacheprovider", "-o", "addopts=", "-q",
        "-x", *sys.argv[1:]]
if rank == 0:
    code = int(pytest.main(args))
    if code:
        MPI.COMM_WORLD.Abort(code)    # the other ranks may wait for this one: end them
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
sys.exit(code)
