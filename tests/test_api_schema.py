"""The OpenAPI schema of the queue API: valid OpenAPI 3, and faithful to the routes and responses."""

from __future__ import annotations

import re

import pytest
from openapi_spec_validator import validate

from .api_helpers import make_queue, push
from .api_helpers import api, user  # noqa: F401 - fixtures, found by name

pytestmark = pytest.mark.django_db

# Every operation's documented status codes (beyond these, none): success codes and the errors of
# the table, plus authentication (401/403) and database unavailability (503) everywhere.
COMMON = {"401", "403", "503"}
EXPECTED = {
    ("/api/queues/", "get"): {"200", "400"},
    ("/api/queues/", "post"): {"201", "400", "409", "413"},
    ("/api/queues/{name}/", "get"): {"200", "400", "404"},
    ("/api/queues/{name}/", "patch"): {"200", "400", "404", "413"},
    ("/api/queues/{name}/", "delete"): {"204", "400", "404"},
    ("/api/queues/{name}/push/", "post"): {"200", "201", "400", "404", "413"},
    ("/api/queues/{name}/pop/", "post"): {"200", "204", "400", "404"},
    ("/api/queues/{name}/peek/", "get"): {"200", "204", "400", "404"},
    ("/api/queues/{name}/items/", "get"): {"200", "400", "404"},
    ("/api/queues/{name}/clear/", "post"): {"204", "400", "404"},
    ("/api/queues/{name}/claim/", "post"): {"200", "204", "400", "404", "413"},
    ("/api/queues/{name}/ack/", "post"): {"204", "400", "404", "409", "413"},
    ("/api/queues/{name}/release/", "post"): {"200", "400", "404", "409", "413"},
    ("/api/queues/{name}/extend/", "post"): {"200", "400", "404", "409", "413"},
    ("/api/queues/{name}/scheduled/", "get"): {"200", "400", "404"},
    ("/api/queues/{name}/dead-letters/", "get"): {"200", "400", "404"},
    ("/api/queues/{name}/dead-letters/{item_id}/", "delete"): {"204", "400", "404"},
    ("/api/queues/{name}/dead-letters/{item_id}/requeue/", "post"): {"200", "400", "404"},
    ("/api/queues/{name}/key-limits/", "get"): {"200", "400", "404"},  # per-key limits
    # Periodic schedules (api/schedules.py).
    ("/api/schedules/", "get"): {"200"},
    ("/api/schedules/", "post"): {"201", "400", "409"},
    ("/api/schedules/{name}/", "get"): {"200", "400", "404"},
    ("/api/schedules/{name}/", "patch"): {"200", "400", "404"},
    ("/api/schedules/{name}/", "delete"): {"204", "400", "404"},
    ("/api/schedules/{name}/pause/", "post"): {"200", "400", "404"},
    ("/api/schedules/{name}/resume/", "post"): {"200", "400", "404"},
    ("/api/schedules/{name}/run-now/", "post"): {"200", "400", "404"},
    # Workflows (api/workflows.py).
    ("/api/workflows/", "get"): {"200", "400"},
    ("/api/workflows/{id}/", "get"): {"200", "400", "404"},
    ("/api/workflows/{id}/cancel/", "post"): {"200", "400", "404"},
}
QUERY = {
    ("/api/queues/", "get"): {"cursor", "limit", "prefix"},
    ("/api/queues/{name}/pop/", "post"): {"end", "wait"},
    ("/api/queues/{name}/peek/", "get"): {"end"},
    ("/api/queues/{name}/items/", "get"): {"end", "cursor", "limit"},
    ("/api/queues/{name}/scheduled/", "get"): {"cursor", "limit"},
    ("/api/queues/{name}/dead-letters/", "get"): {"cursor", "limit"},
    ("/api/queues/{name}/key-limits/", "get"): {"top"},
    ("/api/workflows/", "get"): {"status", "backend", "cursor", "limit"},
    ("/api/workflows/{id}/", "get"): {"backend", "after", "limit"},
    ("/api/workflows/{id}/cancel/", "post"): {"backend"},
}


@pytest.fixture(scope="module")
def schema() -> dict:
    from drf_spectacular.generators import SchemaGenerator

    return SchemaGenerator().get_schema(request=None, public=True)


def resolve(schema: dict, node: dict) -> dict:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        node = schema["components"]["schemas"][name]
    return node


def router_operations() -> set[tuple[str, str]]:
    """(OpenAPI path, method) of every route the API's router serves, read from its URL patterns."""
    from django_fdbqueue.api.urls import router

    operations = set()
    for pattern in router.urls:
        actions = getattr(pattern.callback, "actions", None)
        if not actions:  # the browsable API root, not an operation
            continue
        regex = pattern.pattern.regex.pattern.lstrip("^").rstrip("$")
        path = "/api/" + re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", regex)
        # HEAD comes free with GET; OpenAPI documents GET only.
        operations |= {(path, method) for method in actions if method != "head"}
    return operations


def test_schema_is_valid_openapi(schema):
    assert schema["openapi"].startswith("3.")
    validate(schema)


def test_schema_endpoint_serves_the_same_valid_schema(client):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    served = response.json()
    validate(served)
    assert {p for p in served["paths"] if p.startswith(("/api/queues", "/api/schedules", "/api/workflows"))} == {
        p for p, _ in EXPECTED
    }


def test_operations_match_the_routes(schema):
    documented = {
        (path, method)
        for path, item in schema["paths"].items()
        for method in item
        if method in {"get", "post", "put", "patch", "delete"} and path != "/api/schema/"
    }
    assert router_operations() == set(EXPECTED)
    assert documented == set(EXPECTED)


@pytest.mark.parametrize(("path", "method"), sorted(EXPECTED))
def test_operation_documents_its_status_codes(schema, path, method):
    responses = schema["paths"][path][method]["responses"]
    assert set(responses) == EXPECTED[(path, method)] | COMMON


@pytest.mark.parametrize(("path", "method"), sorted(EXPECTED))
def test_error_responses_are_json_with_detail_and_code(schema, path, method):
    for code, response in schema["paths"][path][method]["responses"].items():
        if int(code) < 400:
            continue
        body = resolve(schema, response["content"]["application/json"]["schema"])
        assert {"detail", "code"} <= set(body["required"]), (path, method, code)
        if code == "503":
            assert "Retry-After" in response["headers"]


@pytest.mark.parametrize(("path", "method"), sorted(EXPECTED))
def test_no_content_responses_have_no_body(schema, path, method):
    responses = schema["paths"][path][method]["responses"]
    if "204" in responses:
        assert "content" not in responses["204"]


@pytest.mark.parametrize(("path", "method"), sorted(EXPECTED))
def test_query_parameters(schema, path, method):
    parameters = schema["paths"][path][method].get("parameters", [])
    query = {p["name"] for p in parameters if p["in"] == "query"}
    assert query == QUERY.get((path, method), set())
    in_path = {p["name"] for p in parameters if p["in"] == "path"}
    assert in_path == set(re.findall(r"\{(\w+)\}", path))
    for p in parameters:
        if p["in"] == "path":
            assert p["name"] in {"name", "item_id", "id"} and p["schema"]["type"] == "string"
            assert p["schema"]["pattern"]


def test_limit_maximum_is_500(schema):
    for path in (
        "/api/queues/",
        "/api/queues/{name}/items/",
        "/api/queues/{name}/scheduled/",
        "/api/queues/{name}/dead-letters/",
    ):
        (limit,) = [p for p in schema["paths"][path]["get"]["parameters"] if p["name"] == "limit"]
        assert limit["schema"]["maximum"] == 500


def test_response_bodies(schema):
    def body(path, method, code):
        response = schema["paths"][path][method]["responses"][code]
        return resolve(schema, response["content"]["application/json"]["schema"])

    queue = body("/api/queues/{name}/", "get", "200")
    assert set(queue["properties"]) == {
        "name",
        "kind",
        "size",
        "pushed",
        "popped",
        "min_priority",
        "max_priority",
        "oldest_age_seconds",
        "url",
        "leased",
        "delayed",
        "dead",
        "max_attempts",
        "oldest_enqueued_at",
        "created_at",
        "key_concurrency",
        "key_rate",
        "tenants",
    }
    item = body("/api/queues/{name}/peek/", "get", "200")
    assert set(item["properties"]) == {"id", "priority", "value", "enqueued_at", "attempts"}
    assert item["properties"]["enqueued_at"]["format"] == "date-time"
    for path in (
        "/api/queues/",
        "/api/queues/{name}/items/",
        "/api/queues/{name}/scheduled/",
        "/api/queues/{name}/dead-letters/",
    ):
        page = body(path, "get", "200")
        assert page["type"] == "object" and set(page["properties"]) == {"next", "results"}
        assert page["properties"]["results"]["type"] == "array"
    pushed = body("/api/queues/{name}/push/", "post", "201")
    assert len(pushed["oneOf"]) == 2
    request = schema["paths"]["/api/queues/{name}/push/"]["post"]["requestBody"]["content"]["application/json"]
    assert len(resolve(schema, request["schema"])["oneOf"]) == 2
    duplicate = body("/api/queues/{name}/push/", "post", "200")
    assert set(duplicate["properties"]) == {"id", "priority", "value", "enqueued_at", "attempts", "duplicate"}


def test_reliable_consumption_bodies(schema):
    """Issue 10: the lease routes' requests and responses, and the documented bounds."""

    def component(path, method, code=None):
        operation = schema["paths"][path][method]
        if code is None:
            node = operation["requestBody"]["content"]["application/json"]["schema"]
        else:
            node = operation["responses"][code]["content"]["application/json"]["schema"]
        return resolve(schema, node)

    claim = component("/api/queues/{name}/claim/", "post")
    assert set(claim["properties"]) == {"lease", "wait", "end", "spread"}
    spread = claim["properties"]["spread"]
    assert (spread["type"], spread["minimum"], spread["maximum"]) == ("integer", 2, 100)
    assert "rarely collide" in spread["description"] and "spread" not in claim.get("required", [])
    assert claim["properties"]["lease"]["maximum"] == 43_200
    assert claim["properties"]["wait"]["maximum"] == 20
    lease = component("/api/queues/{name}/claim/", "post", "200")
    assert set(lease["properties"]) == {"item", "receipt", "lease_expires_at"}
    assert lease["properties"]["lease_expires_at"]["format"] == "date-time"
    assert set(component("/api/queues/{name}/ack/", "post")["properties"]) == {"receipt"}
    assert set(component("/api/queues/{name}/release/", "post")["properties"]) == {"receipt", "delay"}
    released = component("/api/queues/{name}/release/", "post", "200")
    assert resolve(schema, released["properties"]["state"]["allOf"][0])["enum"] == ["ready", "delayed", "dead"]
    extend_forms = [resolve(schema, form) for form in component("/api/queues/{name}/extend/", "post")["oneOf"]]
    assert [set(form["properties"]) for form in extend_forms] == [{"receipt", "lease"}, {"receipt", "seconds"}]
    assert set(component("/api/queues/{name}/extend/", "post", "200")["properties"]) == {"receipt", "lease_expires_at"}
    assert set(component("/api/queues/{name}/", "patch")["properties"]) == {
        "max_attempts",
        "key_concurrency",
        "key_rate",
    }
    single = resolve(schema, resolve(schema, component("/api/queues/{name}/push/", "post"))["oneOf"][0])
    assert {"dedup_key", "delay", "not_before"} <= set(single["properties"])
    assert single["properties"]["not_before"]["format"] == "date-time"
    (wait,) = [p for p in schema["paths"]["/api/queues/{name}/pop/"]["post"]["parameters"] if p["name"] == "wait"]
    assert wait["schema"]["type"] == "number" and wait["schema"]["maximum"] == 20
    scheduled = component("/api/queues/{name}/scheduled/", "get", "200")["properties"]["results"]["items"]
    assert {"state", "visible_at", "attempts"} <= set(resolve(schema, scheduled)["properties"])
    dead = component("/api/queues/{name}/dead-letters/", "get", "200")["properties"]["results"]["items"]
    assert {"died_at", "attempts"} <= set(resolve(schema, dead)["properties"])


def test_schema_generation_emits_no_warnings(capsys):
    from drf_spectacular.drainage import GENERATOR_STATS
    from drf_spectacular.generators import SchemaGenerator

    GENERATOR_STATS.reset()
    SchemaGenerator().get_schema(request=None, public=True)
    err = capsys.readouterr().err
    assert "fdbqueue" not in err.lower() and "queue" not in err.lower(), err


def _operation_of(schema, path, method):
    return schema["paths"][path][method]


def test_a_lease_that_is_gone_has_one_documented_body(schema):
    """Issue 17: ack, release and extend document their 409 as "your lease is gone", with the
    common field lease_gone and the reason, for both codes."""
    for action in ("ack", "release", "extend"):
        response = _operation_of(schema, f"/api/queues/{{name}}/{action}/", "post")["responses"]["409"]
        body = resolve(schema, response["content"]["application/json"]["schema"])
        assert {"detail", "code", "lease_gone", "reason"} <= set(body["properties"]), action
        reason = body["properties"]["reason"]
        assert resolve(schema, reason.get("allOf", [reason])[0])["enum"] == ["expired", "not_found"]
        for words in ("lease is gone", "lease_expired", "lease_not_found", "lease_gone"):
            assert words in response["description"], (action, words)
    created = _operation_of(schema, "/api/queues/", "post")["responses"]["409"]
    assert "lease_gone" not in resolve(schema, created["content"]["application/json"]["schema"])["properties"]


def test_every_body_documents_that_unknown_fields_are_a_400(schema):
    """Issue 17: the 400 for a field the body does not define is in the schema's responses."""
    with_body = [
        (path, method)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
        if "requestBody" in operation
    ]
    assert len(with_body) == 9  # create, patch, push, claim, ack, release, extend; a schedule's create, patch
    for path, method in with_body:
        description = _operation_of(schema, path, method)["responses"]["400"]["description"]
        assert "Unknown field." in description and "never ignored" in description, (path, method)


def test_extend_documents_lease_and_its_deprecated_old_name(schema):
    request = _operation_of(schema, "/api/queues/{name}/extend/", "post")["requestBody"]
    assert request["required"] is True
    forms = [resolve(schema, f) for f in resolve(schema, request["content"]["application/json"]["schema"])["oneOf"]]
    new, old = forms
    assert set(new["required"]) == {"receipt", "lease"} and not new["properties"]["lease"].get("deprecated")
    assert set(old["required"]) == {"receipt", "seconds"} and old["properties"]["seconds"]["deprecated"] is True
    assert new["additionalProperties"] is False and old["additionalProperties"] is False


# -- the request examples Swagger UI offers: each works when executed as offered ----------------


def _push_examples(client) -> dict[str, dict]:
    """The push operation's request examples, from the served schema (what Swagger UI shows)."""
    served = client.get("/api/schema/?format=json").json()
    body = served["paths"]["/api/queues/{name}/push/"]["post"]["requestBody"]["content"]["application/json"]
    return {name: example["value"] for name, example in body.get("examples", {}).items()}


def test_every_push_example_is_accepted_when_executed(api):
    """Swagger UI would otherwise make up a body from the schema (delay with not_before, "string"
    as tenant and key), refused with a 400. The first example, the one shown first, works on any
    queue; the others on the queue their summary names (a tenant's on a queue split by tenant)."""
    examples = _push_examples(api)
    assert len(examples) >= 5
    assert not any("delay" in body and "not_before" in body for body in examples.values())
    make_queue(api, "fifo")
    make_queue(api, "jobs", kind="priority")
    make_queue(api, "split", kind="priority", tenants=True)
    first = next(iter(examples.values()))
    assert push(api, "fifo", first).status_code == 201
    for name, body in examples.items():
        queue = "split" if "tenant" in body else "jobs"
        response = push(api, queue, body)
        assert 200 <= response.status_code < 300, (name, body, response.content)
        assert "string" not in str(body), name
