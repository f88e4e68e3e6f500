"""The CLI's choice lists are the registries' names: a method, sampler, engine or export format added
to its registry is offered by every command that takes one, and a removed one is refused by them."""

from __future__ import annotations

import click
import pytest

from autotune.cli import cli
from autotune.engines.base import METHODS
from autotune.engines.registry import ENGINES, FOLDER_ENGINES
from autotune.planning.inputs import DTYPES
from autotune.search.samplers import SAMPLERS
from autotune.serving import FORMATS


def choices(path: str, option: str) -> tuple[str, ...]:
    command: click.Command = cli
    for name in path.split():
        command = command.commands[name]  # type: ignore[attr-defined]
    (param,) = [p for p in command.params if option in p.opts]
    return tuple(param.type.choices)


@pytest.mark.parametrize(("path", "option", "names"), [
    ("tune", "--sampler", tuple(SAMPLERS)),
    ("tune", "--method", METHODS),
    ("tune", "--engine", ENGINES),
    ("measure", "--method", METHODS),
    ("preflight", "--engine", FOLDER_ENGINES),
    ("export", "--format", FORMATS),
    ("plan", "--export", FORMATS),
    ("plan", "--dtype", DTYPES),
    ("plan", "--kv-dtype", DTYPES),
])
def test_a_choice_list_is_its_registry(path: str, option: str, names: tuple[str, ...]) -> None:
    assert choices(path, option) == tuple(names)
