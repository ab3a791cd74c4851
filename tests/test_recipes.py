"""The recipes in training/: each resolves to exactly the settings it resolved to when every
recipe still spelled out all its keys (``tests/data/recipes-resolved.json``, written by the code
of 68e6bd7 before recipes could inherit). Regenerate the file only for a deliberate change of a
recipe: ``.venv/bin/python tests/test_recipes.py --write``."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

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


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_recipes.py --write   (rewrites the snapshot)")
    SNAPSHOT.parent.mkdir(exist_ok=True)
    SNAPSHOT.write_text(json.dumps(resolved_recipes(), indent=1, sort_keys=True) + "\n")
    print(f"wrote {SNAPSHOT}")
