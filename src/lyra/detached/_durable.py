"""Detached delegations that outlive their process, on lyra's durable executor.

Each delegation is one call of a :class:`~lyra.durable.DurableExecutor` named
by its id, so its task is one DBOS workflow whose ID a later process derives
from the id again. A restarted process lists the run's tasks to find every
delegation; asking the executor for a finished one returns its recorded
result without running it, and an unfinished one goes on from its last
checkpoint (DBOS recovers it as the executor starts). Needs the ``durable``
extra; the child travels by name (a :class:`~lyra.ChildRef`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lyra.delegation import ChildRef, DelegationResult
from lyra.detached._models import DelegationRequest
from lyra.detached._store import Asker, Recorded
from lyra.detached._watch import KEY
from lyra.recovery import RecoveryPolicy
from lyra.supervisor import Job, Task

if TYPE_CHECKING:
    from lyra.durable import DurableExecutor

RUN_ID = "lyra-detached"
"""The run every detached delegation of a database belongs to."""


class DurableRunner:
    """A :class:`~lyra.detached.Runner` on ``executor`` (embedded, or a queue for
    ``lyra worker`` processes), for the child ``child`` names.

    Each delegation is one attempt (a parent that wants another reads the report
    and asks), except that a question (``ctx.ask``) waits in the database for
    its answer -- the store's asker gets it, and the answer goes back there, as
    one from ``lyra answer`` would -- and the attempt then runs again with the
    answer waiting in ``ctx.ask`` (how lyra's durable runs carry an answer: an
    attempt's state does not survive its process, a recorded answer does)."""

    def __init__(self, executor: DurableExecutor, child: ChildRef) -> None:
        self.executor = executor
        observed = ChildRef(
            target="lyra.detached:observed",
            options={"target": child.target, "options": child.options},
        )
        # One attempt, and another only for an answered question: that waits
        # RecoveryPolicy.answer_wait (an hour) before the delegation fails as
        # missing_context / input_required.
        policy = RecoveryPolicy(max_retries=0)
        self._job = Job(child=observed, policy=policy)
        self._recorded: dict[str, Task] = {}
        """The tasks of the delegations an earlier process started, each given again
        as it was recorded (its start time too): a run refuses another task in a
        place it recorded."""

    @classmethod
    def embedded(
        cls, folder: Path | str, child: ChildRef, *, event_log: Path | str | None = None
    ) -> DurableRunner:
        """Children run in this process, checkpointed in ``<folder>/dbos.sqlite``."""
        from lyra.durable import DurableExecutor

        return cls(DurableExecutor.embedded(folder, run_id=RUN_ID, event_log=event_log), child)

    @classmethod
    def queue(
        cls, database_url: str, child: ChildRef, *, event_log: Path | str | None = None
    ) -> DurableRunner:
        """Children go to the PostgreSQL queue for ``lyra worker`` processes."""
        from lyra.durable import DurableExecutor

        return cls(DurableExecutor.queue(database_url, run_id=RUN_ID, event_log=event_log), child)

    async def start(self) -> list[Recorded]:
        await self.executor.start()
        delegations = [
            found
            for found in await self.executor.tasks()
            if found.task.context.get(KEY) == found.call  # a delegation, not another run's task
        ]
        self._recorded = {found.call: found.task for found in delegations}
        asked = {q.call: q.question for q in await self.executor.questions() if not q.answered}
        return [
            Recorded(
                delegation_id=found.call,
                request=DelegationRequest(
                    prompt=found.task.prompt,
                    timeout=found.task.timeout or self._job.limits.timeout,
                    idle_timeout=found.task.idle_timeout,
                    budget=found.task.budget,
                ),
                created_at=_started(found.task.context, found.created_at),
                finished_at=found.completed_at,
                cancelled=found.status == "CANCELLED",
                question=asked.get(found.call),
            )
            for found in delegations
        ]

    async def run(
        self,
        delegation_id: str,
        request: DelegationRequest,
        recorded: Callable[[], None],
        ask: Asker,
    ) -> DelegationResult:
        task = self._recorded.pop(delegation_id, None) or Task(
            prompt=request.prompt,
            timeout=request.timeout,
            idle_timeout=request.idle_timeout,
            budget=request.budget,
            context={KEY: delegation_id, STARTED: time.time()},
        )
        [outcome] = await self.executor.run(
            self._job,
            [task],
            max_concurrency=1,
            call=delegation_id,
            on_recorded=lambda _: recorded(),
            on_question=lambda asked: ask(asked.question),
        )
        return outcome.result

    async def cancel(self, delegation_id: str) -> bool:
        # DBOS cancels only a workflow still unfinished, and records an outcome only for
        # one not cancelled: whichever lands first is the delegation's, here and after
        # a restart alike.
        return await self.executor.cancel(delegation_id) > 0

    async def close(self) -> None:
        await self.executor.aclose()


STARTED = "lyra.detached.started_at"
"""Where a durable delegation's task keeps when it started (seconds since the epoch):
the database's own record of it holds whole seconds, which lost the order of the
delegations started within one after a restart."""


def _started(context: Mapping[str, Any], recorded: float) -> float:
    started = context.get(STARTED)
    return float(started) if isinstance(started, int | float) else recorded
