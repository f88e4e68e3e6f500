"""schemathesis over the OpenAPI document of the live server: whatever the schema allows (and a
little it does not), the server never answers with a 5xx.

Driven through hypothesis directly (each operation's strategy), not schemathesis' pytest plugin,
whose lazy fixture schemas do not run under the pytest this project pins.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

EXAMPLES_PER_ROUTE = 4  # about 50 requests in all, each opening the database as a CLI command does


@pytest.mark.slow
def test_no_route_answers_with_a_server_error(client: httpx.Client) -> None:
    schema = schemathesis.openapi.from_url(f"{client.base_url}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 15  # 11 reads, the 4 job routes

    for operation in operations:
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES_PER_ROUTE, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def no_server_error(case) -> None:  # noqa: ANN001 - a schemathesis Case
            case.call_and_validate(checks=[not_a_server_error])

        no_server_error()
