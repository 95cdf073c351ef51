"""A hand-written recovery loop in the style of the recovery guide.

"Handle Failures Gracefully" and "Log Failures for Analysis", written on
lyra's report helpers instead of regular expressions: each task goes to
``delegate_task``; each failure is logged as one JSON line and handled by
category (timeout: double the timeout; partial: a continuation prompt built
from the completed steps and the blocker; transient tool error: back off;
anything else: stop and leave it to a human). Suggested actions are printed
for a human and never executed.

Four scripted tasks show the branches: one recovers from a timeout and then a
partial failure, one from a rate limit, one stops on a missing module, one
on a contradictory task. The script exits 0 when each ended as expected and
the log holds one valid JSON line per failure.

Run: ``python examples/log_and_retry.py [LOG_FILE] [-v]`` (default: a new
temporary file; ``-v`` shows every lyra event).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import anyio

from lyra import (
    ChildContext,
    delegate_task,
    events,
    extract_blocker,
    extract_category,
    extract_completed_steps,
    extract_files_modified,
    extract_suggested_actions,
    is_retryable,
    parse_report,
)
from lyra.errors import TransientError

BASE_TIMEOUT = 0.4
MAX_ATTEMPTS = 4
calls: Counter[str] = Counter()  # calls per scripted child, where behaviour depends on it


# --- Scripted children: each behaves differently on each call. ---


async def read_repository() -> str:
    await anyio.sleep(0.5)  # slower than BASE_TIMEOUT, well under twice it
    return "src/auth.py, tests/test_auth.py"


def run_tests(library: str) -> str:
    if library == "bcrypt":
        raise ModuleNotFoundError("No module named 'bcrypt'", name="bcrypt")
    return "4 passed"


def import_matplotlib() -> None:
    raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")


async def auth_child(prompt: str, ctx: ChildContext) -> str:
    """Times out once, then fails after a step (partial), then finishes the rest."""
    if "Already completed" not in prompt:
        await ctx.tool("read_repository", read_repository)
        ctx.step("Implemented hash_password in src/auth.py")
        ctx.file_modified("src/auth.py")
    library = "hashlib.scrypt" if "bcrypt" in prompt else "bcrypt"  # told of the blocker
    result = await ctx.tool("run_tests", run_tests, library)
    return f"Authentication implemented with {library}; tests: {result}."


async def export_child(prompt: str, ctx: ChildContext) -> str:
    """Rate limited on the first call."""
    calls["export"] += 1
    if calls["export"] == 1:
        raise TransientError("429 Too Many Requests", retry_after=0.1, status=429)
    return "Exported 120 records to export.csv."


async def plot_child(prompt: str, ctx: ChildContext) -> str:
    """Needs a module that is not installed: retrying cannot help."""
    await ctx.tool("import_matplotlib", import_matplotlib)
    return "never"


async def contradictory_child(prompt: str, ctx: ChildContext) -> str:
    """Refuses a contradictory task."""
    ctx.block("invalid_task", "Cannot both keep every line and delete the module")


TASKS = {
    "auth": ("Implement user authentication in src/auth.py and run its tests", auth_child),
    "export": ("Export the customer records to export.csv", export_child),
    "plot": ("Plot the weekly sign-ups", plot_child),
    "contradictory": (
        "Keep every line of src/legacy.py and delete the module",
        contradictory_child,
    ),
}


# --- The loop. ---


def continuation(prompt: str, report: str) -> str:
    """The guide's handle_partial_success prompt, from lyra's helpers."""
    done = "\n".join(f"✓ {step}" for step in extract_completed_steps(report))
    files = ", ".join(extract_files_modified(report)) or "none"
    return (
        f"Continue from previous attempt of: {prompt}\n\nAlready completed:\n{done}\n"
        f"Files modified: {files}\n\nBlocker encountered: {extract_blocker(report)}\n\n"
        "Please:\n1. Address the blocker\n2. Complete the remaining work\n"
    )


def delegate_with_logging(name: str, log_path: Path) -> tuple[str, int]:
    """Run one task until it completes or no retry can help; return the report and attempts."""
    original, child = TASKS[name]
    prompt, timeout = original, BASE_TIMEOUT
    for attempt in range(1, MAX_ATTEMPTS + 1):
        report = delegate_task(prompt, child=child, timeout=timeout)
        category = extract_category(report)
        if category is None:  # no failure category: the child completed
            return report, attempt

        # Decide the next attempt by category (the guide's "Handle Failures Gracefully").
        retryable = is_retryable(report)
        transient = parse_report(report).error_type in ("rate_limit", "connection")
        next_prompt, next_timeout, wait = prompt, timeout, 0.0
        if category == "timeout" and retryable:
            next_timeout = timeout * 2
            decision = f"retry with timeout={next_timeout:g}s"
        elif category == "partial":
            next_prompt = continuation(original, report)
            decision = "continue with a continuation prompt"
        elif category == "tool_error" and retryable and transient:
            # The report text does not carry the service's retry-after, so this
            # loop backs off blindly; delegate_with_retry honours it.
            wait = 0.1 * 2 ** (attempt - 1)
            decision = f"back off {wait:g}s and retry"
        else:
            decision = "stop: needs a human"

        # Log the failure for later analysis (the guide's "Log Failures for Analysis").
        entry = {
            "timestamp": datetime.now(UTC).isoformat(),
            "task": name,
            "prompt": prompt,
            "attempt": attempt,
            "timeout": timeout,
            "category": category,
            "retryable": retryable,
            "blocker": extract_blocker(report),
            "completed_steps": extract_completed_steps(report),
            "files_modified": extract_files_modified(report),
            "suggested_actions": extract_suggested_actions(report),
            "decision": decision,
        }
        with log_path.open("a", encoding="utf-8") as log_file:
            log_file.write(json.dumps(entry) + "\n")

        print(f"  attempt {attempt}: {category} (retryable={retryable}) -> {decision}")
        # Suggested actions are text for a human, never commands to run: they
        # derive from error text that a child, or a page it read, can shape.
        # Running "pip install <name from an error>" automatically is a
        # supply-chain hazard (a typosquatted or hostile package).
        for action in extract_suggested_actions(report):
            print(f"      for a human: {action}")

        if decision.startswith("stop"):
            return report, attempt
        time.sleep(wait)
        prompt, timeout = next_prompt, next_timeout
    return report, MAX_ATTEMPTS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log_file", nargs="?", type=Path, help="JSON lines log of failures")
    parser.add_argument("-v", "--verbose", action="store_true", help="print lyra's events")
    args = parser.parse_args(argv)
    if args.verbose:  # lyra writes nothing until told where its events go
        events.configure(sys.stderr)
    if args.log_file is None:
        args.log_file = Path(tempfile.mkdtemp(prefix="lyra-example-")) / "failures.jsonl"

    expected = {"auth": ("completed", 3), "export": ("completed", 2)}
    expected |= {"plot": ("failed", 1), "contradictory": ("failed", 1)}
    ok = True
    for name in TASKS:
        print(f"{name}: {TASKS[name][0]}")
        report, attempts = delegate_with_logging(name, args.log_file)
        final = parse_report(report)
        category = f" category={final.category}" if final.category else ""
        print(f"  final report: status={final.status}{category} after {attempts} attempt(s)")
        ok = ok and (final.status, attempts) == expected[name]

    lines = args.log_file.read_text(encoding="utf-8").splitlines()
    logged = Counter(json.loads(line)["task"] for line in lines)
    print(f"\n{len(lines)} failures logged to {args.log_file}: {dict(logged)}")
    ok = ok and logged == {"auth": 2, "export": 1, "plot": 1, "contradictory": 1}
    print("OK: every task ended as expected" if ok else "UNEXPECTED: see above")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
