"""The README's shell examples do what the README says they do.

Two kinds of claims are checked by running the real command: a ``$ lyra …``
line in a code block, whose following lines are the output the README quotes
(a line with ``...`` matches the parts around it, in order, within one output
line; a line that starts with ``...`` stands for lines left out); and the
commands the prose quotes with what they print, each listed below with the
README's words, so that changing either the README or the program without the
other fails here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
FLAT = " ".join(README.split())  # the prose with its line breaks undone

pytestmark = pytest.mark.slow


@dataclass(frozen=True)
class Run:
    status: int
    out: str
    err: str


def quoted_examples() -> list[tuple[str, list[str]]]:
    """(command, quoted output lines) for every ``$ lyra`` line in a code block."""
    examples: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", README, flags=re.S | re.M):
        for chunk in re.split(r"^(?=\$ lyra )", block, flags=re.M):
            if chunk.startswith("$ lyra "):
                command, *output = chunk.rstrip("\n").split("\n")
                examples.append((command.removeprefix("$ "), output))
    return examples


def matches(quoted: str, lines: list[str]) -> bool:
    """True when one of ``lines`` holds the quoted line (its parts around ``...`` in order)."""
    parts = [part.strip() for part in quoted.split("...") if part.strip()]
    for line in lines:
        at = 0
        for part in parts:
            at = line.find(part, at)
            if at < 0:
                break
            at += len(part)
        else:
            return True
    return False


PROSE: dict[str, Callable[[Run], None]] = {}
"""A command the README's prose quotes (as written there) → what must hold of its run."""


def claim(command: str) -> Callable[[Callable[[Run], None]], Callable[[Run], None]]:
    def register(check: Callable[[Run], None]) -> Callable[[Run], None]:
        PROSE[command] = check
        return check

    return register


@claim("lyra analyze P05067 Q5VSL9 XXXXX")
def _quick_start(run: Run) -> None:
    # "each leading with where its AlphaFold model is confident: segments ..., structural
    # units ..., and (Q5VSL9) the PAE between them. ... XXXXX is not a UniProt accession,
    # so it fails alone (at `fetch_protein`, `invalid_task`) while the others complete,
    # and the command exits with status 1 ... pictures included: ... in `figures/`"
    assert run.status == 1
    for protein in ("P05067", "Q5VSL9"):
        brief = run.out.split(f"({protein})", 1)[1]
        assert brief.index("## Confidence along the chain") < brief.index("## Caveats")
        assert f"(../figures/{protein}-plddt.png)" in brief
    assert "### Between units (PAE" in run.out
    assert "XXXXX: invalid_task at fetch_protein" in run.out
    assert "is not a UniProt accession" in run.out
    assert "2 of 3 completed, 0 partial, 1 failed." in run.out


@claim("lyra analyze P04637 Q8I3H7 --inject P04637:hang --idle-timeout 2")
def _idle(run: Run) -> None:
    # "ends the hung one in 2 s, not at `--timeout`"
    assert run.status == 1
    assert "P04637: timeout at analyze_structure" in run.out
    assert "no progress for 2s" in run.out.lower() or "idle" in run.out.lower()


@claim("lyra analyze P04637 Q8I3H7 P69905 --max-turns 7 --concurrency 1")
def _budget(run: Run) -> None:
    # "completes P04637, stops Q8I3H7 at the stage that goes over (`timeout` /
    # `budget`) and never starts P69905 (... "budget exhausted (nothing left
    # before the attempt started ...)")"
    assert "• P04637 (" in run.out.split("Could not be analysed")[0]
    assert re.search(r"Q8I3H7: timeout at \w+: Budget exhausted: max_turns=7", run.out)
    assert "P69905: timeout at fetch_protein" in run.out
    assert "nothing left before the attempt started" in run.out


@claim("lyra analyze P04637 --inject P04637:hang@1 --timeout 2 --retries 1")
def _recovered(run: Run) -> None:
    # "shows a timeout recovered with a 4 s timeout: its progress line (and its line in
    # the answer) reads "attempt 1 (timeout 2 s): timeout; attempt 2 (continuation,
    # timeout doubled to 4 s): completed""
    assert run.status == 0
    assert "1 of 1 completed" in run.out
    shown = "attempt 1 (timeout 2 s): timeout; attempt 2 (continuation, timeout doubled to 4 s)"
    assert f"P04637: completed, 2 attempt(s): {shown}: completed" in run.err
    assert shown in run.out


@claim("lyra analyze P53_HUMAN Q15086")
def _aliases(run: Run) -> None:
    # "analyses P04637 once: "Note: P53_HUMAN is the UniProt entry name of P04637 in the
    # bundled data: analysed as P04637""
    assert run.status == 0
    assert run.out.startswith(
        "Note: P53_HUMAN is the UniProt entry name of P04637 in the bundled data: "
        "analysed as P04637"
    )
    assert "1 of 1 completed" in run.out


@claim("lyra a2a --host 192.0.2.7 --child lyra.proteins:ProteinChild")
def _a2a_beyond_loopback(run: Run) -> None:
    # "Any other address needs a bearer token in `LYRA_A2A_TOKEN` (without one, ...
    # refuses to start, exit 2)"
    assert (run.status, run.out) == (2, "")
    assert "needs a bearer token: set LYRA_A2A_TOKEN" in run.err


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every command, started at once in its own folder, as a user types it."""
    commands = {command for command, _ in quoted_examples()} | set(PROSE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "LYRA_"))}
    procs = {}
    for n, command in enumerate(sorted(commands)):
        folder = tmp_path_factory.mktemp(f"readme{n}")
        argv = [sys.executable, "-m", "lyra", *shlex.split(command)[1:]]
        procs[command] = subprocess.Popen(
            argv, cwd=folder, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    done = {}
    for command, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        done[command] = Run(proc.returncode, out, err)
    return done


def test_the_readme_quotes_examples_and_claims() -> None:
    """The README still holds every quoted example and prose claim checked here."""
    assert quoted_examples(), "no `$ lyra` example found in the README"
    missing = [command for command in PROSE if command not in FLAT]
    assert missing == []


@pytest.mark.parametrize(("command", "quoted"), quoted_examples())
def test_a_quoted_example_prints_what_the_readme_shows(
    runs: dict[str, Run], command: str, quoted: list[str]
) -> None:
    """Each output line the README shows under ``$ command`` is in what it prints."""
    run = runs[command]
    printed = (run.out + run.err).splitlines()
    expected = [line for line in quoted if line.strip() and not line.lstrip().startswith("...")]
    unmatched = [line for line in expected if not matches(line, printed)]
    assert unmatched == [], run.out


@pytest.mark.parametrize("command", sorted(PROSE))
def test_a_command_in_the_prose_does_what_the_prose_says(
    runs: dict[str, Run], command: str
) -> None:
    """Each command the prose quotes behaves as the sentence around it says."""
    PROSE[command](runs[command])


def test_every_lyra_class_or_constant_the_docs_name_exists() -> None:
    """`lyra.X.Name` in the README and docs imports as written (the README named
    ``lyra.InvalidInput``, which lives in ``lyra.errors``). Lower-case names such as
    ``lyra.attempt`` are span attributes, not Python names, and are not checked."""
    import importlib.util

    texts = [README, *(p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md"))]
    named = {m for text in texts for m in re.findall(r"`(lyra(?:\.\w+)+)`", text)}
    checked = sorted(n for n in named if any(part[0].isupper() for part in n.split(".")[1:]))
    assert "lyra.errors.InvalidInput" in checked
    for name in checked:
        module, _, attribute = name.rpartition(".")
        while module and importlib.util.find_spec(module) is None:
            module, _, head = module.rpartition(".")
            attribute = f"{head}.{attribute}"
        found: object = importlib.import_module(module)
        for part in attribute.split("."):
            assert hasattr(found, part), f"{name}: no {part} in {found!r}"
            found = getattr(found, part)
