"""The training step budget is configuration: checked when it is read, applied per track, the rest kept."""
import pytest

from grader.configs import TRAINING, check_steps, training_hp


def test_a_track_not_named_keeps_its_default_budget():
    assert training_hp("reverse", {"lm": 50}) == TRAINING["reverse"]
    assert training_hp("lm", {}) == TRAINING["lm"]


def test_a_smaller_budget_keeps_the_stage_clock():
    hp = training_hp("lm", {"lm": 25})
    assert hp["steps"] == 25 and hp["budget_s"] == TRAINING["lm"]["budget_s"]
    assert {k: v for k, v in hp.items() if k != "steps"} == {k: v for k, v in TRAINING["lm"].items() if k != "steps"}


def test_a_larger_budget_gets_a_proportionally_longer_stage_clock():
    hp = training_hp("reverse", {"reverse": 3 * TRAINING["reverse"]["steps"]})
    assert hp["budget_s"] == pytest.approx(3 * TRAINING["reverse"]["budget_s"])


@pytest.mark.parametrize("value, needle", [
    (200, "must map a track"),
    ({"gpt": 10}, "unknown track 'gpt'"),
    ({"lm": 0}, "positive whole number"),
    ({"lm": 2.5}, "positive whole number"),
    ({"lm": True}, "positive whole number"),
])
def test_a_bad_setting_is_refused_with_what_is_wrong(value, needle):
    with pytest.raises(ValueError, match=needle):
        check_steps(value)


def test_the_service_refuses_a_bad_setting_when_it_starts(tmp_path, monkeypatch):
    from grader.app import create_app
    monkeypatch.setenv("GRADER_INSTANCE_PATH", str(tmp_path / "instance"))
    settings = {"DATABASE_URL": f"sqlite:///{tmp_path}/g.sqlite", "BROKER_URL": "memory://", "SECRET_KEY": "t"}
    with pytest.raises(ValueError, match="unknown track 'Lm'"):
        create_app({**settings, "TRAINING_STEPS": {"Lm": 100}})
    app = create_app({**settings, "TRAINING_STEPS": {"lm": 100}})
    from worker.grading import judge_options
    assert judge_options({}, None, app.config["TRAINING_STEPS"]).steps == {"lm": 100}
