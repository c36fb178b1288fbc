"""MkDocs hooks: the reference tables, generated from the code that holds their facts.

A page asks for one with a line `<!-- table: NAME -->`: `configuration` (gateway.config.Settings,
its other variables and gunicorn's), `detect`, `crop`, `anonymize` (gateway.params' tables) and
`url-options` (gateway.web.url.options' table, aliases and the options not offered), `vocabulary`
(what both grammars name, by what it sets, with each door's default), `errors`
(gateway/errors.py's catalogue, its limits from their definitions).
"""

from __future__ import annotations

import re
import runpy
import sys
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway import params  # noqa: E402
from gateway.config import OTHER_VARIABLES, Settings, variable, with_limits  # noqa: E402
from gateway.errors import documented_errors  # noqa: E402
from gateway.web.url import options  # noqa: E402

MARKER = re.compile(r"^<!-- table: ([a-z-]+) -->$", re.MULTILINE)


def shown(value: object) -> str:
    """A default as the tables write it."""
    if value is None or value in ((), b"", "", {}):
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple) and all(isinstance(v, int) for v in value):
        return "`#" + "".join(f"{v:02x}" for v in value) + "`"
    if isinstance(value, tuple):
        return "`" + ",".join(value) + "`"
    if isinstance(value, float) and value.is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def values(parameter: params.Parameter) -> str:
    if parameter.choices:
        words = ", ".join(f"`{choice}`" for choice in parameter.choices)
        return words + (", `XxY`" if parameter.kind == "gravity" else "")
    if parameter.low is not None:
        return f"{parameter.low:g}-{parameter.high:g}"
    return parameter.kind


def parameter_table(table: tuple[params.Parameter, ...], aliases: dict[str, str] | None = None) -> str:
    names = {p.name: [p.name] for p in table}
    for alias, name in (aliases or {}).items():
        names[name].append(alias)
    rows = ["| parameter | values | default | meaning |", "|---|---|---|---|"]
    for p in table:
        label = " / ".join(f"`{n}`" for n in names[p.name])
        rows.append(f"| {label} | {values(p)} | {shown(p.default)} | {p.description} |")
    return "\n".join(rows)


def url_options_table() -> str:
    rows = parameter_table(options.OPTIONS, options.ALIASES).splitlines()
    rows[0] = "| option | values | default | meaning |"
    rows += [f"| `{name}` | | | not offered (400): {why} |" for name, why in options.UNSUPPORTED.items()]
    return "\n".join(rows)


def vocabulary_table() -> str:
    """Each meaning that both grammars offer (Parameter.into), its names and each door's default."""
    doors = {"detect": params.DETECT, "crop": params.CROP + params.DETECT, "anonymize": params.ANONYMIZE}
    url = {p.into: p for p in options.OPTIONS if p.into}
    url_defaults = params.DOOR_DEFAULTS["detect"] | params.DOOR_DEFAULTS["url"]
    rows = [
        "| sets | `/v1` | URL form | /v1/detect | /v1/crop | /v1/anonymize | URL form's default |",
        "|---|---|---|---|---|---|---|",
    ]
    meanings = dict.fromkeys(p.into for table in doors.values() for p in table if p.into in url)
    for meaning in meanings:
        by_door = {door: next((p for p in table if p.into == meaning), None) for door, table in doors.items()}
        name = next(p.name for p in by_door.values() if p is not None)
        cells = [shown(p.default) if p is not None else "" for p in by_door.values()]
        default = url_defaults.get(meaning, url[meaning].default)
        rows.append(f"| `{meaning}` | `{name}` | `{url[meaning].name}` | {' | '.join(cells)} | {shown(default)} |")
    return "\n".join(rows)


def configuration_table() -> str:
    rows = ["| variable | default | meaning |", "|---|---|---|"]
    for item in fields(Settings):
        value = item.default_factory() if callable(item.default_factory) else item.default
        default = item.metadata["shown"] or shown(value)
        rows.append(f"| `{variable(item)}` | {default} | {item.metadata['meaning']} |")
    gunicorn = runpy.run_path(str(ROOT / "gateway" / "web" / "gunicorn.conf.py"))["VARIABLES"]
    for name, (default, meaning) in {**OTHER_VARIABLES, **gunicorn}.items():
        rows.append(f"| `{name}` | {shown(default)} | {meaning} |")
    return "\n".join(rows)


def errors_table() -> str:
    """Every error of gateway/errors.py, by status, with where it is answered and when."""
    rows = ["| status | code | answered by | when |", "|---|---|---|---|"]
    for error in documented_errors(by_url=True):
        where = "the URL form" if error.by_url_only else "every endpoint"
        rows.append(f"| {error.status} | `{error.code}` | {where} | {with_limits(error.summary)} |")
    return "\n".join(rows)


TABLES = {
    "configuration": configuration_table,
    "detect": lambda: parameter_table(params.DETECT),
    "crop": lambda: parameter_table(params.CROP),
    "anonymize": lambda: parameter_table(params.ANONYMIZE),
    "url-options": url_options_table,
    "vocabulary": vocabulary_table,
    "errors": errors_table,
}


def on_page_markdown(markdown: str, **_: object) -> str:
    return MARKER.sub(lambda match: TABLES[match.group(1)](), markdown)
