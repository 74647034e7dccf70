"""The dashboard's HTML: plain server-rendered pages, every user-controlled text escaped.

Functions here only format what they are given; the handlers (:mod:`master.http.server`) gather
it and decide what the caller may see (``visible``).
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Iterable, Sequence
from html import escape
from urllib.parse import quote

from horus_core import caps
from horus_core.model import Job
from horus_core.modelcard import card_summary
from horus_core.queueusage import QueueUsage
from horus_core.reasoncodes import queue_listing
from master.http import svg
from master.observe.view import ClusterView, GpuView
from master.services.access import Identity

Visible = Callable[[Job], bool]

_CSS = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
nav a{margin-right:1.2em;font-weight:600}
table{border-collapse:collapse;margin:.6em 0 1.4em}
th,td{border-bottom:1px solid #ddd;padding:.3em .7em;text-align:left;vertical-align:top}
th{background:#f3f3f3}
.bar{display:inline-block;height:.8em;background:#4c9be8;vertical-align:middle}
.muted{color:#888}
.warning{color:#a40}
pre{background:#111;color:#eee;padding:.8em;max-height:24em;overflow:auto}
.tail{display:flex;flex-direction:column-reverse;max-height:24em;overflow:auto;background:#111}
.tail pre{max-height:none;overflow:visible;margin:0}
"""


def e(value: object) -> str:
    return escape(str(value), quote=True)


REFRESH_S = 5  # live pages reload themselves (no JavaScript needed)


def page(title: str, body: str, who: Identity | None, *, live: bool = False) -> str:
    user = f"signed in as {e(who.user)}" if who is not None else "auth off"
    refresh = f'<meta http-equiv="refresh" content="{REFRESH_S}">' if live else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{refresh}'
        f"<title>{e(title)} - Horus</title><style>{_CSS}</style></head><body>"
        '<nav><a href="/">Cluster</a><a href="/jobs">Jobs</a><a href="/queue">Queue</a>'
        '<a href="/pairs">Pair speeds</a>'
        f'<span class="muted">{user}</span></nav><h1>{e(title)}</h1>{body}</body></html>'
    )


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], css_id: str) -> str:
    """``rows`` hold HTML already escaped by the caller."""
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table id="{css_id}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def job_link(job: Job, visible: Visible) -> str:
    if not visible(job):
        return '<span class="muted">another user\'s job</span>'
    label = f"{job.id} ({job.spec.name})" if job.spec.name else job.id
    return f'<a class="job" href="/jobs/{quote(job.id, safe="")}">{e(label)}</a>'


def util_bar(util: float) -> str:
    width = int(min(max(util, 0.0), 100.0))
    return f'<span class="bar" style="width:{width}px"></span> {util:.0f}%'


def _memory_of(j: Job, g: GpuView) -> str:
    """A job's GPU memory use and cap on one GPU (docs/sharing.md), as ``1.5 / 4 GiB``."""
    use = next((u.mem_used_mib for u in g.usage if u.job_id == j.id and u.attempt == j.attempt), None)
    cap = caps.format_mib(j.gpu_memory_cap_mib) if j.gpu_memory_cap_mib else "no cap"
    used = caps.format_mib(use) if use else "?"
    return f' <span class="muted">{e(used)} / {e(cap)}</span>'


def _gpu_row(g: GpuView, visible: Visible) -> list[str]:
    s = g.sample()
    jobs = "<br>".join(job_link(j, visible) + _memory_of(j, g) for j in g.jobs)
    jobs = jobs or '<span class="muted">idle</span>'
    return [
        e(g.gpu.node),
        e(g.gpu.index),
        e(g.gpu.model),
        util_bar(s.util),
        f"{s.mem_used_mib} / {s.mem_total_mib} MiB",
        jobs,
    ]


def cluster_page(view: ClusterView, visible: Visible, who: Identity | None) -> str:
    gpus = view.gpus()
    running = sum(1 for j in view.jobs.values() if j.state.active)
    summary = (
        f'<p id="summary">{len(view.nodes)} node(s), {len(gpus)} GPU(s), '
        f"{running} job(s) placed, {view.pending_count} pending</p>"
    )
    nodes = table(
        ("Node", "State", "Stream", "GPUs", "Quarantined GPUs"),
        (
            [
                e(n.entry.name),
                e(_state(n.entry.shown_state.value, n.entry.drain_deadline)),
                "open" if n.entry.connected else "closed",
                e(len(n.gpus)),
                e(", ".join(f"{g.gpu.index}: {g.gpu.quarantine}" for g in n.gpus if g.gpu.quarantine) or "-"),
            ]
            for n in view.nodes
        ),
        "nodes",
    )
    gpu_rows = table(
        ("Node", "GPU", "Model", "Utilisation", "Memory", "Jobs"),
        (_gpu_row(g, visible) for g in gpus),
        "gpus",
    )
    return page("Cluster", summary + "<h2>Nodes</h2>" + nodes + "<h2>GPUs</h2>" + gpu_rows, who, live=True)


def _age(since: float, now: float) -> str:
    s = max(0, int(now - since))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


MAX_QUEUE_ROWS = 500  # a long queue's page shows its head; `hctl queue` lists everything


def _queue_row(queue: str, pos: int, j: Job, visible: Visible, now: float) -> list[str]:
    return [
        e(queue),
        e(pos),
        job_link(j, visible),
        e(j.spec.owner),
        e(j.spec.gpus),
        e(j.spec.job_type),
        _age(j.submitted_at, now),
        e(j.reason_code or "-"),
        e(j.reason),
    ]


def _state(state: str, drain_deadline: float | None) -> str:
    if drain_deadline is None:
        return state
    left = drain_deadline - time.time()
    return f"{state} (preempts in {left:.0f} s)" if left > 0 else f"{state} (preempting)"


def quotas(rows: Sequence[QueueUsage], warnings: Sequence[str]) -> str:
    """The queues' quotas and use (``hctl queues``), with what the cluster cannot honour."""
    if not rows:
        return ""
    heads = ("Queue", "Quota", "Borrowing limit", "GPUs used", "Borrowed", "Running", "Pending (GPUs)")
    body = table(
        heads,
        (
            [e(r.name), e(_quota(r)), e(r.borrowing_limit), e(r.used), e(r.borrowed), e(r.running),
             e(f"{r.pending} ({r.pending_gpus})")]
            for r in rows
        ),
        "quotas",
    )  # fmt: skip
    notes = "".join(
        f'<p class="warning">{e(w)}: reclaim cannot give every queue its quota</p>' for w in warnings
    )
    return "<h2>Quotas</h2>" + body + notes + "<h2>Pending jobs</h2>"


def _quota(r: QueueUsage) -> str:
    parts = ", ".join(f"{t}: {n}" for t, n in sorted(r.nominal.items()))
    return f"{r.nominal_total} ({parts})" if parts else "0"


def jobs_page(jobs: Sequence[Job], visible: Visible, who: Identity | None, limit: int) -> str:
    """The latest jobs, newest first, finished ones included (``hctl jobs --all``)."""
    now = time.time()
    rows = [
        [
            job_link(j, visible),
            e(j.spec.owner),
            e(j.state.value),
            e(j.spec.gpus),
            e("-" if j.state.value == "PENDING" else ", ".join(j.nodes) or j.node or "-"),
            e(j.spec.job_type),
            _age(j.submitted_at, now),
            _age(j.finished_at, now) + " ago" if j.finished_at else "-",
            e(f"{j.reason_code}: {j.reason}" if j.reason_code and j.state.value == "PENDING" else j.reason),
        ]
        for j in jobs
    ]
    heads = ("Job", "User", "State", "GPUs", "Node", "Type", "Age", "Ended", "Reason")
    note = f'<p class="muted">the latest {limit} jobs, newest first (hctl jobs --all lists them all)</p>'
    return page("Jobs", note + table(heads, rows, "jobs"), who, live=True)


def queue_page(
    view: ClusterView,
    visible: Visible,
    who: Identity | None,
    position: Callable[[str], tuple[str, int] | None] = lambda _: None,
    usage: tuple[Sequence[QueueUsage], Sequence[str]] = ((), ()),
) -> str:
    """``position``: a job id's (queue, position) at the last scheduling pass (the master's
    positions_of); ``usage``: the queues' rows and quota warnings (with --queues)."""
    now = time.time()
    listing = queue_listing(view.pending, lambda j: position(j.id))
    mine = [(q, pos, j) for q, pos, j in listing if visible(j)]
    rows = [_queue_row(q, pos, j, visible, now) for q, pos, j in mine[:MAX_QUEUE_ROWS]]
    note = f'<p id="queue-size">{len(view.pending)} job(s) pending in the whole cluster</p>'
    heads = ("Queue", "Position", "Job", "User", "GPUs", "Type", "Waiting", "Code", "Reason")
    body = table(heads, rows, "queue")
    if len(mine) > MAX_QUEUE_ROWS:
        body += f'<p class="muted">and {len(mine) - MAX_QUEUE_ROWS} more (hctl queue lists them all)</p>'
    return page("Queue", quotas(*usage) + note + body, who, live=True)


def _speed(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else '<span class="muted">not measured yet</span>'


def job_page(
    job: Job,
    view: ClusterView,
    history: Sequence[tuple[float, float]],
    log_tail: str,
    visible: Visible,
    who: Identity | None,
    part_tails: Sequence[tuple[str, str]] = (),
) -> str:
    """``part_tails``: a gang's ``(node, tail)`` per part in rank order, shown instead of ``log_tail``."""
    placed = job.state.active
    facts = [
        ("Name", e(job.spec.name)),
        ("User", e(job.spec.owner)),
        ("State", e(job.state.value)),
        ("Reason", e(f"{job.reason_code}: {job.reason}" if job.reason_code else job.reason)),
        ("Type", e(job.spec.job_type)),
        ("Model card", e(card_summary(job.spec.model_card)) if job.spec.model_card else "-"),
        ("Command", f"<code>{e(shlex.join(job.spec.command))}</code>"),  # (as a shell reads it back)
        ("Attempt", e(job.attempt)),
        ("Node", e(", ".join(job.nodes) or job.node)),  # a gang: every node, rank 0 first
        ("GPUs", e(", ".join(job.gpus))),
        ("Predicted speed", _speed(job.predicted_slowdown) if job.attempt else "-"),
        ("Measured speed", _speed(view.speeds.get(job.id)) if placed else "-"),
        ("Speed floor", e(f"{job.spec.min_speed:g}x" if job.spec.min_speed > 0 else "none")),
        ("GPU memory (use / cap)", "<br>".join(_memory_of(job, g) for g in view.gpus_of(job)) or "-"),
    ]
    dl = table(("Field", "Value"), ([e(k), v] for k, v in facts), "job")
    co = view.co_runners(job) if placed else []
    co_rows = [
        [job_link(c, visible), e(c.spec.job_type) if visible(c) else "", _speed(c.predicted_slowdown)]
        for c in co
    ]
    co_html = table(("Co-runner", "Type", "Predicted speed"), co_rows, "corunners")
    chart = svg.line_chart(history)
    body = (
        dl
        + "<h2>Sharing its GPUs</h2>"
        + (co_html if co else '<p class="muted" id="corunners">no co-runners</p>')
        + f'<h2>GPU utilisation</h2><div id="util-chart">{chart}</div>'
        + "<h2>Log tail</h2>"
        + f'<p class="muted">its last lines, newest at the bottom (hctl logs {e(job.id)}: all)</p>'
        + (_part_tails(part_tails) if part_tails else _tail_box("log", log_tail))
    )
    return page(f"Job {job.id}", body, who, live=not job.state.terminal)


def _part_tails(tails: Sequence[tuple[str, str]]) -> str:
    """One block per part of a gang, rank 0 first (``id="log"``, as a job on one node), then ``log-1``..."""
    return "".join(
        f"<h3>{e(node)} (rank {rank})</h3>" + _tail_box("log" if rank == 0 else f"log-{rank}", tail)
        for rank, (node, tail) in enumerate(tails)
    )


def _tail_box(ident: str, text: str) -> str:
    """A log tail in a box that opens scrolled to its end (a column-reverse flex box: no script)."""
    return f'<div class="tail"><pre id="{ident}">{e(text)}</pre></div>'


def login_page(error: str = "") -> str:
    msg = f'<p class="muted">{e(error)}</p>' if error else ""
    form = (
        '<form method="post" action="/login"><label>Token <input type="password" name="token"></label>'
        ' <button type="submit">Sign in</button></form>'
    )
    return page("Sign in", msg + form, None)
