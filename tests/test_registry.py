"""The model registry: one list of family modules, each registering its own names; listing the
models never imports torch; unknown names fail with the list and a close match."""

from __future__ import annotations

import importlib

import pytest
from conftest import loaded_in_child

from spotdiff_cli.captioners import registry
from spotdiff_cli.errors import ModelError


def test_listing_models_imports_no_torch() -> None:
    """`spotdiff models` shows every model's info: the families must declare it without torch."""
    code = (
        "from typer.testing import CliRunner; from spotdiff_cli.cli import app;"
        "from spotdiff_cli.captioners import available_models;"
        "r = CliRunner().invoke(app, ['models']); assert r.exit_code == 0, r.output;"
        "missing = [n for n in available_models() if n not in r.output]; assert not missing, missing"
    )
    assert loaded_in_child(code, "torch", "timm") == [False, False]


@pytest.mark.parametrize("module", registry.FAMILY_MODULES)
def test_every_family_registers_its_own_names(module: str) -> None:
    importlib.import_module(module)
    mine = [
        n
        for n in registry.available_models()
        if registry._FACTORIES[n].__module__.startswith(module)
    ]
    assert mine, f"{module} registers no model"
    assert all(registry.model_info(n).summary for n in mine)


def test_every_model_comes_from_a_listed_family() -> None:
    listed = [
        n
        for n in registry.available_models()
        if registry._FACTORIES[n].__module__.startswith("spotdiff_cli.")
    ]
    assert {"grounded", "ddla", "nn"} <= set(listed)
    assert all(
        registry._FACTORIES[n].__module__.startswith(registry.FAMILY_MODULES) for n in listed
    )


def test_an_unknown_name_lists_the_models_and_suggests_one() -> None:
    with pytest.raises(ModelError, match=r"unknown model 'ddlaa'; did you mean 'ddla'\?.*grounded"):
        registry.create_model("ddlaa")
    with pytest.raises(ModelError, match="unknown model"):
        registry.model_info("nothing-like-it")
