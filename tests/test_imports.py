"""The dependency direction of DESIGN.md, read from the sources: each layer imports only layers below it.

Every module of the ``autotune`` package is parsed (not imported) and every import in it counted,
those inside functions too: a lazy import is still a dependency, only a later one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import autotune

PACKAGE_ROOT = Path(autotune.__file__).parent
# The ground floor models/ may stand on: modules that import nothing of ours above them.
MODELS_MAY_IMPORT = ("autotune.models", "autotune.errors", "autotune.safetensors_header")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE_ROOT.rglob("*.py"))}


MODULES = package_modules()


def imported_modules(name: str, path: Path) -> set[str]:
    """The modules of ours that the module ``name`` imports (``from a import b``: ``a.b`` when that is
    a module, else ``a``; a package importing its own submodule does not depend on itself)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from .x import y
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            submodules = {f"{base}.{alias.name}" for alias in node.names} & MODULES.keys()
            found.update(submodules)
            if len(submodules) < len(node.names):  # names defined in the module (or package) itself
                found.add(base)
    return {module for module in found if module in MODULES and module != name}


GRAPH = {name: imported_modules(name, path) for name, path in MODULES.items()}


def in_package(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def imports_between(source: str, target: str) -> list[str]:
    return sorted(f"{module} -> {imported}" for module, imports in GRAPH.items() if in_package(module, source)
                  for imported in imports if in_package(imported, target))


def test_the_graph_sees_the_package() -> None:
    assert "autotune.models.folder" in GRAPH["autotune.preflight"]
    assert "autotune.engines.trtllm.mapping" in GRAPH["autotune.engines.trtllm.checks"]


def test_no_import_cycles() -> None:
    cycles: list[list[str]] = []
    state: dict[str, str] = {}  # module -> "open" while on the path, "done" after

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for imported in sorted(GRAPH[module]):
            if state.get(imported) == "open":
                cycles.append(path[path.index(imported):] + [imported])
            elif imported not in state:
                visit(imported, path + [imported])
        state[module] = "done"

    for module in GRAPH:
        if module not in state:
            visit(module, [module])
    assert cycles == []


@pytest.mark.parametrize(("source", "target"), [("autotune.engines", "autotune.preflight"),
                                                ("autotune.preflight", "autotune.engines"),
                                                ("autotune.perfmodel", "autotune.engines")])
def test_engines_never_meet_preflight_and_perfmodel_never_imports_engines(source, target) -> None:
    """Engines may use the performance model (the embedded engine's timing), not the other way: what
    both need (the steady window) lives on the ground floor, autotune/analysis/steady.py."""
    assert imports_between(source, target) == []


def top_level(module: str) -> str:
    """The top-level package or module of ``module`` under autotune (``autotune.engines.base`` ->
    ``autotune.engines``); ``autotune`` itself for the package's ``__init__``."""
    return ".".join(module.split(".")[:2])


def test_no_two_top_level_packages_import_each_other() -> None:
    """Module cycles are caught above; this is the coarser rule of DESIGN.md: a layer imports only
    layers below it, so no two of autotune's top-level packages and modules import each other, even
    through modules that do not form a cycle themselves."""
    arrows = {(top_level(module), top_level(imported)) for module, imports in GRAPH.items() for imported in imports}
    arrows = {(a, b) for a, b in arrows if a != b and "autotune" not in (a, b)}
    both_ways = sorted(f"{a} <-> {b}: {imports_between(a, b)[0]}, {imports_between(b, a)[0]}"
                       for a, b in arrows if (b, a) in arrows and a < b)
    assert both_ways == []


def test_model_folders_import_only_the_ground_floor() -> None:
    upward = sorted(f"{module} -> {imported}" for module, imports in GRAPH.items() if in_package(module, "autotune.models")
                    for imported in imports if not any(in_package(imported, allowed) for allowed in MODELS_MAY_IMPORT))
    assert upward == []


def test_aiconfigurator_core_is_imported_by_its_adapter_only() -> None:
    """The plan extra is optional: only autotune/perfmodel/silicon.py imports it (lazily), so that
    `autotune plan` works without it and says how to install it."""
    importers = set()
    for name, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(imported.split(".")[0] == "aiconfigurator_core" for imported in names):
                importers.add(name)
    assert importers == {"autotune.perfmodel.silicon"}
