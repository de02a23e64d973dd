"""A throw-away PKI for one OpenVPN tunnel: a CA, a server and a client certificate with
their keys, and a tls-crypt key.

Keys are EC P-256 (fast to make and to verify), made with the ``openssl`` command line
where the run is controlled (a tunnel end may be a router without openssl). Nothing is
written to this machine's disk: each key openssl must read back (to sign) is handed to
it as an in-memory file (``memfd``), and every output comes on stdout. The CA's key
exists only in that memory and is gone once both certificates are signed. The tls-crypt
key is 256 random bytes in OpenVPN's static-key format, so the controlling machine needs
no openvpn either.

Each tunnel end gets only what it needs, as files of its own in the site's directory for
it (:meth:`~tunnelbench.tunnels.site.Site.files`): the CA's certificate, its own
certificate and key, and the tls-crypt key, each created 0600 and recorded for removal
before it is written (:meth:`~tunnelbench.lab.host.Host.write`). The tunnel passes only
paths to openvpn; none of this reaches the store or a report.
"""

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tunnelbench.system.command import run
from tunnelbench.tunnels.site import Site

SERVER, CLIENT = "server", "client"
CURVE = "P-256"
#: Long enough for a lab left up by hand; the keys go with the lab anyway.
DAYS = 3650
PREFIX = "openvpn-"  # the site's directory is shared with other files: no subdirectory
_USAGE = {SERVER: "serverAuth", CLIENT: "clientAuth"}
#: OpenVPN's static key file: 2048 bits as 16 lines of 32 hex digits between these.
STATIC_KEY_BYTES = 256
STATIC_KEY_HEADER = "#\n# 2048 bit OpenVPN static key\n#\n-----BEGIN OpenVPN Static key V1-----\n"
STATIC_KEY_FOOTER = "-----END OpenVPN Static key V1-----\n"


@dataclass(frozen=True)
class Made:
    """One tunnel's credentials as text (PEM), before any end has them."""

    ca: str
    tls_crypt: str
    certs: dict[str, str]  # SERVER/CLIENT -> certificate
    keys: dict[str, str]  # SERVER/CLIENT -> private key


@dataclass(frozen=True)
class Credentials:
    """Paths of one tunnel end's credentials, on that end's host."""

    ca: Path
    cert: Path
    key: Path
    tls_crypt: Path


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


def static_key(random: bytes) -> str:
    """``random`` (256 bytes) as OpenVPN's static key file, the form ``openvpn --genkey
    tls-crypt`` writes."""
    if len(random) != STATIC_KEY_BYTES:
        raise ValueError(f"a static key is {STATIC_KEY_BYTES} bytes, not {len(random)}")
    text = random.hex()
    lines = [text[i : i + 32] for i in range(0, len(text), 32)]
    return STATIC_KEY_HEADER + "\n".join(lines) + "\n" + STATIC_KEY_FOOTER


@contextlib.contextmanager
def _in_memory(name: str, text: str) -> Iterator[Path]:
    """``text`` as a file that exists only in this process's memory, by a path another
    process can open while this one holds it (root reads another's ``/proc/PID/fd``)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(fd, text.encode())
        yield Path(f"/proc/{os.getpid()}/fd/{fd}")
    finally:
        os.close(fd)


def make(openssl: str, stem: str) -> Made:
    """A CA, a server and a client certificate and key, and a tls-crypt key; names
    begin with ``stem``."""
    ca_key = run(genkey_argv(openssl)).stdout
    keys = {role: run(genkey_argv(openssl)).stdout for role in _USAGE}
    certs = {}
    with _in_memory("ca.key", ca_key) as ca_key_path:
        ca = run(ca_argv(openssl, ca_key_path, f"{stem}-ca")).stdout
        with _in_memory("ca.crt", ca) as ca_path:
            for role, usage in _USAGE.items():
                with _in_memory(f"{role}.key", keys[role]) as key_path:
                    argv = leaf_argv(
                        openssl, key_path, ca_path, ca_key_path, f"{stem}-{role}", usage
                    )
                    certs[role] = run(argv).stdout
    return Made(ca, static_key(secrets.token_bytes(STATIC_KEY_BYTES)), certs, keys)


def install(site: Site, role: str, made: Made, own: str) -> Credentials:
    """Hand ``role`` (the ``own`` side, SERVER or CLIENT) its files: each recorded,
    created 0600 and then written, in the site's directory for ``role``."""
    directory, host = site.files(role), site.host(role)

    def put(name: str, text: str) -> Path:
        path = directory / f"{PREFIX}{role}-{name}"
        host.write(path, text, mode=0o600)
        return path

    return Credentials(
        ca=put("ca.crt", made.ca),
        cert=put(f"{own}.crt", made.certs[own]),
        key=put(f"{own}.key", made.keys[own]),
        tls_crypt=put("tls-crypt.key", made.tls_crypt),
    )
