"""AppTest of the Continuous batching page: the burst runs on the process-wide engine loop and the steps
it rode in show up, split by kind, from the engine's own StepRecords."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from kvviz.engine import get_engine_loop
from kvviz_app.shell.i18n import texts

T = texts("batching")

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]


def test_burst_fills_the_timeline_from_the_engine_steps():
    at = AppTest.from_file(str(ROOT / "pages" / "batching.py"), default_timeout=600).run()
    assert not at.exception, at.exception
    at.button(key="batching_burst").click().run()
    assert not at.exception, at.exception
    assert at.success, at.error
    prefix = at.session_state["batching_prefix"]

    def burst(item) -> bool:  # the four prompts (the request that cached the system prompt ends in "cache")
        return item.request_id.startswith(prefix) and item.request_id[len(prefix):].isdigit()

    steps = get_engine_loop().call(lambda e: [s for s in e.steps if any(burst(i) for i in s.items)])
    kinds = {i.kind for s in steps for i in s.items if burst(i)}
    assert kinds == {"scratch", "cached", "decode"}, kinds
    first = min(s.step for s in steps)  # all four burst prompts were admitted in one step
    assert sum(1 for i in next(s for s in steps if s.step == first).items if burst(i)) == 4
    assert T.DEMO_DONE.format(requests=4, steps=len(steps), shared=sum(s.num_requests > 1 for s in steps)) \
        == at.success[0].value
    metrics = {m.label: m.value for m in at.metric}
    assert int(metrics[T.M_STEPS]) >= 1 and metrics[T.M_STEP_MS].endswith("ms")
    assert any(T.TABLE_COLUMNS["computed"] in df.value.columns for df in at.dataframe)
