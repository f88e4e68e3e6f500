"""The read routes: each parses its parameters, makes the one :mod:`autotune.api` call the CLI
makes for the same question and answers with what ``--json`` prints (:mod:`autotune.json_shapes`).

Parameters are declared with their bounds and choices, so that a bad one is a 422 naming it
before the library runs; the library checks again, as for the CLI. The routes are plain
functions: FastAPI runs them in its thread pool, the database calls block there. The best-profile
route, asked by every deployment pipeline, answers from :class:`~autotune.service.answers.AnswerCache`
and reaches the thread pool only to compute.
"""

from collections.abc import Callable
from typing import Annotated, Any, Literal, TypeVar

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse
from pydantic import BaseModel

from autotune import __version__, api, json_shapes, report
from autotune.engines.trtllm.versions import DEFAULT_TRTLLM_VERSION, trtllm_rules
from autotune.errors import ConfigurationError, NotFoundError
from autotune.perfmodel.calibration import ENGINE_STEP_OVERHEAD_US
from autotune.planning import MAX_CONCURRENCY, MAX_DEPTH, PlanOptions, parse_concurrencies
from autotune.planning.inputs import DTYPES, MAX_SEQUENCE, MAX_TP
from autotune.profiles.data import METHODS
from autotune.profiles.query import MAX_ID
from autotune.service.errors import ERROR_RESPONSES
from autotune.service.limits import DEFAULT_LIMIT, MAX_LIMIT, MAX_NAME_LENGTH
from autotune.service.answers import AnswerCache, question_of
from autotune.service.plots import StudyPlots
from autotune.serving import FORMATS

# The media type of each export format; the bytes are those `autotune export` writes.
EXPORT_MEDIA_TYPES = {"trtllm": "application/yaml", "trtllm-bench": "text/x-shellscript",
                      "vllm": "text/x-shellscript", "sglang": "text/x-shellscript", "json": "application/json"}
READ_ONLY = ("Reads need no token. The writes (`POST /v1/tune`, `POST /v1/jobs/{id}/cancel`) need "
             "`Authorization: Bearer <token>` matching the server's AUTOTUNE_API_TOKEN (401 without the header, "
             "403 with a wrong token); a server started without AUTOTUNE_API_TOKEN is read-only and answers "
             "every write 403.")

Method = Literal[METHODS]  # type: ignore[valid-type]
ExportFormat = Literal[FORMATS]  # type: ignore[valid-type]
Dtype = Literal[DTYPES]  # type: ignore[valid-type]
PlanEngine = Literal[tuple(ENGINE_STEP_OVERHEAD_US)]  # type: ignore[misc]


class PlanQuery(BaseModel):
    """The query of ``GET /v1/plan``: `autotune plan --model`'s options."""

    hardware: Annotated[str, Query(min_length=1, max_length=MAX_NAME_LENGTH,
                                   description="A catalog accelerator (see /v1/hardware) or stored hardware.")]
    model: Annotated[str, Query(min_length=1, max_length=MAX_NAME_LENGTH, description="A tuned target model.")]
    concurrencies: Annotated[str | None, Query(max_length=200, description="Comma-separated, e.g. 1,8,64.")] = None
    max_depth: Annotated[int | None, Query(ge=1, le=MAX_DEPTH)] = None
    tp: Annotated[int, Query(ge=1, le=MAX_TP)] = 1
    dtype: Dtype | None = None
    kv_dtype: Dtype | None = None
    engine: PlanEngine = "trtllm"
    isl: Annotated[int | None, Query(ge=1, le=MAX_SEQUENCE)] = None
    osl: Annotated[int | None, Query(ge=1, le=MAX_SEQUENCE)] = None
PlotName = Literal[tuple(report.PLOT_CAPTIONS)]  # type: ignore[misc]
Name = Annotated[str, Query(min_length=1, max_length=MAX_NAME_LENGTH)]
OptionalName = Annotated[str | None, Query(min_length=1, max_length=MAX_NAME_LENGTH)]
StudyName = Annotated[str, Path(min_length=1, max_length=MAX_NAME_LENGTH, description="The study's name.")]
ProfileId = Annotated[int, Path(ge=1, le=MAX_ID, description="The profile's id (`autotune profiles list`).")]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="At most this many items (newest first); the "
                             "X-Total-Count header says how many there are.")]
BEST_PATH = "/v1/profiles/best"
T = TypeVar("T")
HARDWARE_HELP = "NAME or FINGERPRINT of stored hardware, or 'current' (the server's machine)."


def checked_query(name: str, check: Callable[[Any], T], value: Any) -> T:
    """``check(value)``, the library's check of query parameter ``name``: its refusal becomes a
    validation error naming ``name`` (a 422 with its ``field``), with the library's message."""
    try:
        return check(value)
    except ConfigurationError as exc:
        raise RequestValidationError([{"type": "value_error", "loc": ("query", name), "msg": str(exc),
                                       "input": value}]) from None


def renamed_query(name: str, value: Any, old: str, old_value: Any) -> Any:
    """Query parameter ``name``, also accepted under its name before issue 38, ``old`` (hidden from the
    schema); both given is a validation error naming ``old`` (a 422 with its ``field``)."""
    if old_value is None:
        return value
    if value is not None:
        raise RequestValidationError([{"type": "value_error", "loc": ("query", old), "input": old_value,
                                       "msg": f"{old} is the old name of {name}: give one of them"}])
    return old_value


def json_response(data: Any, headers: dict[str, str] | None = None) -> Response:
    """``data`` encoded exactly as the CLI prints it with ``--json``."""
    return Response(json_shapes.dumps(data), media_type="application/json", headers=headers)


def listing(items: list, limit: int) -> Response:
    """The first ``limit`` items, with the full count in X-Total-Count."""
    return json_response(items[:limit], headers={"X-Total-Count": str(len(items))})


def build_router(db_url: str | None, writable: bool = False, answers: AnswerCache | None = None) -> APIRouter:
    """The read routes over the database at ``db_url`` (None: autotune's default); ``writable``:
    whether the server takes writes (it has a token), for /healthz to say; ``answers``: where the
    best-profile answers are kept (None: nothing is kept)."""
    router = APIRouter(responses=ERROR_RESPONSES)

    @router.get("/healthz", tags=["service"], summary="Liveness and database reachability")
    def healthz() -> Response:
        """200 when the database answers; says whether its schema is this autotune's newest, and
        whether the API takes writes."""
        status = api.db_status(db_url)
        return json_response({"status": "ok", "version": __version__, "schema_is_head": status.is_head,
                              "read_only": not writable, "writes": READ_ONLY})

    _add_profile_routes(router, db_url, answers or AnswerCache(0))
    _add_study_routes(router, db_url, StudyPlots(db_url))
    _add_planning_routes(router, db_url)
    return router


def _add_profile_routes(router: APIRouter, db_url: str | None, answers: AnswerCache) -> None:
    """The deployment profiles: listed, the best, one, one exported."""

    @router.get("/v1/profiles", tags=["profiles"], summary="List deployment profiles (`autotune profiles list`)")
    def profiles(hardware: Annotated[str | None, Query(max_length=MAX_NAME_LENGTH, description=HARDWARE_HELP)] = None,
                 model: OptionalName = None, method: Method | None = None, study: OptionalName = None,
                 limit: Limit = DEFAULT_LIMIT) -> Response:
        found = api.list_profiles(db_url, hardware=hardware, model=model, method=method, study=study)
        return listing(json_shapes.profile_list(found), limit)

    # Before /v1/profiles/{profile_id}, which would take "best" for an id.
    @router.get(BEST_PATH, tags=["profiles"], summary="The best stored profile (`autotune profiles best`)")
    async def best(request: Request, model: Annotated[str, Query(min_length=1, max_length=MAX_NAME_LENGTH, description="Target model name or fingerprint.")],
             hardware: Annotated[str | None, Query(max_length=MAX_NAME_LENGTH,
                                                   description=HARDWARE_HELP + " Default: any machine.")] = None,
             concurrency: Annotated[int | None, Query(ge=1, le=MAX_CONCURRENCY)] = None,
             slo_tpot_ms: Annotated[float | None, Query(gt=0, le=1e6)] = None,
             batch_size: Annotated[int | None, Query(ge=1, le=MAX_CONCURRENCY, include_in_schema=False)] = None,
             ) -> Response:
        """The profile with the highest tokens/s, or with a concurrency and/or TPOT limit the
        fastest stored operating point that meets them. 404 names the nearest stored match. The
        server may keep answers a few seconds (`autotune serve --answer-cache-s`); `Age` says how old one is."""
        concurrency = renamed_query("concurrency", concurrency, "batch_size", batch_size)

        def compute() -> bytes:
            found = api.best_profile(db_url, model, hardware=hardware, concurrency=concurrency, slo_tpot_ms=slo_tpot_ms)
            return json_shapes.dumps(found.to_dict()).encode("utf-8")

        body, age = await answers.get(question_of(request.scope), compute)
        return Response(body, media_type="application/json", headers={"Age": str(int(age))})

    @router.get("/v1/profiles/{profile_id}", tags=["profiles"], summary="One profile (`autotune profiles show`)")
    def profile(profile_id: ProfileId) -> Response:
        return json_response(json_shapes.profile_detail(api.show_profile(db_url, profile_id),
                                                         validations=api.profile_validations(db_url, profile_id)))

    @router.get("/v1/profiles/{profile_id}/export", tags=["profiles"], response_class=Response,
                summary="A profile as a serving config (`autotune export`: the same bytes)")
    def export(profile_id: ProfileId, format: ExportFormat = "trtllm",  # noqa: A002 - the CLI's option name
               trtllm_version: Annotated[str, Query(max_length=32)] = DEFAULT_TRTLLM_VERSION) -> Response:
        checked_query("trtllm_version", trtllm_rules, trtllm_version)
        exported = api.export_text(db_url, profile_id, format, trtllm_version=trtllm_version)
        return Response(exported.text.encode("utf-8"), media_type=EXPORT_MEDIA_TYPES[format],
                        headers={"Content-Disposition": f'attachment; filename="{exported.filename}"'})


def _add_study_routes(router: APIRouter, db_url: str | None, plots: StudyPlots) -> None:
    """The tuning studies: listed, their trials, report and plots."""

    @router.get("/v1/studies", tags=["studies"], summary="List tuning studies (`autotune studies`)")
    def studies(limit: Limit = DEFAULT_LIMIT) -> Response:
        return listing(json_shapes.study_list(api.studies(db_url)), limit)

    @router.get("/v1/studies/{name}/trials", tags=["studies"], summary="A study's trials (`autotune trials`)")
    def trials(name: StudyName, limit: Limit = DEFAULT_LIMIT) -> Response:
        return listing(api.trial_listing(db_url, name).row_dicts(), limit)

    @router.get("/v1/studies/{name}/report", tags=["studies"], response_class=HTMLResponse,
                summary="A study's HTML report, plots embedded (`autotune report`)")
    def report(name: StudyName) -> HTMLResponse:
        return HTMLResponse(api.report_html(db_url, name))

    @router.get("/v1/studies/{name}/plots", tags=["studies"],
                summary="A study's plots: each one's caption and PNG URL (the figures of `autotune report`)")
    def study_plots(name: StudyName) -> Response:
        """`intervals` says whether the figures draw 95 % intervals (a study only screened has none:
        `note` says why); each caption says what its error bars are. A plot's URL names the version
        of the study's data it shows, so it changes when a trial is added."""
        return json_response(plots.of(name).listing())

    @router.get("/v1/studies/{name}/{plot}.png", tags=["studies"], response_class=Response,
                responses={200: {"content": {"image/png": {}}, "description": "The plot as a PNG image."}},
                summary="One plot of a study's report, as PNG (where the served report links it)")
    def plot_png(name: StudyName, plot: Annotated[PlotName, Path(description="The plot's name (its file stem).")],
                 version: Annotated[str | None, Query(max_length=64, description=(
                     "The version `/v1/studies/{name}/plots` names; not checked: the plot as the study stands "
                     "now is sent."))] = None) -> Response:
        drawn = plots.of(name).pngs
        if plot not in drawn:
            raise NotFoundError(f"study {name!r} has no {plot} plot; it has {', '.join(drawn) or 'none'}")
        return Response(drawn[plot], media_type="image/png", headers={"Cache-Control": "no-cache"})


def _add_planning_routes(router: APIRouter, db_url: str | None) -> None:
    """The stored hardware and the what-if plan."""

    @router.get("/v1/hardware", tags=["hardware"], summary="Stored hardware profiles and the accelerator catalog")
    def hardware() -> Response:
        return json_response(api.hardware(db_url).to_dict())

    @router.get("/v1/plan", tags=["plan"], summary="What-if plan for a tuned target (`autotune plan --model`)")
    def plan(query: Annotated[PlanQuery, Query()],
             batch_sizes: Annotated[str | None, Query(max_length=200, include_in_schema=False)] = None) -> Response:
        """Predicted, never measured: the best method and depth per concurrency from the target's
        stored acceptance and a roofline of the hardware. Plans from a config.json (`--config`) are
        left to the CLI: they name files on the machine that runs them."""
        concurrencies = renamed_query("concurrencies", query.concurrencies, "batch_sizes", batch_sizes)
        sizes = checked_query("concurrencies", parse_concurrencies, concurrencies)
        predicted = api.plan(db_url, PlanOptions(hardware=query.hardware, model=query.model, concurrencies=sizes,
                                                 max_depth=query.max_depth, tp=query.tp, dtype=query.dtype,
                                                 kv_dtype=query.kv_dtype, engine=query.engine, isl=query.isl,
                                                 osl=query.osl))
        return json_response(predicted.to_dict())
