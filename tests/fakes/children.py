"""Scripted children importable by name (``--child fakes.children:…``, ``ChildRef``),
for tests of the command line and of durable runs."""

from __future__ import annotations

import os
import subprocess
import sys

import anyio

from lyra import ChildContext
from lyra.errors import InvalidInput, TransientError


async def spender(prompt: str, ctx: ChildContext) -> str:
    """Three steps of 400 tokens and one turn each, then the prompt back."""
    for step in range(3):
        ctx.charge(input_tokens=300, output_tokens=100, cost_usd=0.01, turns=1)
        ctx.step(f"Step {step + 1}")
    return f"spent on: {prompt}"


async def exits(prompt: str, ctx: ChildContext) -> str:
    """A child (or a library it calls) that takes its process down with sys.exit."""
    sys.exit(3)


async def stalls(prompt: str, ctx: ChildContext) -> str:
    """One step, then no progress ever again (a hung call)."""
    ctx.step("Started")
    await anyio.sleep_forever()
    return "never"


async def napper(prompt: str, ctx: ChildContext) -> str:
    """Naps, then notes its subject in the file ``ctx.context["done_file"]`` names."""
    await anyio.sleep(float(ctx.context.get("nap", 0.3)))
    with open(ctx.context["done_file"], "a", encoding="utf-8") as done:
        done.write(f"{ctx.subject}\n")
    return f"napped: {prompt}"


async def chatty(prompt: str, ctx: ChildContext) -> str:
    """Prints to stdout and stderr (as careless code does), then answers."""
    print(f"chatty on stdout: {prompt}")
    print(f"chatty on stderr: {prompt}", file=sys.stderr)
    return f"said: {prompt}"


def noisy(prompt: str, ctx: ChildContext) -> str:
    """Writes to stdout the three ways careless code does -- print(), the descriptor
    itself, a subprocess that inherited it -- then answers."""
    print(f"noise from print: {prompt}")
    os.write(1, b"noise from the descriptor\n")
    subprocess.run([sys.executable, "-c", "print('noise from a subprocess')"], check=True)
    return f"said: {prompt}"


async def stuck_in_a_tool(prompt: str, ctx: ChildContext) -> str:
    """Runs a tool that blocks its worker thread for 20 s (lyra abandons it at the deadline)."""
    import time

    await ctx.tool("sleepy", time.sleep, 20)
    return "never on time"


async def meets_a_cancelled_future(prompt: str, ctx: ChildContext) -> str:
    """For prompts starting "bad": awaits a future someone else cancelled (a shared
    fetch whose first waiter timed out); the others answer at once."""
    import asyncio

    if not prompt.startswith("bad"):
        return f"done: {prompt}"
    future: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    future.cancel()
    return await future


async def plodder(prompt: str, ctx: ChildContext) -> str:
    """``N x S`` in the prompt (e.g. ``5x0.2``): N steps, each S seconds after the last,
    then ``plodded N steps``; ``Nx S`` then ``quiet T``: T silent seconds after them.
    The prompt ``ask``: asks which organism, as :func:`asker` does."""
    if prompt == "ask":
        return await asker(prompt, ctx)
    words = prompt.split()
    steps, _, pause = words[0].partition("x")
    for step in range(int(steps)):
        await anyio.sleep(float(pause))
        ctx.step(f"step {step + 1} of {steps}")
    if len(words) == 3 and words[1] == "quiet":
        await anyio.sleep(float(words[2]))
    return f"plodded {steps} steps"


async def gated(prompt: str, ctx: ChildContext) -> str:
    """One step, then waits (heartbeating) until the file the prompt names exists, then
    another step: a test decides when it finishes, however loaded the machine is."""
    from pathlib import Path

    ctx.step("waiting at the gate")
    while not Path(prompt).exists():
        ctx.heartbeat()
        await anyio.sleep(0.01)
    ctx.step("through the gate")
    return "gate opened"


async def asker(prompt: str, ctx: ChildContext) -> str:
    """One step, then asks which organism (``ctx.ask``) and answers with it."""
    ctx.step("Read the task")
    organism = await ctx.ask("Which organism?")
    ctx.step(f"Looked up {organism}")
    return f"studied {organism}"


async def drips(prompt: str, ctx: ChildContext) -> str:
    """As ``spender`` does; but a prompt that says "forever" spends 400 tokens a step,
    a step every 50 ms, until it is stopped, and one that says "organism" asks which
    (``ctx.ask``) and answers with it."""
    if "organism" in prompt:
        organism = await ctx.ask("Which organism?")
        return f"{prompt}: {organism}"
    if "forever" not in prompt:
        return await spender(prompt, ctx)
    while True:
        ctx.charge(input_tokens=300, output_tokens=100, turns=1)
        ctx.step("Dripped")
        await anyio.sleep(0.05)


async def crashes(prompt: str, ctx: ChildContext) -> str:
    """One step, then an unrecognised error (``partial``)."""
    ctx.step("Fetched")
    raise RuntimeError("disk full")


async def invalid(prompt: str, ctx: ChildContext) -> str:
    """Refuses its input before any work (``invalid_task``)."""
    raise InvalidInput("P0 is no UniProt accession")


async def forbidden(prompt: str, ctx: ChildContext) -> str:
    """A service refused its key: HTTP 403 (``tool_error`` / ``auth``)."""
    raise TransientError("the data service refused the key", status=403)


async def gone(prompt: str, ctx: ChildContext) -> str:
    """Its subject does not exist: HTTP 404 (``invalid_task`` / ``not_found``)."""
    raise TransientError("no such entry", status=404)
