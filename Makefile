# The two commands of the README: `make run` and `make test`. Both install what is
# missing (Debian packages, the pinned wireguard-go and boringtun, the Python environment) and are
# fast and silent the second time.
PYTHON ?= python3
VENV := .venv
TOOLS := .tools/bin
STAMP := $(VENV)/.tunnelbench-installed
TB := $(VENV)/bin/tunnelbench
export TUNNELBENCH_TOOLS_DIR := $(CURDIR)/$(TOOLS)

.PHONY: run test setup lint unit integration kernel bench clean

run: setup
	$(TB) run

test: setup lint
	$(VENV)/bin/pytest -q --durations=40 tests

setup: system-packages $(TOOLS)/wireguard-go $(TOOLS)/boringtun-cli $(TOOLS)/sshd $(TOOLS)/snmpd $(STAMP)

.PHONY: system-packages
system-packages:
	@scripts/install-debian-packages

$(TOOLS)/wireguard-go: scripts/install-wireguard-go
	@scripts/install-wireguard-go $(TOOLS)

$(TOOLS)/boringtun-cli: scripts/install-boringtun
	@scripts/install-boringtun $(TOOLS)

# Debian's sshd and snmpd unpacked, not installed (that would start them on the host):
# tests/sshd.py, tests/snmpd.py.
$(TOOLS)/sshd: scripts/unpack-daemon
	@scripts/unpack-daemon openssh-server openssh-client usr/sbin/sshd -V $(TOOLS)

$(TOOLS)/snmpd: scripts/unpack-daemon
	@scripts/unpack-daemon snmpd snmp usr/sbin/snmpd -v $(TOOLS)

$(STAMP): pyproject.toml requirements-dev.lock
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements-dev.lock
	@$(VENV)/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@touch $(STAMP)

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

unit: setup
	$(VENV)/bin/pytest -q tests/unit

integration: setup
	$(VENV)/bin/pytest -q tests/integration

kernel: setup
	$(VENV)/bin/pytest -q tests/kernel

bench: setup
	$(VENV)/bin/python -m benchmarks

clean:
	rm -rf $(VENV) .tools
