"""One loaded view for every renderer: the same summaries, with the run's environment
(and so the advice that depends on it) wherever a run is shown or compared."""

from pathlib import Path

from tests.report_fixtures import recorded
from tunnelbench.analysis.summary import summarize_run
from tunnelbench.report import compare, view

NAME = "wireguard-implementations"


def _advice(summaries) -> list[list[str]]:
    return [[a.suggestion for a in s.advice] for s in summaries]


def test_the_view_is_the_run_summarized_with_its_environment(tmp_path):
    store = recorded(NAME, tmp_path)
    loaded = view.load(store, "latest")
    assert loaded.run.id == store.run("latest").id
    assert [t.id for t in loaded.trials] == [t.id for t in store.trials(loaded.run.id)]
    expected = summarize_run(loaded.trials, loaded.run.environment)
    assert _advice(loaded.summaries) == _advice(expected)
    # The environment matters: without it, advice that reads the CPU's flags is lost.
    assert _advice(loaded.summaries) != _advice(summarize_run(loaded.trials))


def test_a_compared_side_keeps_the_advice_the_report_gives(tmp_path):
    store = recorded(NAME, tmp_path)
    path = Path(store.path)
    shown = _advice(view.load(store, "latest").summaries)
    store.close()
    side = compare.load(compare.RunRef(path, "latest"))
    assert _advice(side.summaries) == shown
    assert any(shown)
