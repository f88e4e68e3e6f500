"""Model roots: files under a root pass; a symlink or ``..`` out of it, a file elsewhere, and any
file when no root is configured are refused, naming the request field; the built-ins always pass."""

from __future__ import annotations

from pathlib import Path

import pytest

from autotune.jobs.roots import ENV_MODEL_ROOTS, ModelRoots, OutsideModelRoots
from autotune.search.request import model_paths, tune_options


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    root, outside = tmp_path / "models", tmp_path / "elsewhere"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "sub" / "target.safetensors").write_bytes(b"x")
    (outside / "secret.safetensors").write_bytes(b"x")
    (root / "link.safetensors").symlink_to(outside / "secret.safetensors")
    return {"root": root, "outside": outside}


def test_files_under_a_root_pass_and_the_built_ins_always(tree: dict[str, Path]) -> None:
    roots = ModelRoots.of([str(tree["root"])])
    options = tune_options({"target": str(tree["root"] / "sub" / "target.safetensors"), "draft": ["builtin"],
                            "workload": str(tree["root"] / "sub" / ".." / "sub" / "target.safetensors")})
    roots.check(model_paths(options))
    ModelRoots.of([]).check(model_paths(tune_options({})))  # no roots, built-ins only: allowed


@pytest.mark.parametrize(("field", "path"), [
    ("target", "{outside}/secret.safetensors"),
    ("draft", "{root}/link.safetensors"),  # a symlink out of the root
    ("workload", "{root}/sub/../../elsewhere/secret.safetensors"),  # '..' out of the root
    ("target", "{root}/../models-sibling/x.safetensors"),  # a sibling whose name starts like the root
])
def test_a_file_outside_the_roots_is_refused_naming_its_field(tree: dict[str, Path], field: str, path: str) -> None:
    value = path.format(root=tree["root"], outside=tree["outside"])
    request = {field: [value] if field == "draft" else value}
    with pytest.raises(OutsideModelRoots, match=f"^{field} ") as refused:
        ModelRoots.of([str(tree["root"])]).check(model_paths(tune_options(request)))
    assert refused.value.field == field and str(tree["root"]) not in str(refused.value).replace(value, "")


def test_without_roots_every_file_is_refused_and_the_variable_gives_them(
        tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    target = str(tree["root"] / "sub" / "target.safetensors")
    with pytest.raises(OutsideModelRoots, match="no model roots are configured"):
        ModelRoots.of([]).check({"target": [target]})
    monkeypatch.setenv(ENV_MODEL_ROOTS, f"{tree['outside']}:{tree['root']}")
    ModelRoots.of([]).check({"target": [target]})
