"""The layering of DESIGN §1, checked from the source: no import cycles anywhere in
src/lyra, a generic core that never imports the protein workload or the command
line (not even lazily), and a protein workload that uses only lyra's public API."""

from __future__ import annotations

import ast
import builtins
import importlib
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
CORE = ("delegation", "recovery", "supervisor", "children", "durable", "detached", "logs")
GROUND = (
    "errors",
    "events",
    "settings",
    "templates",
    "tracing",
    "_taxonomy",
    "_sync",
    "_api",
    "_files",
    "_extras",
)


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for path in (SRC / "lyra").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


@cache
def syntax(module: str) -> ast.Module:
    """A module's syntax tree (parsed once for all the checks below)."""
    return ast.parse(modules()[module].read_text(encoding="utf-8"))


def imports(module: str) -> Iterator[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) for every import statement in the
    module -- at the top, inside functions, and under ``TYPE_CHECKING`` alike."""
    tree = syntax(module)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [alias.name for alias in node.names]
            submodules = [n for n in names if f"{node.module}.{n}" in modules()]
            for name in submodules:  # `from lyra import events` imports a module
                yield f"{node.module}.{name}", [], node.lineno
            rest = [n for n in names if n not in submodules]
            if rest or not submodules:
                yield node.module, rest, node.lineno


def graph() -> dict[str, set[str]]:
    """lyra's modules and the lyra modules each imports."""
    return {
        module: {target for target, _, _ in imports(module) if target in modules()}
        for module in modules()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module, or a self-import (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1 or node in edges[node]:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def layer(module: str) -> str:
    """The top-level part of lyra a module belongs to (``delegation``, ``proteins``…)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_graph_finds_every_module_and_a_cycle() -> None:
    """The checker itself: it sees the package, and it finds a cycle when there is one."""
    assert {"lyra", "lyra.delegation._delegate", "lyra.proteins._analyze"} <= set(modules())
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"a"}}) == [["a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_there_are_no_import_cycles() -> None:
    """No module of src/lyra imports, however indirectly, a module that imports it."""
    assert cycles(graph()) == []


@pytest.mark.parametrize("package", CORE + GROUND)
def test_the_core_never_imports_proteins_or_the_cli(package: str) -> None:
    """Nothing in the generic core imports lyra.proteins or lyra.cli, even inside a function."""
    offending = [
        f"{module}:{line} imports {target}"
        for module in modules()
        if layer(module) == package
        for target, _, line in imports(module)
        if target.startswith(("lyra.proteins", "lyra.cli"))
    ]
    assert offending == []


def test_proteins_use_only_the_public_api() -> None:
    """lyra.proteins imports other parts of lyra only through public modules and the
    names in their __all__, as a user's own workload would."""
    offending = []
    for module in modules():
        if layer(module) != "proteins":
            continue
        for target, names, line in imports(module):
            if not target.startswith("lyra") or layer(target) == "proteins":
                continue
            private = any(part.startswith("_") for part in target.split("."))
            exported = set(public_names(target))
            hidden = [name for name in names if name not in exported]
            if private or hidden:
                offending.append(f"{module}:{line} uses {target} {hidden or ''}")
    assert offending == []


def public_names(module: str) -> list[str]:
    """A module's ``__all__``, read from its source (imported, when made by code)."""
    tree = syntax(module)
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "__all__" for target in node.targets
        ):
            if isinstance(node.value, ast.List | ast.Tuple):
                return list(ast.literal_eval(node.value))
            return list(importlib.import_module(module).__all__)
    return []


def test_importing_the_core_loads_no_workload_and_no_cli() -> None:
    """The issue's own check: importing the core pulls in neither lyra.proteins nor lyra.cli."""
    code = (
        "import lyra.delegation, lyra.recovery, lyra.supervisor, lyra.durable, lyra.logs, sys; "
        "print(sorted(m for m in sys.modules if m.startswith(('lyra.proteins', 'lyra.cli'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_settings_is_the_only_reader_of_the_environment() -> None:
    """No module but lyra.settings looks at os.environ or os.getenv."""
    readers = [
        f"{module}:{node.lineno}"
        for module in modules()
        if module != "lyra.settings"
        for node in ast.walk(syntax(module))
        if isinstance(node, ast.Attribute)
        and node.attr in ("environ", "getenv", "environb")
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    ]
    assert readers == []


def test_the_readme_lists_every_variable_once() -> None:
    """Every environment variable Settings reads is in the README's table, once."""
    from lyra.settings import Settings

    readme = (SRC.parent / "README.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    listed = [row.split("`")[1] for row in rows]
    for name in Settings.variables():
        assert listed.count(name) == 1, name


def test_settings_read_the_environment_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """settings() reads the environment on each call: a change is seen at once."""
    from lyra.settings import settings

    monkeypatch.setenv("LYRA_MODEL", "claude-haiku-4-5")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    current = settings()
    assert (current.model, current.model_configured) == ("claude-haiku-4-5", True)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert not settings().model_configured


def test_lyra_is_installed_under_its_distribution_name() -> None:
    """The installed distribution is lyra-supervisor (the index's "lyra" is another
    project), at lyra's own version, with the lyra command."""
    from importlib.metadata import distribution

    import lyra

    installed = distribution("lyra-supervisor")
    assert installed.version == lyra.__version__
    [command] = [e for e in installed.entry_points if e.group == "console_scripts"]
    assert (command.name, command.value) == ("lyra", "lyra.cli:console")


LEAF_EXTRAS = ["durable", "otel", "mcp", "plots", "pydantic-ai", "openai-agents"]
LEAF_EXTRAS += ["claude-agent-sdk", "langgraph"]


@pytest.mark.parametrize("extra", LEAF_EXTRAS)
def test_an_install_hint_names_what_installs_today(extra: str) -> None:
    """lyra is not on the package index yet: a hint names the extra's own packages with
    lyra's bounds (pyproject.toml's), which install however lyra was installed, and the
    checkout's form; never `pip install lyra-supervisor`."""
    import tomllib

    from lyra._extras import install_hint

    declared = tomllib.loads((SRC.parent / "pyproject.toml").read_text())
    wanted = declared["project"]["optional-dependencies"][extra]
    hint = install_hint(extra)
    assert hint.startswith("pip install '")
    assert hint.endswith(f" (or pip install -e '.[{extra}]' in a lyra checkout)")
    named = re.findall(r"'([A-Za-z0-9_.-]+)[<>=!~]", hint)
    assert sorted(named) == sorted(re.split(r"[<>=!~]", req)[0] for req in wanted)
    assert "lyra-supervisor" not in hint


def test_nothing_tells_a_user_to_install_lyra_from_the_index() -> None:
    """No module, doc or example says `pip install lyra-supervisor` (the index has no
    such package yet) or `pip install 'lyra[…]'` (someone else's package)."""
    root = SRC.parent
    texts = [*modules().values(), root / "README.md", *root.glob("docs/**/*.md")]
    texts += [*root.glob("examples/*.py"), *root.glob("examples/*.md")]
    texts += [*root.glob("benchmarks/*.py")]
    wrong = re.compile(r"""pip install ['"]?lyra(-supervisor)?(?![\w-])""", re.MULTILINE)
    stale = [str(path.relative_to(root)) for path in texts if wrong.search(path.read_text())]
    assert stale == []


# -- events: each name spelled once, in lyra.events ---------------------------------

EMITTERS = ("info", "warning", "error")


@cache
def event_names() -> dict[str, str]:
    """lyra.events' name constants (every public upper-case string there): constant to name."""
    from lyra import events

    return {
        constant: value
        for constant, value in vars(events).items()
        if constant.isupper() and not constant.startswith("_") and isinstance(value, str)
    }


def emissions(module: str, tree: ast.AST) -> Iterator[tuple[str, str | None, set[str], int]]:
    """(level, constant or None, keyword fields, line) for each call of an emitter of
    lyra.events in a module, and (``"indirect"``, None, …) for an emitter reached some
    other way (taken as a value, imported by name), which would hide its event's name."""
    inside = module == "lyra.events"
    called = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
            emitter = func.attr if func.value.id == "events" else None
        else:
            emitter = func.id if inside and isinstance(func, ast.Name) else None
        if emitter not in EMITTERS:
            continue
        called.add(id(func))
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Attribute) and isinstance(first.value, ast.Name):
            constant = first.attr if first.value.id == "events" else None
        else:
            constant = first.id if inside and isinstance(first, ast.Name) else None
        fields = {keyword.arg for keyword in node.keywords if keyword.arg is not None}
        yield emitter, constant, fields, node.lineno
    for node in ast.walk(tree):
        taken = (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id == "events"
            and node.attr in EMITTERS
            and id(node) not in called
        )
        imported = isinstance(node, ast.ImportFrom) and (
            (node.module == "lyra.events" and any(a.name in EMITTERS for a in node.names))
            or (node.module == "lyra" and any(a.name == "events" and a.asname for a in node.names))
        )
        if taken or imported:
            yield "indirect", None, set(), node.lineno


@cache
def emitted() -> dict[str, list[tuple[str, str | None, set[str], int]]]:
    """Every module's emissions (see :func:`emissions`)."""
    return {module: list(emissions(module, syntax(module))) for module in modules()}


def test_the_emission_checker_sees_names_and_hidden_emitters() -> None:
    """The checker itself: a constant's call, a spelled-out name and an emitter taken as
    a value are each seen for what they are."""
    code = (
        "from lyra import events\n"
        "events.info(events.RUN_FINISHED, total=1)\n"
        "events.warning('run_finished')\n"
        "say = events.error\n"
    )
    found = list(emissions("lyra.x", ast.parse(code)))
    assert found == [
        ("info", "RUN_FINISHED", {"total"}, 2),
        ("warning", None, set(), 3),
        ("indirect", None, set(), 4),
    ]


def test_event_names_are_snake_case_constants() -> None:
    """Each event name is snake or dotted lower case (structlog style), its constant is
    the name in capitals, and no two constants share a name."""
    names = event_names()
    assert len(names) > 30
    for constant, name in names.items():
        assert re.fullmatch(r"[a-z][a-z0-9]*([._][a-z0-9]+)*", name), name
        assert constant == name.upper().replace(".", "_"), constant
    assert len(set(names.values())) == len(names)


def test_every_event_is_emitted_through_its_constant() -> None:
    """Every call of lyra.events.info/warning/error names its event by a constant of
    lyra.events, no emitter is reached another way, and every constant is emitted."""
    names = event_names()
    offending = [
        f"{module}:{line} {level}"
        for module, found in emitted().items()
        for level, constant, _, line in found
        if constant not in names
    ]
    assert offending == []
    used = {constant for found in emitted().values() for _, constant, _, _ in found}
    assert sorted(set(names) - used) == []


def test_the_logs_read_only_events_that_are_emitted() -> None:
    """Every event lyra.logs reads back (by its constant) is emitted somewhere."""
    names = event_names()
    read = {
        name
        for module in modules()
        if layer(module) == "logs"
        for target, taken, _ in imports(module)
        if target == "lyra.events"
        for name in taken
        if name in names
    }
    assert {"DELEGATION_STARTED", "DELEGATION_FAILED", "RUN_FINISHED"} <= read
    used = {constant for found in emitted().values() for _, constant, _, _ in found}
    assert sorted(read - used) == []


def test_no_event_name_is_spelled_out() -> None:
    """No string in src/lyra is an event's name but its constant in lyra.events: a
    writer or a reader that spelled one out would miss a rename."""
    names = set(event_names().values())
    spelled = [
        f"{module}:{node.lineno} {node.value}"
        for module, path in modules().items()
        if module != "lyra.events"
        for node in ast.walk(syntax(module))
        if isinstance(node, ast.Constant) and node.value in names
    ]
    assert spelled == []


def documented_events() -> tuple[list[tuple[str, set[str], set[str]]], dict[str, set[str]]]:
    """docs/events.md's rows, (name, levels, fields), a group's fields expanded; and the
    groups of fields it defines (``*identity*``...)."""
    text = (SRC.parent / "docs" / "events.md").read_text(encoding="utf-8")
    cells = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith("| `") or line.startswith("| *")
    ]
    groups = {
        row[0].strip("*"): set(re.findall(r"`(\w+)`", row[1])) for row in cells if row[0][0] == "*"
    }
    rows = []
    for row in cells:
        if row[0][0] != "`":
            continue
        fields = set(re.findall(r"`(\w+)`", row[2]))
        for group in re.findall(r"\*(\w+)\*", row[2]):
            fields |= groups[group]
        rows.append((row[0].strip("`"), {level.strip() for level in row[1].split(",")}, fields))
    return rows, groups


def test_every_event_is_documented() -> None:
    """docs/events.md lists every event once, at the levels it is emitted at, with every
    field its calls name (fields passed on as a dict are the page's to list)."""
    rows, groups = documented_events()
    assert set(groups) == {"identity", "usage"}
    names = event_names()
    assert sorted(name for name, _, _ in rows) == sorted(names.values())
    levels: dict[str, set[str]] = {}
    fields: dict[str, set[str]] = {}
    for found in emitted().values():
        for level, constant, named, _ in found:
            assert constant is not None
            levels.setdefault(names[constant], set()).add(level)
            fields.setdefault(names[constant], set()).update(named)
    for name, documented_levels, documented_fields in rows:
        assert documented_levels == levels[name], name
        assert sorted(fields[name] - documented_fields) == [], name


# -- the public surface, and what crosses between lyra's parts ----------------------

LYRA_PUBLIC = [
    "Budget",
    "ChildContext",
    "ChildFailure",
    "ChildRef",
    "ConfigurationError",
    "DelegationResult",
    "ErrorType",
    "FailedDelegation",
    "FailureCategory",
    "Limits",
    "RecoveryPolicy",
    "Supervisor",
    "Task",
    "TaskReport",
    "Usage",
    "adelegate_task",
    "adelegate_with_retry",
    "delegate_task",
    "delegate_with_retry",
    "extract_blocker",
    "extract_category",
    "extract_completed_steps",
    "extract_files_modified",
    "extract_suggested_actions",
    "find_reports",
    "is_retryable",
    "parse_report",
    "render_report",
]
DELEGATION_PUBLIC = [
    "MAX_DEPTH",
    "Answerer",
    "Budget",
    "Child",
    "ChildAgent",
    "ChildContext",
    "ChildFailure",
    "ChildFn",
    "ChildRef",
    "DelegationResult",
    "ErrorType",
    "FailedDelegation",
    "FailureCategory",
    "Limits",
    "RunningAttempt",
    "TaskReport",
    "Usage",
    "Verifier",
    "concurrency",
    "escape",
    "escape_for_reading",
    "exception_text",
    "extract_blocker",
    "extract_category",
    "extract_completed_steps",
    "extract_files_modified",
    "extract_suggested_actions",
    "find_reports",
    "is_retryable",
    "json_safe",
    "observing",
    "parse_report",
    "parse_retry_after",
    "render_report",
    "running",
    "safe_str",
    "valid_data",
    "valid_text",
]


def ruff_order(name: str) -> tuple[int, str]:
    """The order ruff keeps ``__all__`` in: constants, then classes, then the rest."""
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


@pytest.mark.parametrize(
    ("package", "expected"), [("lyra", LYRA_PUBLIC), ("lyra.delegation", DELEGATION_PUBLIC)]
)
def test_the_public_surface(package: str, expected: list[str]) -> None:
    """The package exports exactly the names a user should use, sorted, none private,
    each importable from it."""
    module = importlib.import_module(package)
    assert list(module.__all__) == expected
    assert expected == sorted(expected, key=ruff_order)
    assert [name for name in expected if name.startswith("_")] == []
    namespace: dict[str, object] = {}
    exec(f"from {package} import *", namespace)
    assert sorted(name for name in namespace if name != "__builtins__") == sorted(expected)


def test_lyra_tells_type_checkers_what_its_table_holds() -> None:
    """lyra/__init__.py's TYPE_CHECKING imports re-export (``X as X``) exactly the names
    of the table that its lazy imports and ``__all__`` are made from, from the same homes."""
    import lyra

    tree = syntax("lyra")
    [block] = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name)
        and node.test.id == "TYPE_CHECKING"
    ]
    told: dict[str, tuple[str, ...]] = {}
    for node in block.body:
        assert isinstance(node, ast.ImportFrom)
        assert node.module is not None
        assert [alias.asname for alias in node.names] == [alias.name for alias in node.names]
        told[node.module] = tuple(alias.name for alias in node.names)
    assert told == lyra._HOMES


@pytest.mark.slow
def test_importing_lyra_imports_nothing_of_lyra_until_used() -> None:
    """``import lyra`` loads no other module of lyra; a public name loads its home."""
    code = (
        "import sys, lyra; print(sorted(m for m in sys.modules if m.partition('.')[0] == 'lyra'));"
        "lyra.Budget; print('lyra.delegation' in sys.modules, 'lyra.recovery' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["['lyra']", "True False"]


def part(module: str) -> str:
    """The part of lyra a module belongs to: its package or module right under lyra
    (``lyra.delegation._delegate`` is in ``lyra.delegation``, ``lyra`` is its own)."""
    return ".".join(module.split(".")[:2])


def crossing(module: str, target: str, names: list[str]) -> str | None:
    """Why importing ``names`` from ``target`` in ``module`` breaks the rule, or None.

    Within its part, a module imports anything. From another part of lyra it imports
    (1) a public module (no name in its path starts with ``_``) and the names in its
    ``__all__``; or (2) the part's internal surface, ``lyra.<part>._internal``, and the
    names in its ``__all__``; or (3) a private module right under lyra (``lyra._sync``,
    ``lyra._extras``…: lyra's own shared ground); never a name that starts with ``_``
    (a dunder such as ``__version__`` is public).
    """
    if not target.startswith("lyra") or part(target) == part(module):
        return None
    names = [name for name in names if not (name.startswith("__") and name.endswith("__"))]
    private = [name for name in names if name.startswith("_")]
    if private:
        return f"private names {private}"
    if target.count(".") == 1 and target.startswith("lyra._"):
        return None
    internal = target == f"{part(target)}._internal"
    if not internal and any(piece.startswith("_") for piece in target.split(".")):
        return "a private module"
    hidden = [name for name in names if name not in public_names(target)]
    return f"names not in its __all__ {hidden}" if hidden else None


def test_the_crossing_rule_sees_what_it_forbids() -> None:
    """The rule itself: a private module, a private name and a name outside a surface's
    __all__ are each refused; a public name, an internal one and lyra's ground pass."""
    assert crossing("lyra.recovery._loop", "lyra.delegation._delegate", ["run_attempt"])
    assert crossing("lyra.recovery._loop", "lyra.delegation", ["run_attempt"])
    assert crossing("lyra.recovery._loop", "lyra.delegation._internal", ["Budget"])
    assert crossing("lyra.recovery._loop", "lyra._sync", ["_private"])
    assert crossing("lyra.recovery._loop", "lyra.delegation", ["Budget"]) is None
    assert crossing("lyra.recovery._loop", "lyra.delegation._internal", ["Tree"]) is None
    assert crossing("lyra.recovery._loop", "lyra._sync", ["blocking"]) is None
    assert crossing("lyra.delegation._context", "lyra.delegation._live", []) is None
    assert crossing("lyra.mcp._server", "lyra", ["__version__", "Supervisor"]) is None


def test_parts_of_lyra_use_each_other_only_through_their_surfaces() -> None:
    """No part of lyra imports a private module or name of another part, except that
    part's agreed internal surface (see :func:`crossing`)."""
    offending = [
        f"{module}:{line} imports {target}: {why}"
        for module in modules()
        for target, names, line in imports(module)
        if (why := crossing(module, target, names)) is not None
    ]
    assert offending == []


# -- exceptions: one tree, as errors.py draws it ------------------------------------


def exception_classes() -> dict[str, list[str]]:
    """Every exception class lyra defines, by name, with the names of its bases (a base
    imported under another name is read as its own name)."""
    builtin = {
        name
        for name, value in vars(builtins).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    }
    classes: dict[str, list[list[str]]] = {}
    for module in modules():
        tree = syntax(module)
        aliases = {
            alias.asname: alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
            if alias.asname
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).rpartition(".")[2] for base in node.bases]
                classes.setdefault(node.name, []).append([aliases.get(b, b) for b in bases])
    found: dict[str, list[str]] = {}
    while True:
        known = builtin | set(found)
        more = {
            name: bases
            for name, definitions in classes.items()
            for bases in definitions
            if name not in found and set(bases) & known
        }
        if not more:
            break
        found.update(more)
    for name in found:
        assert len(classes[name]) == 1, f"two exception classes are called {name}"
    return found


def drawn_tree() -> dict[str, str | None]:
    """The trees errors.py's docstring draws: each class by name, with its parent."""
    from lyra import errors

    assert errors.__doc__ is not None
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in errors.__doc__.splitlines():
        root = re.fullmatch(r" {4}(\w+)", line)
        branch = re.match(r" {4}((?:[│ ] {3})*)[├└]── (\w+)", line)
        if root:
            path = [root[1]]
            parents[root[1]] = None
        elif branch:
            depth = len(branch[1]) // 4 + 1
            del path[depth:]
            assert branch[2] not in parents, f"{branch[2]} is drawn twice"
            parents[branch[2]] = path[-1]
            path.append(branch[2])
    return parents


def test_every_exception_is_drawn_where_it_stands() -> None:
    """errors.py's docstring draws every public exception class lyra defines, each under
    its own first base, and nothing that is not one."""
    classes = exception_classes()
    drawn = drawn_tree()
    assert {"ConfigurationError", "StageFailed", "NoWorkers"} <= set(classes)
    public = {name for name in classes if not name.startswith("_")}
    assert sorted(public - set(drawn)) == []
    assert sorted(set(drawn) - set(classes) - {"BaseException"}) == []
    misplaced = [
        f"{name} is drawn under {parent}, defined under {classes[name][0]}"
        for name, parent in drawn.items()
        if parent is not None and classes[name][0] != parent
    ]
    assert misplaced == []


def test_every_exception_is_a_lyra_error_but_the_two_that_stop_a_run() -> None:
    """Every exception class lyra defines descends from LyraError, except those drawn
    under BaseException (they must stop a whole run, as KeyboardInterrupt does)."""
    classes = exception_classes()
    drawn = drawn_tree()

    def ancestors(name: str) -> set[str]:
        found = set(classes.get(name, []))
        for base in classes.get(name, []):
            found |= ancestors(base)
        return found

    stops = {name for name, parent in drawn.items() if parent == "BaseException"}
    assert stops == {"NoWorkers", "StorageGaveOut"}
    assert all(classes[name] == ["BaseException"] for name in stops)
    outside = [
        name
        for name in classes
        if name != "LyraError" and name not in stops and "LyraError" not in ancestors(name)
    ]
    assert outside == []


def test_every_macro_call_in_an_escaped_template_is_marked_trusted() -> None:
    """A macro's values are escaped inside it, so its call must be marked ``| trusted``:
    otherwise the template's escaping runs over it again (``A&amp;amp;B`` in the answer's
    lists, before this was checked)."""
    unmarked = []
    for template in sorted(SRC.rglob("templates/*.j2")):
        text = template.read_text(encoding="utf-8")
        for macro in re.findall(r"\{%-?\s*macro\s+(\w+)\(", text):
            for call in re.findall(rf"\{{\{{-?\s*{macro}\([^}}]*\}}\}}", text):
                if not re.search(r"\|\s*trusted\s*-?\}\}$", call):
                    unmarked.append(f"{template.name}: {call}")
    assert unmarked == []
