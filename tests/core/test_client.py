"""The async SDK against a fake master on a real grpc.aio server (the real wire)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator

import grpc
import pytest
from test_client_fake import FakeMaster, serve

import horus_core
from horus_core import errors
from horus_core.client import GpuStatus, HorusClient, JobEvent, RetryPolicy
from horus_core.model import JobSpec, JobState, NodeState, ProfileHints

FAST_RETRY = RetryPolicy(max_attempts=3, initial_backoff=0.001, max_backoff=0.002)
SPEC = JobSpec(
    command=("python", "train.py", "--lr", "0.1"),
    gpus=2,
    name="resnet",
    job_type="ResNet-18 (batch size 32)",
    env=(("A", "1"),),
    hints=ProfileHints(util_avg=40.0, mem_mib=2048),
)


@pytest.fixture
def fake() -> FakeMaster:
    return FakeMaster()


@pytest.fixture
async def client(fake: FakeMaster) -> AsyncIterator[HorusClient]:
    async with serve(fake) as address, HorusClient.connect(address, timeout=5, retry=FAST_RETRY) as c:
        yield c


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ------------------------------------------------------------------------------- surface


def test_public_surface() -> None:
    from horus_core import client as mod

    assert horus_core.HorusClient is HorusClient
    assert horus_core.SyncHorusClient is mod.SyncHorusClient
    assert set(mod.__all__) >= {"HorusClient", "SyncHorusClient", "JobEvent", "GpuStatus", "RetryPolicy"}


# -------------------------------------------------------------------------------- submit


async def test_submit_returns_model_job_with_uuid_request_id(client: HorusClient, fake: FakeMaster) -> None:
    job = await client.submit(SPEC)
    assert job.state is JobState.PENDING
    assert job.spec == SPEC
    assert fake.jobs[job.id].spec == SPEC
    (request_id,) = fake.submit_request_ids
    assert uuid.UUID(request_id).version == 4


async def test_submit_retry_reuses_request_id_and_makes_one_job(
    client: HorusClient, fake: FakeMaster
) -> None:
    fake.fail_submits = 1  # the first call is recorded (job created), then its answer is "lost"
    job = await client.submit(SPEC)
    first, second = fake.submit_request_ids
    assert first == second
    assert list(fake.jobs) == [job.id]


async def test_submit_explicit_request_id_is_idempotent(client: HorusClient, fake: FakeMaster) -> None:
    a = await client.submit(SPEC, request_id="req-1")
    b = await client.submit(SPEC, request_id="req-1")
    assert a.id == b.id and len(fake.jobs) == 1


async def test_retries_are_bounded(client: HorusClient, fake: FakeMaster) -> None:
    fake.fail_submits = 10
    with pytest.raises(errors.Unavailable, match="cannot reach the Horus master"):
        await client.submit(SPEC)
    assert len(fake.submit_request_ids) == FAST_RETRY.max_attempts
    assert len(set(fake.submit_request_ids)) == 1


# -------------------------------------------------------------------------------- errors


async def test_invalid_argument_names_the_field(client: HorusClient) -> None:
    with pytest.raises(errors.InvalidArgument) as info:
        await client.submit(JobSpec(command=("x",), gpus=8))
    assert info.value.field == "gpus"
    assert "largest node has 2" in str(info.value)


async def test_not_found_and_failed_precondition(client: HorusClient, fake: FakeMaster) -> None:
    with pytest.raises(errors.NotFound, match="j-nope"):
        await client.get("j-nope")
    done = fake.add_job(state=JobState.SUCCEEDED)
    with pytest.raises(errors.FailedPrecondition, match="already SUCCEEDED"):
        await client.cancel(done.id)


async def test_bearer_token_is_sent(fake: FakeMaster) -> None:
    fake.required_token = "s3cret"
    async with serve(fake) as address:
        async with HorusClient.connect(address, token="s3cret") as c:
            assert (await c.cluster_info()).policy == "fifo"
        assert fake.metadata[-1]["authorization"] == "Bearer s3cret"
        async with HorusClient.connect(address, token="wrong") as c:
            with pytest.raises(errors.Unauthenticated):
                await c.nodes()


async def test_unreachable_master_is_one_clear_error() -> None:
    target = f"127.0.0.1:{free_port()}"
    async with HorusClient.connect(target, timeout=2, retry=FAST_RETRY) as c:
        with pytest.raises(errors.Unavailable) as info:
            await c.get("j-1")
    assert str(info.value).startswith(f"cannot reach the Horus master at {target}: ")
    assert "\n" not in str(info.value)


async def test_deadline_is_per_rpc(fake: FakeMaster) -> None:
    job = fake.add_job()
    fake.get_delay = 0.5
    async with serve(fake) as address, HorusClient.connect(address, timeout=0.05, retry=FAST_RETRY) as c:
        with pytest.raises(errors.Unavailable, match=r"did not answer within 0\.05 s"):
            await c.get(job.id)
    assert fake.get_calls == FAST_RETRY.max_attempts  # DEADLINE_EXCEEDED is retried too


# ---------------------------------------------------------------------------------- list


async def test_list_iterates_every_page(client: HorusClient, fake: FakeMaster) -> None:
    ids = [fake.add_job().id for _ in range(25)]
    fake.add_job(state=JobState.SUCCEEDED)
    got = [j.id async for j in client.iter_jobs(states=[JobState.PENDING], page_size=10)]
    assert got == ids
    assert [r.page_token for r in fake.list_requests] == ["", "10", "20"]
    assert all(list(r.states) == [1] and r.page_size == 10 for r in fake.list_requests)


async def test_list_is_awaited_like_the_other_listings(client: HorusClient, fake: FakeMaster) -> None:
    ids = [fake.add_job().id for _ in range(12)]
    jobs = await client.list(page_size=5)  # every page, like nodes(), gpus() and queues()
    assert isinstance(jobs, list) and [j.id for j in jobs] == ids
    assert isinstance(await client.nodes(), list) and isinstance(await client.gpus(), list)


def test_a_command_string_is_refused_with_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match=r"JobSpec.command must be a sequence of strings.*'echo hi'"):
        JobSpec(command="echo hi", gpus=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"JobSpec\.gpu_types"):
        JobSpec(command=("true",), gpu_types="v100")  # type: ignore[arg-type]
    listed = JobSpec(command=["python", "train.py"], mounts=["/d:/d"])  # type: ignore[arg-type]
    assert listed.command == ("python", "train.py") and listed.mounts == ("/d:/d",)
    assert hash(listed) == hash(JobSpec(command=("python", "train.py"), mounts=("/d:/d",)))


async def test_list_page_and_owner_filter(client: HorusClient, fake: FakeMaster) -> None:
    fake.add_job(JobSpec(command=("a",), owner="ann"))
    fake.add_job(JobSpec(command=("b",), owner="bob"))
    page = await client.list_page(owner="bob", page_size=5)
    assert [j.spec.owner for j in page.jobs] == ["bob"] and page.next_page_token == ""
    assert fake.list_requests[-1].owner == "bob"


# ------------------------------------------------------------------------------- streams


async def test_watch_streams_events(client: HorusClient, fake: FakeMaster) -> None:
    job = fake.add_job()
    events: list[JobEvent] = []

    async def consume() -> None:
        async for event in client.watch(job.id):
            events.append(event)
            if event.job.state.terminal:
                return

    task = asyncio.create_task(consume())
    await fake.watching.wait()
    fake.add_job()  # another job: filtered out by the server
    fake.set_state(job.id, JobState.RUNNING, "started", node="node-a", gpus=("GPU-a0",), attempt=1)
    fake.set_state(job.id, JobState.SUCCEEDED, "exit 0", exit_code=0)
    await asyncio.wait_for(task, 5)
    assert [(e.previous_state, e.job.state) for e in events] == [
        (JobState.PENDING, JobState.RUNNING),
        (JobState.RUNNING, JobState.SUCCEEDED),
    ]
    assert events[0].job.gpus == ("GPU-a0",) and events[0].reason == "started"
    assert events[1].job.exit_code == 0


async def test_logs_plain_and_follow(client: HorusClient, fake: FakeMaster) -> None:
    job = fake.add_job(state=JobState.RUNNING, attempt=2)
    fake.logs[(job.id, 1)] = [b"old\n"]
    fake.logs[(job.id, 2)] = [b"hello\n", b"world\n"]
    assert b"".join([c async for c in client.logs(job.id)]) == b"hello\nworld\n"
    assert [c async for c in client.logs(job.id, attempt=1)] == [b"old\n"]

    async def finish() -> None:
        await asyncio.sleep(0.05)
        fake.logs[(job.id, 2)].append(b"more\n")
        await asyncio.sleep(0.05)
        fake.set_state(job.id, JobState.SUCCEEDED)

    task = asyncio.create_task(finish())
    chunks = [c async for c in client.log_chunks(job.id, follow=True)]
    await task
    assert b"".join(c.data for c in chunks) == b"hello\nworld\nmore\n"
    assert [c.offset for c in chunks] == [0, 6, 12]


async def test_logs_of_unknown_job(client: HorusClient) -> None:
    with pytest.raises(errors.NotFound):
        _ = [c async for c in client.logs("j-nope")]


# ---------------------------------------------------------------------------------- wait


async def test_wait_follows_the_watch(client: HorusClient, fake: FakeMaster) -> None:
    job = fake.add_job()

    async def run_it() -> None:
        await fake.watching.wait()
        fake.set_state(job.id, JobState.RUNNING)
        fake.set_state(job.id, JobState.FAILED, "exit 3", exit_code=3)

    task = asyncio.create_task(run_it())
    done = await client.wait(job.id, timeout=5, poll_interval=10)
    await task
    assert done.state is JobState.FAILED and done.exit_code == 3


async def test_wait_returns_at_once_for_a_finished_job(client: HorusClient, fake: FakeMaster) -> None:
    job = fake.add_job(state=JobState.CANCELLED)
    assert (await client.wait(job.id, timeout=2)).state is JobState.CANCELLED


async def test_wait_survives_a_missed_event(client: HorusClient, fake: FakeMaster) -> None:
    """The change lands between the read and the watch subscription: the re-read finds it."""
    job = fake.add_job()
    fake.drop_watch_events = True
    fake.confirm_subscription = False
    asyncio.get_running_loop().call_later(0.05, fake.set_state, job.id, JobState.SUCCEEDED)
    done = await client.wait(job.id, timeout=5, poll_interval=0.02)
    assert done.state is JobState.SUCCEEDED


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED])
async def test_wait_reopens_a_broken_watch(
    client: HorusClient, fake: FakeMaster, code: grpc.StatusCode
) -> None:
    job = fake.add_job()
    fake.break_watches, fake.break_code = 2, code

    async def finish() -> None:
        await fake.watching.wait()
        fake.set_state(job.id, JobState.SUCCEEDED)

    task = asyncio.create_task(finish())
    done = await client.wait(job.id, timeout=5, poll_interval=10)
    await task
    assert done.state is JobState.SUCCEEDED and fake.watch_opened == 3


async def test_wait_times_out(client: HorusClient, fake: FakeMaster) -> None:
    job = fake.add_job()
    with pytest.raises(TimeoutError):
        await client.wait(job.id, timeout=0.1, poll_interval=0.02)
    assert not fake._watchers or all(q.empty() for _, q in fake._watchers)


async def test_wait_unknown_job(client: HorusClient) -> None:
    with pytest.raises(errors.NotFound):
        await client.wait("j-nope", timeout=2)


# ------------------------------------------------------------------------------- cluster


async def test_nodes_gpus_profiles_info(client: HorusClient, fake: FakeMaster) -> None:
    fake.add_job(state=JobState.RUNNING, node="node-a", gpus=("GPU-a0",), attempt=1)
    nodes = await client.nodes()
    assert [(n.name, n.state, len(n.gpus)) for n in nodes] == [
        ("node-a", NodeState.READY, 2),
        ("node-b", NodeState.LOST, 1),
    ]
    gpus = await client.gpus()
    assert all(isinstance(g, GpuStatus) for g in gpus)
    a0 = next(g for g in gpus if g.gpu.uuid == "GPU-a0")
    assert a0.gpu.node == "node-a" and a0.job_ids == ("j-0001",)
    assert a0.stats.util_sm == 40.0 and a0.jobs[0].attempt == 1 and a0.jobs[0].mem_used_mib == 1000
    (profile,) = await client.profiles()
    assert profile.job_type.startswith("ResNet-18") and profile.co_speed == {"VAE": 0.9}
    assert profile.solo_samples_per_s == {"v100x1": 640.0}
    (pair,) = await client.pair_speeds()
    assert (pair.job_type, pair.co_runner, pair.gpu_type, pair.speed, pair.samples) == (
        profile.job_type,
        "VAE",
        "v100",
        0.9,
        3,
    )
    info = await client.cluster_info()
    assert (info.policy, info.max_gpus_per_node) == ("fifo", 2)


async def test_bad_token_is_rejected_locally() -> None:
    with pytest.raises(errors.InvalidArgument) as info:
        HorusClient.connect("127.0.0.1:1", token="two\nlines")
    assert info.value.field == "token"


def test_retry_policy_delays_are_bounded() -> None:
    policy = RetryPolicy(max_attempts=6, initial_backoff=0.1, max_backoff=0.3, multiplier=2)
    delays = list(policy.delays())
    assert len(delays) == 5
    assert all(0.05 <= d <= 0.3 for d in delays)
    with pytest.raises(ValueError, match="max_attempts"):
        RetryPolicy(max_attempts=0)
