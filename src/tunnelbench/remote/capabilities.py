"""What the DUT's kernel can do that advice depends on, asked on the DUT itself.

A lab run records its own kernel's capabilities (:func:`tunnelbench.bench.environment.
capability_record`); advice reads them to say whether the kernel data path it suggests
(kernel WireGuard, the kernel's ESP, ovpn-dco) is there. On real hosts the kernel that
matters is the DUT's, not this machine's: this records, in the same sections, what the
DUT says of the paths its hosts file's tunnel could take, with ``where`` naming whose
kernel it is. A black box's is unknown: nothing is recorded, and advice says so.
"""

from typing import Any

from tunnelbench.kinds import Protection, TunnelKind, TunnelMode
from tunnelbench.remote.session import Session
from tunnelbench.remote.tunnel import esp_refusal
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.openvpn import kernel_dco


def dut_record(session: Session) -> dict[str, Any] | None:
    """The DUT's capability record: its WireGuard module (from its facts); for a built
    tunnel in ESP at the DUT, each AEAD's SA (the lab's probe, made there and deleted);
    for OpenVPN, ovpn-dco's netlink family. None for a black box."""
    dut = session.file.dut
    host, facts = session.hosts.get(dut), session.facts.get(dut)
    if host is None or facts is None:
        return None
    record: dict[str, Any] = {"where": f"{dut}'s kernel", "links": {}, "esp": {}}
    software = facts.software
    if software.wireguard_module is not None:
        has = software.has_module("wireguard")
        record["links"]["wireguard"] = {"ok": has, "detail": software.kernel_wireguard()}
    plan = session.file.tunnel
    esp = plan.kind is TunnelKind.IPSEC or plan.protection is Protection.IPSEC
    if plan.mode is TunnelMode.BUILD and esp and dut in plan.ends:
        for cipher, algorithm in strongswan.KERNEL_ALGORITHMS.items():
            refusal = esp_refusal(session, dut, cipher)
            record["esp"][algorithm] = {"ok": refusal is None, "detail": refusal or "made an SA"}
    if plan.kind is TunnelKind.OPENVPN:
        found = kernel_dco(host)
        record["openvpn_dco"] = {"ok": found.ok, "detail": found.detail}
    return record
