"""Plain-text templates (prompts, answers, briefs), rendered in one place.

:class:`Templates` loads the ``templates/`` folder of a package; lyra's own
are :data:`LYRA`. A workload built on lyra (such as :mod:`lyra.proteins`)
keeps its templates beside its code and renders them the same way.

Text that people and parent models read back (answers, briefs) carries
untrusted values -- a child's words, a data source's fields -- so those
templates are ``escaped``: every value passes through the report format's one
escaping function (:func:`lyra.delegation.escape`), and no value can forge a
``<task_metadata>`` block. Text that is already escaped is marked with the
``trusted`` filter. Reports themselves are written by
:mod:`lyra.delegation._report._render`, not by a template.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import Any

import jinja2

__all__ = ["LYRA", "Templates", "render"]


class _Trusted(str):
    """Text already escaped (marked with the ``trusted`` filter)."""

    __slots__ = ()


class Templates:
    """The jinja templates in ``<package>/templates``, each compiled once.

    ``escape``: a function applied to every value rendered, except text marked
    ``{{ text | trusted }}`` (see the module docstring).
    """

    def __init__(self, package: str, *, escape: Callable[[str], str] | None = None) -> None:
        self.package = package
        self.escape = escape
        # jinja's own cache takes a lock and a lookup on every call
        self._loaded: dict[str, jinja2.Template] = {}

    @cached_property
    def environment(self) -> jinja2.Environment:
        """The jinja environment (built on first use)."""
        environment = jinja2.Environment(
            loader=jinja2.PackageLoader(self.package, "templates"),
            auto_reload=False,  # packaged files: no stat of the file per render
            autoescape=False,  # plain text for people and models, not HTML
            trim_blocks=True,
            lstrip_blocks=True,
            undefined=jinja2.StrictUndefined,
            finalize=self._finalize if self.escape is not None else None,
        )
        environment.filters["trusted"] = _Trusted
        return environment

    def _finalize(self, value: Any) -> Any:
        if isinstance(value, _Trusted) or self.escape is None:
            return value
        return self.escape(str(value))

    def get(self, name: str) -> jinja2.Template:
        """One template, loaded once."""
        template = self._loaded.get(name)
        if template is None:
            template = self._loaded[name] = self.environment.get_template(name)
        return template

    def render(self, name: str, **values: Any) -> str:
        """Render one template."""
        return self.get(name).render(**values)


LYRA = Templates("lyra")
"""lyra's own templates."""


def render(name: str, **values: Any) -> str:
    """Render one of lyra's own templates."""
    return LYRA.render(name, **values)
