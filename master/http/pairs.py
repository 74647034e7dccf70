"""The dashboard's pair speeds: the learned ones as heat maps (one per GPU type, with a legend)
and a table, and the pairs sharing GPUs right now with what the learner measured of them so far
(stored pair speeds come only every checkpoint and when an attempt ends)."""

from __future__ import annotations

from collections.abc import Sequence

from master.http import svg
from master.http.pages import Visible, e, job_link, page, table
from master.observe.view import Sharing
from master.services.access import Identity
from master.store.learned import PairRow


def pairs_page(
    pairs: Sequence[PairRow],
    who: Identity | None,
    now: Sequence[Sharing] = (),
    visible: Visible = lambda _: True,
) -> str:
    """``now``: the attempts sharing their GPUs with one co-runner at this moment."""
    live = _sharing_now(now, visible) if now else ""
    if not pairs:
        why = "no pair speed learned yet" if now else "nothing measured yet"
        note = " (stored every minute while jobs share, and when they end)" if now else ""
        return page("Pair speeds", f'<p id="no-pairs">{why}{note}</p>' + live, who, live=bool(now))
    parts: list[str] = []
    for gpu_type in sorted({p.gpu_type for p in pairs}):
        rows = [p for p in pairs if p.gpu_type == gpu_type]
        names = sorted({p.job_type for p in rows} | {p.co_runner for p in rows})
        speeds = {(p.job_type, p.co_runner): p.speed for p in rows}
        parts.append(f"<h2>{e(gpu_type)}</h2>" + svg.heat_map(speeds, names))
    listing = table(
        ("Job type", "Next to", "GPU type", "Speed", "Measurements"),
        ([e(p.job_type), e(p.co_runner), e(p.gpu_type), f"{p.speed:.2f}x", e(p.samples)] for p in pairs),
        "pairs",
    )
    intro = "<p>Measured speed of the row's job type next to the column's, relative to alone.</p>"
    return page("Pair speeds", intro + svg.speed_legend() + "".join(parts) + listing + live, who)


def _sharing_now(now: Sequence[Sharing], visible: Visible) -> str:
    rows = []
    for s in now:
        n = s.now
        who = job_link(s.job, visible) if s.job is not None else e(n.job_id)
        rate = f"{n.shared_rate:.1f}" if n.shared_rate is not None else '<span class="muted">settling</span>'
        rows.append([who, e(n.signature), e(n.co_runner), e(n.gpu_type), rate, e(n.reports), _speed(s)])
    heads = ("Job", "Job type", "Next to", "GPU type", "Samples/s shared", "Reports", "Speed vs alone")
    intro = '<p class="muted">what the running jobs measured so far, before it is stored</p>'
    return "<h2>Sharing now</h2>" + intro + table(heads, rows, "sharing-now")


def _speed(s: Sharing) -> str:
    if s.speed is not None:
        return f"{s.speed:.2f}x"
    predicted = f", predicted {s.job.predicted_slowdown:.2f}x" if s.job is not None else ""
    return f'<span class="muted">no solo measurement yet{e(predicted)}</span>'
