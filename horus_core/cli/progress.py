"""The progress part of ``hctl job ID``: the latest report and the master's estimate of what is left."""

from __future__ import annotations

from typing import Any

from horus_core.client import JobProgress, ProgressReport
from horus_core.model import JobState


def duration(seconds: float) -> str:
    """A span as ``3h12m``, ``5m40s`` or ``42s``."""
    secs = max(0, round(seconds))
    hours, rest = divmod(secs, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def progress_fields(p: JobProgress, ended: JobState | None = None) -> list[tuple[str, object]]:
    """``Progress``, ``Remaining`` and ``Measured speed`` lines (nothing for a job that never
    reported); ``ended``: the terminal state of a job that ended (nothing is left of it)."""
    if p.latest is None:
        return []
    speed = [("Measured speed", f"{p.measured_speed:.2f}x of solo")] if p.measured_speed is not None else []
    last = p.latest
    loss = "-" if last.loss is None else f"{last.loss:.4g}"
    seen = f"step {last.step}, loss {loss}, {last.samples_per_s:.1f} samples/s (attempt {last.attempt})"
    left = remaining_text(p) if ended is None else f"none: the job ended {ended.value} at step {last.step:,}"
    return [("Progress", f"{seen}; {p.points} reports kept"), ("Remaining", left), *speed]


def remaining_text(p: JobProgress) -> str:
    if p.steps_left is None:
        return "(no estimate yet: needs total_steps or a few reports of a falling loss)"
    text = f"~{p.steps_left:,.0f} steps"
    if p.seconds_left is not None:
        text += f", ~{duration(p.seconds_left)}"
    target = "" if p.target_step is None else f" to step {p.target_step:,.0f}"
    return f"{text} (from the {p.estimate_from}{target})"


def report_record(r: ProgressReport) -> dict[str, Any]:
    return {
        "attempt": r.attempt,
        "step": r.step,
        "loss": r.loss,
        "samples_per_s": r.samples_per_s,
        "at": r.at,
    }


def progress_record(p: JobProgress) -> dict[str, Any]:
    """``-o json``'s ``progress`` key (a contract: add keys, never rename them)."""
    return {
        "latest": None if p.latest is None else report_record(p.latest),
        "points": p.points,
        "estimate_from": p.estimate_from,
        "steps_left": p.steps_left,
        "seconds_left": p.seconds_left,
        "target_step": p.target_step,
        "curve": None if p.curve is None else dict(zip(("b0", "b1", "b2"), p.curve, strict=True)),
        "measured_speed": p.measured_speed,
    }
