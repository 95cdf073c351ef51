"""Durable and multi-machine runs on DBOS Transact (DESIGN §10).

``DurableExecutor.embedded(run_dir, run_id=…)`` checkpoints every protein's
child in ``<run_dir>/dbos.sqlite`` and runs it here; ``DurableExecutor.queue(
database_url, run_id=…)`` puts the children on a PostgreSQL-backed DBOS queue
for ``lyra worker`` processes. Importing this package does not import DBOS;
starting an executor or a worker does.
"""

from lyra.durable._database import DatabaseUnreachable
from lyra.durable._executor import DurableChildError, DurableExecutor

__all__ = ["DatabaseUnreachable", "DurableChildError", "DurableExecutor"]
