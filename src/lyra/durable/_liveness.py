"""Which executors are alive, from PostgreSQL's own session locks.

Without DBOS Conductor, DBOS recovers a process's pending workflows only
when a process with the *same* executor ID restarts; recovering those of an
executor that is gone for good takes an explicit call naming it
(``DBOS._recover_pending_workflows``, what the admin API's
``/dbos-workflow-recovery`` endpoint runs). lyra decides "gone" without a
heartbeat table: every lyra process holds a session-level advisory lock
keyed by its executor ID on a connection of its own, and PostgreSQL releases
it the moment that session ends -- a clean exit, a crash, a SIGKILL. An
executor whose lock can be taken is dead; its pending children are handed
back to the queue, where a live worker dequeues them.

Server-side TCP keepalives make a vanished machine (not only a dead process)
release its lock within about half a minute.
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

# Server-side keepalives: a session whose client machine vanished ends in ~25 s.
_KEEPALIVES = "-c tcp_keepalives_idle=10 -c tcp_keepalives_interval=5 -c tcp_keepalives_count=3"


def lock_key(executor_id: str) -> int:
    """The advisory-lock key of an executor: 64 bits of a hash, signed as PostgreSQL wants."""
    digest = hashlib.sha256(f"lyra-executor:{executor_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Liveness:
    """This process's claim to be alive, and a test of other executors' claims."""

    def __init__(self, url: str, executor_id: str) -> None:
        import psycopg

        self.executor_id = executor_id
        self._guard = threading.Lock()
        self._conn: Any = psycopg.connect(
            url, autocommit=True, connect_timeout=10, options=_KEEPALIVES
        )
        self._conn.execute("SELECT pg_advisory_lock(%s)", (lock_key(executor_id),))

    def is_alive(self, executor_id: str) -> bool:
        """True while the process with that executor ID holds its lock."""
        if executor_id == self.executor_id:
            return True
        key = lock_key(executor_id)
        with self._guard:
            row = self._conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
            if row is not None and row[0]:
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
                return False
        return True

    def close(self) -> None:
        """Give up the claim (closing the session releases the lock)."""
        with self._guard:
            self._conn.close()
