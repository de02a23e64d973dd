"""strongSwan as tunnelbench drives it: the files and commands, and what it answers.

Pure: configuration text, command lines and the parsing of ``swanctl`` output; running
it in a lab is :mod:`tunnelbench.tunnels.esp`'s business.

Each tunnel end runs its own ``charon`` (IKEv2, controlled over its vici socket with
``swanctl``), fully isolated from any other charon on the host:

- its own ``strongswan.conf`` (named by ``STRONGSWAN_CONF``) with an explicit plugin
  ``load`` list: nothing from ``/etc/strongswan.d`` and no ``load_modular`` surprises;
- its own directory in the lab, mounted on ``/run`` inside a private mount namespace
  (``unshare --mount --propagation private`` within ``ip netns exec``), so the pid file
  charon insists on (``/var/run/charon.pid``, compiled in) and its vici socket are the
  lab's: two labs, or two ends of one lab, never share them, and a charon the host runs
  for itself is neither seen nor touched;
- its own ``swanctl.conf``, holding the lab's pre-shared key (a file only root can read,
  removed with the lab).
"""

import re
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.echo import did_you_mean, shown
from tunnelbench.errors import LabError, UserError
from tunnelbench.kinds import Cipher, EspMode
from tunnelbench.model import encapsulation as model
from tunnelbench.model.plan import IMPLEMENTATION_AUTO
from tunnelbench.system import probing

#: strongSwan's IKE daemon, as Debian's strongswan-charon installs it (not on PATH).
CHARON = "/usr/lib/ipsec/charon"
PLUGIN_DIR = Path("/usr/lib/ipsec/plugins")
KERNEL = "kernel"  # ESP in the kernel (XFRM), set up by charon's kernel-netlink plugin
LIBIPSEC = "libipsec"  # strongSwan's userspace ESP, the kernel-libipsec plugin, over TUN
IMPLEMENTATIONS = (KERNEL, LIBIPSEC)

#: The programs every ESP set-up runs, with what they are for.
PROGRAMS = (
    (CHARON, "strongSwan's IKE daemon, from strongswan-charon"),
    ("swanctl", "strongSwan's control tool, from strongswan-swanctl"),
    ("unshare", "a private mount namespace per daemon, from util-linux"),
)
#: The Debian package of each of :data:`PROGRAMS`.
PACKAGES = {CHARON: "strongswan-charon", "swanctl": "strongswan-swanctl", "unshare": "util-linux"}

#: Where a daemon's directory is mounted inside its private mount namespace: charon's
#: compiled-in pid file, /var/run/charon.pid, lands in it (/var/run is /run on Debian).
INSIDE = Path("/run")
CONF = "strongswan.conf"
VICI = "charon.vici"
PIDFILE = "charon.pid"
#: The plugins each implementation loads, and nothing else. openssl: AES-GCM,
#: ChaCha20-Poly1305, SHA-2, X25519; kdf: IKEv2's prf+ (5.9.8's openssl plugin lacks
#: it); kernel-netlink: addresses, routes (and XFRM for the kernel's ESP);
#: socket-default: IKE's sockets; vici: swanctl's socket.
PLUGINS = {
    KERNEL: ("random", "nonce", "openssl", "kdf", "kernel-netlink", "socket-default", "vici"),
    LIBIPSEC: (
        "random", "nonce", "openssl", "kdf", "kernel-libipsec", "kernel-netlink",
        "socket-default", "vici",
    ),
}  # fmt: skip
#: The plugins' files and the Debian packages that ship them.
PLUGIN_PACKAGES = {
    "openssl": "libstrongswan-standard-plugins",
    "kernel-libipsec": "libcharon-extra-plugins",
    "vici": "strongswan-swanctl",
}
#: kernel-libipsec reads each packet from its TUN device into a buffer of the MTU it set
#: at start (1400, compiled in): a larger packet would be cut short. The device MTU may
#: be lowered, never raised above this.
LIBIPSEC_MAX_MTU = 1400

CONNECTION = "tb"
#: IKE's own proposal is fixed and fast (it is not what is measured): AES-GCM, SHA-256
#: PRF, X25519.
IKE_PROPOSAL = "aes256gcm16-prfsha256-x25519"
#: IKE's NAT-T port where it is free (a lab's namespaces; a host without its own IKE
#: daemon), else one of :data:`NAT_T_PORTS`: charon's ``port_nat_t``, on which a
#: connection whose ports are both NAT-T ports runs IKE (with the non-ESP marker) and
#: ESP in UDP alike. Its plain IKE port is left to the kernel (``port = 0``): nothing
#: is sent from it.
NAT_T_PORT = 4500
NAT_T_PORTS = range(4501, 4600)
#: The routing table of a lab's charon (its namespace has no other); on a host, one
#: drawn from :data:`ROUTING_TABLES` (:func:`rules_removal`).
ROUTING_TABLE = 220
ROUTING_TABLES = range(0x7462_0000, 0x7462_FFFF)
ESP_PROPOSALS = {Cipher.AES_256_GCM: "aes256gcm16", Cipher.CHACHA20_POLY1305: "chacha20poly1305"}
#: The kernel's name of each AEAD, as the capability probe asks for it.
KERNEL_ALGORITHMS = {
    Cipher.AES_256_GCM: "rfc4106(gcm(aes))",
    Cipher.CHACHA20_POLY1305: "rfc7539esp(chacha20,poly1305)",
}
#: How ``swanctl --list-sas`` names the negotiated ESP algorithm: encr-alg, encr-keysize
#: (none for ChaCha20-Poly1305, whose key is always 256 bits).
NEGOTIATED = {
    ("AES_GCM_16", "256"): Cipher.AES_256_GCM,
    ("CHACHA20_POLY1305", ""): Cipher.CHACHA20_POLY1305,
}


#: The ceiling model's name of each cipher (both add the same bytes).
MODEL_CIPHERS = {
    Cipher.AES_256_GCM: model.Cipher.AES_GCM,
    Cipher.CHACHA20_POLY1305: model.Cipher.CHACHA20_POLY1305,
}
LIBIPSEC_NAME = "strongSwan's userspace ESP (libipsec)"


# --- which ESP runs here ---


def kernel_refusal(cipher: Cipher) -> str | None:
    """None when this kernel can make ESP SAs with ``cipher`` (or that could not be
    probed: the run then meets the real error); else the kernel's refusal."""
    algorithm = KERNEL_ALGORITHMS[cipher]
    found = probing.esp(algorithm)
    return f"{algorithm}: {found.detail}" if found.ok is False else None


def resolve_implementation(requested: str | None, cipher: Cipher, mode: EspMode) -> str:
    """Who does ESP: ``kernel`` when this kernel has the cipher's AEAD, else ``libipsec``
    (``requested`` None: "auto"); a named one is checked. Transport mode needs the kernel
    (libipsec does tunnel mode only). A :class:`UserError` names the setting that cannot
    be met."""
    if requested is not None and requested not in IMPLEMENTATIONS:
        spelt = (IMPLEMENTATION_AUTO, *IMPLEMENTATIONS)
        raise UserError(
            f"tunnel.implementation: {shown(requested)} is not an ESP implementation;"
            f" allowed: {', '.join(spelt)}{did_you_mean(requested, spelt)}"
        )
    refusal = kernel_refusal(cipher) if requested != LIBIPSEC else None
    if mode is EspMode.TRANSPORT:
        if requested == LIBIPSEC:
            raise UserError(
                f"tunnel.esp_mode: 'transport' needs kernel ESP; {LIBIPSEC_NAME} does "
                "tunnel mode only"
            )
        if refusal is not None and requested is None:
            raise UserError(
                f"tunnel.esp_mode: 'transport' needs kernel ESP, and this kernel has none with "
                f"{cipher.value} ({refusal}); {LIBIPSEC_NAME} does tunnel mode only"
            )
    if requested == KERNEL and refusal is not None:
        raise UserError(
            f"tunnel.implementation: this kernel has no ESP with {cipher.value} ({refusal}); "
            f"use {LIBIPSEC!r} or 'auto'"
        )
    if requested is None:
        return KERNEL if refusal is None else LIBIPSEC
    return requested


def encapsulated(implementation: str) -> bool:
    """Whether ESP travels in UDP (NAT-T): libipsec can do no other (it has no raw ESP
    socket), so charon forces NAT-T; the kernel sends plain ESP (IP protocol 50)."""
    return implementation == LIBIPSEC


def esp_model(
    implementation: str, cipher: Cipher, mode: EspMode
) -> tuple[model.Encapsulation, model.EncapOptions]:
    """The ceiling model's view of this ESP: its encapsulation and options."""
    kind = (
        model.Encapsulation.ESP_TUNNEL
        if mode is EspMode.TUNNEL
        else model.Encapsulation.ESP_TRANSPORT
    )
    return kind, model.EncapOptions(
        cipher=MODEL_CIPHERS[cipher], nat_t=encapsulated(implementation)
    )


def missing_plugins(implementation: str) -> list[str]:
    """The plugins ``implementation`` loads whose files are not installed, each with the
    Debian package that ships it."""
    return [
        f"{name} ({PLUGIN_PACKAGES[name]})"
        for name in PLUGINS[implementation]
        if name in PLUGIN_PACKAGES and not (PLUGIN_DIR / f"libstrongswan-{name}.so").is_file()
    ]


@dataclass(frozen=True)
class Child:
    """One CHILD_SA: the traffic it protects, as swanctl traffic selectors."""

    name: str
    local_ts: tuple[str, ...]
    remote_ts: tuple[str, ...]


@dataclass(frozen=True)
class Connection:
    """One end's IKEv2 connection to the other, between their WAN addresses."""

    local_addr: str
    remote_addr: str
    children: tuple[Child, ...]
    cipher: Cipher
    mode: EspMode
    encap: bool  # ESP in UDP (NAT-T) even without a NAT: libipsec can do no other
    #: The two ends' NAT-T ports (:func:`strongswan_conf`): IKE runs between them from
    #: its first message, so no end floats to 4500 and neither needs port 500.
    local_port: int = NAT_T_PORT
    remote_port: int = NAT_T_PORT
    if_id: int | None = None  # kernel ESP through an XFRM interface with this id


def daemon_argv(directory: Path, charon: str = CHARON) -> list[str]:
    """charon in a private mount namespace where ``directory`` is mounted on /run.

    Every step execs the next, so the process started is charon itself: the PID the lab
    records is the daemon's (its threads are sampled, a CPU budget applies to it).
    ``sh`` only runs the fixed script; the directory and the daemon are its arguments.
    """
    return [
        "unshare", "--mount", "--propagation", "private", "--",
        "sh", "-c", 'mount --bind "$0" /run && exec "$@"', str(directory),
        "env", f"STRONGSWAN_CONF={INSIDE / CONF}", charon,
    ]  # fmt: skip


def vici_uri(directory: Path) -> str:
    """The daemon's vici socket, from outside its mount namespace."""
    return f"unix://{directory / VICI}"


def swanctl_argv(directory: Path, *args: str) -> list[str]:
    """``swanctl`` talking to the daemon of ``directory`` with its own strongswan.conf."""
    return [
        "env", f"STRONGSWAN_CONF={directory / CONF}", "swanctl", *args,
        "--uri", vici_uri(directory),
    ]  # fmt: skip


def strongswan_conf(
    implementation: str, nat_t_port: int = NAT_T_PORT, routing_table: int = ROUTING_TABLE
) -> str:
    """The daemon's strongswan.conf, with the paths it sees inside its mount namespace.

    Every plugin is critical (``!``): a missing one stops the daemon at start, with its
    name in the log, instead of failing the first SA; but for kernel-netlink beside
    kernel-libipsec, whose ESP feature (the kernel's) is meant not to load.

    Routes are the site's (``install_routes = no``): it routes the inner prefixes into
    the ESP device itself, as for every tunnel kind. kernel-libipsec adds a route per
    outbound policy regardless, to ``routing_table``, which charon looks up by a rule
    of its own from start to exit: a table of this daemon's, never a host's own (its
    main table, or the 220 its own strongSwan uses), whose routes charon replaces.
    swanctl, reading the same file from outside, loads one plugin only (a pre-shared key
    needs none; an empty list would mean the compiled-in default).
    """
    plugins = " ".join(
        name if implementation == LIBIPSEC and name == "kernel-netlink" else f"{name}!"
        for name in PLUGINS[implementation]
    )
    return f"""\
# tunnelbench: one tunnel end's charon; this directory is its /run.
charon {{
    load = {plugins}
    port = 0
    port_nat_t = {nat_t_port}
    install_routes = no
    install_virtual_ip = no
    routing_table = {routing_table}
    filelog {{
        stderr {{
            default = 1
            time_format = %H:%M:%S
        }}
    }}
    plugins {{
        vici {{
            socket = unix://{INSIDE / VICI}
        }}
    }}
}}
swanctl {{
    load = random
}}
"""


def rules_removal(routing_table: int) -> list[str]:
    """What removes charon's rules for ``routing_table`` (both families) where it could
    not itself (killed): every rule naming that table, and only those, until the kernel
    says there is none (or has no IPv6); any other refusal is the line's failure."""
    script = "".join(
        f"while out=$(ip -{family} rule del table {routing_table} 2>&1); do :; done;"
        ' case "$out" in *"No such"*|*"not supported"*) ;; *) echo "$out" >&2; exit 1;; esac;'
        for family in (4, 6)
    )
    return ["sh", "-c", script]


def swanctl_conf(connection: Connection, psk_hex: str) -> str:
    """The connection and its pre-shared key; the initiator starts it with ``swanctl
    --initiate``, so neither end acts on loading (``start_action = none``)."""
    c = connection
    children = "".join(_child(child, c) for child in c.children)
    return f"""\
# tunnelbench: IKEv2 with a pre-shared key made for this lab. Secret: root only.
connections {{
    {CONNECTION} {{
        version = 2
        local_addrs = {c.local_addr}
        remote_addrs = {c.remote_addr}
        proposals = {IKE_PROPOSAL}
        local_port = {c.local_port}
        remote_port = {c.remote_port}
        encap = {"yes" if c.encap else "no"}
        mobike = no
        dpd_delay = 0
        local {{
            auth = psk
            id = {c.local_addr}
        }}
        remote {{
            auth = psk
            id = {c.remote_addr}
        }}
        children {{
{children}        }}
    }}
}}
secrets {{
    ike-{CONNECTION} {{
        id-local = {c.local_addr}
        id-remote = {c.remote_addr}
        secret = 0x{psk_hex}
    }}
}}
"""


def _child(child: Child, c: Connection) -> str:
    lines = [
        f"local_ts = {', '.join(child.local_ts)}",
        f"remote_ts = {', '.join(child.remote_ts)}",
        f"esp_proposals = {ESP_PROPOSALS[c.cipher]}",
        f"mode = {c.mode.value}",
        "start_action = none",
    ]
    if c.if_id is not None:
        lines += [f"if_id_in = {c.if_id}", f"if_id_out = {c.if_id}"]
    body = "".join(f"{' ' * 16}{line}\n" for line in lines)
    return f"{' ' * 12}{child.name} {{\n{body}{' ' * 12}}}\n"


def version(text: str) -> str:
    """``5.9.8`` from ``charon --version`` (``Linux strongSwan 5.9.8``)."""
    match = re.search(r"strongSwan (\S+)", text)
    if match is None:
        raise LabError(f"cannot read strongSwan's version from {text.strip()!r}")
    return match.group(1)


@dataclass(frozen=True)
class ChildSa:
    """One CHILD_SA as ``swanctl --list-sas --raw`` reports it."""

    name: str
    state: str  # INSTALLED once both directions are in the (kernel or libipsec) SAD
    mode: str  # TUNNEL, TRANSPORT
    encap: bool  # ESP in UDP
    encr_alg: str  # AES_GCM_16, CHACHA20_POLY1305
    encr_keysize: str  # "256"; ChaCha20-Poly1305 names none
    bytes_in: int
    bytes_out: int
    packets_in: int
    packets_out: int

    @property
    def cipher(self) -> Cipher | None:
        """The tunnelbench cipher negotiated; None for one tunnelbench never asks for."""
        return NEGOTIATED.get((self.encr_alg, self.encr_keysize))

    @property
    def algorithm(self) -> str:
        """As swanctl prints it: ``AES_GCM_16-256``, ``CHACHA20_POLY1305``."""
        return self.encr_alg + (f"-{self.encr_keysize}" if self.encr_keysize else "")


_TOKEN = re.compile(r"\{|\}|([^\s{}=]+)=(\[[^\]]*\]|[^\s{}]*)|([^\s{}=]+)")

Section = dict[str, "str | Section"]


def parse_raw(line: str) -> Section:
    """One vici message as swanctl ``--raw`` prints it (``list-sa event {tb {k=v ...
    child-sas {tb-1 {...}}}}``): sections by name, values as text (lists keep their
    brackets)."""
    root: Section = {}
    stack = [root]
    name = ""
    for match in _TOKEN.finditer(line):
        token = match.group(0)
        if token == "{":
            section: Section = {}
            stack[-1][name] = section
            stack.append(section)
        elif token == "}":
            if len(stack) == 1:
                raise LabError(f"unbalanced swanctl output: {line.strip()!r}")
            stack.pop()
        elif match.group(1) is not None:
            stack[-1][match.group(1)] = match.group(2)
        else:
            name = match.group(3)
    if len(stack) != 1:
        raise LabError(f"truncated swanctl output: {line.strip()!r}")
    return root


def child_sas(raw: str) -> list[ChildSa]:
    """Every CHILD_SA of every IKE_SA in ``swanctl --list-sas --raw`` output."""
    found = []
    for line in raw.splitlines():
        if not line.startswith("list-sa event"):
            continue
        event = parse_raw(line).get("event")
        if not isinstance(event, dict):
            continue
        for ike in event.values():
            children = ike.get("child-sas", {}) if isinstance(ike, dict) else {}
            for child in children.values() if isinstance(children, dict) else ():
                if isinstance(child, dict):
                    found.append(_child_sa(child))
    return found


def _child_sa(fields: Section) -> ChildSa:
    def text(key: str) -> str:
        value = fields.get(key, "")
        return value if isinstance(value, str) else ""

    def number(key: str) -> int:
        value = text(key)
        return int(value) if value.isdigit() else 0

    return ChildSa(
        name=text("name"),
        state=text("state"),
        mode=text("mode"),
        encap=text("encap") == "yes",
        encr_alg=text("encr-alg"),
        encr_keysize=text("encr-keysize"),
        bytes_in=number("bytes-in"),
        bytes_out=number("bytes-out"),
        packets_in=number("packets-in"),
        packets_out=number("packets-out"),
    )
