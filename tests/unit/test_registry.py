import pytest

from tunnelbench.errors import UserError
from tunnelbench.kinds import Generator, TunnelKind
from tunnelbench.registry import Registry
from tunnelbench.traffic import REGISTRY as GENERATORS
from tunnelbench.tunnels import REGISTRY as TUNNELS
from tunnelbench.tunnels.base import TunnelSpec


def test_every_tunnel_kind_is_registered_under_its_own_kind():
    assert TUNNELS.kinds() == list(TunnelKind)
    for kind in TunnelKind:
        assert TUNNELS.get(kind).kind is kind
    assert GENERATORS.get(Generator.IPERF3).kind is Generator.IPERF3


def test_duplicates_are_rejected():
    registry: Registry[TunnelKind, str] = Registry("tunnel kind")
    registry.register(TunnelKind.NONE, "a")
    with pytest.raises(ValueError, match="registered twice"):
        registry.register(TunnelKind.NONE, "b")


def test_unknown_kind_error_lists_what_is_supported():
    registry: Registry[TunnelKind, str] = Registry("tunnel kind")
    registry.register(TunnelKind.NONE, "a")
    with pytest.raises(UserError, match="unsupported tunnel kind 'vxlan'; supported: none"):
        registry.get(TunnelKind.VXLAN)


def test_declared_overheads():
    spec = TunnelSpec("kernel")
    assert TUNNELS.get(TunnelKind.WIREGUARD).overhead(spec, 4) == 60
    assert TUNNELS.get(TunnelKind.WIREGUARD).overhead(spec, 6) == 80
    assert TUNNELS.get(TunnelKind.VXLAN).overhead(spec, 4) == 50
    assert TUNNELS.get(TunnelKind.VXLAN).overhead(spec, 6) == 70
    assert TUNNELS.get(TunnelKind.NONE).overhead(spec, 4) == 0
    assert TUNNELS.get(TunnelKind.WIREGUARD).default_mtu(1500, spec) == 1420
    assert TUNNELS.get(TunnelKind.VXLAN).default_mtu(1500, spec) == 1450


def test_an_implementation_of_another_kind_is_refused():
    with pytest.raises(UserError, match="'wireguard-go' is not an implementation of vxlan"):
        TUNNELS.get(TunnelKind.VXLAN).resolve_implementation("wireguard-go")
