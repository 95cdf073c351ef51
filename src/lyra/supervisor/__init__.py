"""Many children: the Supervisor, its fan-out and the run directory."""

from lyra.supervisor._executor import Executor, LocalExecutor
from lyra.supervisor._rundir import RunDir, write_atomic
from lyra.supervisor._supervisor import Supervisor

__all__ = ["Executor", "LocalExecutor", "RunDir", "Supervisor", "write_atomic"]
