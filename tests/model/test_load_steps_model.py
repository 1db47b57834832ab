"""Loading the real model reports its stages as LoadStep codes that the view words in both languages."""

from __future__ import annotations

import pytest

from kvviz.i18n import use_lang
from kvviz.model import load_model
from kvviz.text import common as C

pytestmark = pytest.mark.model


def test_load_model_reports_coded_steps():
    steps = []
    load_model(progress=lambda step, fraction: steps.append((step, fraction)))
    assert steps and steps[-1][0].code == "ready" and steps[-1][1] == 1.0
    for step, fraction in steps:
        assert 0.0 <= fraction <= 1.0
        assert C.LOAD_STEPS[step.code].format(**step.params)
        with use_lang("ru"):
            assert C.LOAD_STEPS[step.code].format(**step.params)
