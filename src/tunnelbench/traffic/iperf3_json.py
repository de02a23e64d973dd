"""Reading iperf3's JSON output (``-J --get-server-output``), as 3.12 writes it.

Goodput is what the receivers counted (``end.sum_received``, plus its ``_bidir_reverse``
twin), which already excludes the ``--omit`` warm-up. Intervals are taken from whichever
side received: the server's report for upload, the client's for download, both for
bidirectional tests.
"""

from dataclasses import dataclass
from typing import Any

from tunnelbench.errors import LabError


@dataclass
class ProcessMeasurement:
    upload_bps: float | None
    download_bps: float | None
    retransmits: int | None
    intervals_bps: list[float]


def parse(doc: dict[str, Any], duration: int) -> ProcessMeasurement:
    """Measurements from one iperf3 client's JSON document."""
    if "error" in doc:
        raise LabError(f"iperf3: {doc['error']}")
    end = doc.get("end") or {}
    upload = download = None
    for key in ("sum_received", "sum_received_bidir_reverse"):
        if key not in end:
            continue
        summary = end[key]
        # "sender" says whether the client was the sending side of this summary.
        if summary["sender"]:
            upload = float(summary["bits_per_second"])
        else:
            download = float(summary["bits_per_second"])
    if upload is None and download is None:
        raise LabError("iperf3 output has no receiver summary (end.sum_received)")
    retransmits = [
        end[key]["retransmits"]
        for key in ("sum_sent", "sum_sent_bidir_reverse")
        if key in end and "retransmits" in end[key]
    ]
    return ProcessMeasurement(
        upload_bps=upload,
        download_bps=download,
        retransmits=sum(retransmits) if retransmits else None,
        intervals_bps=receiver_intervals(doc, duration),
    )


def receiver_intervals(doc: dict[str, Any], duration: int) -> list[float]:
    """Goodput per interval as the receivers saw it, omitted warm-up intervals dropped.

    The server reports one more, partial interval after the test ends; only intervals
    that start within the test duration are kept.
    """
    reports = [doc.get("intervals", [])]
    if server := doc.get("server_output_json"):
        reports.append(server.get("intervals", []))
    series: list[float] = []
    for intervals in reports:
        index = 0
        for interval in intervals:
            received = [
                v
                for k, v in interval.items()
                if k.startswith("sum") and not v["sender"] and not v.get("omitted", False)
            ]
            if not received or received[0]["start"] >= duration - 0.5:
                continue
            if index == len(series):
                series.append(0.0)
            series[index] += sum(float(v["bits_per_second"]) for v in received)
            index += 1
    return series


def version(doc: dict[str, Any]) -> str:
    return str(doc.get("start", {}).get("version", "unknown"))
