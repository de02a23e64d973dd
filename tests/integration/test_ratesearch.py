"""The rate search on a real lab: MLRsearch's trials are trafgen runs, their loss the
receiver's kernel counter, and the rate it finds through a shaped link is the shaper's."""

from collections.abc import Iterator

import pytest

from tunnelbench.bench import ratesearch
from tunnelbench.lab import netns
from tunnelbench.model import frames
from tunnelbench.model.plan import LabSettings, LinkSettings
from tunnelbench.model.wan import burst_bytes
from tunnelbench.system import programs
from tunnelbench.traffic import trafgen

RATE, QUEUE = 10_000_000, 20
WAN = LinkSettings(rate=RATE, queue_limit=QUEUE)


@pytest.fixture
def shaped() -> Iterator[netns.Lab]:
    if programs.find(trafgen.PROGRAM) is None:
        pytest.skip("no trafgen (Debian's netsniff-ng; `make test` installs it)")
    lab = netns.build(LabSettings(wan=WAN))
    try:
        yield lab
    finally:
        lab.teardown()


def test_the_ndr_through_a_shaped_link_is_the_shapers_frame_rate(shaped):
    settings = ratesearch.SearchSettings(frame=1518, max_pps=4000)
    client, server = shaped.host("client"), shaped.host("server")
    found = ratesearch.search(
        client, server, shaped.server_address(4), settings, shaped.files("client") / "f.cfg"
    )
    # The model: tbf passes 10e6 / (1514 x 8) = 825.6 frames a second, and in a trial of
    # T seconds also what its full bucket (10 frames) and its queue (20) take at once,
    # so the highest loss-free rate over the 1 s final trials is 825.6 + 30 / 1.
    written = frames.written_bytes(1518)
    lead = burst_bytes(RATE, WAN.mtu) / written + QUEUE
    model = frames.shaped_pps(RATE, 1518) + lead / settings.final_duration
    assert found.ndr_pps is not None and found.pdr_pps is not None
    assert found.ndr_pps == pytest.approx(model, rel=0.02), (found.ndr_pps, model)
    assert found.pdr_pps >= found.ndr_pps
    # Every trial is kept; at the NDR, the final trial lost nothing by the receiver's
    # count, and the first trial, far above it, lost (or was held back) most of its frames.
    final = [t for t in found.trials if t.duration == settings.final_duration]
    at_ndr = [t for t in final if t.rate_pps == pytest.approx(found.ndr_pps)]
    assert at_ndr and all(t.received >= t.intended and t.loss_ratio == 0 for t in at_ndr)
    assert found.trials[0].rate_pps == settings.max_pps and found.trials[0].loss_ratio > 0.5
    assert all(t.received <= t.sent + 5 for t in found.trials)  # nothing counted unsent
    assert found.seconds < 60


def test_a_path_that_loses_at_the_lowest_rate_has_no_ndr(shaped):
    # From 2,000 frames a second up, twice what the shaper passes (825.6): every trial
    # is held back, and the search says there is no rate, instead of raising.
    settings = ratesearch.SearchSettings(frame=1518, min_pps=2000, max_pps=4000)
    found = ratesearch.search(
        shaped.host("client"), shaped.host("server"), shaped.server_address(4), settings,
        shaped.files("client") / "f.cfg",
    )  # fmt: skip
    assert found.ndr_pps is None and found.pdr_pps is None, found
    assert found.trials and all(t.loss_ratio > 0.4 for t in found.trials)
