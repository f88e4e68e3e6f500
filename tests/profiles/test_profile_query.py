"""list / show / best on real databases, including every "not found" and the nearest match it names."""

from __future__ import annotations

import json

import pytest

import profile_factory as factory
from autotune.errors import ConfigurationError
from autotune.profiles import ProfileNotFoundError, best_profile, list_profiles, query, show_profile


@pytest.fixture
def populated(db_url: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, dict[str, int]]:
    monkeypatch.setattr(query, "current_fingerprint", lambda: factory.H100[1])  # "this machine" is the H100
    return db_url, factory.populate(db_url)


def ids_of(profiles) -> list[int]:  # noqa: ANN001
    return [p.id for p in profiles]


def test_list_is_newest_first_and_filters(populated) -> None:  # noqa: ANN001
    url, ids = populated
    assert ids_of(list_profiles(url)) == [ids["other"], ids["cpu"], ids["h100-new"], ids["h100-old"]]
    on_h100 = [ids["other"], ids["h100-new"], ids["h100-old"]]
    assert ids_of(list_profiles(url, hardware=factory.H100[0])) == on_h100
    assert ids_of(list_profiles(url, hardware=factory.H100[1])) == on_h100
    assert ids_of(list_profiles(url, hardware=factory.H100[1][:6])) == on_h100  # unique prefix
    assert ids_of(list_profiles(url, hardware="current")) == on_h100
    assert ids_of(list_profiles(url, model="tiny-target", hardware="current")) == [ids["h100-new"], ids["h100-old"]]
    assert ids_of(list_profiles(url, study="cpu")) == [ids["cpu"]]
    assert all(p.method == "mtp" for p in list_profiles(url, method="mtp"))
    assert list_profiles(url, method="ngram") == []
    summary = list_profiles(url, study="h100-old")[0].summary()
    assert summary["hardware"] == factory.H100[0] and summary["model"] == "tiny-target"
    assert summary["method"] == "mtp" and summary["concurrency"] == 4
    json.dumps([p.summary() for p in list_profiles(url)])


def test_current_hardware_never_tuned_lists_nothing(populated, monkeypatch) -> None:  # noqa: ANN001
    url, _ = populated
    monkeypatch.setattr(query, "current_fingerprint", lambda: "ffffffffffffffff")
    assert list_profiles(url, hardware="current") == []


@pytest.mark.parametrize("kwargs, message", [
    ({"hardware": "no-such-gpu"}, "no hardware named 'no-such-gpu'.*H100"),
    ({"model": "no-such-model"}, "no target model 'no-such-model'.*tiny-target"),
    ({"model": "tiny-draft"}, "no target model 'tiny-draft'"),  # a draft is no target
    ({"study": "no-such-study"}, "no study 'no-such-study'.*newest: other"),
    ({"method": "eagle"}, "unknown method 'eagle'"),
])
def test_list_refuses_unknown_names(populated, kwargs, message) -> None:  # noqa: ANN001
    url, _ = populated
    with pytest.raises(ConfigurationError, match=message):
        list_profiles(url, **kwargs)


def test_show_loads_the_study_with_every_trial(populated) -> None:  # noqa: ANN001
    url, ids = populated
    profile = show_profile(url, ids["h100-old"])
    # mtp@3 and mtp@2 are within noise at concurrency 4: the smaller depth is recommended.
    assert profile.label() == "mtp@2" and profile.concurrency == 4
    assert profile.tied_with == ["mtp@2", "mtp@3"]
    assert profile.study.name == "h100-old" and profile.hardware.fingerprint == factory.H100[1]
    screening = [m for m in profile.measurements if m.phase == "screening"]
    confirmation = [m for m in profile.measurements if m.phase == "confirmation"]
    assert len(screening) == 61 and sum(not m.complete for m in screening) == 1
    assert len(confirmation) == 25 and all(m.repetitions == factory.ROUNDS and m.confirmed for m in confirmation)
    chosen = profile.chosen_measurement()
    assert chosen.phase == profile.chosen_phase == "confirmation" and chosen.trial_number == profile.chosen_trial
    assert (chosen.method, chosen.depth, chosen.concurrency, chosen.tokens_per_s) == ("mtp", 2, 4, profile.tokens_per_s)
    assert chosen.intervals["speedup"]["value"] == chosen.speedup == profile.speedup
    assert [m.fingerprint for m in profile.draft_models] == ["dddd000011112222"]
    drafts = {(m.draft, m.draft_fingerprint) for m in profile.measurements if m.method == "draft"}
    assert drafts == {("tiny-draft", "dddd000011112222")}  # by the tuner's label and by fingerprint
    assert [row["concurrency"] for row in profile.per_concurrency] == list(factory.CONCURRENCIES)
    json.dumps(profile.to_dict())
    assert show_profile(url, ids["h100-old"], with_measurements=False).measurements == ()


def test_a_confirmed_profile_carries_its_intervals(populated) -> None:  # noqa: ANN001
    url, ids = populated
    profile = show_profile(url, ids["h100-old"])
    assert profile.confirmed and profile.repetitions == factory.ROUNDS
    tokens, speedup = profile.estimate("tokens_per_s"), profile.estimate("speedup")
    assert tokens.n == factory.ROUNDS and tokens.low < profile.tokens_per_s < tokens.high
    assert speedup.value == pytest.approx(factory.speedup("mtp", 2, 4), rel=1e-3) and speedup.excludes(1.0)
    summary = profile.summary()
    assert summary["repetitions"] == factory.ROUNDS and summary["confirmed"] is True
    assert set(summary["intervals"]) == {"tokens_per_s", "tpot_ms_p50", "speedup"}  # the listed figures only
    by_level = {row["concurrency"]: row for row in profile.per_concurrency}
    assert by_level[16]["method"] == "none" and by_level[16]["depth"] == 0  # speculation off
    assert by_level[1]["speedup_low"] < by_level[1]["speedup"] < by_level[1]["speedup_high"]
    # Phases number their trials apart: the newer study's chosen confirmation row shares its
    # number with a screening trial of another configuration.
    newer = show_profile(url, ids["h100-new"])
    twin = next(m for m in newer.measurements if m.key == ("screening", newer.chosen_trial))
    assert newer.chosen_measurement().phase == "confirmation" and twin.config_label != newer.label()


def test_a_screening_only_profile_has_no_speedups(populated) -> None:  # noqa: ANN001
    url, ids = populated
    profile = show_profile(url, ids["cpu"])
    assert not profile.confirmed and profile.repetitions == 1 and profile.intervals == {}
    assert profile.speedup is None and profile.estimate("speedup") is None
    tokens = profile.estimate("tokens_per_s")
    assert (tokens.value, tokens.n, tokens.has_interval) == (profile.tokens_per_s, 1, False)
    assert all(m.phase == "screening" and m.speedup is None and m.intervals == {} for m in profile.measurements)
    assert all(row["speedup"] is None for row in profile.per_concurrency if row["method"] != "none")


def test_show_unknown_id_names_the_newest(populated) -> None:  # noqa: ANN001
    url, ids = populated
    with pytest.raises(ProfileNotFoundError, match=f"no deployment profile with id 999.*newest ids: {ids['other']}"):
        show_profile(url, 999)


def test_show_on_an_empty_database(sqlite_url: str) -> None:
    with pytest.raises(ProfileNotFoundError, match="holds no profile yet"):
        show_profile(sqlite_url, 1)


def test_best_without_constraints_is_the_fastest_profile_here(populated) -> None:  # noqa: ANN001
    url, ids = populated
    best = best_profile(url, "tiny-target")  # hardware defaults to this machine
    assert best.profile.id == ids["h100-old"] and best.operating_point is None
    assert best.deployment() == best.profile
    assert best_profile(url, "tiny-target", hardware=factory.CPU[0]).profile.id == ids["cpu"]
    json.dumps(best.to_dict())


def test_best_at_a_concurrency_is_the_fastest_trial_there(populated) -> None:  # noqa: ANN001
    url, ids = populated
    best = best_profile(url, "tiny-target", concurrency=16)
    point = best.operating_point
    # Speculation loses at batch 16: the faster (old) study's baseline wins.
    assert (point.method, point.depth, point.concurrency) == ("none", 0, 16)
    assert point.tokens_per_s == pytest.approx(factory.baseline_tokens_per_s(16))
    assert best.profile.id == ids["h100-old"]
    deployment = best.deployment()
    assert (deployment.method, deployment.depth, deployment.concurrency) == ("none", 0, 16)
    assert deployment.chosen_trial == point.trial_number and deployment.draft is None
    assert (deployment.chosen_phase, deployment.repetitions, deployment.intervals) == (point.phase, point.repetitions, point.intervals)
    assert deployment.confirmed == point.confirmed and deployment.tied_with == []


def test_best_under_a_tpot_slo(populated) -> None:  # noqa: ANN001
    url, _ = populated
    best = best_profile(url, "tiny-target", concurrency=2, slo_tpot_ms=7.0)
    assert best.operating_point.tpot_ms_p50 <= 7.0
    assert best.request == {"model": "tiny-target", "hardware": "current", "concurrency": 2, "slo_tpot_ms": 7.0}
    anywhere = best_profile(url, "tiny-target", slo_tpot_ms=9.0)
    assert anywhere.operating_point.tpot_ms_p50 <= 9.0
    assert anywhere.operating_point.tokens_per_s >= best.operating_point.tokens_per_s


def test_best_may_pick_a_draft_trial_and_carry_its_draft(db_url: str, monkeypatch) -> None:  # noqa: ANN001
    monkeypatch.setattr(query, "current_fingerprint", lambda: factory.H100[1])
    from autotune.store import open_database

    with open_database(db_url) as database, database.session() as session:
        hw, target = factory.hardware(session, *factory.H100), factory.model(session, "t", "t" * 16)
        draft = factory.model(session, "d", "d" * 16, role="draft")
        factory.study(session, "draft-only", hw, target, draft, methods=("none", "draft"))
    deployment = best_profile(db_url, "t", concurrency=1).deployment()
    assert deployment.method == "draft" and deployment.draft.name == "d"


@pytest.mark.parametrize("kwargs, message", [
    ({"model": "tiny-target", "hardware": "ffff"}, "no hardware named 'ffff'"),
    ({"model": "nobody"}, "no target model 'nobody'.*models with profiles: tiny-target"),
    ({"model": "tiny-target", "concurrency": 3}, "no profile for .tiny-target. was measured at concurrency 3; nearest measured concurrency: 2 "
                                                r"\(measured: 1, 2, 4, 8, 16\)"),
    ({"model": "tiny-target", "concurrency": 1, "slo_tpot_ms": 1.0},
     r"meets TPOT p50 <= 1 ms; the fastest measured is 5.15 ms \(mtp@4 at concurrency 1\)"),
    ({"model": "tiny-target", "slo_tpot_ms": 0.5}, "the fastest measured is 5.15 ms"),
])
def test_best_not_found_names_the_nearest_match(populated, kwargs, message) -> None:  # noqa: ANN001
    url, _ = populated
    with pytest.raises(ProfileNotFoundError, match=message):
        best_profile(url, **kwargs)


def test_best_on_other_hardware_points_to_where_the_model_was_tuned(populated, monkeypatch) -> None:  # noqa: ANN001
    url, _ = populated
    monkeypatch.setattr(query, "current_fingerprint", lambda: "ffffffffffffffff")
    with pytest.raises(ProfileNotFoundError, match=(
        r"no deployment profile for 'tiny-target' on this machine \(fingerprint ffffffffffffffff\); nearest: the same "
        r"model on 1x NVIDIA H100 80GB HBM3 \(aaaa111122223333, 2 profiles\), cpu: .* 1 profile\)")):
        best_profile(url, "tiny-target")
    with pytest.raises(ProfileNotFoundError, match="'other-target' on hardware 'cpu: Test CPU.*same model on 1x NVIDIA H100"):
        best_profile(url, "other-target", hardware=factory.CPU[0])


@pytest.mark.parametrize("kwargs", [{"concurrency": 0}, {"concurrency": 2.5}, {"concurrency": True}, {"slo_tpot_ms": 0},
                                    {"slo_tpot_ms": -3.0}, {"slo_tpot_ms": "fast"}])
def test_best_refuses_bad_requests_before_touching_the_database(kwargs) -> None:  # noqa: ANN001
    with pytest.raises(ConfigurationError):
        best_profile("sqlite:////nonexistent/folder/autotune.db", "m", **kwargs)
