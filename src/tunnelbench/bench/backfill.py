"""The kind and generator facts of trials stored before trials recorded them.

Analysis reads a trial's declared facts (:mod:`tunnelbench.model.kindfacts`) and never
the tunnel registry, so a trial stored by an earlier version gets them here, when the
store reads it: from its configuration and what its settings resolved to, exactly as
its kind would have declared them then. Nothing is written back (a database may be read
read-only); a trial whose kind cannot rebuild them keeps None.
"""

from tunnelbench.errors import UserError
from tunnelbench.kinds import Cipher
from tunnelbench.model.plan import TrialConfig
from tunnelbench.model.records import Resolved
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.base import TunnelSpec


def backfill(config: TrialConfig, resolved: Resolved) -> Resolved:
    """``resolved`` with its missing facts filled in (the same object)."""
    if resolved.setup.implementation is None:
        return resolved  # skipped: nothing resolved, nothing ran
    if resolved.generator is None:
        resolved.generator = GENERATORS.get(config.traffic.generator).facts()
    if resolved.tunnel is None:
        try:
            kind = TUNNELS.get(config.tunnel.kind)
        except UserError:
            return resolved
        spec = TunnelSpec(
            implementation=resolved.setup.implementation,
            mtu=resolved.setup.mtu or 0,
            cipher=Cipher(resolved.setup.cipher) if resolved.setup.cipher else None,
            esp_mode=config.tunnel.esp_mode,
            protection=config.tunnel.protection,
            esp_implementation=resolved.esp.implementation,
        )
        resolved.tunnel = kind.facts(spec, resolved.setup_found())
    return resolved
