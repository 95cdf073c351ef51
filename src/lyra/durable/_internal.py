"""What lyra's command line uses of durable runs and a library user does not: the
checks of a run directory's checkpoints and of a database URL, the run's event
ledger, the worker's loop, the questions tasks wait on (``lyra answer``). Not public
API: it changes with the command line. Importing it does not import DBOS.

The rule (tests/test_architecture.py): another part of lyra imports from
``lyra.durable`` the names of its ``__all__``, or those of this module's.
"""

from contextlib import AbstractContextManager
from typing import Any

from lyra.durable._checkpoints import CheckpointsDamaged, check_recorded, check_sqlite
from lyra.durable._database import (
    SQLITE_FILE,
    check_reachable,
    holds_runs,
    postgres_url,
    redacted,
    require_durable,
    sqlite_url,
)
from lyra.durable._events import Ledger
from lyra.durable._executor import hold_run_dir, quiet_dbos
from lyra.durable._questions import answer as answer_question
from lyra.durable._questions import known_run
from lyra.durable._questions import waiting as questions_waiting
from lyra.durable._worker import run_worker

__all__ = [
    "SQLITE_FILE",
    "CheckpointsDamaged",
    "Ledger",
    "answer_question",
    "check_reachable",
    "check_recorded",
    "check_sqlite",
    "dbos_client",
    "hold_run_dir",
    "holds_runs",
    "known_run",
    "postgres_url",
    "questions_waiting",
    "quiet_dbos",
    "redacted",
    "require_durable",
    "run_worker",
    "sqlite_url",
]


def dbos_client(url: str) -> AbstractContextManager[Any]:
    """A DBOS client on a run's database, closed after use (see
    :func:`lyra.durable._engine.dbos_client`); DBOS is imported when it is called."""
    from lyra.durable import _engine

    return _engine.dbos_client(url)
