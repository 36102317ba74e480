"""config.py: one description per TrainConfig field, and everything made from it.

The claim under test: adding a hyperparameter is one edit (a field with its ``knob``), and
it appears in the CLI, the Train page's form, the search's flags and the JSON and argv codecs
with no other change; and a config is validated once on each path.
"""
from __future__ import annotations

import argparse
import dataclasses

import pytest
from streamlit.testing.v1 import AppTest

from reviewbert import config
from reviewbert.config import TrainConfig, knob
from reviewbert.errors import ConfigError
from reviewbert.training import jobs, search


@dataclasses.dataclass
class WithDropout(TrainConfig):
    """TrainConfig plus one new knob, declared the one way a knob is declared."""
    classifier_dropout: float = knob(0.1, group="basic", label="Classifier dropout", rule=(
        lambda v: isinstance(v, (int, float)) and 0 <= v < 1, "must be in [0, 1)"),
        help="dropout before the classifier (a knob added by a test)")


def _parser(cls) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    config.add_arguments(p, cls)
    return p


def test_a_new_field_appears_in_the_cli_with_its_help_default_and_rule():
    p = _parser(WithDropout)
    assert "--classifier-dropout X" in p.format_help()
    assert "dropout before the classifier (a knob added by a test) (default: 0.1)" in \
        " ".join(p.format_help().split())
    given = config.given(p.parse_args(["--classifier-dropout", "0.3"]), WithDropout)
    assert given == {"classifier_dropout": 0.3}
    assert WithDropout.from_dict(given).classifier_dropout == 0.3
    with pytest.raises(ConfigError, match=r"classifier_dropout must be in \[0, 1\), got 1.5"):
        WithDropout(classifier_dropout=1.5)
    assert "--classifier-dropout" not in _parser(TrainConfig).format_help()  # subclass only


def test_a_new_field_appears_in_the_search_flags_and_round_trips_argv_and_json():
    assert "classifier_dropout" in config.searchable(WithDropout)
    assert search.parse_grid("classifier_dropout=0.1,0.3", cls=WithDropout) == \
        ("classifier_dropout", [0.1, 0.3])
    with pytest.raises(ConfigError, match="classifier_dropout must be in"):
        search.parse_grid("classifier_dropout=0.1,1.5", cls=WithDropout)
    assert search.parse_range("classifier_dropout=0.0:0.5", cls=WithDropout)[1] == \
        {"low": 0.0, "high": 0.5, "log": False}
    with pytest.raises(ConfigError, match="unknown hyperparameter"):
        search.parse_grid("classifier_dropout=0.1,0.3")  # plain TrainConfig has no such field
    cfg = WithDropout(data=["a.csv"], classifier_dropout=0.25, labels=3)
    back = config.given(_parser(WithDropout).parse_args(
        config.to_argv(dataclasses.asdict(cfg), WithDropout)), WithDropout)
    assert WithDropout.from_dict(back) == cfg
    assert WithDropout.from_dict(dataclasses.asdict(cfg)) == cfg


FORM_SCRIPT = """
import streamlit as st
from reviewbert.ui.config_form import config_form
from test_config import WithDropout
values, cfg, errors = config_form([], cls=WithDropout)
st.session_state["got"] = (values.get("classifier_dropout"), errors)
"""


def test_a_new_field_appears_in_the_train_form():
    """The form draws one widget per field of the class it is given (here the subclass);
    the AppTest script imports this very module (tests/unit is on sys.path)."""
    at = AppTest.from_string(FORM_SCRIPT, default_timeout=60).run()
    assert not at.exception
    labels = [w.label for w in at.number_input]
    assert "Classifier dropout" in labels and "Learning rate, BERT" in labels
    at.number_input(key="cfg_classifier_dropout").set_value(0.7).run()
    got, errors = at.session_state["got"]
    assert got == 0.7 and "data" in errors and "classifier_dropout" not in errors
    at.number_input(key="cfg_classifier_dropout").set_value(1.5).run()
    assert "classifier_dropout" in at.session_state["got"][1]
    assert any("classifier_dropout must be in" in e.value for e in at.error)


def test_every_field_is_described_once_with_a_group_help_and_rule():
    specs = config.describe()
    assert [s.name for s in specs] == [f.name for f in dataclasses.fields(TrainConfig)]
    for s in specs:
        assert s.group in config.GROUPS and s.help, s.name
        assert s.rule is not None or s.type is bool, f"{s.name} has no rule"
        if s.choices:  # the rule that comes with choices names each of them
            assert all(str(c) in s.error("nope") for c in s.choices)
            assert s.error(s.default) is None
    assert TrainConfig.validate_field("labels", 4) == "labels must be 5 or 3, got 4"


def test_a_config_is_validated_once_on_the_form_path_and_on_the_cli_path(tmp_path, monkeypatch):
    calls = []
    real = TrainConfig.validate
    monkeypatch.setattr(TrainConfig, "validate", lambda self: (calls.append(1), real(self))[1])
    data = tmp_path / "r.csv"
    data.write_text("review,rating\ngood,5\n")
    cfg, errors = config.check({"data": [str(data)], "epochs": 2})
    assert errors == {} and cfg.epochs == 2 and len(calls) == 1
    launched = []
    monkeypatch.setattr(jobs.runs, "launch_training", lambda args, run_dir, queue: launched.append(
        (args, run_dir)))
    run_dir, _ = jobs.start_run(cfg, tmp_path / "ckpts", "one")   # the page's Launch button
    assert len(calls) == 1 and launched and (run_dir / "train_config.json").exists()
    calls.clear()
    from reviewbert.cli.train import _read_config
    TrainConfig.from_dict({**_read_config(run_dir / "train_config.json"), "epochs": 1}, strict=True)
    assert len(calls) == 1                                        # the child's `train --config`
    assert config.check({"epochs": 0, "data": []})[1].keys() == {"epochs", "data"}
