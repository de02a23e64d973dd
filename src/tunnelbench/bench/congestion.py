"""The lab's TCP congestion control: cubic, unless the plan names one.

Users' endpoints run cubic (Linux's default, and Windows' and macOS's); this machine's
default is bbr, and a namespace inherits the default of the namespace that created it,
so a lab that kept it would measure bbr, which fills a FIFO differently (it paces to its
estimate of the bottleneck and keeps the queue short). A plan names another with
``traffic.congestion`` (``--congestion``), and every trial records what its senders used
(``congestion`` in its resolved settings). A kernel without cubic keeps its default.

A congestion control is set per socket, by the generator (iperf3 ``-C``, iperf2 ``-Z``),
not as the namespaces' default: the sysctl ``net.ipv4.tcp_congestion_control`` is per
namespace on this kernel (6.18), but a namespace other than the host's may only make an
algorithm of ``tcp_allowed_congestion_control`` its default (here ``reno bbr``: writing
``cubic`` is refused with EPERM), a list only the host's namespace can change, and the
lab changes nothing there. A socket of a root process may take any algorithm the kernel
has. Real hosts keep their own default (they are the user's endpoints).
"""

from collections.abc import Sequence
from dataclasses import replace

from tunnelbench.kinds import Direction, Generator, Protocol
from tunnelbench.model.plan import TrafficSettings

#: What the lab's senders use when the plan names none (None: the kernel's default).
LAB_DEFAULT: str | None = "cubic"


def lab_traffic(
    settings: TrafficSettings, available: Sequence[str], default: str | None = LAB_DEFAULT
) -> TrafficSettings:
    """``settings`` as the lab's generator runs them: TCP with no congestion control
    named gets ``default`` where the kernel has it (``available``: its
    ``tcp_available_congestion_control``); otherwise unchanged."""
    if settings.protocol is not Protocol.TCP or settings.congestion is not None:
        return settings
    if settings.generator is Generator.IPERF2 and settings.direction is Direction.BIDIR:
        return settings  # 2.1.8 takes -Z at neither end of a full-duplex test (iperf2.py)
    if default is None or default not in available:
        return settings
    return replace(settings, congestion=default)
