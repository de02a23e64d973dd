# The two commands of the README: `make run` and `make test`. Both install what is
# missing (Debian packages, the pinned wireguard-go and boringtun, the Python environment) and are
# fast and silent the second time.
PYTHON ?= python3
VENV := .venv
TOOLS := .tools/bin
STAMP := $(VENV)/.tunnelbench-installed
BYTECODE := $(VENV)/.tunnelbench-compiled
TB := $(VENV)/bin/tunnelbench
UV := $(VENV)/bin/uv pip
export TUNNELBENCH_TOOLS_DIR := $(CURDIR)/$(TOOLS)

.PHONY: run test setup lint unit integration kernel bench clean

run: setup
	$(TB) run

# The unit and browser tests measure nothing and run on both cores; the integration and
# kernel suites measure, so they run alone, one test at a time.
test: setup lint
	$(VENV)/bin/pytest -q -n 2 --durations=20 tests/unit tests/browser
	$(VENV)/bin/pytest -q --durations=40 tests/integration tests/kernel

setup: system-packages $(TOOLS)/wireguard-go $(TOOLS)/boringtun-cli $(TOOLS)/sshd $(TOOLS)/snmpd $(STAMP) $(BYTECODE)

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

# pip installs uv from its own lock; uv installs the locked packages (compiled, as pip
# would) and tunnelbench itself, editable.
$(STAMP): pyproject.toml requirements-dev.lock requirements-uv.lock
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/pip install -q --disable-pip-version-check --require-hashes -r requirements-uv.lock
	@$(UV) install -q --python $(VENV)/bin/python --require-hashes --compile-bytecode -r requirements-dev.lock
	@$(UV) install -q --python $(VENV)/bin/python --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# tunnelbench's own modules compiled once, here: an environment with
# PYTHONDONTWRITEBYTECODE set (as many containers have) would otherwise compile all of
# them at every command's start (0.3 s). Python checks each against its source's time
# and size, so an edited module is never read stale.
$(BYTECODE): $(STAMP) $(shell find src -name '*.py')
	@$(VENV)/bin/python -m compileall -q src >/dev/null
	@touch $(BYTECODE)

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/mypy

unit: setup
	$(VENV)/bin/pytest -q -n 2 tests/unit tests/browser

integration: setup
	$(VENV)/bin/pytest -q tests/integration

kernel: setup
	$(VENV)/bin/pytest -q tests/kernel

bench: setup
	$(VENV)/bin/python -m benchmarks

clean:
	rm -rf $(VENV) .tools
	find src -name __pycache__ -type d -prune -exec rm -rf {} +
