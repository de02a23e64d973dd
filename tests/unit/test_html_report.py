"""The HTML report of the recorded runs: self-contained, escaped, complete; its SVG charts.

Opening the page in a real browser is tests/browser/test_html_in_chromium.py.
"""

import re
import sqlite3
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from itertools import pairwise

import pytest

from tests.report_fixtures import RECORDED, recorded, wide
from tunnelbench.analysis.summary import summarize_run
from tunnelbench.report import html, svg, view
from tunnelbench.report.charts import Chart, Reference, Series, charts_for_run

VOID = {"meta", "br", "link", "img", "input", "hr", "col", "area", "base", "wbr"}


class _Balance(HTMLParser):
    """Checks that every element is closed in order (SVG elements may self-close)."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def _parse(page: str) -> _Balance:
    parser = _Balance()
    parser.feed(page)
    parser.close()
    return parser


@pytest.mark.parametrize("name", RECORDED)
def test_page_is_one_balanced_document_that_fetches_nothing(name, tmp_path):
    page = html.render(view.load(recorded(name, tmp_path), "latest"))
    parsed = _parse(page)
    assert parsed.errors == [] and parsed.stack == []
    # Nothing that could make a browser fetch: no script, link, image, frame, import, url().
    assert {t for t, _ in parsed.tags} <= {
        "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p",
        "br", "code", "section", "ul", "li", "div", "table", "thead", "tbody", "tr", "th",
        "td", "figure", "figcaption", "footer", "svg", "desc", "g", "line", "rect", "text",
        "circle",
    }  # fmt: skip
    for _, attrs in parsed.tags:
        assert not {"src", "href", "xlink:href", "srcset", "action"} & set(attrs)
    assert not re.search(r"https?:|url\(|@import", page)
    csp = next(a for t, a in parsed.tags if t == "meta" and a.get("http-equiv"))
    assert (csp["content"] or "").startswith("default-src 'none'")


@pytest.mark.parametrize("name", RECORDED)
def test_every_chart_is_an_accessible_well_formed_svg(name, tmp_path):
    store = recorded(name, tmp_path)
    charts = charts_for_run(summarize_run(store.trials(1)))
    page = html.render(view.load(store, "latest"))
    for chart in charts:
        drawing = svg.render(chart)
        root = ET.fromstring(drawing)  # well-formed XML
        assert root.get("id") == f"chart-{chart.id}"
        assert root.get("role") == "img"
        assert root.findtext("title") == chart.title
        assert f'id="fig-{chart.id}"' in page and drawing in page


def test_queue_comparison_page_content(tmp_path):
    page = html.render(view.load(recorded("queue-comparison", tmp_path), "1"))
    text = re.sub(r"<[^>]+>", " ", page)
    assert "tunnelbench run 1: queue-comparison" in text
    assert (
        "wireguard (wireguard-go): 915\u2013916 Mbit/s, 96% of the no-tunnel baseline across 4 "
        "configurations (busiest core cpu0 67% busy); 4 configurations skipped on this machine."
    ) in text
    # Environment: kernel, CPU and every version.
    for value in ("6.18.44-fc-v669", "Intel(R) Xeon(R) Processor", "iperf 3.12", "v0.0.20250522"):
        assert value in text
    # Results: every configuration, the skipped ones with their reason.
    assert page.count("<tr") == 16 + 1 + 9 + 3  # rows, header, environment, versions
    assert page.count('<tr class="skipped">') == 8
    assert "fq_codel is not available in this kernel" in text
    assert "wireguard-go@gwa 52%" in text


def test_diagnosis_and_advice_sections_come_from_the_analysis(tmp_path):
    store = recorded("l2-tunnel-mtu", tmp_path)
    page = html.render(view.load(store, "latest"))
    # The recorded single-stream baselines had their iperf3 sender at 90-98% of a core.
    assert '<section id="diagnosis"><h2>Diagnosis</h2><ul><li>none, LAN MTU 1500' in page
    assert "generator-bound: the load generator iperf3-client:5201 used" in page
    assert '<section id="advice"><h2>Advice</h2>' in page
    assert "(`traffic.streams`)" in page
    assert page.count("<td>generator</td>") == 4  # the verdict column, every row


def test_every_string_from_the_store_is_escaped(tmp_path):
    store = recorded("queue-comparison", tmp_path)
    evil = "<script>alert(1)</script>"
    db = sqlite3.connect(store.path)
    db.execute(
        "UPDATE runs SET command_line = ?, environment = ?", (evil, f'{{"{evil}": "{evil}"}}')
    )
    db.execute("UPDATE trials SET error = ? WHERE status = 'skipped'", (evil,))
    db.commit()
    page = html.render(view.load(store, "1"))
    assert "<script" not in page
    assert page.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 4


def test_write_returns_the_path(tmp_path):
    path = html.write(view.load(recorded("l2-tunnel-mtu", tmp_path), "latest"), tmp_path / "r.html")
    assert path == tmp_path / "r.html"
    assert path.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")


def test_fifty_configurations_get_one_readable_row_each(tmp_path):
    store = wide(tmp_path)
    charts = charts_for_run(summarize_run(store.trials(1)))
    throughput = ET.fromstring(svg.render(charts[0]))
    bars = [e for e in throughput.iter("rect") if e.find("title") is not None]
    assert len(bars) == 50
    heights = {float(b.attrib["height"]) for b in bars}
    assert heights == {14.0}  # every bar its own row at full height, however many
    label_ys = sorted(
        float(t.attrib["y"]) for t in throughput.iter("text") if "MTU" in (t.text or "")
    )
    assert min(b - a for a, b in pairwise(label_ys)) >= 12


def test_svg_helpers():
    assert svg.nice_ticks(956) == [0, 200, 400, 600, 800, 1000]
    assert svg.nice_ticks(14368, 4) == [0, 5000, 10000, 15000]
    assert svg.nice_ticks(0) == [0.0, 1.0]
    assert svg.fmt(13304.1) == "13,304" and svg.fmt(65.0) == "65" and svg.fmt(2.34) == "2.3"
    label = "wireguard (wireguard-go) · queue pfifo · limit 1000 · download"
    assert svg.wrap(label) == ["wireguard (wireguard-go) · queue pfifo", "limit 1000 · download"]


def test_a_sub_millisecond_axis_reads_unique_ordered_values():
    """A veth path's round trip (0.03-0.08 ms) second by second: the value axis read
    ``0 0 0 0 0`` when every label had one decimal."""
    chart = Chart(
        id="rtt", title="RTT", kind="line", x_label="s", y_label="ms",
        categories=("1", "2", "3"), series=(Series("rtt", (0.031, 0.074, 0.052)),),
    )  # fmt: skip
    root = ET.fromstring(svg.render(chart))
    ticks = [t.text for t in root.iter("text") if t.get("data-axis") == "y"]
    assert ticks == ["0", "0.02", "0.04", "0.06", "0.08"]
    assert svg.fmt(0.25) == "0.25" and svg.fmt(0.5) == "0.5" and svg.fmt(1.25) == "1.2"


def test_missing_values_and_global_references_are_drawn():
    chart = Chart(
        id="t", title="T & <x>", kind="bar", x_label="c", y_label="Mbit/s",
        categories=("a", "b"), series=(Series("s", (5.0, None), (4.0, None), (6.0, None)),),
        reference_lines=(Reference("cap", 8.0), Reference("base", 7.0, "a")),
    )  # fmt: skip
    root = ET.fromstring(svg.render(chart))
    texts = [t.text for t in root.iter("text")]
    assert "not measured" in texts and "cap (8)" in texts
    assert root.findtext("title") == "T & <x>"
    dashed = [e for e in root.iter("line") if e.get("stroke-dasharray") in ("3 2", "6 3")]
    assert len(dashed) >= 2 + 2  # the two marks and their two legend keys


def test_results_come_before_the_findings_and_each_suggestion_is_said_once(tmp_path):
    loaded = view.load(recorded("timeline", tmp_path), "1")
    page = html.render(loaded)
    assert page.index('<section id="results">') < page.index('<section id="diagnosis">')
    advice = page.split('<section id="advice">', 1)[1].split("</section>", 1)[0]
    items = re.findall(r"<li>(.*?)</li>", advice)
    heads = [item.split(" — ")[0] for item in items]
    assert len(heads) == len(set(heads)) == 2  # kernel WireGuard, vector instructions
    assert "because" not in advice  # the finding's evidence is under Diagnosis
    # What the advice adds to the finding stays: why userspace WireGuard costs more.
    assert "wireguard-go copies every packet between the kernel and userspace" in advice


def test_the_cpu_flags_are_a_list_of_words_not_a_python_list(tmp_path):
    loaded = view.load(recorded("timeline", tmp_path), "1")
    page = html.render(loaded)
    row = re.search(r"<tr><th>cpu_flags</th><td>(.*?)</td></tr>", page)
    assert row is not None
    assert "[" not in row.group(1) and "&#x27;" not in row.group(1)
    assert row.group(1).split(", ")[:3] == loaded.environment["cpu_flags"][:3]


def test_a_scatter_of_round_trips_that_span_decades_has_a_log_axis():
    """A veth path's 0.05 ms beside a bloated queue's 40 ms: on a linear 0-40 ms axis the
    first two points were drawn on top of each other; in decades they stand apart."""
    from tunnelbench.report.charts import spans_decades

    assert spans_decades([0.05, None, 40.0]) and not spans_decades([2.0, 9.0, 0.0, None])
    rtt = Series("loaded RTT p95", (0.05, 0.09, 40.0), (0.04, 0.08, 35.0), (0.06, 0.11, 48.0))
    chart = Chart(
        id="latency", title="L", kind="scatter", x_label="ms, log scale", y_label="Mbit/s",
        categories=("none", "vxlan", "fifo"), series=(Series("goodput", (900.0, 800.0, 20.0)),),
        x=rtt, x_log=True,
    )  # fmt: skip
    root = ET.fromstring(svg.render(chart))
    ticks = [t.text for t in root.iter("text") if t.get("data-axis") == "x"]
    assert ticks == ["0.01", "0.1", "1", "10", "100"]
    centres = [
        float(c.get("cx", "0").rstrip("%"))
        for c in root.iter("circle")
        if c.find("title") is not None
    ]
    assert centres == sorted(centres)
    assert centres[1] - centres[0] >= 3.0  # % of the width: apart, not piled up at 0
    assert svg.decades([0.05, 40.0]) == [0.01, 0.1, 1.0, 10.0, 100.0]
    assert svg.decades([3.0, 7.0]) == [1.0, 10.0]
