"""The protein workload's own templates (briefs, prompts, the analysis text).

Every value they render is escaped with the report format's escaping function:
a protein description from a data source can never forge a ``<task_metadata>``
block in a brief or on stdout.
"""

from __future__ import annotations

from lyra.delegation import escape_for_reading
from lyra.templates import Templates

TEMPLATES = Templates("lyra.proteins", escape=escape_for_reading)
render = TEMPLATES.render
