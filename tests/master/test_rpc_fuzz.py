"""Hypothesis fuzzing of every client RPC and the worker stream against a live master (real
grpc.aio server on 127.0.0.1:0 in a thread, real SQLite file): random and boundary values, wrong
types (bytes that are not protobuf), oversized fields, NaN/inf, invalid UTF-8. No UNKNOWN or
INTERNAL status, no traceback or ERROR in the master's log, no state change from a rejected
request, and every accepted submission readable back. ``-m slow`` runs a longer sweep."""

from __future__ import annotations

import asyncio
import logging
import pathlib
import sqlite3
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from master_fakes import running_master

from horus_core.gen import client_pb2 as cpb
from horus_core.gen import types_pb2 as pb
from horus_core.gen import worker_pb2 as wpb

CLIENT_RPCS = {
    "SubmitJob": cpb.SubmitJobRequest,
    "GetJob": cpb.GetJobRequest,
    "ListJobs": cpb.ListJobsRequest,
    "CancelJob": cpb.CancelJobRequest,
    "ListNodes": cpb.ListNodesRequest,
    "ListGpus": cpb.ListGpusRequest,
    "ListProfiles": cpb.ListProfilesRequest,
    "GetClusterInfo": cpb.GetClusterInfoRequest,
}
STREAM_RPCS = {"WatchJobs": cpb.WatchJobsRequest, "GetLogs": cpb.GetLogsRequest}
BAD_CODES = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}
FAST = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=1500, deadline=None, suppress_health_check=list(HealthCheck))

_INTS = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: (0, 2**64 - 1),
    FieldDescriptor.TYPE_ENUM: (-3, 12),  # proto3 enums are open: unknown values parse
}
_TEXT = st.one_of(
    st.text(st.characters(blacklist_categories=["Cs"]), max_size=12),
    st.sampled_from(["", "/", "/data/x:/x", "sleep", "a" * 300, "x" * 140_000, "\x00", "line\nbreak"]),
)


def _ints(lo: int, hi: int) -> st.SearchStrategy[int]:
    return st.one_of(st.integers(-5, 100).filter(lambda v: lo <= v <= hi), st.sampled_from([lo, hi, 0, 1]))


def scalar(fd: FieldDescriptor) -> st.SearchStrategy[Any]:
    if fd.type in _INTS:
        return _ints(*_INTS[fd.type])
    if fd.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    return _TEXT


@st.composite
def message(draw: st.DrawFn, desc: Descriptor, depth: int = 0) -> dict[str, Any]:
    """Keyword arguments for a message of type ``desc``: each field set or not, at random."""
    out: dict[str, Any] = {}
    for fd in desc.fields:
        if fd.containing_oneof is not None and any(f.name in out for f in fd.containing_oneof.fields):
            continue
        if not draw(st.booleans()):
            continue
        mt = fd.message_type
        if mt is not None and mt.GetOptions().map_entry:
            out[fd.name] = draw(st.dictionaries(_TEXT, scalar(mt.fields_by_name["value"]), max_size=3))
        elif mt is not None:
            if depth >= 3:
                continue
            one = message(mt, depth + 1)
            out[fd.name] = draw(st.lists(one, max_size=3) if fd.is_repeated else one)
        else:
            out[fd.name] = draw(st.lists(scalar(fd), max_size=4) if fd.is_repeated else scalar(fd))
    return out


def build(cls: type[Message], kwargs: dict[str, Any]) -> Message:
    msg = cls()
    _fill(msg, kwargs)
    return msg


def _fill(msg: Message, kwargs: dict[str, Any]) -> None:
    for name, value in kwargs.items():
        fd = msg.DESCRIPTOR.fields_by_name[name]
        target = getattr(msg, name) if fd.message_type is not None or fd.is_repeated else None
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            target.update(value)
        elif fd.message_type is not None and fd.is_repeated:
            for item in value:
                _fill(target.add(), item)
        elif fd.message_type is not None:
            target.SetInParent()
            _fill(target, value)
        elif fd.is_repeated:
            target.extend(value)
        else:
            setattr(msg, name, value)


class LiveMaster:
    """A master on its own event loop in a thread, so that sync gRPC clients can fuzz it."""

    def __init__(self, tmp_path: pathlib.Path) -> None:
        self.db = tmp_path / "horus.db"
        self.errors: list[logging.LogRecord] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._loop.run_until_complete, args=(self._run(tmp_path),))
        self.port = 0

    async def _run(self, tmp_path: pathlib.Path) -> None:
        self._stop = asyncio.Event()
        async with running_master(tmp_path, allow_mounts=("/data",)) as m:
            self.port = m.port
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> LiveMaster:
        self._thread.start()
        assert self._ready.wait(30), "master did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)

    def count(self, table: str = "jobs") -> int:
        with sqlite3.connect(self.db) as conn:
            return int(conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


class _Collect(logging.Handler):
    def __init__(self, sink: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.sink = sink

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info or record.levelno >= logging.ERROR:
            self.sink.append(record)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveMaster]:
    with LiveMaster(tmp_path_factory.mktemp("fuzz")) as m:
        handler = _Collect(m.errors)
        logging.getLogger().addHandler(handler)
        try:
            yield m
        finally:
            logging.getLogger().removeHandler(handler)


@pytest.fixture(scope="module")
def channel(live: LiveMaster) -> Iterator[grpc.Channel]:
    with grpc.insecure_channel(f"127.0.0.1:{live.port}") as ch:
        yield ch


def call(
    channel: grpc.Channel, method: str, raw: bytes, stream: bool = False
) -> tuple[grpc.StatusCode, bytes]:
    """The status of one call with ``raw`` as the request, and its answer (unary calls)."""
    path = f"/horus.v1.HorusService/{method}"
    try:
        if stream:
            for _ in channel.unary_stream(path)(raw, timeout=0.3):
                pass
            return grpc.StatusCode.OK, b""
        answer: bytes = channel.unary_unary(path)(raw, timeout=10)
    except grpc.RpcError as exc:
        code: grpc.StatusCode = exc.code()
        return code, b""
    return grpc.StatusCode.OK, answer


def check_clean(live: LiveMaster) -> None:
    assert not live.errors, [r.getMessage() for r in live.errors]


def client_request(draw: st.DrawFn) -> tuple[str, bytes, bool]:
    method = draw(st.sampled_from(sorted(CLIENT_RPCS) + sorted(STREAM_RPCS)))
    cls = CLIENT_RPCS.get(method) or STREAM_RPCS[method]
    kind = draw(st.sampled_from(["message", "message", "message", "junk", "bad-utf8"]))
    if kind == "junk":
        raw = draw(st.binary(max_size=64))
    elif kind == "bad-utf8":  # a string field (1) holding bytes that are not UTF-8
        raw = b"\x0a\x03\xff\xfe\xfd"
    else:
        fields = draw(message(cls.DESCRIPTOR))
        if method == "SubmitJob" and draw(st.booleans()):  # often a nearly valid spec
            spec = fields.setdefault("spec", {})
            spec.update(command=["sleep", "1"], gpus=1, env=[], mounts=[], workdir="", image="", name="")
            fields["request_id"] = draw(st.text("abc", max_size=3))
        raw = build(cls, fields).SerializeToString()
    return method, raw, method in STREAM_RPCS


def _client_case(live: LiveMaster, channel: grpc.Channel, data: st.DataObject) -> None:
    method, raw, stream = client_request(data.draw)
    before = live.count()
    code, answer = call(channel, method, raw, stream)
    assert code not in BAD_CODES, (method, raw[:100])
    if method == "SubmitJob" and code is not grpc.StatusCode.OK:
        assert live.count() == before  # a rejected submission stored nothing
    if method == "SubmitJob" and code is grpc.StatusCode.OK:
        job = cpb.SubmitJobResponse.FromString(answer).job
        sent = cpb.SubmitJobRequest.FromString(raw).spec
        assert list(job.spec.command) == list(sent.command) and job.spec.cpus == sent.cpus
        code, got = call(channel, "GetJob", cpb.GetJobRequest(job_id=job.id).SerializeToString())
        assert code is grpc.StatusCode.OK and pb.Job.FromString(got) == job  # readable back, the same
    check_clean(live)


@FAST
@given(data=st.data())
def test_fuzz_client_rpcs(live: LiveMaster, channel: grpc.Channel, data: st.DataObject) -> None:
    _client_case(live, channel, data)


@pytest.mark.slow
@LONG
@given(data=st.data())
def test_fuzz_client_rpcs_long(live: LiveMaster, channel: grpc.Channel, data: st.DataObject) -> None:
    _client_case(live, channel, data)


def worker_stream(channel: grpc.Channel, messages: list[bytes]) -> grpc.StatusCode:
    connect = channel.stream_stream("/horus.v1.WorkerService/Connect")
    try:
        for _ in connect(iter(messages), timeout=10):
            pass
    except grpc.RpcError as exc:
        code: grpc.StatusCode = exc.code()
        return code
    return grpc.StatusCode.OK


@st.composite
def worker_messages(draw: st.DrawFn) -> list[bytes]:
    first = draw(message(wpb.Register.DESCRIPTOR))
    first["name"] = draw(st.sampled_from(["fuzz-a", "fuzz-b", first.get("name", "")]))
    out = [wpb.WorkerMessage(register=build(wpb.Register, first)).SerializeToString()]  # type: ignore[arg-type]
    for _ in range(draw(st.integers(0, 4))):
        if draw(st.integers(0, 5)) == 0:
            out.append(draw(st.binary(max_size=32)))
        else:
            out.append(
                build(wpb.WorkerMessage, draw(message(wpb.WorkerMessage.DESCRIPTOR))).SerializeToString()
            )
    return out


def _worker_case(live: LiveMaster, channel: grpc.Channel, messages: list[bytes]) -> None:
    jobs = live.count()
    code = worker_stream(channel, messages)
    assert code not in BAD_CODES, messages
    assert live.count() == jobs  # a worker cannot create jobs
    check_clean(live)


@FAST
@given(messages=worker_messages())
def test_fuzz_worker_stream(live: LiveMaster, channel: grpc.Channel, messages: list[bytes]) -> None:
    _worker_case(live, channel, messages)


@pytest.mark.slow
@LONG
@given(messages=worker_messages())
def test_fuzz_worker_stream_long(live: LiveMaster, channel: grpc.Channel, messages: list[bytes]) -> None:
    _worker_case(live, channel, messages)
