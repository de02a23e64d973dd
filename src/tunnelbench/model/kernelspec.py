"""What ``lab.kernel`` may name, checked without touching the system (fetching and
unpacking a kernel is :mod:`tunnelbench.vm.kernels`' work)."""

import os
import re

from tunnelbench.echo import shown
from tunnelbench.errors import UserError
from tunnelbench.model.plan import HOST_KERNEL

#: The stock kernel of the configured Debian release.
DEBIAN = "debian"
DEBIAN_META_PACKAGE = "linux-image-amd64"
PACKAGE_PREFIX = "linux-image-"
PACKAGE = re.compile(r"linux-image-[0-9a-z][0-9a-z.+~-]{0,100}")
RELEASE = re.compile(r"[0-9]+\.[0-9]+[0-9a-z.+~-]{0,100}")


def parse_spec(key: str, value: object) -> str:
    """``lab.kernel`` in canonical form: ``host``, ``debian``, a package name, or an
    absolute path; a bare release becomes its package's name."""
    if not isinstance(value, str) or not value:
        raise UserError(f"{key}: {shown(value)} is not a kernel; {ALLOWED}")
    if value in (HOST_KERNEL, DEBIAN):
        return value
    if value.startswith("/"):
        if "\n" in value or len(value) > 4096:
            raise UserError(f"{key}: {shown(value)} is not a directory path")
        return os.path.normpath(value)
    if PACKAGE.fullmatch(value):
        return value
    if RELEASE.fullmatch(value):
        return PACKAGE_PREFIX + value
    raise UserError(f"{key}: {shown(value)} is not a kernel; {ALLOWED}")


ALLOWED = (
    "allowed: 'host', 'debian', a Debian kernel package or release such as"
    " 'linux-image-6.1.0-56-amd64' or '6.1.0-56-amd64', or the absolute path of an"
    " unpacked kernel (boot/vmlinuz-* and lib/modules/*)"
)
