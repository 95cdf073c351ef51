"""``lyra delegate``: one delegation from the command line; prints its report."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lyra.cli import _logging, _stdout
from lyra.cli._options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_UNWRITTEN,
    Subparsers,
    add_child_option,
    add_event_options,
    add_limit_options,
    add_retries_option,
    budget_of,
    positive_float,
    task_text,
)


def register(commands: Subparsers) -> None:
    """Add ``lyra delegate`` to the subcommands."""
    p = commands.add_parser(
        "delegate",
        help="run one child on a prompt and print its report",
        description="Run one child agent on PROMPT under a deadline and print its output "
        "or failure report (both end in a <task_metadata> block). The child is --child, "
        "else LYRA_CHILD, else the Anthropic child when ANTHROPIC_API_KEY is set.",
        epilog="examples:\n"
        "  lyra delegate 'Summarise P04637' --child lyra.proteins:ProteinChild\n"
        "  lyra delegate 'Triage this bug report' --timeout 120 --idle-timeout 30 "
        "--max-tokens 50000\n"
        "  lyra delegate 'Analyze P04637' --child lyra.proteins:ProteinChild --retries 2\n\n"
        "exit status: 0 completed, 1 failed (the report says why), 2 usage error, "
        "4 the events could not all be written (stderr says why; the report is printed), "
        "130 interrupted (Ctrl+C or SIGTERM: the child is stopped, and no report is printed, "
        "--json included)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", type=task_text, help="the task for the child")
    add_child_option(p)
    p.add_argument("--timeout", type=positive_float, default=300.0, help="seconds (default 300)")
    add_limit_options(
        p,
        idle="seconds without progress before the child is stopped (default: none)",
        budget="for the delegation and everything it delegates",
    )
    add_retries_option(p)
    p.add_argument(
        "--subject",
        help="what the task is about: shown in the report, and the child's ctx.subject "
        "(lyra.proteins:ProteinChild analyses the protein it names)",
    )
    p.add_argument("--json", action="store_true", help="print the parsed report as JSON")
    add_event_options(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run one child (with recovery when --retries is given); print its report."""
    from lyra._sync import run_blocking
    from lyra.children import default_child
    from lyra.delegation import Limits, json_safe
    from lyra.delegation._internal import printable
    from lyra.recovery import RecoveryPolicy, recover

    child = args.child.resolve() if args.child else default_child()

    async def go() -> Any:
        outcome = await recover(
            args.prompt,
            child=child,
            limits=Limits(
                timeout=args.timeout, idle_timeout=args.idle_timeout, budget=budget_of(args)
            ),
            policy=RecoveryPolicy(max_retries=args.retries),
            subject=args.subject,
        )
        return outcome.result

    with _logging.events_to(args.events, verbose=args.verbose) as unwritten:
        result = run_blocking("recover", go)
    if args.json:
        fields = result.to_report().model_dump(mode="json")
        text = json.dumps({**fields, "report": result.report}, indent=2, ensure_ascii=False)
        _stdout.write(json_safe(text))
    else:  # (a child's text cannot drive the terminal, as in lyra analyze's briefs)
        _stdout.write(printable(result.report))
    _logging.say_unwritten("lyra delegate", unwritten)
    if unwritten:
        return EXIT_UNWRITTEN  # the report is above; the event log is not whole
    return EXIT_OK if result.ok else EXIT_FAILED
