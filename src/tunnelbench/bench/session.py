"""One lab's life, the same for a trial and for ``lab up``: the underlay (namespaces,
links, addresses, routes), its shaping, queues and offloads, the tunnel, its CPU budget,
and the teardown — in that order, undone on any failure or Ctrl-C.

The runner measures inside a session (its probes attach between the steps); ``lab up``
opens one and keeps it, so a lab built by hand is built exactly as a trial's is.
"""

from types import TracebackType

from tunnelbench.errors import LabError
from tunnelbench.kinds import TunnelKind
from tunnelbench.lab import cgroup, netns
from tunnelbench.lab import state as lab_state
from tunnelbench.lab.netns import Lab
from tunnelbench.model.plan import TrialConfig
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.base import TunnelHandle, TunnelSpec


class LabSession:
    """``with LabSession(config, spec) as session``: :meth:`build`, then
    :meth:`tunnel_up`; the lab is torn down when the block ends, however it ends,
    unless :meth:`keep` was called."""

    def __init__(self, config: TrialConfig, spec: TunnelSpec, *, lab_id: str | None = None):
        # Named before it is built, so that a Ctrl-C landing between the build's return
        # and its assignment still finds the lab by its name (see teardown).
        self.config, self.spec = config, spec
        self.lab_id = lab_id or netns.new_lab_id()
        self._building = False
        self._lab: Lab | None = None
        self._handle: TunnelHandle | None = None
        self._kept = False
        #: What set-up did and found out, which the trial records: role -> a kernel
        #: tunnel's device whose GSO/TSO was turned off, role -> a pinned role's tunnel
        #: device steered as its links are, and the tunnel's CPU budget as applied.
        self.unbundled: dict[str, str] = {}
        self.steered: dict[str, str] = {}
        self.limit: cgroup.CpuLimit | None = None

    @property
    def lab(self) -> Lab:
        assert self._lab is not None, "build() first"
        return self._lab

    @property
    def handle(self) -> TunnelHandle:
        assert self._handle is not None, "tunnel_up() first"
        return self._handle

    def build(self) -> Lab:
        """The underlay with its shaping, queues and offloads (removed again if any
        step fails)."""
        tunnel = self.config.tunnel.kind is not TunnelKind.NONE
        self._building = True
        self._lab = netns.build(self.config.lab, lab_id=self.lab_id, tunnel=tunnel)
        return self._lab

    def tunnel_up(self) -> TunnelHandle:
        """The tunnel between the lab's tunnel ends, routed, with its CPU budget."""
        lab, settings = self.lab, self.config.tunnel
        self._handle = TUNNELS.get(settings.kind).setup(lab, self.spec)
        kernel_path = not TUNNELS.get(settings.kind).facts(self.spec).userspace
        if kernel_path:
            self.unbundled = netns.unbundle_tunnel(lab, self._handle.devices)
        self.steered = netns.steer_tunnel(lab, self._handle.devices)
        if settings.cpu_budget is not None:
            self.limit = cgroup.limit_cpu(lab.state, self._handle.daemons, settings.cpu_budget)
        return self._handle

    def keep(self) -> None:
        """Leave the lab running when the block ends (``lab up``; ``lab down`` removes
        it from its saved state)."""
        self._kept = True

    def teardown(self) -> None:
        if self._kept:
            return
        if self._lab is not None:
            lab, self._lab = self._lab, None
            lab.teardown()
        elif self._building:
            _remove_own(self.lab_id)
        self._building = False

    def __enter__(self) -> "LabSession":
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if error is not None:
            self._kept = False  # a lab that failed half-way is never left behind
        self.teardown()


def _remove_own(lab_id: str) -> None:
    """Remove the lab ``lab_id`` if this process built it and its state is still
    recorded: the build finished but was interrupted before the session held it. A lab
    of that name that another process built (``lab up`` refused for an existing name)
    is left alone."""
    try:
        state = lab_state.LabState.load(lab_id)
    except FileNotFoundError:
        return
    if state.owner == lab_state.current_owner() and (problems := lab_state.teardown(state)):
        raise LabError("lab teardown incomplete: " + "; ".join(problems))
