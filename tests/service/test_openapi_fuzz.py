"""schemathesis over the OpenAPI document of the live server: whatever the schema allows (and a
little it does not), the server never answers with a 5xx, and every 422 names its `field` (README's
promise): a parameter or body field of the operation, or `body` / `query` for them together.

Driven through hypothesis directly (each operation's strategy), not schemathesis' pytest plugin,
whose lazy fixture schemas do not run under the pytest this project pins.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

EXAMPLES_PER_ROUTE = 4  # about 70 requests in all, each opening the database as a CLI command does
WHOLE = {"body", "query"}  # a combination of the parameters, or a body that is not JSON


@schemathesis.check
def a_422_names_its_field(ctx, response, case) -> None:  # noqa: ANN001 - schemathesis' check signature
    if response.status_code != 422:
        return
    field = response.json()["error"].get("field")
    raw = case.operation.definition.raw
    named = {parameter["name"] for parameter in raw.get("parameters", [])}
    for content in raw.get("requestBody", {}).get("content", {}).values():
        named |= set(resolved(case, content["schema"]).get("properties", {}))
    assert field in named | WHOLE, f"{case.operation.label}: 422 names no field of it: {response.text}"


def resolved(case, schema: dict) -> dict:  # noqa: ANN001 - a schemathesis Case
    """``schema``, its ``$ref`` (#/components/schemas/...) followed."""
    if "$ref" not in schema:
        return schema
    return case.operation.schema.raw_schema["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]


@pytest.mark.slow
def test_no_route_answers_with_a_server_error_and_every_422_names_its_field(client: httpx.Client) -> None:
    schema = schemathesis.openapi.from_url(f"{client.base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 17  # 13 reads, the 4 job routes

    for operation in operations:
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_ROUTE, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def checked(case) -> None:  # noqa: ANN001 - a schemathesis Case
            case.call_and_validate(checks=[not_a_server_error, a_422_names_its_field])

        checked()
