"""A throw-away PKI for one lab's OpenVPN tunnel: a CA, a server and a client
certificate with their keys, and a tls-crypt key.

Keys are EC P-256 (fast to make and to verify), made with the ``openssl`` command line;
the tls-crypt key comes from ``openvpn --genkey``. Both print to stdout, so no program
writes key material to disk on its own: each file is recorded in the lab's state first
(teardown, or ``lab clean`` after a crash, removes it), then created with mode 0600 in
the lab's root-only directory, and only then written. The CA's key is deleted as soon as
both certificates are signed. The tunnel passes only the paths to openvpn; none of this
reaches the store or a report.
"""

from dataclasses import dataclass
from pathlib import Path

from tunnelbench.lab.netns import Lab
from tunnelbench.system.command import run

SERVER, CLIENT = "server", "client"
CURVE = "P-256"
#: Long enough for a lab left up by hand; the keys go with the lab anyway.
DAYS = 3650
PREFIX = "openvpn-"  # the lab directory is shared with other files: no subdirectory
_USAGE = {SERVER: "serverAuth", CLIENT: "clientAuth"}


@dataclass(frozen=True)
class Credentials:
    """Paths of one lab's OpenVPN credentials (in the lab's directory)."""

    ca: Path
    tls_crypt: Path
    certs: dict[str, Path]  # SERVER/CLIENT -> certificate
    keys: dict[str, Path]  # SERVER/CLIENT -> private key


def genkey_argv(openssl: str) -> list[str]:
    """A new EC private key, as PEM on stdout."""
    return [openssl, "genpkey", "-algorithm", "EC", "-pkeyopt", f"ec_paramgen_curve:{CURVE}"]


def ca_argv(openssl: str, key: Path, name: str) -> list[str]:
    """The self-signed CA certificate of ``key``, as PEM on stdout.

    ``-config /dev/null``: only the extensions given here, none from the host's
    openssl.cnf.
    """
    return [
        openssl, "req", "-new", "-x509", "-key", str(key), "-subj", f"/CN={name}",
        "-days", str(DAYS), "-config", "/dev/null",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    ]  # fmt: skip


def leaf_argv(openssl: str, key: Path, ca: Path, ca_key: Path, name: str, usage: str) -> list[str]:
    """The certificate of ``key`` signed by the CA, as PEM on stdout; ``usage`` is the
    extended key usage openvpn's ``--remote-cert-tls`` checks (serverAuth, clientAuth)."""
    return [
        openssl, "req", "-new", "-x509", "-key", str(key), "-subj", f"/CN={name}",
        "-CA", str(ca), "-CAkey", str(ca_key), "-days", str(DAYS), "-config", "/dev/null",
        "-addext", "basicConstraints=critical,CA:FALSE",
        "-addext", "keyUsage=critical,digitalSignature",
        "-addext", f"extendedKeyUsage={usage}",
    ]  # fmt: skip


def tls_crypt_argv(openvpn: str) -> list[str]:
    """A new tls-crypt key (encrypts and authenticates the control channel), on stdout."""
    return [openvpn, "--genkey", "tls-crypt"]


def write_private(lab: Lab, path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by root alone (never through a symlink), on
    the host of the lab's tunnel ends, recorded for teardown.

    The credentials are made where the run is controlled (openssl needs no network
    context); both tunnel ends read them from the lab's directory."""
    lab.host(lab.chain.tunnel_ends[0]).write(path, text, mode=0o600)


def create(lab: Lab, openssl: str, openvpn: str) -> Credentials:
    """Make the lab's credentials in its directory; see the module's description."""
    directory, stem = lab.directory, f"tunnelbench-{lab.lab_id}"

    def made(name: str, argv: list[str]) -> Path:
        path = directory / f"{PREFIX}{name}"
        write_private(lab, path, run(argv).stdout)
        return path

    ca_key = made("ca.key", genkey_argv(openssl))
    ca = made("ca.crt", ca_argv(openssl, ca_key, f"{stem}-ca"))
    keys, certs = {}, {}
    for role, usage in _USAGE.items():
        keys[role] = made(f"{role}.key", genkey_argv(openssl))
        certs[role] = made(
            f"{role}.crt", leaf_argv(openssl, keys[role], ca, ca_key, f"{stem}-{role}", usage)
        )
    ca_key.unlink()  # nothing is signed after this
    return Credentials(ca, made("tls-crypt.key", tls_crypt_argv(openvpn)), certs, keys)
