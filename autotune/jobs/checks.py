"""Checking a tune request before it is queued or run: the model roots first, then the options as
``autotune tune`` checks them, and a refusal names the request field it is about.

The roots come first because the tune's own checks look at the files (does the target exist, is
it a folder): a path outside the roots is refused with the same words whether or not it exists,
so the answer says nothing about the machine's files.

The tune's checks are the command's, whose messages name the option but carry no field. The field
at fault is found by asking the same checks about each field of the request alone (the others at
their defaults): the first one refused alone is named; when only a combination is refused, none is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autotune.errors import ConfigurationError, InvalidOption

if TYPE_CHECKING:
    from autotune.jobs.roots import ModelRoots
    from autotune.search.options import TuneOptions


def checked_options(request: Mapping[str, Any], db_url: str | None, roots: ModelRoots | None, *,
                    here: bool) -> TuneOptions:
    """The options ``request`` asks for, checked: against ``roots`` (None: not known here, the
    worker checks), then as the tune checks them; ``here``: this machine runs the
    tune, so its files and engine are checked too (else only what holds on any machine).
    :class:`InvalidOption` for the first problem."""
    from autotune.search.request import model_paths, tune_options

    try:
        options = tune_options(request, db_url)
    except ConfigurationError as exc:  # an unknown field
        raise InvalidOption(str(exc), _field_at_fault(request, db_url, here)) from None
    if roots is not None:
        roots.check(model_paths(options))
    try:
        _validate(options, here)
    except ConfigurationError as exc:
        raise InvalidOption(str(exc), _field_at_fault(request, db_url, here)) from None
    return options


def _validate(options: TuneOptions, here: bool) -> None:
    if here:
        options.validate()
    else:
        options.validate_values()


def _field_at_fault(request: Mapping[str, Any], db_url: str | None, here: bool) -> str | None:
    from autotune.search.request import tune_options

    for field, value in request.items():
        try:
            _validate(tune_options({field: value}, db_url), here)
        except ConfigurationError:
            return field
    return None
