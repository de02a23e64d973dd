"""The HTML report opened in a real headless browser (Debian's chromium).

For each report: the page loads with no console message at all (it has no script, so any
message is an error such as a blocked fetch), the browser makes no network request on the
page's behalf (read from Chromium's own net log), every chart is in the rendered DOM, and
screenshots at laptop and phone width are written to tests/browser/artifacts/ for a
person to look at. Two control pages prove that the checks catch a fetch and a script
error. Needs no root and no lab; chromium is installed by ``make setup``.
"""

import json
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.report_fixtures import RECORDED, drawn_axes, recorded, unreadable, wide
from tunnelbench.bench.store import Store
from tunnelbench.report import html, view
from tunnelbench.report.charts import charts_for_run

ARTIFACTS = Path(__file__).parent / "artifacts"
FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--no-first-run", "--disable-component-update", "--disable-sync", "--disable-extensions",
    "--disable-default-apps", "--no-pings", "--hide-scrollbars",
]  # fmt: skip
CONSOLE = re.compile(r":CONSOLE[:(]\d+\)?\] (.*)")
# The browser's own traffic (component updates, sign-in, spell-check dictionaries) is
# started by no page: Chromium logs its initiator as "not an origin" and its network
# isolation key without the page's site. Everything else was asked for by the page.
BROWSER_INITIATOR = "not an origin"


def _chromium() -> str:
    path = shutil.which("chromium")
    if path is None:
        pytest.fail(
            "chromium is not installed; `make setup` installs it (scripts/debian-packages.txt)"
        )
    return path


@dataclass
class Visit:
    dom: str
    console: list[str]
    page_requests: list[str]  # URLs the browser fetched for the page
    browser_requests: list[str]  # the browser's own background requests, ignored


def _requests(net_log: Path) -> tuple[list[str], list[str]]:
    text = net_log.read_text()
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # the browser stopped before closing the event list
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    names = {number: name for name, number in log["constants"]["logEventTypes"].items()}
    page: list[str] = []
    browser: list[str] = []
    for event in log["events"]:
        params = event.get("params") or {}
        if names.get(event["type"]) != "URL_REQUEST_START_JOB" or "url" not in params:
            continue  # other events, and the end of a request job
        own = params.get("initiator") == BROWSER_INITIATOR and "file://" not in params.get(
            "network_isolation_key", ""
        )
        (browser if own else page).append(params["url"])
    return page, browser


def visit(page: Path, tmp: Path) -> Visit:
    """Load a page once, keeping its DOM, console messages and network requests."""
    net_log = tmp / "net.json"
    result = subprocess.run(
        [
            _chromium(), *FLAGS, f"--user-data-dir={tmp / 'profile'}", "--enable-logging=stderr",
            "--v=0", f"--log-net-log={net_log}", "--dump-dom", page.resolve().as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    console = [m.group(1) for m in CONSOLE.finditer(result.stderr)]
    page_requests, browser_requests = _requests(net_log)
    return Visit(result.stdout, console, page_requests, browser_requests)


def screenshot(page: Path, tmp: Path, name: str, width: int, height: int) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    out = ARTIFACTS / f"{name}-{width}.png"
    out.unlink(missing_ok=True)
    subprocess.run(
        [
            _chromium(), *FLAGS, f"--user-data-dir={tmp / 'profile'}",
            f"--screenshot={out}", f"--window-size={width},{height}", page.resolve().as_uri(),
        ],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    print(f"screenshot: {out}")
    return out


def _png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    width, height = struct.unpack(">II", header[16:24])
    return width, height


def _store(name: str, tmp: Path) -> Store:
    return wide(tmp) if name == "wide" else recorded(name, tmp)


# Heights that hold each whole page (the wide run's 50 configurations make a long page).
HEIGHTS = {"l2-tunnel-mtu": (3200, 5200), "queue-comparison": (4200, 6800), "wide": (16000, 19000)}


@pytest.mark.parametrize("name", [*RECORDED, "wide"])
def test_report_loads_offline_without_errors_with_every_chart(name, tmp_path):
    loaded = view.load(_store(name, tmp_path), "latest")
    page = html.write(loaded, tmp_path / f"{name}.html")
    expected = [c.id for c in charts_for_run(loaded.summaries, loaded.artifact)]

    seen = visit(page, tmp_path)

    assert seen.console == []
    assert seen.page_requests == []
    section = seen.dom.split('<section id="charts">', 1)[1].split("</section>", 1)[0]
    rendered = re.findall(r'<svg id="chart-([^"]+)"', section)
    assert rendered == expected and len(rendered) >= 3
    assert "<h2>Summary</h2>" in seen.dom and "<h2>Environment</h2>" in seen.dom
    for width, height in zip((1280, 390), HEIGHTS[name], strict=True):
        shot = screenshot(page, tmp_path, name, width, height)
        assert _png_size(shot) == (width, height)
        assert shot.stat().st_size > 20_000  # a drawn page, not a blank one


# Run in a copy of the page (its policy forbids scripts): every element that reaches
# past the viewport's edges, outside the boxes meant to scroll; and each of those boxes
# that does scroll ("SCROLLS": part of its table is behind a scrollbar).
CLIPPED = """<script>
const width = document.documentElement.clientWidth, out = [];
for (const el of document.querySelectorAll("body *")) {
  if (el.closest(".scroll") || el.tagName === "SCRIPT") continue;
  const box = el.getBoundingClientRect();
  if (box.width > 0 && (box.right > width + 1 || box.left < -1))
    out.push(`${el.tagName} ${el.id} ${(el.textContent || "").slice(0, 50)}`);
}
for (const box of document.querySelectorAll(".scroll")) {
  const edge = box.getBoundingClientRect();
  if (box.scrollWidth > box.clientWidth + 1 || edge.right > width + 1 || edge.left < -1)
    out.push(`SCROLLS ${box.className} by ${box.scrollWidth - box.clientWidth} px`);
}
document.body.setAttribute("data-clipped", JSON.stringify(out));
</script>"""


def clipped(page: Path, tmp: Path, width: int) -> list[str]:
    """What of ``page`` is cut off at ``width`` px (see :data:`CLIPPED`)."""
    probe = tmp / f"clip-{width}.html"
    text = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page.read_text())
    probe.write_text(text.replace("</body>", CLIPPED + "</body>"))
    done = subprocess.run(
        [_chromium(), *FLAGS, f"--user-data-dir={tmp / 'profile'}",
         f"--window-size={width},2000", "--dump-dom", probe.resolve().as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    found = re.search(r'data-clipped="([^"]*)"', done.stdout)
    assert found is not None, "the probe script did not run"
    return list(json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&")))


def test_latency_and_window_charts_are_drawn_and_nothing_is_clipped(tmp_path):
    """tests/fixtures/runs/timeline.db: 2 configurations, with round trips and the
    sampler's per-part CPU series."""
    store = recorded("timeline", tmp_path)
    page = html.write(view.load(store, "1"), tmp_path / "timeline.html")
    seen = visit(page, tmp_path)
    assert seen.console == [] and seen.page_requests == []
    drawings = dict(CHART.findall(seen.dom))
    latency = drawings["chart-latency"]
    assert "1  none" in latency and "2  wireguard (wireguard-go)" in latency  # numbered
    timelines = [body for name, body in drawings.items() if name.startswith("chart-timeline-")]
    assert len(timelines) == 2
    for body in timelines:  # four panels on one time axis, each with its value axis
        for unit in ("goodput (Mbit/s)", "round trip (ms)", "cpu0 (%)", "cpu1 (%)"):
            assert f">{unit}</text>" in body
        directions = [d for d, _ in drawn_axes(f"<svg>{body}</svg>")]
        assert sorted(directions) == ["x"] + ["y"] * 4  # one time axis labelled
    for width in (1280, 390):
        # On a phone the tables scroll in their boxes, as they are meant to.
        cut = clipped(page, tmp_path, width)
        assert [c for c in cut if width > 1000 or not c.startswith("SCROLLS")] == []
        screenshot(page, tmp_path, "timeline", width, 5000)


# Every chart as the browser holds it: its id, and what is inside its <svg>.
CHART = re.compile(r'<svg id="(chart-[^"]+)"[^>]*>(.*?)</svg>', re.S)


def unreadable_axes(dom: str) -> tuple[list[str], int]:
    """The charts of a page whose tick labels repeat or are out of order on an axis (a
    sub-millisecond axis once read ``0 0 0 0 0``), and how many axes were read."""
    bad, axes = [], 0
    for chart, body in CHART.findall(dom):
        drawing = f"<svg>{body}</svg>"
        axes += len(drawn_axes(drawing))
        bad += [f"{chart} {axis}" for axis in unreadable(drawing)]
    return bad, axes


def test_the_axis_check_catches_an_axis_of_zeros():
    """Negative control: the labels one decimal gave a 0.02-0.08 ms axis, as a browser
    serialises a drawing."""
    ticks = "".join(
        f'<g id="rtt-ytick_{n}"><g id="rtt-line2d_{n}"></g><g id="rtt-text_{n}">'
        f'<text x="29" y="{100 - 20 * n}">0</text></g></g>'
        for n in range(5)
    )
    dom = f'<svg id="chart-rtt"><g id="rtt-matplotlib.axis_2">{ticks}</g></svg>'
    assert unreadable_axes(dom) == (["chart-rtt y: 0 0 0 0 0"], 1)


# A path of 0.03-0.2 ms (the host's veths: timeline) and one whose FIFO holds 600 ms
# (bloated-600ms: `tunnelbench run` of a 3 Mbit/s WAN, a bfifo of 15,000 and 225,000
# bytes, 2 runs of 3 s after an "auto" warm-up): the two ends of the axes a report draws.
@pytest.mark.parametrize("name", ["timeline", "bloated-600ms"])
def test_every_axis_reads_distinct_values_in_order_and_nothing_is_cut(name, tmp_path):
    page = html.write(view.load(recorded(name, tmp_path), "latest"), tmp_path / f"{name}.html")
    seen = visit(page, tmp_path)
    assert seen.console == [] and seen.page_requests == []
    bad, axes = unreadable_axes(seen.dom)
    assert bad == [] and axes >= 6, (bad, axes)
    if name == "bloated-600ms":  # 40 against 600 ms: the latency scatter is in decades
        assert "round trip under load, 95th percentile (ms, log scale)" in seen.dom
    assert clipped(page, tmp_path, 1300) == []
    assert all(c.startswith("SCROLLS") for c in clipped(page, tmp_path, 390))


def test_a_wide_window_shows_the_whole_results_table(tmp_path):
    """The results table takes a wide window's whole width: it had the text's 1000 px,
    and at a 1300 px window its last columns (the verdict) sat behind a scrollbar while
    300 px stayed empty. On a phone it scrolls in its box, and nothing else is cut."""
    store = recorded("iperf2-vs-iperf3", tmp_path)  # its table: 209 px past the text's width
    page = html.write(view.load(store, "latest"), tmp_path / "generators.html")
    assert clipped(page, tmp_path, 1300) == []
    narrow = clipped(page, tmp_path, 390)
    assert any(c.startswith("SCROLLS scroll wide") for c in narrow), narrow
    assert all(c.startswith("SCROLLS") for c in narrow), narrow


def test_the_clipping_probe_catches_a_wide_element(tmp_path):
    """Negative control: a 2000 px wide block is reported at 390 px."""
    page = tmp_path / "wide.html"
    page.write_text(
        '<!DOCTYPE html><html><body><div id="w" style="width:2000px">x</div></body></html>'
    )
    assert [c.split()[:2] for c in clipped(page, tmp_path, 390)] == [["DIV", "w"]]


def test_a_page_that_fetches_is_caught(tmp_path):
    """Negative control: a page loading a script from a CDN fails the request check."""
    page = tmp_path / "fetch.html"
    page.write_text(
        '<!DOCTYPE html><html><head><script src="https://cdn.example/x.js"></script></head>'
        "<body><p>hello</p></body></html>"
    )
    assert visit(page, tmp_path).page_requests == ["https://cdn.example/x.js"]


def test_a_page_with_a_script_error_is_caught(tmp_path):
    """Negative control: an error in a script shows up as a console message."""
    page = tmp_path / "error.html"
    page.write_text("<!DOCTYPE html><html><body><script>notDefined();</script></body></html>")
    (message,) = visit(page, tmp_path).console
    assert "notDefined is not defined" in message


def test_the_report_policy_blocks_a_fetch_that_slipped_in(tmp_path):
    """Defence in depth: with the report's Content-Security-Policy, an injected image
    is not fetched, and the blocked attempt is reported on the console."""
    page = tmp_path / "csp.html"
    page.write_text(
        f'<!DOCTYPE html><html><head><meta http-equiv="Content-Security-Policy" '
        f'content="{html.CSP}"></head><body><img src="https://cdn.example/x.png"></body></html>'
    )
    seen = visit(page, tmp_path)
    assert seen.page_requests == []
    assert any("Content Security Policy" in m for m in seen.console)


def test_a_tuning_sessions_report_shows_its_path_offline(tmp_path):
    """tests/fixtures/runs/tune-tiny-fifo.db: the README's tune session."""
    store = recorded("tune-tiny-fifo", tmp_path)
    page = html.write(view.load(store, "1"), tmp_path / "tune.html")
    seen = visit(page, tmp_path)
    assert seen.console == []
    assert seen.page_requests == []
    assert '<section id="tuning"><h2>Tuning path</h2>' in seen.dom
    assert "kept: lab.wan.queue_limit 4 → 64" in seen.dom
    for width in (1280, 390):
        shot = screenshot(page, tmp_path, "tune-tiny-fifo", width, 4000)
        assert _png_size(shot) == (width, 4000)
        assert shot.stat().st_size > 20_000
