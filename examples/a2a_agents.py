"""A2A both ways: lyra serves a child as an A2A agent, and a lyra tree delegates to it.

The script serves a scripted "curator" child the way ``lyra a2a`` does
(``lyra.a2a.serve``: the official A2A SDK's server on uvicorn, 127.0.0.1, a free
port), then:

1. a plain A2A client (the SDK's own, nothing of lyra) sends it a task and prints
   what arrives: each step a ``working`` update, the output an artifact, then
   ``completed``;
2. a lyra parent, "triager", delegates to the same server through
   ``A2AChild(url)`` under one deadline and one budget: a task that completes (its
   steps and usage come back into the tree); one that names no accession, whose
   question (the curator's ``ctx.ask``, A2A ``input-required``) the triager's
   ``answer=`` answers, and the same remote task goes on; one the curator rejects
   (``invalid_task`` there, A2A ``rejected``, ``invalid_task`` here again); one
   that runs away and is stopped here by the triager's budget, its remote task
   cancelled there.

No network beyond 127.0.0.1, no API key. Exits 0 when every task ended as it should.
Needs the ``a2a`` extra: ``pip install -e '.[a2a]'`` in a lyra checkout.

Run: ``python examples/a2a_agents.py [-v]`` (``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import socket
import sys

import anyio
from a2a.client import create_client
from a2a.helpers import get_text_parts, new_text_message
from a2a.types import Role, SendMessageRequest, TaskState

from lyra import Budget, ChildContext, DelegationResult, Limits, Supervisor, events
from lyra.a2a import serve
from lyra.children.a2a import A2AChild
from lyra.errors import InvalidInput

stopped_remotely: list[str] = []
asked: list[str] = []


async def curator(prompt: str, ctx: ChildContext) -> str:
    """The served child: looks an accession up (asking which, for "the entry");
    "everything" takes for ever."""
    accession = prompt.split()[-1]
    if accession == "entry":  # whoever delegated knows which: ask, and wait
        accession = await ctx.ask("Which UniProt accession?")
    if not accession[:1].isalpha():
        raise InvalidInput(f"{accession!r} is not a UniProt accession")
    try:
        for step in range(1_000 if "everything" in prompt else 2):
            ctx.charge(input_tokens=600, output_tokens=200, cost_usd=0.004, turns=1)
            ctx.step(f"Read section {step + 1} of {accession}")
            await anyio.sleep(0.05)
    except BaseException:  # stopped: by the task's cancel, here
        stopped_remotely.append(accession)
        raise
    return f"{accession}: cellular tumour antigen p53, 393 residues"


async def plain_client(url: str) -> list[str]:
    """What an A2A client of any make sees of one task."""
    seen = []
    async with await create_client(url) as client:
        message = new_text_message("Summarise P04637", role=Role.ROLE_USER)
        async for event in client.send_message(SendMessageRequest(message=message)):
            if event.HasField("status_update"):
                status = event.status_update.status
                said = " ".join(get_text_parts(status.message.parts)[:1])
                seen.append(f"{TaskState.Name(status.state)} {said}".strip())
            elif event.HasField("artifact_update"):
                seen.append(f"artifact: {get_text_parts(event.artifact_update.artifact.parts)[0]}")
    return seen


async def triage(url: str) -> dict[str, DelegationResult]:
    """A lyra parent whose grandchildren are tasks on the A2A server; it answers
    their questions."""
    results: dict[str, DelegationResult] = {}

    async def triager(prompt: str, ctx: ChildContext) -> str:
        remote = A2AChild(url)
        for name, task, budget in (
            ("lookup", "Summarise P04637", None),
            ("question", "Summarise the p53 entry", None),
            ("typo", "Summarise 04637", None),
            ("runaway", "Read everything about P04637", Budget(max_tokens=3_000)),
        ):
            results[name] = await ctx.delegate(task, child=remote, budget=budget)
        return "triaged"

    def answer(question: str) -> str:
        asked.append(question)
        return "P04637"

    supervisor = Supervisor(triager, budget=Budget(max_tokens=50_000), answer=answer)
    results["triager"] = await supervisor.delegate("Triage the P04637 reports", timeout=20)
    return results


async def main_async() -> bool:
    with socket.socket() as probe:  # a free port (the OS picks it)
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    listening = anyio.Event()
    async with anyio.create_task_group() as server:
        urls: list[str] = []
        on_listening = lambda url: (urls.append(url), listening.set())  # noqa: E731
        server.start_soon(
            lambda: serve(curator, port=port, limits=Limits(timeout=10), on_listening=on_listening)
        )
        await listening.wait()
        url = urls[0]
        print(f"serving the curator at {url} (as `lyra a2a --child …` does)\n")
        seen = await plain_client(url)
        print("a plain A2A client sees:", *seen, sep="\n  ")
        results = await triage(url)
        server.cancel_scope.cancel()  # serve() shuts down as on Ctrl+C

    print("\nthe triager's tree:")
    for name, result in results.items():
        failure, usage = result.failure, result.usage
        how = "completed" if failure is None else f"{failure.category}/{failure.error_type}"
        print(f"  {name:<8} {how}, {usage.tokens if usage else 0:,} tokens")
        if failure is not None:
            print(f"           {failure.message.splitlines()[0]}")
    print(f"asked of the triager: {asked}")
    print(f"stopped on the server: {stopped_remotely}")
    kinds = {name: (r.failure.error_type if r.failure else "ok") for name, r in results.items()}
    expected = {"lookup": "ok", "question": "ok", "typo": "data", "runaway": "budget"}
    return (
        seen[-1] == "TASK_STATE_COMPLETED"
        and "TASK_STATE_WORKING Read section 1 of P04637" in seen
        and kinds == {**expected, "triager": "ok"}
        and results["question"].output == results["lookup"].output
        and asked == ["Which UniProt accession?"]
        and results["typo"].failure is not None
        and results["typo"].failure.category == "invalid_task"
        and results["lookup"].usage is not None
        and results["lookup"].usage.tokens == 1_600
        and stopped_remotely == ["P04637"]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)
    ok = anyio.run(main_async)
    print("\nOK: both ways, one taxonomy and one budget" if ok else "\nUNEXPECTED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
