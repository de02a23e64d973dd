"""The rate search's settings and its count of frames offered in time."""

import pytest

from tunnelbench.bench import ratesearch
from tunnelbench.errors import UserError


def test_frames_written_late_count_as_not_offered():
    assert ratesearch.offered_in_time(1000, 1.01, 1.0) == 1000  # within 2%
    assert ratesearch.offered_in_time(2000, 2.4, 0.5) == 416  # held back at 833 a second
    assert ratesearch.offered_in_time(10, 0.2, 1.0) == 10


def test_a_trials_loss_counts_what_was_not_offered_or_not_received():
    trial = ratesearch.SearchTrial(1000, 1.0, 1000, 1000, 1.2, 833, 1000)
    assert trial.loss_ratio == pytest.approx(0.167)
    dropped = ratesearch.SearchTrial(1000, 1.0, 1000, 1000, 1.0, 1000, 990)
    assert dropped.loss_ratio == pytest.approx(0.01)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"min_pps": 5000}, "min 5000 pps must be below max 4000"),
        ({"pdr_loss": 0.0}, r"loss ratios 0.0 \(NDR\) < 0.0 \(PDR\) < 1"),
        ({"initial_duration": 2.0}, "initial trial duration"),
    ],
)
def test_settings_that_cannot_be_searched_are_refused(changes, message):
    settings = ratesearch.SearchSettings(frame=64, max_pps=4000, **changes)
    with pytest.raises(UserError, match=message):
        settings.check()
