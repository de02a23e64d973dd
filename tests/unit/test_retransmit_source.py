"""One retransmit figure per table, and its source named.

tests/fixtures/runs/window-retransmits.db is a real run recorded with the kernel's window
counters: `tunnelbench run window.toml` of a road-warrior lab without a tunnel, the WAN
shaped to 100 Mbit/s with a 5-packet FIFO, 2 s trials after 1 s of warm-up, TCP and UDP
at 50 Mbit/s, 2 repetitions (machine otherwise idle: outside load 0.5-1% of a core).
The older recorded runs (queue-comparison) hold only iperf3's own count.
"""

import csv
import io
import json
import sqlite3

from tests.report_fixtures import recorded
from tunnelbench.analysis.summary import (
    GENERATOR_RETRANSMITS,
    KERNEL_RETRANSMITS,
    ConfigSummary,
    summarize_run,
)
from tunnelbench.bench.store import Store
from tunnelbench.kinds import Protocol
from tunnelbench.report import charts, compare, csv_report, json_report, markdown, table, view
from tunnelbench.report.compare import RunRef

NAME = "window-retransmits"


def tcp_and_udp(store: Store) -> tuple[ConfigSummary, ConfigSummary]:
    tcp, udp = summarize_run(store.trials(1))
    assert tcp.config.traffic.protocol is Protocol.TCP
    assert udp.config.traffic.protocol is Protocol.UDP
    return tcp, udp


def test_the_kernels_window_count_is_the_figure(tmp_path):
    store = recorded(NAME, tmp_path)
    tcp, udp = tcp_and_udp(store)
    kernel = [t.metrics[KERNEL_RETRANSMITS] for t in tcp.trials]
    iperf3 = [t.metrics[GENERATOR_RETRANSMITS] for t in tcp.trials]
    assert kernel == [10617.0, 11067.0] and iperf3 == [10597.0, 11072.0]
    assert tcp.retransmits_metric == KERNEL_RETRANSMITS
    assert tcp.retransmits is not None and tcp.retransmits.median == 10842.0
    assert table.retransmits_cell(tcp) == "10,842"  # unmarked: the kernel's
    # UDP: the kernel counted no TCP segments, and the cell says it does not apply.
    assert all(t.metrics[KERNEL_RETRANSMITS] == 0 for t in udp.trials)
    assert (udp.retransmits, udp.retransmits_metric) == (None, None)
    assert table.retransmits_cell(udp) == "n/a"


def test_reports_say_where_the_figure_comes_from(tmp_path):
    store = recorded(NAME, tmp_path)
    summaries = list(tcp_and_udp(store))
    note = table.retransmits_note(summaries)
    assert note.startswith("Retransmits are the kernel's count: RetransSegs of the client's")
    assert "marked" not in note
    text = table.render(summaries)
    assert "*" not in text
    assert note in markdown.render(view.load(store, "latest"))
    chart = charts.losses_chart(summaries, charts.config_labels(summaries))
    assert chart is not None and chart.series[0].name == "TCP retransmits"
    assert chart.series[0].values[0] == 10842.0


def test_json_and_csv_name_the_source(tmp_path):
    store = recorded(NAME, tmp_path)
    tcp, udp = tcp_and_udp(store)
    assert (
        json_report.configuration(view.load(store, "latest"), tcp)["retransmits_source"]
        == KERNEL_RETRANSMITS
    )
    assert json_report.configuration(view.load(store, "latest"), udp)["retransmits_source"] is None
    header = next(csv.reader(io.StringIO(csv_report.render(view.load(store, "latest")))))
    first = header.index("metric.tcp.window.retrans_segs")
    assert header[first + 1] == "metric.retransmits"  # the kernel's first, then iperf3's


def test_a_table_of_old_and_new_runs_marks_the_generators_count(tmp_path):
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new, old = recorded(NAME, tmp_path / "new"), recorded("queue-comparison", tmp_path / "old")
    a = compare.load(RunRef(new.path, "1"))
    b = compare.load(RunRef(old.path, "1"))
    comparison = compare.compare(a, b)
    header, body = compare.rows(comparison)
    a_col, b_col = header.index("A retrans"), header.index("B retrans")
    assert "10,842" in [row[a_col] for row in body]
    marked = [row[b_col] for row in body if row[b_col] not in ("-", "skipped", "failed")]
    assert marked and all(cell.endswith("*") for cell in marked)
    text = compare.render_table(comparison)
    assert "Retransmits are the kernel's count" in text
    assert "Retransmits marked *: iperf3's own count over its measured window" in text


def test_a_configuration_never_mixes_the_two_sources(tmp_path):
    """A test-local copy, altered: one TCP trial lost its kernel count, as a run resumed
    by a newer version would hold. Not a measurement."""
    path = recorded(NAME, tmp_path).path
    db = sqlite3.connect(path)
    with db:
        db.execute(
            "DELETE FROM metrics WHERE name = ? AND trial_id = (SELECT MIN(id) FROM trials)",
            (KERNEL_RETRANSMITS,),
        )
    db.close()
    store = Store.open_existing(path)
    tcp, _ = tcp_and_udp(store)
    assert tcp.retransmits_metric == GENERATOR_RETRANSMITS
    assert tcp.retransmits is not None and tcp.retransmits.values == (10597.0, 11072.0)
    assert table.retransmits_cell(tcp) == "10,834*"
    out = json.loads(json_report.render(view.load(store, "latest")))
    sources = [c["retransmits_source"] for c in out["configurations"]]
    assert sources == [GENERATOR_RETRANSMITS, None]
