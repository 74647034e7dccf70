"""The container body DockerRuntime sends: hardened defaults, GPU contract, mount allow-list (no engine)."""

from __future__ import annotations

import pathlib

import pytest

from horus_core.errors import InvalidArgument
from horus_core.model import JobSpec
from worker.runtime.base import AttemptKey, LaunchRequest
from worker.runtime.docker_config import (
    ContainerPolicy,
    MountNotAllowed,
    check_mounts,
    container_name,
    create_body,
    key_from_labels,
)

GPUS = ("GPU-aaaa", "GPU-bbbb")


def _request(**spec: object) -> LaunchRequest:
    fields: dict[str, object] = {"command": ("python", "train.py"), "image": "img:1"}
    fields.update(spec)
    return LaunchRequest(
        AttemptKey("job-1", 2),
        JobSpec(**fields),  # type: ignore[arg-type]
        GPUS,
        pathlib.Path("/logs/job-1/2.log"),
        (("HORUS_JOB_ID", "job-1"),),
    )


def test_hardened_defaults_and_limits() -> None:
    body = create_body(_request(cpus=1.5, memory_mib=512, workdir="/w"), ContainerPolicy("w1"), [])
    host = body["HostConfig"]
    assert host["Privileged"] is False
    assert host["CapDrop"] == ["ALL"] and "CapAdd" not in host
    assert host["SecurityOpt"] == ["no-new-privileges"]
    assert host["PidsLimit"] == 4096
    assert host["NetworkMode"] == "none"
    assert host["IpcMode"] == "private" and host["PidMode"] == "" and host["UTSMode"] == ""
    assert host["NanoCpus"] == 1_500_000_000
    assert host["Memory"] == host["MemorySwap"] == 512 << 20
    assert host["Mounts"] == [] and "Binds" not in host and "Devices" not in host
    assert "DeviceRequests" not in host  # no nvidia runtime: the env contract only
    assert body["Cmd"] == ["python", "train.py"] and body["WorkingDir"] == "/w"
    assert body["Labels"] == {
        "horus.job_id": "job-1",
        "horus.attempt": "2",
        "horus.worker": "w1",
        "horus.log_path": "/logs/job-1/2.log",
    }
    assert key_from_labels(body["Labels"]) == AttemptKey("job-1", 2)


def test_env_strips_reserved_user_keys_and_sets_exactly_the_gpus() -> None:
    user_env = (
        ("FOO", "bar"),
        ("CUDA_VISIBLE_DEVICES", "all"),
        ("NVIDIA_VISIBLE_DEVICES", "all"),
        ("LD_PRELOAD", "/evil.so"),
        ("HORUS_JOB_ID", "forged"),
    )
    env = create_body(_request(env=user_env), ContainerPolicy("w1"), [])["Env"]
    assert sorted(env) == sorted(
        [
            "FOO=bar",
            "HORUS_JOB_ID=job-1",
            "NVIDIA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb",
            "CUDA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb",
        ]
    )


def test_nvidia_runtime_gets_device_requests_by_uuid() -> None:
    body = create_body(_request(), ContainerPolicy("w1", nvidia=True), [])
    assert body["HostConfig"]["DeviceRequests"] == [
        {"Driver": "nvidia", "DeviceIDs": ["GPU-aaaa", "GPU-bbbb"], "Capabilities": [["gpu"]]}
    ]
    assert "NVIDIA_VISIBLE_DEVICES=GPU-aaaa,GPU-bbbb" in body["Env"]


def test_no_gpus_means_void_not_all() -> None:
    request = LaunchRequest(AttemptKey("j", 1), JobSpec(command=("x",), image="i"), (), pathlib.Path("l"), ())
    body = create_body(request, ContainerPolicy("w1", nvidia=True), [])
    assert "NVIDIA_VISIBLE_DEVICES=void" in body["Env"] and "DeviceRequests" not in body["HostConfig"]


@pytest.mark.parametrize("network", ["host", "container:abc"])
def test_host_and_container_networks_are_refused(network: str) -> None:
    with pytest.raises(ValueError, match="namespace"):
        ContainerPolicy("w1", network=network)


def test_allow_list_must_be_absolute_and_not_root() -> None:
    for bad in ("/", "data", "//"):
        with pytest.raises(ValueError, match="allow-mount"):
            ContainerPolicy("w1", allow_mounts=(bad,))


def test_mount_allow_list(tmp_path: pathlib.Path) -> None:
    data = tmp_path / "data"
    (data / "set").mkdir(parents=True)
    (tmp_path / "database").mkdir()
    (data / "escape").symlink_to("/etc")
    allow = (str(data),)
    assert check_mounts([f"{data}/set:/in:ro"], allow) == [
        {"Type": "bind", "Source": str(data / "set"), "Target": "/in", "ReadOnly": True}
    ]
    assert check_mounts([f"{data}:/in"], allow)[0]["ReadOnly"] is False
    for refused in (f"{tmp_path}/database:/x", f"{data}/../database:/x", f"{data}/escape:/x", "/etc:/x"):
        with pytest.raises(MountNotAllowed, match=r"mount /.* not allowed"):
            check_mounts([refused], allow)
    with pytest.raises(MountNotAllowed, match="this worker allows no host mounts"):
        check_mounts(["/etc:/x"], ())
    for malformed in ("relative:/x", "/a:b", "/a", "/a:/b:rx"):
        with pytest.raises(InvalidArgument):
            check_mounts([malformed], allow)


def test_progress_and_speed_files_are_shown_under_horus() -> None:
    request = LaunchRequest(
        AttemptKey("j", 1),
        JobSpec(command=("x",), image="i"),
        (),
        pathlib.Path("/st/j/1/output.log"),
        (("HORUS_PROGRESS_FILE", "/st/j/1/progress.jsonl"), ("HORUS_SPEED_FILE", "/st/j/1/speed")),
    )
    body = create_body(request, ContainerPolicy("w1"), [])
    assert body["HostConfig"]["Mounts"] == [
        {"Type": "bind", "Source": "/st/j/1", "Target": "/horus", "ReadOnly": True},
        {
            "Type": "bind",
            "Source": "/st/j/1/progress.jsonl",
            "Target": "/horus/progress.jsonl",
            "ReadOnly": False,
        },
    ]
    assert {"HORUS_PROGRESS_FILE=/horus/progress.jsonl", "HORUS_SPEED_FILE=/horus/speed"} <= set(body["Env"])
    with pytest.raises(InvalidArgument, match="reserved"):
        check_mounts(["/data/x:/horus/x"], ("/data",), resolve=False)


def test_container_names_are_docker_safe() -> None:
    assert container_name("node 1", AttemptKey("job/ä", 3)) == "horus-node_1-job__-3"


def test_the_sharing_modes_paths_and_variables_reach_the_container() -> None:
    pipe = "/st/mps/0/pipe"
    env = (("CUDA_MPS_PIPE_DIRECTORY", pipe), ("CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "0=4096M"))
    hami = "/opt/hami/libvgpu.so"
    log = pathlib.Path("/st/j/1/output.log")
    binds = ((pipe, pipe, False), (hami, hami, True))
    request = LaunchRequest(
        AttemptKey("j", 1), JobSpec(command=("x",), image="i"), ("GPU-a",), log, env, binds
    )
    body = create_body(request, ContainerPolicy("w1"), [])
    assert {"Type": "bind", "Source": pipe, "Target": pipe, "ReadOnly": False} in body["HostConfig"]["Mounts"]
    lib = {
        "Type": "bind",
        "Source": "/opt/hami/libvgpu.so",
        "Target": "/opt/hami/libvgpu.so",
        "ReadOnly": True,
    }
    assert lib in body["HostConfig"]["Mounts"]
    assert {f"CUDA_MPS_PIPE_DIRECTORY={pipe}", "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=0=4096M"} <= set(body["Env"])
