"""Durable and multi-machine runs on DBOS Transact (DESIGN §10).

``DurableExecutor.embedded(run_dir, run_id=…)`` checkpoints every task of a
:meth:`lyra.Supervisor.run` in ``<run_dir>/dbos.sqlite`` and runs it here;
``DurableExecutor.queue(database_url, run_id=…)`` puts the tasks on a
PostgreSQL-backed DBOS queue for ``lyra worker`` processes. A question a task
waits on (:class:`WaitingQuestion`) is answered with ``lyra answer`` or
:meth:`DurableExecutor.answer`. The child is named
by a :class:`lyra.ChildRef` so that any process can build it. Events are
written once each, after the checkpoint they belong to is saved. Importing
this package does not import DBOS; starting an executor or a worker does.
"""

from lyra.durable._database import DatabaseUnreachable
from lyra.durable._executor import DurableChildError, DurableExecutor, NoWorkers, RecordedTask
from lyra.durable._questions import WaitingQuestion
from lyra.durable._spec import JobSpec

__all__ = [
    "DatabaseUnreachable",
    "DurableChildError",
    "DurableExecutor",
    "JobSpec",
    "NoWorkers",
    "RecordedTask",
    "WaitingQuestion",
]
