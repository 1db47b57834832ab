"""How well two latency samples separate (kvviz.analysis.separation): the AUC and the best threshold's accuracy.
Pure: moved out of the model lane (it was in tests/model/test_timing.py)."""

from __future__ import annotations

from kvviz.analysis.separation import auc, threshold_accuracy


def test_statistics():
    assert auc([1, 2], [3, 4]) == 1.0 and auc([3, 4], [1, 2]) == 0.0 and auc([1], [1]) == 0.5
    assert threshold_accuracy([1, 2], [3, 4]) == 1.0 and threshold_accuracy([1, 3], [2, 4]) == 0.75
