"""Learner recipes: one name for a set of RL settings, on the command line and in compare's suites."""

import pytest

from rltok.cli import main, parser
from rltok.cli.train import config_from_args
from rltok.compare.suites import SUITES, entry_config
from rltok.config import preset
from rltok.recipes import RECIPES, recipe


def config_of(*argv: str):
    return config_from_args(parser().parse_args(["train", *argv]))


def test_a_recipe_is_the_flags_it_names():
    """--recipe byte-head-smoothed sets what the README's rows spelled out flag by flag."""
    spelled = config_of(
        *("--prior-cue", "read-entropy", "--surprisal-prior", "4", "--rate-control", "calibrate"),
        *("--lm-segmentation", "greedy", "--policy-context", "3", "--prior-role", "teach"),
        *("--policy-lr-mult", "10", "--group-lm", "--group-entropy", "0", "--rate-neutral"),
        *("--teach-smoothing", "0.1"),
    )
    assert config_of("--recipe", "byte-head-smoothed").to_json() == spelled.to_json()


def test_flags_override_a_recipe_and_the_preset_stays_under_it():
    cfg = config_of("--recipe", "byte-head", "--policy-lr-mult", "3", "--preset", "smoke")
    assert cfg.boundaries.policy.lr_mult == 3 and cfg.boundaries.policy.context == 3
    assert cfg.train.seq_len == preset("smoke").train.seq_len


def test_the_prior_only_form_turns_off_the_policy_loss_and_nothing_else_it_learns_from():
    full, off = recipe("byte-head"), recipe("byte-head-prior-only")
    assert off.loss == {"policy": 0.0} and off.boundaries.pop("estimator.rate_neutral") is False
    assert off.boundaries == {
        k: v for k, v in full.boundaries.items() if k != "estimator.rate_neutral"
    }


def test_the_default_rl_is_the_group_prior_recipe():
    """The CPU presets' rl is a named recipe: applying it changes nothing."""
    for name in ("smoke", "tiny", "small"):
        assert RECIPES["group-prior"].apply(preset(name)).to_json() == preset(name).to_json()


def test_every_learned_suite_row_names_a_recipe_that_validates():
    learned = [e for suite in SUITES.values() for e in suite if e.recipe]
    assert {e.recipe.removesuffix("-prior-only") for e in learned} == set(RECIPES)
    for entry in learned:
        cfg = entry_config(entry, preset("tiny"), seed=1)
        assert cfg.boundaries.method == "rl" and cfg.train.seed == 1
        if entry.prior_of:
            assert cfg.loss.policy == 0


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--recipe", "nope"], "unknown recipe 'nope'; choose one of: group-prior"),
        (["--recipe", "paper", "--boundaries", "hnet"], "not hnet; drop one of the two"),
    ],
)
def test_a_wrong_recipe_gets_one_sentence(capsys, tmp_path, argv, said):
    code = main(["train", *argv, "--out", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and said in err[0], err


def test_train_help_shows_the_recipes_before_the_flags(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    shown = capsys.readouterr().out
    assert shown.index("byte-head-smoothed") < shown.index("--policy-lr-mult POLICY_LR_MULT\n")
