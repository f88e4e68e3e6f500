"""The search space: applicable methods, conditional parameters, enumeration."""

from __future__ import annotations

from dataclasses import replace

import optuna
import pytest

from autotune.errors import ConfigurationError
from autotune.search.setup import set_up_study
from autotune.search.space import Candidate, SearchSpace


def test_mtp_is_excluded_for_a_target_without_mtp_modules(options, models) -> None:
    setup = set_up_study(replace(options, target=models["plain_target"]))
    assert setup.space.methods == ("none", "draft", "ngram")
    assert all(c.method != "mtp" for c in setup.space.candidates())


def test_mtp_is_included_when_the_target_has_modules(options) -> None:
    assert set_up_study(options).space.methods == ("none", "mtp", "draft", "ngram")


def test_asking_for_mtp_without_modules_is_an_error(options, models) -> None:
    with pytest.raises(ConfigurationError, match="MTP modules"):
        set_up_study(replace(options, target=models["plain_target"], methods=("mtp",)))


def test_the_baseline_is_always_in_the_space() -> None:
    space = SearchSpace.build(("ngram",), (), 3, (2, 1, 2), target_has_mtp=False)
    assert space.methods == ("none", "ngram")
    assert space.concurrencies == (1, 2)
    assert space.baselines() == [Candidate("none", 0, 1), Candidate("none", 0, 2)]


@pytest.mark.parametrize(
    ("methods", "drafts", "depth", "message"),
    [
        (("eagle",), (), 2, "unknown method 'eagle'"),
        (("draft",), (), 2, "needs at least one draft"),
        (None, (), 0, "max depth must be in"),
    ],
)
def test_invalid_spaces_are_refused(methods, drafts, depth, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        SearchSpace.build(methods, drafts, depth, (1,), target_has_mtp=True)


def test_parameters_are_conditional_on_the_method() -> None:
    space = SearchSpace.build(None, ("builtin", "small"), 4, (1, 2, 4), target_has_mtp=True)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(60):
        trial = study.ask()
        candidate = space.suggest(trial)
        study.tell(trial, 0.0)
        seen.add(candidate.method)
        expected = {"method", "batch_size", f"{candidate.method}_depth"}  # OPTUNA_CONCURRENCY_KEY: the stored name
        if candidate.method == "draft":
            expected.add("draft")
            assert candidate.draft in ("builtin", "small")
        else:
            assert candidate.draft is None
        assert 1 <= candidate.depth <= 4
        assert set(trial.params) == expected
        assert SearchSpace.params(candidate) == trial.params
        assert SearchSpace.candidate_of(trial.params) == candidate
    assert seen == {"mtp", "draft", "ngram"}  # the baseline is enqueued, never sampled


@pytest.mark.parametrize("wanted", [Candidate("draft", 3, 2, "builtin"), Candidate("none", 0, 2)])
def test_an_enqueued_candidate_is_read_back(wanted) -> None:
    space = SearchSpace.build(None, ("builtin",), 4, (1, 2), target_has_mtp=True)
    study = optuna.create_study()
    study.enqueue_trial(SearchSpace.params(wanted), user_attrs=space.user_attrs(wanted))
    trial = study.ask()
    assert space.suggest(trial) == wanted
    assert SearchSpace.candidate_of(trial.params) == wanted


def test_candidates_enumerate_every_point_once_baselines_first() -> None:
    space = SearchSpace.build(None, ("builtin", "small"), 3, (1, 2), target_has_mtp=True)
    candidates = space.candidates()
    # baselines + (mtp + 2 drafts + ngram) x 3 depths x 2 concurrency levels
    assert len(candidates) == 2 + 4 * 3 * 2
    assert len(set(candidates)) == len(candidates)
    assert candidates[:2] == space.baselines()


def test_labels_name_the_configuration_and_batch() -> None:
    assert Candidate("none", 0, 4).label == "none c4"
    assert Candidate("draft", 3, 1, "builtin").label == "draft@3 c1"
    assert Candidate("draft", 2, 8, "small").label == "draft:small@2 c8"
    assert Candidate("draft", 2, 8, "small").engine_config({"small": "/m/small.safetensors"}).draft == "/m/small.safetensors"
