"""PID -> pod UID through /proc/<pid>/cgroup (worker/k8s/cgroup.py): the four kubelet layouts
(cgroup v1 and v2, cgroupfs and systemd drivers), QoS classes, static pods, foreign cgroup
namespaces, and what is no pod's."""

from __future__ import annotations

import pathlib

import pytest

from worker.k8s.cgroup import MAX_CGROUP_BYTES, PodResolver, pod_uid_of_cgroup, pod_uid_of_path

UID = "0b6e7b8e-1c1f-4d2a-9d57-2f1f9b8c4a10"
UND = UID.replace("-", "_")
CTR = "3f1c0e7d9a2b4c6e8f0a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6"

V1_CGROUPFS = f"""12:pids:/kubepods/burstable/pod{UID}/{CTR}
11:memory:/kubepods/burstable/pod{UID}/{CTR}
4:devices:/kubepods/burstable/pod{UID}/{CTR}
1:name=systemd:/kubepods/burstable/pod{UID}/{CTR}
0::/
"""
_SYSTEMD_PATH = (
    f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UND}.slice/cri-containerd-{CTR}.scope"
)
V1_SYSTEMD = f"13:cpuset:{_SYSTEMD_PATH}\n5:memory:{_SYSTEMD_PATH}\n1:name=systemd:{_SYSTEMD_PATH}\n"
V2_CGROUPFS = f"0::/kubepods/pod{UID}/{CTR}\n"  # Guaranteed: no QoS level
V2_SYSTEMD = (
    f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UND}.slice/crio-{CTR}.scope\n"
)


@pytest.mark.parametrize(
    "text",
    [V1_CGROUPFS, V1_SYSTEMD, V2_CGROUPFS, V2_SYSTEMD],
    ids=["v1-cgroupfs", "v1-systemd", "v2-cgroupfs", "v2-systemd"],
)
def test_each_layout_names_the_pod(text: str) -> None:
    assert pod_uid_of_cgroup(text) == UID


@pytest.mark.parametrize(
    ("path", "uid"),
    [
        (f"/kubepods/besteffort/pod{UID}/{CTR}", UID),
        (f"/kubepods.slice/kubepods-pod{UND}.slice/docker-{CTR}.scope", UID),  # systemd, Guaranteed
        (f"/kubepods/burstable/pod{UID}", UID),  # the pod cgroup itself (the pause process)
        # seen from a container's own cgroup namespace: the path climbs out first
        (f"/../../kubepods-burstable-pod{UND}.slice/cri-containerd-{CTR}.scope", UID),
        # kind's nodes (kubelet --cgroup-root=/kubelet)
        (
            f"/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/kubelet-kubepods-besteffort-pod{UND}.slice/x.scope",
            UID,
        ),
        (f"/kubelet/kubepods/burstable/pod{UID}/{CTR}", UID),
        # a static pod's cgroup carries its config hash
        (
            f"/kubepods/burstable/pod6e1a3b5c7d9f0a2b4c6d8e0f1a3b5c7d/{CTR}",
            "6e1a3b5c7d9f0a2b4c6d8e0f1a3b5c7d",
        ),
    ],
)
def test_more_paths(path: str, uid: str) -> None:
    assert pod_uid_of_path(path) == uid


@pytest.mark.parametrize(
    "text",
    [
        "0::/user.slice/user-1000.slice/session-3.scope\n",
        "0::/system.slice/containerd.service\n",
        f"0::/system.slice/docker-{CTR}.scope\n",  # a plain Docker container, no pod
        "0::/kubepods/burstable/podnot-a-uid/x\n",
        f"0::/notkubepods/pod{UID}/x\n",  # a "pod<uid>" segment outside kubepods
        f"0::/kubepods/burstable/pod{UID}x/y\n",  # the segment does not end at the UID
        "",
        "garbage without colons\n",
    ],
)
def test_what_is_no_pods_cgroup(text: str) -> None:
    assert pod_uid_of_cgroup(text) is None


def test_the_resolver_reads_a_fake_proc_tree(tmp_path: pathlib.Path) -> None:
    other = "11111111-2222-3333-4444-555555555555"
    for pid, text in [
        (10, V1_CGROUPFS),
        (11, V2_SYSTEMD.replace(UND, other.replace("-", "_"))),
        (12, "0::/\n"),
    ]:
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cgroup").write_text(text)
    (tmp_path / "13").mkdir()
    (tmp_path / "13" / "cgroup").write_bytes(
        b"x" * (MAX_CGROUP_BYTES + 10) + f"\n0::/kubepods/pod{UID}/c\n".encode()
    )
    resolver = PodResolver(tmp_path)
    assert [resolver.pod_of(p) for p in (10, 11, 12, 13, 99, 0)] == [UID, other, None, None, None, None]
    (tmp_path / "10" / "cgroup").write_text("0::/\n")
    assert resolver.pod_of(10) == UID, "one pass reads each PID once"
    assert PodResolver(tmp_path).pod_of(10) is None
