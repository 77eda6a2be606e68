"""The config schema: a config.json written before a field was renamed still loads, under the new name."""

import json

from rltok.config import Config, preset


def test_a_config_json_with_the_old_window_names_loads_under_the_new_ones():
    raw = json.loads(preset("smoke").to_json())
    raw["model"]["window"] = raw["model"].pop("attention_window")
    raw["boundaries"]["window"] = 8
    del raw["boundaries"]["policy_window"]
    cfg = Config.from_dict(raw)
    assert cfg.model.attention_window == preset("smoke").model.attention_window
    assert cfg.boundaries.policy_window == 8
    assert Config.from_dict(json.loads(cfg.to_json())) == cfg
