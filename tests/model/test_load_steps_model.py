"""Loading the real model reports its stages as LoadStep codes that the view words in both languages."""

from __future__ import annotations

import pytest

from kvviz.model import load_model
from kvviz_app.shell.i18n import texts, use_lang

C = texts("common")

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
