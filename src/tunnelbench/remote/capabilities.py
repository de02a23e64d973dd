"""What the DUT's kernel can do that advice depends on, asked on the DUT itself.

A lab run records its own kernel's capabilities (:func:`tunnelbench.bench.environment.
capability_record`); advice reads them to say whether the kernel data path it suggests
(kernel WireGuard, the kernel's ESP, ovpn-dco) is there. On real hosts the kernel that
matters is the DUT's, not this machine's: this records, in the same sections, what the
DUT says of the paths its hosts file's tunnel could take, with ``where`` naming whose
kernel it is. A black box's is unknown: nothing is recorded, and advice says so.
"""

from tunnelbench.kinds import Protection, TunnelKind, TunnelMode
from tunnelbench.model.capability_record import Found, KernelCapabilities
from tunnelbench.remote.session import Session
from tunnelbench.remote.software import WIREGUARD_MODULE
from tunnelbench.remote.tunnel import esp_refusal
from tunnelbench.tunnels import strongswan
from tunnelbench.tunnels.openvpn import kernel_dco


def dut_record(session: Session) -> KernelCapabilities | None:
    """The DUT's capability record: its WireGuard module (from its facts); for a built
    tunnel in ESP at the DUT, each AEAD's SA (the lab's probe, made there and deleted);
    for OpenVPN, ovpn-dco's netlink family. None for a black box."""
    dut = session.file.dut
    host, facts = session.hosts.get(dut), session.facts.get(dut)
    if host is None or facts is None:
        return None
    links: dict[str, Found] = {}
    software = facts.software
    if software.wireguard_module is not None:
        has = software.has_module(WIREGUARD_MODULE)
        links["wireguard"] = Found(has, software.kernel_wireguard())
    esp: dict[str, Found] = {}
    plan = session.file.tunnel
    encrypted = plan.kind is TunnelKind.IPSEC or plan.protection is Protection.IPSEC
    if plan.mode is TunnelMode.BUILD and encrypted and dut in plan.ends:
        for cipher, algorithm in strongswan.KERNEL_ALGORITHMS.items():
            refusal = esp_refusal(session, dut, cipher)
            esp[algorithm] = Found(refusal is None, refusal or "made an SA")
    dco = None
    if plan.kind is TunnelKind.OPENVPN:
        found = kernel_dco(host)
        dco = Found(found.ok, found.detail)
    return KernelCapabilities(where=f"{dut}'s kernel", links=links, esp=esp, openvpn_dco=dco)
