"""MkDocs hook: the API reference page, generated from the OpenAPI schema.

At every build (``mkdocs build``/``serve``) it runs the example project's
``manage.py spectacular --validate --fail-on-warn`` with the interpreter running MkDocs
(which needs the ``api`` and ``docs`` extras), and adds ``api-reference.md`` to the site
as a generated page: one section per operation (parameters, request body, responses) and
one per component schema (fields, types, flags). Nothing is written into ``docs/``; the
page is never stale. A schema that cannot be built or validated fails the build.

Offline: the schema comes from the code, not from a server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from http import HTTPStatus
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.exceptions import PluginError
from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
MANAGE = REPO / "example_project" / "manage.py"
PAGE = "api-reference.md"
METHODS = ("get", "post", "put", "patch", "delete")


def load_schema() -> dict[str, Any]:
    """The example project's OpenAPI document (dict); raises ``PluginError`` on failure."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    env.pop("DJANGO_SETTINGS_MODULE", None)
    proc = subprocess.run(
        [
            sys.executable,
            str(MANAGE),
            "spectacular",
            "--format",
            "openapi-json",
            "--validate",
            "--fail-on-warn",
        ],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise PluginError(
            f"manage.py spectacular failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
        )
    return json.loads(proc.stdout)


def cell(text: Any) -> str:
    """``text`` made safe for one Markdown table cell."""
    value = " ".join(str(text or "").split())
    return value.replace("|", "\\|")


def slug(*parts: str) -> str:
    """An explicit heading id from ``parts`` (lower case, ``[a-z0-9-]``)."""
    return re.sub(r"[^a-z0-9]+", "-", "-".join(parts).lower()).strip("-")


def description(schema: dict[str, Any], text: Any) -> str:
    """``text`` for a table cell, without drf-spectacular's enum listing ("* `a` - a"),
    which the type column already shows."""
    value = str(text or "")
    if value.lstrip().startswith("* `") and ("enum" in schema or "enum" in schema.get("items", {})):
        return ""
    return cell(value)


def phrase(code: str) -> str:
    """The reason phrase of an HTTP status code ("OK", "Not Found")."""
    try:
        return HTTPStatus(int(code)).phrase
    except ValueError:
        return code


def schema_link(name: str) -> str:
    return f"[{name}](#{slug('schema', name)})"


def type_of(schema: dict[str, Any] | None) -> str:
    """A short, linked description of a JSON schema's type."""
    if not schema:
        return "any"
    if "$ref" in schema:
        return schema_link(schema["$ref"].rsplit("/", 1)[-1])
    for combo in ("oneOf", "anyOf", "allOf"):
        if combo in schema:
            joined = " or " if combo != "allOf" else " and "
            return joined.join(type_of(s) for s in schema[combo])
    kind = schema.get("type", "object")
    if kind == "object" and schema.get("properties"):
        return "object with " + ", ".join(f"`{name}`" for name in schema["properties"])
    if kind == "array":
        return f"array of {type_of(schema.get('items'))}"
    if kind == "object" and "additionalProperties" in schema and not schema.get("properties"):
        extra = schema["additionalProperties"]
        return f"object of {type_of(extra) if isinstance(extra, dict) else 'any'}"
    text = kind
    if schema.get("format"):
        text += f" ({schema['format']})"
    if "enum" in schema:
        text += ": " + ", ".join(f"`{v}`" for v in schema["enum"] if v is not None)
    return text


def constraints(schema: dict[str, Any]) -> str:
    """Bounds and defaults of a (property or parameter) schema, as text."""
    notes = []
    for key, label in (
        ("minimum", "min"),
        ("maximum", "max"),
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("pattern", "pattern"),
        ("default", "default"),
    ):
        if key in schema:
            value = schema[key]
            notes.append(
                f"{label} `{value}`" if key == "pattern" else f"{label} {json.dumps(value)}"
            )
    return ", ".join(notes)


def content_types(body: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    """Media types of a request/response body and the schema of the first one."""
    content = body.get("content") or {}
    if not content:
        return "", None
    first = next(iter(content.values()))
    return ", ".join(f"`{t}`" for t in content), first.get("schema")


def render_operation(path: str, method: str, op: dict[str, Any]) -> list[str]:
    lines = [
        f"### `{method.upper()} {path}` {{#{slug('op', op.get('operationId', method + path))}}}",
        "",
    ]
    if op.get("description"):
        lines += [op["description"].strip(), ""]
    params = op.get("parameters") or []
    if params:
        lines += ["| parameter | in | type | required | notes |", "|---|---|---|---|---|"]
        for p in params:
            s = p.get("schema") or {}
            notes = "; ".join(
                filter(None, [description(s, p.get("description")), cell(constraints(s))])
            )
            required = "yes" if p.get("required") else ""
            lines.append(
                f"| `{p['name']}` | {p['in']} | {cell(type_of(s))} | {required} | {notes} |"
            )
        lines.append("")
    if op.get("requestBody"):
        types, schema = content_types(op["requestBody"])
        lines += [f"**Request body** ({types}): {type_of(schema)}", ""]
    lines += ["| status | meaning | body |", "|---|---|---|"]
    for code, response in sorted(op.get("responses", {}).items()):
        _, schema = content_types(response)
        body = cell(type_of(schema)) if schema else "none"
        lines.append(f"| {code} | {cell(response.get('description')) or phrase(code)} | {body} |")
    lines.append("")
    return lines


def render_component(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name} {{#{slug('schema', name)}}}", ""]
    if schema.get("description"):
        lines += [schema["description"].strip(), ""]
    properties = schema.get("properties")
    if not properties:
        lines += [f"Type: {type_of(schema)}", ""]
        return lines
    required = set(schema.get("required", []))
    lines += ["| field | type | flags | notes |", "|---|---|---|---|"]
    for prop, s in properties.items():
        flags = [
            flag
            for flag, on in (
                ("required", prop in required),
                ("read-only", s.get("readOnly")),
                ("write-only", s.get("writeOnly")),
                ("nullable", s.get("nullable")),
            )
            if on
        ]
        notes = "; ".join(
            filter(None, [description(s, s.get("description")), cell(constraints(s))])
        )
        lines.append(f"| `{prop}` | {cell(type_of(s))} | {', '.join(flags)} | {notes} |")
    lines.append("")
    return lines


def render(schema: dict[str, Any]) -> str:
    """The whole reference page as Markdown."""
    info = schema.get("info", {})
    lines = [
        "# API reference",
        "",
        "Generated at build time from the OpenAPI "
        f"{schema.get('openapi', '3')} schema of the example project "
        "(`example_project/manage.py spectacular`), so it always matches the code. The "
        "example project mounts the API under `/api/`; your prefix may differ. How the API "
        "behaves (errors, permissions, owner scoping) is explained in [REST API](api.md).",
        "",
        f"Schema: *{cell(info.get('title'))}*, version {cell(info.get('version'))}. "
        "Authentication: "
        + ", ".join(f"`{n}`" for n in schema.get("components", {}).get("securitySchemes", {}))
        + ".",
        "",
        "## Operations",
        "",
    ]
    for path, item in schema.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                lines += render_operation(path, method, item[method])
    lines += ["## Schemas", ""]
    for name, component in schema.get("components", {}).get("schemas", {}).items():
        lines += render_component(name, component)
    return "\n".join(lines)


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated ``api-reference.md`` to the site's files."""
    files.append(File.generated(config, PAGE, content=render(load_schema())))
    return files
