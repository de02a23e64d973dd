"""The HTML report of the recorded runs: self-contained, escaped, complete; its SVG charts
(matplotlib's, the renderer the PNGs have).

Opening the page in a real browser is tests/browser/test_html_in_chromium.py.
"""

import re
import sqlite3
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from itertools import pairwise

import numpy
import pytest

from tests.report_fixtures import RECORDED, drawn_axes, recorded, unreadable, wide
from tunnelbench.report import figures, html, view
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
    # Nothing that could make a browser fetch: no script, link, image, frame, import, URL;
    # the charts' references (markers, clip paths) point into the page and resolve there.
    assert {t for t, _ in parsed.tags} <= {
        "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3", "p",
        "br", "code", "section", "ul", "li", "div", "table", "thead", "tbody", "tr", "th",
        "td", "figure", "figcaption", "footer", "svg", "defs", "g", "path", "use", "text",
        "clippath", "rect",
    }  # fmt: skip
    ids = {a["id"] for _, a in parsed.tags if a.get("id")}
    for _, attrs in parsed.tags:
        assert not {"src", "xlink:href", "srcset", "action"} & set(attrs)
        assert attrs.get("href") is None or (attrs["href"] or "")[1:] in ids
    assert set(re.findall(r"url\(#([^)]+)\)", page)) <= ids
    assert not re.search(r"https?:|url\((?!#)|@import", page)
    assert len(ids) == sum(1 for _, a in parsed.tags if a.get("id"))  # no id twice
    csp = next(a for t, a in parsed.tags if t == "meta" and a.get("http-equiv"))
    assert (csp["content"] or "").startswith("default-src 'none'")


@pytest.mark.parametrize("name", RECORDED)
def test_every_chart_is_an_accessible_well_formed_svg_with_readable_axes(name, tmp_path):
    loaded = view.load(recorded(name, tmp_path), "latest")
    page = html.render(loaded)
    for chart in charts_for_run(loaded.summaries, loaded.artifact):
        drawing = figures.chart_svg(chart)
        root = ET.fromstring(drawing)  # well-formed XML
        assert root.get("id") == f"chart-{chart.id}"
        assert root.get("role") == "img" and root.get("class") == "chart"
        assert root.findtext("title") == chart.title
        assert f'id="fig-{chart.id}"' in page and drawing in page
        assert unreadable(drawing) == [] and len(drawn_axes(drawing)) >= 2, chart.id


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
    loaded = view.load(wide(tmp_path), "latest")
    charts = charts_for_run(loaded.summaries, loaded.artifact)
    drawing = figures.chart_svg(charts[0])
    (rows,) = [ticks for direction, ticks in drawn_axes(drawing) if direction == "y"]
    assert len(rows) == 50 and len({t.label for t in rows}) == 50
    ys = sorted(t.y for t in rows)
    assert min(b - a for a, b in pairwise(ys)) >= 12  # pt apart: each row readable
    assert unreadable(drawing) == []


def test_a_sub_millisecond_axis_reads_unique_ordered_values():
    """A veth path's round trip (0.03-0.08 ms): the hand-drawn SVG's value axis read
    ``0 0 0 0 0`` when every label had one decimal."""
    chart = Chart(
        id="rtt", title="RTT", kind="line", x_label="s", y_label="ms",
        categories=("1", "2", "3"), series=(Series("rtt", (0.031, 0.074, 0.052)),),
    )  # fmt: skip
    drawing = figures.chart_svg(chart)
    (values,) = [ticks for direction, ticks in drawn_axes(drawing) if direction == "y"]
    assert [t.label for t in values][:2] == ["0.00", "0.01"]
    assert len(values) >= 5 and unreadable(drawing) == []


def test_the_axis_check_catches_an_axis_of_zeros():
    """Negative control for :func:`unreadable`: an axis labelled with one decimal."""
    chart = Chart(
        id="rtt", title="RTT", kind="line", x_label="s", y_label="ms",
        categories=("1", "2", "3"), series=(Series("rtt", (0.031, 0.074, 0.052)),),
    )  # fmt: skip
    fig = figures.figure(chart)
    from matplotlib.ticker import FormatStrFormatter

    fig.axes[0].yaxis.set_major_formatter(FormatStrFormatter("%.1f"))
    assert unreadable(figures.svg(fig, "rtt", "RTT")) == ["y: 0.0 0.0 0.0 0.0 0.0 0.1 0.1 0.1"]


def test_missing_values_and_global_references_are_drawn():
    chart = Chart(
        id="t", title="T & <x>", kind="bar", x_label="c", y_label="Mbit/s",
        categories=("a", "b"), series=(Series("s", (5.0, None), (4.0, None), (6.0, None)),),
        reference_lines=(Reference("cap", 8.0), Reference("base", 7.0, "a")),
    )  # fmt: skip
    root = ET.fromstring(figures.chart_svg(chart))
    texts = ["".join(t.itertext()).strip() for t in root.iter("text")]
    assert figures.NO_DATA in texts and "cap" in texts and "base" in texts
    assert root.findtext("title") == "T & <x>"
    fig = figures.figure(chart)
    lines = [line for line in fig.axes[0].get_lines() if line.get_linestyle() == "--"]
    assert [float(numpy.asarray(line.get_xdata())[0]) for line in lines] == [8.0, 7.0]


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
    assert row.group(1).split(", ")[:3] == list(loaded.environment.cpu_flags or ())[:3]


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
    drawing = figures.chart_svg(chart)
    (decades,) = [ticks for direction, ticks in drawn_axes(drawing) if direction == "x"]
    assert [t.label for t in decades] == ["0.1", "1", "10"]  # 0.04-48 ms
    fig = figures.figure(chart)
    ax = fig.axes[0]
    assert ax.get_xscale() == "log"
    width = ax.bbox.width
    centres = [ax.transData.transform((x, 1.0))[0] for x in (0.05, 0.09, 40.0)]
    assert centres == sorted(centres)
    assert centres[1] - centres[0] >= 0.03 * width  # apart, not piled up at 0
