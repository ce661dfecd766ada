"""A saved config's values checked by OmegaConf's own type rules: check_saved_types refuses what rebuild() refuses."""

from __future__ import annotations

import pytest

from ablate.config import ConfigError, check_saved_types, rebuild


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("model", "heads", "4"),
        ("model", "heads", 4.0),
        ("model", "heads", True),
        ("model", "kv_heads", None),
        ("train", "max_flops", "1e18"),
        ("train", "betas", [0.9, "0.98"]),
        ("train", "betas", [0.9, None]),
        ("logging", "wandb", "no"),
        ("logging", "wandb", 5),
        ("logging", "name", 7),
        ("logging", "name", "${nowhere}"),  # an interpolation: table never resolves one, so none passes
    ],
)
def test_the_check_refuses_what_rebuilding_refuses(section, key, value):
    saved = {section: {key: value}}
    try:
        rebuild(saved)
        rebuilt = True
    except Exception:
        rebuilt = False
    try:
        check_saved_types(saved, "config.yaml")
        passed = True
    except ConfigError as e:
        assert f"config.yaml: bad value for '{section}.{key}'" in str(e)
        passed = False
    assert passed == rebuilt
