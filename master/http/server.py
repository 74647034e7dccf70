"""The master's HTTP side: the read-only dashboard (``--http-listen``) and ``/metrics``
(``--metrics-listen``), both aiohttp servers in the master's event loop.

Auth is the API's: with ``--auth-tokens`` every dashboard page needs a token, as a bearer header
or as the cookie the login form sets; non-admin users see only their own jobs
(:mod:`master.services.access`). ``/metrics`` is not authenticated (Prometheus scrapes it): bind
it to a trusted address.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from horus_core.errors import PermissionDenied
from horus_core.model import Job
from horus_core.queueusage import QueueUsage
from master.auth import TokenTable
from master.http import pages
from master.http.pairs import pairs_page
from master.observe.history import UtilHistory
from master.observe.metrics import MasterMetrics
from master.observe.view import ViewSources, gather
from master.services.access import Identity, check_job_access
from master.services.logs import LogStore

log = logging.getLogger(__name__)

COOKIE = "horus_token"
LOG_TAIL_BYTES = 8192
MIN_PART_TAIL_BYTES = 2048  # a gang's part keeps at least this much of its tail on the job page
MAX_PAIRS = 2000
MAX_JOBS = 500  # the jobs page: the latest ones
WHO: web.RequestKey[Identity | None] = web.RequestKey("who")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Quotas = Callable[[], tuple[list[QueueUsage], list[str]]]  # the queues' rows, what they cannot honour
Position = Callable[[str], tuple[str, int] | None]  # a pending job's (queue, position) at the last pass


def _html(text: str, status: int = 200) -> web.Response:
    resp = web.Response(text=text, status=status, content_type="text/html", charset="utf-8")
    resp.headers["Content-Security-Policy"] = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'"
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


class Dashboard:
    """The pages' handlers over what they read: the view's sources (the store's reader among
    them), the job logs, the queue positions of the last pass and the utilisation history."""

    def __init__(
        self,
        sources: ViewSources,
        logs: LogStore,
        position: Position,
        tokens: TokenTable | None,
        history: UtilHistory,
        quotas: Quotas | None = None,
    ) -> None:
        self.quotas = quotas  # --queues: the quotas and their warnings on the queue page
        self.sources = sources
        self.logs = logs
        self.position = position
        self.tokens = tokens
        self.history = history

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._auth])
        app.router.add_get("/", self.cluster)
        app.router.add_get("/queue", self.queue)
        app.router.add_get("/jobs", self.jobs)
        app.router.add_get("/jobs/{job_id}", self.job)
        app.router.add_get("/pairs", self.pairs)
        app.router.add_get("/login", self.login_form)
        app.router.add_post("/login", self.login)
        return app

    def identify(self, request: web.Request) -> Identity | None:
        assert self.tokens is not None
        header = request.headers.get("Authorization")
        if header is None and COOKIE in request.cookies:
            header = f"Bearer {request.cookies[COOKIE]}"
        return self.tokens.identify(header)

    @web.middleware
    async def _auth(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if self.tokens is None or request.path == "/login":
            request[WHO] = None
            return await handler(request)
        who = self.identify(request)
        if who is None:
            if "Authorization" in request.headers:
                return _html(pages.login_page("invalid token"), status=401)
            raise web.HTTPSeeOther("/login")
        request[WHO] = who
        return await handler(request)

    @staticmethod
    def visible_to(who: Identity | None) -> Callable[[Job], bool]:
        return lambda job: who is None or who.admin or job.spec.owner == who.user

    async def cluster(self, request: web.Request) -> web.Response:
        who = request[WHO]
        return _html(pages.cluster_page(await gather(self.sources), self.visible_to(who), who))

    async def queue(self, request: web.Request) -> web.Response:
        who = request[WHO]
        usage = self.quotas() if self.quotas is not None else ([], [])
        view = await gather(self.sources, queue=True)
        return _html(pages.queue_page(view, self.visible_to(who), who, self.position, usage))

    async def jobs(self, request: web.Request) -> web.Response:
        who = request[WHO]
        owner = None if who is None or who.admin else who.user
        rows = await self.sources.read.recent_jobs(owner, MAX_JOBS)
        return _html(pages.jobs_page([r.job for r in rows], self.visible_to(who), who, MAX_JOBS))

    async def job(self, request: web.Request) -> web.Response:
        who = request[WHO]
        job_id = request.match_info["job_id"]
        row = await self.sources.read.job(job_id)
        if row is None:
            return _html(pages.page("Not found", f"<p>no job {pages.e(job_id)}</p>", who), status=404)
        try:
            check_job_access(who, row.job)
        except PermissionDenied as exc:
            return _html(pages.page("Forbidden", f"<p>{pages.e(exc)}</p>", who), status=403)
        view = await gather(self.sources)
        parts = await self._part_tails(row.job)
        tail = "" if parts else await self._tail(row.job)
        text = pages.job_page(row.job, view, self.history.of(job_id), tail, self.visible_to(who), who, parts)
        return _html(text)

    async def _tail(self, job: Job, node: str = "", limit: int = LOG_TAIL_BYTES) -> str:
        """The last ``limit`` bytes of the current attempt's log (``node``: a gang's part but rank 0)."""
        if job.attempt == 0:
            return ""
        logs = self.logs
        size = await logs.size(job.id, job.attempt, node)
        start = max(0, size - limit)
        data = await logs.read(job.id, job.attempt, start, limit, node=node)
        cut = data.find(b"\n") if start > 0 else -1
        if 0 <= cut < len(data) - 1:
            data = data[cut + 1 :]  # (cut inside the log: from its first whole line)
        return data.decode("utf-8", "replace")

    async def _part_tails(self, job: Job) -> list[tuple[str, str]]:
        """A gang's ``(node, tail)`` per part in rank order (rank 0's log is the plain one); none for
        a job on one node. The parts share the page's budget, each keeping at least 2 KiB."""
        if job.attempt == 0 or len(job.nodes) < 2:
            return []
        limit = max(MIN_PART_TAIL_BYTES, LOG_TAIL_BYTES // len(job.nodes))
        rank0, *others = job.nodes  # the nodes of the current attempt, in rank order
        return [
            (rank0, await self._tail(job, "", limit)),
            *[(n, await self._tail(job, n, limit)) for n in others],
        ]

    async def pairs(self, request: web.Request) -> web.Response:
        who = request[WHO]
        rows = await self.sources.read.pair_speeds(MAX_PAIRS)
        now = await self.sources.sharing_now()
        return _html(pairs_page(rows, who, now, self.visible_to(who)))

    async def login_form(self, request: web.Request) -> web.Response:
        return _html(pages.login_page())

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = str(form.get("token", ""))
        if self.tokens is None or self.tokens.identify(f"Bearer {token}") is None:
            return _html(pages.login_page("invalid token"), status=401)
        resp = web.HTTPSeeOther("/")
        resp.set_cookie(COOKIE, token, httponly=True, samesite="Strict", path="/")
        raise resp


def metrics_app(metrics: MasterMetrics) -> web.Application:
    async def handle(request: web.Request) -> web.Response:
        body = await metrics.render()
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    app = web.Application()
    app.router.add_get("/metrics", handle)
    return app


async def start_site(app: web.Application, listen: str) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on HOST:PORT (port 0: any free port); returns the runner and the bound port."""
    host, sep, port_text = listen.rpartition(":")
    if not sep or not port_text.isdigit():
        raise OSError(f"expected HOST:PORT, got {listen!r}")
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host.strip("[]") or "0.0.0.0", int(port_text))
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise OSError(f"cannot listen on {listen}: {exc}") from None
    return runner, int(runner.addresses[0][1])
