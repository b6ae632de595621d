"""Render openapi.yaml (the service's exported schema) as docs/api.md.

    .venv/bin/python docs/gen_api.py            # rewrite docs/api.md
    .venv/bin/python docs/gen_api.py --check    # exit 1 when docs/api.md is out of date

`openapi.yaml` itself is `judge-service openapi -o openapi.yaml`; run this after it.
Needs PyYAML only (a dependency of judge-service and of mkdocs). The output is
deterministic: paths in the file's order, grouped by their first tag, schemas sorted.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "openapi.yaml"
OUT = Path(__file__).resolve().parent / "api.md"
METHODS = ("get", "post", "put", "patch", "delete")
REF = "#/components/schemas/"


def anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def op_anchor(method: str, path: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", f"{method} {path}".lower()).strip("-")


def prose(text: str | None) -> str:
    """A description as one markdown line: RST ``code`` to `code`, whitespace runs to one
    space, and outside code spans the characters markdown would read (<, >, *, |) escaped."""
    if not text:
        return ""
    text = " ".join(text.replace("``", "`").split())
    parts = text.split("`")
    for i in range(0, len(parts), 2):  # even parts lie outside code spans
        parts[i] = (
            parts[i]
            .replace("&", "&amp;")
            .replace("<", "&lt;")
            .replace(">", "&gt;")
            .replace("*", "\\*")
            .replace("|", "\\|")
        )
    for i in range(1, len(parts), 2):
        parts[i] = parts[i].replace("|", "\\|")
    return "`".join(parts)


def type_of(schema: dict[str, Any]) -> str:
    """A schema's type as markdown: links for references, `a or b` for unions."""
    if "$ref" in schema:
        name = schema["$ref"].removeprefix(REF)
        return f"[{name}](#{anchor(name)})"
    if "anyOf" in schema or "oneOf" in schema:
        options = schema.get("anyOf") or schema.get("oneOf") or []
        return " or ".join(type_of(option) for option in options)
    if "enum" in schema:
        return " \\| ".join(f"`{value}`" for value in schema["enum"])
    if "const" in schema:
        return f"`{schema['const']}`"
    kind = schema.get("type")
    if kind == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    if kind == "object" or "additionalProperties" in schema:
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict) and extra:
            return f"object of {type_of(extra)}"
        return "object"
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    return str(kind) if kind else "any"


def constraints(schema: dict[str, Any]) -> str:
    """Bounds of a schema (its union members' too), e.g. `maxLength 256, minimum 0`."""
    found: list[str] = []
    keys = (
        "minLength",
        "maxLength",
        "minimum",
        "exclusiveMinimum",
        "maximum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
        "pattern",
    )
    members = [schema, *(schema.get("anyOf") or []), schema.get("items") or {}]
    for member in members:
        for key in keys:
            if key in member:
                item = f"{key} {member[key]}"
                if member is schema.get("items"):
                    item = f"items {item}"
                if item not in found:
                    found.append(item)
    return ", ".join(f"`{item}`" for item in found)


def default_of(schema: dict[str, Any]) -> str:
    if "default" not in schema:
        return ""
    value = schema["default"]
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    return f"`{value}`"


def cell(text: str) -> str:
    return text.replace("\n", " ")


def render_operation(method: str, path: str, op: dict[str, Any], schemes: set[str]) -> list[str]:
    lines = [f"### `{method.upper()} {path}` {{#{op_anchor(method, path)}}}", ""]
    if op.get("summary"):
        lines += [f"**{prose(op['summary'])}**", ""]
    if op.get("description"):
        lines += [prose(op["description"]), ""]
    if op.get("security"):
        names = sorted({name for entry in op["security"] for name in entry} & schemes)
        lines += [f"Security: {', '.join(names)} (see [Authentication](#authentication)).", ""]
    params = op.get("parameters") or []
    if params:
        lines += [
            "| parameter | in | type | required | default | constraints | description |",
            "|---|---|---|---|---|---|---|",
        ]
        for p in params:
            schema = p.get("schema", {})
            lines.append(
                "| "
                + " | ".join(
                    cell(x)
                    for x in (
                        f"`{p['name']}`",
                        p.get("in", ""),
                        type_of(schema),
                        "yes" if p.get("required") else "no",
                        default_of(schema),
                        constraints(schema),
                        prose(p.get("description") or schema.get("description")),
                    )
                )
                + " |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        for media, content in body.get("content", {}).items():
            req = " (required)" if body.get("required") else ""
            lines += [f"Request body{req}: `{media}`, {type_of(content.get('schema', {}))}.", ""]
    responses = op.get("responses") or {}
    if responses:
        lines += ["| status | description | body |", "|---|---|---|"]
        for status in sorted(responses, key=str):
            response = responses[status]
            bodies = [
                f"`{media}` {type_of(content.get('schema', {}))}"
                if content.get("schema")
                else f"`{media}`"
                for media, content in (response.get("content") or {}).items()
            ]
            lines.append(
                f"| {status} | {prose(response.get('description'))} | {', '.join(bodies)} |"
            )
        lines.append("")
    return lines


def render_schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### {name} {{#{anchor(name)}}}", ""]
    if schema.get("description"):
        lines += [prose(schema["description"]), ""]
    props = schema.get("properties") or {}
    if not props:
        lines += [f"Type: {type_of(schema)}.", ""]
        return lines
    required = set(schema.get("required") or [])
    closed = schema.get("additionalProperties") is False
    lines += [
        "| field | type | required | default | constraints | description |",
        "|---|---|---|---|---|---|",
    ]
    for field, prop in props.items():
        lines.append(
            "| "
            + " | ".join(
                cell(x)
                for x in (
                    f"`{field}`",
                    type_of(prop),
                    "yes" if field in required else "no",
                    default_of(prop),
                    constraints(prop),
                    prose(prop.get("description")),
                )
            )
            + " |"
        )
    lines.append("")
    if closed:
        lines += ["Unknown fields are refused (422).", ""]
    return lines


def render(spec: dict[str, Any]) -> str:
    info = spec.get("info", {})
    schemes = spec.get("components", {}).get("securitySchemes", {}) or {}
    lines = [
        "# API reference",
        "",
        "<!-- Generated from openapi.yaml by docs/gen_api.py: do not edit by hand. -->",
        "",
        "Generated from `openapi.yaml` (the schema the app exports: `judge-service openapi`) by",
        "`docs/gen_api.py`. After the API changes, regenerate both:",
        "",
        "```bash",
        ".venv/bin/judge-service openapi -o openapi.yaml",
        ".venv/bin/python docs/gen_api.py          # --check: exit 1 when this page is stale",
        "```",
        "",
        f"{prose(info.get('title'))} {info.get('version', '')}: {prose(info.get('summary'))}",
        f"OpenAPI {spec.get('openapi', '')}. The meaning of the fields, the formulas and the",
        "validation codes: [Design and contract](design.md).",
        "",
        "## Authentication",
        "",
    ]
    for name, scheme in sorted(schemes.items()):
        kind = scheme.get("type", "")
        detail = scheme.get("scheme", "")
        lines.append(f"- `{name}`: {kind} {detail}. {prose(scheme.get('description'))}".rstrip())
    lines += [
        "",
        "Required on every `/v1` operation when the server has `JUDGE_API_KEYS`"
        " (`authorization: Bearer <key>`); open otherwise.",
        "",
        "## Endpoints",
        "",
    ]
    groups: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, item in (spec.get("paths") or {}).items():
        for method in METHODS:
            if method in item:
                op = item[method]
                tag = (op.get("tags") or ["other"])[0]
                groups.setdefault(tag, []).append((method, path, op))
    index = ["| operation | summary |", "|---|---|"]
    for ops in groups.values():
        for method, path, op in ops:
            link = f"[`{method.upper()} {path}`](#{op_anchor(method, path)})"
            index.append(f"| {link} | {prose(op.get('summary'))} |")
    lines += [*index, ""]
    for tag, ops in groups.items():
        lines += [f"## {tag}", ""]
        for method, path, op in ops:
            lines += render_operation(method, path, op, set(schemes))
    lines += ["## Schemas", ""]
    schemas = spec.get("components", {}).get("schemas", {}) or {}
    for name in sorted(schemas):
        lines += render_schema(name, schemas[name])
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spec", type=Path, default=SPEC)
    parser.add_argument("-o", "--output", type=Path, default=OUT)
    parser.add_argument("--check", action="store_true", help="exit 1 if the output is stale")
    args = parser.parse_args(argv)
    text = render(yaml.safe_load(args.spec.read_text(encoding="utf-8")))
    current = args.output.read_text(encoding="utf-8") if args.output.exists() else None
    if args.check:
        if current != text:
            print(f"{args.output} is out of date: run docs/gen_api.py", file=sys.stderr)
            return 1
        print(f"{args.output} is current")
        return 0
    if current != text:
        args.output.write_text(text, encoding="utf-8")
        print(f"{args.output}: written")
    else:
        print(f"{args.output}: already current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
