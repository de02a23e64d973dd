"""Where a finished trial goes, and the one way a trial's outcome is stored there: the
run's :class:`~tunnelbench.bench.store.Store`, a VM guest's event stream
(:class:`tunnelbench.cli.guest.EventSink`) or a remote run's store."""

from typing import Any, Protocol

from tunnelbench.model.plan import Trial, TrialConfig
from tunnelbench.model.records import Resolved, TrialStatus


class TrialSink(Protocol):
    """Where a finished trial goes: the run's :class:`Store`, or in a VM guest the
    events the host stores (:class:`tunnelbench.cli.guest.EventSink`)."""

    def add_trial(
        self,
        run_id: int,
        *,
        seq: int,
        repetition: int,
        config_key: str,
        config: TrialConfig,
        resolved: Resolved,
        status: TrialStatus,
        error: str | None,
        started_at: float,
        metrics: dict[str, float],
        artifacts: dict[str, Any],
    ) -> int: ...


def store_trial(
    store: TrialSink,
    run_id: int,
    trial: Trial,
    *,
    resolved: Resolved,
    status: TrialStatus,
    error: str | None,
    started_at: float,
    metrics: dict[str, float],
    artifacts: dict[str, Any],
) -> None:
    """Store what became of ``trial`` (its place, repetition and configuration from the
    trial itself): every run, guest and remote run stores its trials through this."""
    store.add_trial(
        run_id,
        seq=trial.seq,
        repetition=trial.repetition,
        config_key=trial.config.key(),
        config=trial.config,
        resolved=resolved,
        status=status,
        error=error,
        started_at=started_at,
        metrics=metrics,
        artifacts=artifacts,
    )
