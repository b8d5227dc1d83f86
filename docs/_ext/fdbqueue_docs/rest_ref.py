"""reference/rest-api.md: every route of the REST API, from the OpenAPI schema the app serves.

drf-spectacular's generator runs at build time against the API's URLs, mounted at ``api/`` as the
installation steps do, exactly as the schema endpoint would produce it; the page lists each
operation (parameters, request body, responses) and then every schema the operations refer to.
"""

from __future__ import annotations

import json
from typing import Any

from . import markdown as md

METHODS = ("get", "post", "put", "patch", "delete")


def schema() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def label(name: str) -> str:
    return "rest-schema-" + md.slug(name)


def op_label(method: str, path: str) -> str:
    return "rest-" + md.slug(f"{method} {path}")


def type_of(node: dict[str, Any]) -> str:
    """A schema as a short Markdown phrase: ``integer``, a link to a named schema, ``array of X``."""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"{{ref}}`{name} <{label(name)}>`"
    for combiner, word in (("oneOf", " or "), ("anyOf", " or "), ("allOf", " and ")):
        if combiner in node:
            text = word.join(dict.fromkeys(type_of(part) for part in node[combiner]))
            break
    else:
        kind = node.get("type", "any")
        if kind == "array":
            text = "array of " + type_of(node.get("items", {}))
        else:
            text = md.code(kind + (f" ({node['format']})" if "format" in node else ""))
    return text + (" or `null`" if node.get("nullable") else "")


CONSTRAINTS = (
    ("enum", "one of {}"),
    ("default", "default {}"),
    ("minimum", "≥ {}"),
    ("exclusiveMinimum", "> {}"),
    ("maximum", "≤ {}"),
    ("minLength", "length ≥ {}"),
    ("maxLength", "length ≤ {}"),
    ("minItems", "≥ {} items"),
    ("maxItems", "≤ {} items"),
    ("pattern", "matches {}"),
)


def constraints(node: dict[str, Any]) -> str:
    parts = []
    for key, phrase in CONSTRAINTS:
        if key not in node or (key == "exclusiveMinimum" and node[key] is True):
            continue
        value = node[key]
        if key == "enum":
            value = ", ".join(md.code(json.dumps(v)) for v in value)
        elif key in ("default", "pattern"):
            value = md.code(json.dumps(value) if key == "default" else value)
        parts.append(phrase.format(value))
    if node.get("exclusiveMinimum") is True and "minimum" in node:  # OpenAPI 3.0's boolean form
        parts = [p.replace("≥", ">") if p.startswith("≥") else p for p in parts]
    for flag, word in (("readOnly", "read-only"), ("writeOnly", "write-only"), ("deprecated", "deprecated")):
        if node.get(flag):
            parts.append(word)
    return "; ".join(parts)


def _meaning(node: dict[str, Any]) -> str:
    extra = constraints(node)
    text = md.prose(node.get("description"), first_paragraph=False)
    return " ".join(part for part in (text, f"({extra})" if extra else "") if part) or "—"


def _body(content: dict[str, Any] | None) -> str:
    if not content:
        return "no body"
    return "; ".join(f"{type_of(media.get('schema', {}))} ({md.code(kind)})" for kind, media in content.items())


def render_operation(path: str, method: str, op: dict[str, Any]) -> str:
    out = [
        f"({op_label(method, path)})=\n### {md.text(op.get('summary') or op['operationId'])}\n",
        f"{md.code(method.upper() + ' ' + path)}\n",
    ]
    if op.get("description"):
        out.append(md.prose(op["description"], first_paragraph=False) + "\n")
    params = op.get("parameters", [])
    if params:
        out.append(
            md.table(
                ["Parameter", "In", "Type", "Required", "Meaning"],
                [
                    [
                        md.code(p["name"]),
                        p["in"],
                        type_of(p.get("schema", {})),
                        "yes" if p.get("required") else "no",
                        _meaning({**p.get("schema", {}), "description": p.get("description")}),
                    ]
                    for p in params
                ],
            )
        )
    if "requestBody" in op:
        body = op["requestBody"]
        out.append(f"Request body{' (required)' if body.get('required') else ''}: {_body(body.get('content'))}\n")
    out.append(
        md.table(
            ["Status", "Body", "Meaning"],
            [
                [
                    md.code(status),
                    _body(response.get("content")),
                    md.prose(response.get("description"), first_paragraph=False),
                ]
                for status, response in op.get("responses", {}).items()
            ],
        )
    )
    return "\n".join(out)


def render_schema(name: str, node: dict[str, Any]) -> str:
    out = [f"({label(name)})=\n### {name}\n"]
    if node.get("description"):
        out.append(md.prose(node["description"], first_paragraph=False) + "\n")
    properties = node.get("properties")
    if properties:
        required = set(node.get("required", []))
        out.append(
            md.table(
                ["Field", "Type", "Required", "Meaning"],
                [
                    [md.code(field), type_of(prop), "yes" if field in required else "no", _meaning(prop)]
                    for field, prop in properties.items()
                ],
            )
        )
        if node.get("additionalProperties") is False:
            out.append("Other fields are refused (400).\n")
    else:
        out.append(f"{type_of(node)}{': ' + constraints(node) if constraints(node) else ''}\n")
    return "\n".join(out)


def _security(spec: dict[str, Any]) -> str:
    schemes = spec.get("components", {}).get("securitySchemes", {})
    rows = [
        [
            md.code(name),
            md.text(s.get("type", "")),
            md.text(f"{s.get('in', '')} {s.get('name', '')}"),
            md.text(s.get("description", "")),
        ]
        for name, s in schemes.items()
    ]
    return md.table(["Scheme", "Type", "Where", "Meaning"], rows) if rows else ""


def render() -> str:
    spec = schema()
    operations = [
        (path, method, item[method]) for path, item in spec["paths"].items() for method in METHODS if method in item
    ]
    out = [
        f"OpenAPI {spec['openapi']}; the paths below assume the API is mounted at `api/`. "
        "Authentication, as a project configured like the installation steps (knox tokens and "
        "sessions) offers it:\n",
        _security(spec),
        "## Routes\n",
        md.table(
            ["Method and path", "Summary"],
            [
                [f"{{ref}}`{method.upper()} {path} <{op_label(method, path)}>`", md.text(op.get("summary", ""))]
                for path, method, op in operations
            ],
        ),
    ]
    out += [render_operation(path, method, op) for path, method, op in operations]
    out.append("## Schemas\n")
    out += [render_schema(name, node) for name, node in spec.get("components", {}).get("schemas", {}).items()]
    return "\n".join(out)
