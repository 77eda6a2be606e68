"""The config schema: config.json files written before a field was renamed, or before the RL settings
were grouped into parts, still load, under the new names; one that used a removed setting is refused
in one sentence."""

import json
from pathlib import Path

import pytest

from rltok.config import Config, preset
from rltok.errors import UserError
from rltok.recipes import recipe

# a run's config.json as rltok wrote it before the RL settings were grouped (flat boundaries section)
FLAT = Path(__file__).parents[1] / "docs/results/learner-600/gl-e-600-s0/config.json"


def test_a_config_json_with_the_old_window_names_loads_under_the_new_ones():
    raw = json.loads(preset("smoke").to_json())
    raw["model"]["window"] = raw["model"].pop("attention_window")
    raw["boundaries"]["window"] = 8
    del raw["boundaries"]["policy"]["window"]
    cfg = Config.from_dict(raw)
    assert cfg.model.attention_window == preset("smoke").model.attention_window
    assert cfg.boundaries.policy.window == 8
    assert Config.from_dict(json.loads(cfg.to_json())) == cfg


def test_a_flat_config_json_loads_into_the_grouped_settings():
    """A byte-head-group-lm run's record: every flat RL field lands in its part."""
    raw = json.loads(FLAT.read_text())
    assert "group_size" in raw["boundaries"] and "group" not in raw["boundaries"]
    cfg = Config.from_dict(raw)
    want = recipe("byte-head-group-lm").apply(preset("tiny"))
    want.train = cfg.train
    assert cfg.boundaries == want.boundaries and cfg.loss == want.loss
    assert Config.from_dict(json.loads(cfg.to_json())) == cfg


@pytest.mark.parametrize(
    "field, value",
    [("prior_fade", 100), ("rate_warmup", 50), ("rate_start", 0.5), ("rate_control", "mode")],
)
def test_a_config_json_that_used_a_removed_setting_is_refused_in_one_sentence(field, value):
    raw = json.loads(FLAT.read_text())
    raw["boundaries"][field] = value
    with pytest.raises(UserError, match=f"{field}.*removed after commit f17465c"):
        Config.from_dict(raw)
