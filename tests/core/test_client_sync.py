"""SyncHorusClient: the blocking wrapper, against the fake master served from another thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from test_client_fake import FakeMaster, ThreadedFakeMaster

from horus_core import errors
from horus_core.client import RetryPolicy, SyncHorusClient
from horus_core.model import JobSpec, JobState

SPEC = JobSpec(command=("python", "train.py"), gpus=1, name="sync")


@pytest.fixture
def server() -> Iterator[ThreadedFakeMaster]:
    with ThreadedFakeMaster(FakeMaster()).running() as srv:
        yield srv


@pytest.fixture
def client(server: ThreadedFakeMaster) -> Iterator[SyncHorusClient]:
    with SyncHorusClient.connect(
        server.address, retry=RetryPolicy(max_attempts=2, initial_backoff=0.001)
    ) as c:
        yield c


def test_sync_submit_get_list_cancel(client: SyncHorusClient, server: ThreadedFakeMaster) -> None:
    job = client.submit(SPEC)
    assert client.get(job.id) == job
    for _ in range(4):
        client.submit(SPEC)
    jobs = client.list(states=[JobState.PENDING], page_size=2)
    assert isinstance(jobs, list) and len(jobs) == 5
    assert client.list_page(page_size=2).next_page_token == "2"
    assert client.cancel(job.id).state is JobState.CANCELLED
    with pytest.raises(errors.FailedPrecondition):
        client.cancel(job.id)


def test_sync_cluster_calls(client: SyncHorusClient) -> None:
    assert [n.name for n in client.nodes()] == ["node-a", "node-b"]
    assert len(client.gpus()) == 3
    assert client.profiles()[0].samples == 12
    assert client.cluster_info().version == "0.1.0-fake"


def test_sync_watch_logs_and_wait(client: SyncHorusClient, server: ThreadedFakeMaster) -> None:
    job = server.call(lambda: server.fake.add_job(state=JobState.RUNNING, attempt=1))
    server.fake.logs[(job.id, 1)] = [b"a", b"b"]
    assert list(client.logs(job.id)) == [b"a", b"b"]

    events = client.watch(job.id)
    server.when_watching(lambda: server.fake.set_state(job.id, JobState.SUCCEEDED, "done"))
    first = next(events)
    assert first.job.state is JobState.SUCCEEDED and first.reason == "done"
    events.close()  # ends the stream on the client's loop
    assert client.wait(job.id, timeout=5).state is JobState.SUCCEEDED


def test_sync_close_is_idempotent_and_stops_the_thread(server: ThreadedFakeMaster) -> None:
    before = threading.active_count()
    c = SyncHorusClient(server.address)
    assert c.cluster_info().policy == "fifo"
    c.close()
    c.close()
    assert threading.active_count() == before
    with pytest.raises(RuntimeError, match="closed"):
        c.get("j-1")
