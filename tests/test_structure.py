"""The shape of the package: no import loops, and no import that runs back up the layers.

Every ``import`` / ``from ... import`` in spotdiff_cli (including the lazy ones inside functions,
and ``importlib.import_module("spotdiff_cli...")`` calls) is read with ``ast``, nothing is run.
Layers, lowest first: a module may import its own layer or lower ones only.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "spotdiff_cli"

# Top-level module or sub-package -> layer. The CLI registers its Typer commands on import (the
# one import allowed to run from cli/__init__ into its own command modules).
LAYERS = {
    "errors": 0,
    "types": 1,
    "config": 1,
    "geometry": 1,
    "device": 1,
    "weights": 1,
    "atomic": 1,
    "extras": 1,
    "frames": 1,
    "__init__": 1,
    "analysis": 2,
    "embed": 2,  # the offline sentence encoder (numpy MiniLM): weights and errors only
    "captioners": 3,
    "describer": 4,
    "data": 4,
    "timeline": 5,
    "evaluate": 5,
    "train": 6,
    "report": 6,
    "api": 7,
    "video_run": 7,
    "cli": 8,
    "entry": 9,
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the spotdiff_cli modules it imports (resolved to the deepest existing module)."""

    def deepest(name: str) -> str | None:
        while name and name not in modules:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom):
                if node.level:  # relative: "." is this package, ".." its parent, ...
                    anchor = package[: len(package) - node.level + 1]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                    for alias in node.names
                ]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif (
                isinstance(node, ast.Call)
                and getattr(node.func, "attr", "") == "import_module"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                targets = [node.args[0].value]
            for target in targets:
                resolved = deepest(target) if target.startswith("spotdiff_cli") else None
                if resolved and resolved != module and not module.startswith(resolved + "."):
                    graph[module].add(resolved)
    return graph


def _layer(module: str) -> int:
    parts = module.split(".")
    return LAYERS[parts[1] if len(parts) > 1 else "__init__"]


def test_every_top_level_part_has_a_layer():
    tops = {m.split(".")[1] for m in _modules() if "." in m}
    assert tops <= set(LAYERS), f"give these a layer in LAYERS: {sorted(tops - set(LAYERS))}"


def test_no_import_runs_back_up_the_layers():
    upward = [
        f"{a} ({_layer(a)}) imports {b} ({_layer(b)})"
        for a, targets in _imports(_modules()).items()
        for b in targets
        if _layer(b) > _layer(a)
    ]
    assert not upward, "\n".join(sorted(upward))


def test_no_import_loops():
    graph = _imports(_modules())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            # cli/__init__ imports its command modules to register them, and they import the app.
            if len(component) > 1 and not all(m.startswith("spotdiff_cli.cli") for m in component):
                loops.append(sorted(component))

    for module in graph:
        if module not in index:
            visit(module)
    assert not loops, "import loops:\n" + "\n".join(" <-> ".join(c) for c in loops)


def test_the_checker_sees_a_loop_and_an_upward_import(tmp_path, monkeypatch):
    """The tests above can fail: a fake package with both defects is caught."""
    fake = tmp_path / "spotdiff_cli"
    (fake / "analysis").mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "errors.py").write_text("from .analysis import x\n")
    (fake / "analysis" / "__init__.py").write_text("from ..errors import y\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", fake)
    graph = _imports(_modules())
    assert "spotdiff_cli.analysis" in graph["spotdiff_cli.errors"]
    assert "spotdiff_cli.errors" in graph["spotdiff_cli.analysis"]
    assert _layer("spotdiff_cli.analysis") > _layer("spotdiff_cli.errors")


# The model families (captioners/registry.py's FAMILY_MODULES), by module path.
FAMILIES = (
    "spotdiff_cli.captioners.grounded",
    "spotdiff_cli.captioners.spot_the_diff",
    "spotdiff_cli.captioners.duda",
    "spotdiff_cli.captioners.onediff",
    "spotdiff_cli.captioners.clip4idc",
    "spotdiff_cli.captioners.idc_pcl",
)


def _family(module: str) -> str | None:
    return next((f for f in FAMILIES if module == f or module.startswith(f + ".")), None)


def test_the_families_are_the_registrys():
    from spotdiff_cli.captioners.registry import FAMILY_MODULES

    assert set(FAMILY_MODULES) == set(FAMILIES)


def test_no_family_imports_another_familys_module():
    """What families share lives beside them (captioners/learned.py, decoding.py, ...)."""
    crossing = [
        f"{a} imports {b}"
        for a, targets in _imports(_modules()).items()
        for b in targets
        if _family(a) and _family(b) and _family(a) != _family(b)
    ]
    assert not crossing, "\n".join(sorted(crossing))


def _probes(root: Path) -> list[str]:
    """``getattr``/``hasattr`` calls on a model in the modules under ``root``: the training loop
    and evaluation call the hooks of captioners/learned.py and base.py, never probe for them."""
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and node.args
                and any(word in ast.unparse(node.args[0]) for word in ("model", "captioner"))
            ):
                found.append(f"{path.relative_to(root.parent)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_train_and_evaluate_never_probe_a_model_for_a_hook(tmp_path):
    probes = _probes(PACKAGE / "train") + _probes(PACKAGE / "evaluate")
    assert not probes, "call the hook (it has a default), do not probe:\n" + "\n".join(probes)
    (tmp_path / "loop.py").write_text("if callable(getattr(model, 'begin_epoch', None)): pass\n")
    assert _probes(tmp_path)  # the check can fail
