"""The recipes in training/: each resolves to exactly the settings it resolved to when every
recipe still spelled out all its keys (``tests/data/recipes-resolved.json``, written by the code
of 68e6bd7 before recipes could inherit). Regenerate the file only for a deliberate change of a
recipe: ``.venv/bin/python tests/test_recipes.py --write``. Each recipe states only what differs
from the recipe it builds on (``defaults:``), and inheriting follows its rules."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from spotdiff_cli.errors import UsageError

SNAPSHOT = Path(__file__).resolve().parent / "data" / "recipes-resolved.json"


def resolved_recipes() -> dict[str, dict[str, Any]]:
    """Every training/*.yaml by file name -> its resolved TrainConfig as a plain dict."""
    from spotdiff_cli.train.recipes import RECIPES_DIR, load_recipe

    return {
        path.name: json.loads(json.dumps(load_recipe(path).to_dict()))
        for path in sorted(RECIPES_DIR.glob("*.yaml"))
    }


def test_every_recipe_resolves_as_before() -> None:
    before = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    now = resolved_recipes()
    assert sorted(now) == sorted(before), "recipes added or removed: update the snapshot"
    changed = [name for name in before if now[name] != before[name]]
    assert not changed, "\n".join(
        f"{name}: {key}: {before[name].get(key)!r} -> {now[name].get(key)!r}"
        for name in changed
        for key in sorted(set(before[name]) | set(now[name]))
        if before[name].get(key) != now[name].get(key)
    )


def test_every_recipe_states_only_what_differs_from_its_base() -> None:
    """No line of a recipe repeats what its ``defaults:`` already gives it (the bases in
    training/base/ may: they write down the built-in defaults the recipes rely on, with why)."""
    import yaml

    from spotdiff_cli.train.recipes import RECIPES_DIR, load_recipe

    repeated = []
    for path in sorted(RECIPES_DIR.glob("*.yaml")):
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
        assert "defaults" in values, f"{path.name} builds on no base"
        base = json.loads(
            json.dumps(load_recipe(RECIPES_DIR / f"{values['defaults']}.yaml").to_dict())
        )
        mine = json.loads(json.dumps(load_recipe(path).to_dict()))
        for key in values:
            if key == "model_config":
                repeated += [
                    f"{path.name}: model_config.{k}"
                    for k in values[key]
                    if base[key].get(k, object()) == mine[key][k]
                ]
            elif key != "defaults" and base[key] == mine[key]:
                repeated.append(f"{path.name}: {key}")
    assert not repeated, "settings a recipe's base already gives:\n" + "\n".join(repeated)


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_recipe_builds_on_its_defaults(tmp_path: Path) -> None:
    """The base first, the recipe on top; model_config merges key by key, every other setting
    (a mapping such as objectives, a list such as stages) is replaced whole; flags win."""
    from spotdiff_cli.train.recipes import load_recipe

    _write(
        tmp_path,
        "parent",
        "defaults: base/tiny-cpu\nmodel: capt\nobjectives: {caption: 1.0}\n"
        "model_config: {hidden_size: 64, dropout: 0.2}\n",
    )
    child = _write(
        tmp_path,
        "child",
        "defaults: parent\nlr: 2.0e-3\nobjectives: {other: 0.5}\nmodel_config: {dropout: 0.1}\n",
    )
    config = load_recipe(child, epochs=3)
    assert (config.model, config.synth_pairs, config.lr, config.epochs) == ("capt", 60, 2e-3, 3)
    assert config.objectives == {"other": 0.5}
    assert config.model_config == {"hidden_size": 64, "dropout": 0.1}


def test_a_copied_recipe_folder_uses_its_own_bases(tmp_path: Path) -> None:
    """A user's copy of training/ edits its bases: the copy's recipes build on them."""
    import shutil

    from spotdiff_cli.train.recipes import RECIPES_DIR, load_recipe

    copy = tmp_path / "training"
    shutil.copytree(RECIPES_DIR, copy)
    common = copy / "base" / "common.yaml"
    common.write_text(common.read_text().replace("seed: 0 ", "seed: 7 "))
    assert load_recipe(copy / "ddla-synth.yaml").seed == 7
    assert load_recipe(RECIPES_DIR / "ddla-synth.yaml").seed == 0


def test_a_broken_defaults_chain_is_one_clear_error(tmp_path: Path) -> None:
    from spotdiff_cli.train.recipes import load_recipe

    loop = _write(tmp_path, "a", "defaults: b\n")
    _write(tmp_path, "b", "defaults: a\n")
    with pytest.raises(UsageError, match="builds on itself"):
        load_recipe(loop)
    with pytest.raises(UsageError, match="builds on 'nowhere', which is neither beside it"):
        load_recipe(_write(tmp_path, "c", "defaults: nowhere\n"))
    with pytest.raises(UsageError, match="'defaults' .* must name the recipe it builds on"):
        load_recipe(_write(tmp_path, "d", "defaults: {a: 1}\n"))
    with pytest.raises(UsageError, match=r"unknown setting 'lrr' in .*e\.yaml"):
        load_recipe(_write(tmp_path, "e", "defaults: base/synth\nlrr: 1\n"))


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_recipes.py --write   (rewrites the snapshot)")
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(json.dumps(resolved_recipes(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
