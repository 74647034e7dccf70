"""The one writer: a task that owns the write connection and commits queued writes in groups.

Callers hand a :class:`WriteOp` to :meth:`Writer.submit` and get its result only after the
transaction holding it has committed (SQLite: ``BEGIN IMMEDIATE`` ... ``COMMIT`` with
``synchronous=FULL``; PostgreSQL: a transaction whose first statement checks the leader's lease,
:mod:`master.store.lease`), so an acknowledged write survives a crash. While one batch commits,
new requests queue up and go into the next batch: one fsync serves many requests (group commit).

On SQLite a batch runs as one call on the writer's own thread, so the event loop pays one
hand-off per batch, not one per statement; on PostgreSQL it runs on the loop in a greenlet
(:mod:`master.store.pg`). Ops are plain synchronous functions of the connection: they cannot
await anything, so no network call can ever happen inside a transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from horus_core.errors import Unavailable

log = logging.getLogger(__name__)

T = TypeVar("T")
_MANY_ROWS = 32  # an op writing this many rows or more starts without the commit delay


class Conn(Protocol):
    """What a write op may use of its connection: a ``sqlite3.Connection``, or on PostgreSQL a
    :class:`master.store.pg.PgConn` (tell them apart with :func:`master.store.pg.is_pg`)."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, parameters: Any = (), /) -> Any: ...

    def executemany(self, sql: str, parameters: Iterable[Any], /) -> Any: ...

    def close(self) -> Any: ...


# Runs a synchronous function of the connection where statements may be issued (the SQLite
# writer's thread, or a greenlet on the loop for PostgreSQL).
Runner = Callable[..., Awaitable[Any]]


class Session(Protocol):
    """How a dialect opens a write transaction: ``begin`` issues its first statements (and on
    PostgreSQL checks this master still holds the lease: the fence)."""

    def begin(self, conn: Conn) -> None: ...

    def seal(self, conn: Conn) -> str | None:
        """Last statement before COMMIT: write a commit mark, return its token (None: no marks)."""
        ...

    def landed(self, conn: Conn, token: str) -> bool | None:
        """After a COMMIT whose answer was lost: whether its mark is there (None: cannot tell)."""
        ...

    def error(self, exc: BaseException) -> BaseException:
        """What a caller whose write failed with ``exc`` is told (a lost connection: Unavailable)."""
        ...


class SqliteSession:
    def begin(self, conn: Conn) -> None:
        conn.execute("BEGIN IMMEDIATE")

    def seal(self, conn: Conn) -> str | None:
        return None  # (a local file: a COMMIT's outcome is never unknown)

    def landed(self, conn: Conn, token: str) -> bool | None:
        return None

    def error(self, exc: BaseException) -> BaseException:
        return exc


class WriteOp(Generic[T]):
    """A unit of work run inside the writer's transaction (on the writer's thread).

    Ops of a class with ``batchable = True`` that sit next to each other in a batch are applied
    with one call to :meth:`apply_many` (e.g. one ``executemany`` for many submissions).
    Ops must not raise for expected outcomes (return them instead): an exception rolls the whole
    batch back, after which every op of that batch is retried in a transaction of its own.
    """

    batchable: ClassVar[bool] = False

    @property
    def row_count(self) -> int:
        """How many rows the op writes, about (one by default): an op of many rows already
        shares its fsync among them, so the writer starts it without a commit delay."""
        return 1

    def apply(self, conn: Conn) -> T:
        raise NotImplementedError

    @classmethod
    def apply_many(cls, conn: Conn, ops: Sequence[WriteOp[Any]]) -> list[Any]:
        return [op.apply(conn) for op in ops]


class CommitUnknown(Exception):
    """The COMMIT of a sealed transaction failed: it may have landed (its answer lost)."""

    def __init__(self, token: str, results: list[Any]) -> None:
        super().__init__(token)
        self.token, self.results = token, results


@dataclass
class _Item:
    op: WriteOp[Any]
    fut: asyncio.Future[Any]


@dataclass
class WriterStats:
    batches: int = 0
    ops: int = 0
    retried_batches: int = 0
    largest_batch: int = 0


class Writer:
    def __init__(
        self,
        conn: Conn,
        *,
        group_commit: bool = True,
        max_batch: int = 1024,
        commit_delay_s: float = 0.001,
        runner: Runner | None = None,
        session: Session | None = None,
    ) -> None:
        self._conn = conn
        self._runner = runner
        self._session: Session = session or SqliteSession()

        self._commit_delay_s = commit_delay_s
        self._max_batch = max(1, max_batch) if group_commit else 1
        self._queue: asyncio.Queue[_Item | None] = asyncio.Queue()
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="horus-db-writer")
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._closed = False
        self._last_batch = 0
        self.stats = WriterStats()

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="horus-db-writer")

    async def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` where it may use the connection (the writer's thread on SQLite)."""
        if self._runner is not None:
            return await self._runner(fn, *args)
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn, *args)

    async def submit(self, op: WriteOp[T]) -> T:
        if self._closing or self._task is None or self._task.done():
            raise Unavailable("the master's store is closed")
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put_nowait(_Item(op, fut))
        # A caller that goes away cancels only its wait: the write itself still runs and commits.
        return await fut

    async def close(self) -> None:
        """Stop taking writes, commit what is queued, close the connection."""
        if self._closed:
            return
        self._closed = self._closing = True
        if self._task is not None and not self._task.done():
            self._queue.put_nowait(None)
            with contextlib.suppress(Exception):
                await self._task
        with contextlib.suppress(Exception):  # (PostgreSQL: the server may be gone already)
            await self.call(self._conn.close)
        self._thread.shutdown(wait=True)

    async def _run(self) -> None:
        try:
            while True:
                first = await self._queue.get()
                if first is None:
                    return
                if self._max_batch > 1 and self._last_batch > 1 and first.op.row_count < _MANY_ROWS:
                    # Several writers are active (the last batch had company): give the requests
                    # on their way a moment to join, so one fsync serves more of them. A lone
                    # writer never waits (like PostgreSQL's commit_delay with commit_siblings),
                    # nor does a write of many rows (a scheduling pass's: it holds the pass).
                    await asyncio.sleep(self._commit_delay_s)
                batch, stop = self._take_batch(first)
                self._last_batch = len(batch)
                await self._commit(batch)
                if stop:
                    return
        except BaseException:
            log.exception("writer stopped unexpectedly")
            self._closing = True
            raise
        finally:
            self._fail_queued()

    def _take_batch(self, first: _Item) -> tuple[list[_Item], bool]:
        batch = [first]
        while len(batch) < self._max_batch and not self._queue.empty():
            item = self._queue.get_nowait()
            if item is None:
                return batch, True
            batch.append(item)
        return batch, False

    async def _commit(self, batch: list[_Item]) -> None:
        try:
            results = await self._attempt(batch)
        except Exception as exc:
            if len(batch) == 1:
                log.warning("write failed: %s: %s", type(exc).__name__, exc)
                _fail(batch[0], self._session.error(exc))
                return
            log.warning("a batch of %d writes failed (%s); retrying one by one", len(batch), exc)
            self.stats.retried_batches += 1
            for item in batch:
                await self._commit([item])
            return
        if not results and batch:  # (failed as a whole: the outcome was unknown)
            return
        self._count(len(batch))
        for item, result in zip(batch, results, strict=True):
            if not item.fut.done():
                item.fut.set_result(result)

    async def _attempt(self, batch: list[_Item]) -> list[Any]:
        """The batch's results once committed. A COMMIT whose answer was lost is looked up by its
        mark: landed, the results stand; not landed, it failed (and may be retried); unknown (the
        server still away), Unavailable, never retried: a retry could apply it twice."""
        try:
            return list(await self.call(self._transaction, [item.op for item in batch]))
        except CommitUnknown as unk:
            landed = await self.call(self._session.landed, self._conn, unk.token)
            if landed:
                log.warning("the answer to a COMMIT was lost; its mark shows it landed")
                return unk.results
            cause = unk.__cause__ or unk
            if landed is None:
                for item in batch:
                    _fail(
                        item, Unavailable(f"the store did not confirm a write ({cause}); it may have landed")
                    )
                return []  # (the futures are failed: nothing to set)
            raise cause from None

    def _transaction(self, ops: list[WriteOp[Any]]) -> list[Any]:
        """On the writer thread: BEGIN (IMMEDIATE), every op, COMMIT (or ROLLBACK and raise)."""
        conn = self._conn
        try:
            self._session.begin(conn)
            results: list[Any] = []
            i = 0
            while i < len(ops):
                cls = type(ops[i])
                j = i + 1
                if cls.batchable:
                    while j < len(ops) and type(ops[j]) is cls:
                        j += 1
                if j - i == 1:
                    results.append(ops[i].apply(conn))
                else:
                    results.extend(cls.apply_many(conn, ops[i:j]))
                i = j
            token = self._session.seal(conn)
            try:
                conn.execute("COMMIT")
            except Exception as exc:
                if token is None:
                    raise
                raise CommitUnknown(token, results) from exc
        except BaseException:
            with contextlib.suppress(Exception):  # (a connection that broke has nothing to undo)
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            raise
        return results

    def _count(self, size: int) -> None:
        self.stats.batches += 1
        self.stats.ops += size
        self.stats.largest_batch = max(self.stats.largest_batch, size)

    def _fail_queued(self) -> None:
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                _fail(item, Unavailable("the master's store is closed"))


def _fail(item: _Item, exc: BaseException) -> None:
    if not item.fut.done():
        item.fut.set_exception(exc)
