"""The node report's JSON form (horus_core.k8sreport): round trips, the contract's example, and
every bad field refused with a ValueError that names it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from horus_core.k8sreport import (
    EVENT_OOM,
    EVENT_OVER_CAP,
    MAX_EVENTS,
    MAX_PODS,
    MAX_REPORT_BYTES,
    GpuReadingK8s,
    NodeReport,
    PodEvent,
    PodReading,
    configmap_name,
    is_stale,
    parse_report,
    render_report,
    report_to_dict,
)

G0 = "GPU-11111111-2222-3333-4444-555555555555"
G1 = "GPU-66666666-7777-8888-9999-000000000000"

CONTRACT_EXAMPLE = """
{"version": 1, "node": "n1", "time": 1765000000.0, "interval_s": 15.0,
 "gpus": [{"uuid": "GPU-a", "index": 0, "name": "NVIDIA H100 80GB HBM3", "util": 37.0,
           "mem_used_mib": 12000, "mem_total_mib": 81559}],
 "pods": [{"uid": "0b6e7b8e-1c1f-4d2a-9d57-2f1f9b8c4a10", "namespace": "ns", "name": "p",
           "gpus": ["GPU-a"], "util": 30.0, "mem_used_mib": 9000,
           "samples_per_s": 123.4, "step": 1000},
          {"uid": "u2", "namespace": "ns", "name": "q", "gpus": [], "util": 0.0,
           "mem_used_mib": 0, "samples_per_s": null, "step": null}],
 "events": [{"uid": "u2", "kind": "over_cap", "time": 1765000001.5, "gpu": "GPU-a",
             "mem_used_mib": 5000, "cap_mib": 4096, "detail": "used 5000 MiB above its cap"}]}
"""


def _report() -> NodeReport:
    return NodeReport(
        node="gpu-node-1",
        time=1765000000.25,
        interval_s=15.0,
        gpus=(
            GpuReadingK8s(
                uuid=G0,
                index=0,
                name="Tesla V100-SXM2-16GB",
                util=55.5,
                mem_used_mib=9000,
                mem_total_mib=16160,
            ),
            GpuReadingK8s(uuid=G1, index=1, name="Tesla V100-SXM2-16GB"),
        ),
        pods=(
            PodReading(
                uid="uid-a",
                namespace="team",
                name="a",
                gpus=(G0,),
                util=40.0,
                mem_used_mib=6000,
                samples_per_s=88.5,
                step=12,
            ),
            PodReading(uid="uid-b", namespace="team", name="b", gpus=(G0, G1), util=15.5, mem_used_mib=3000),
        ),
        events=(
            PodEvent(
                uid="uid-c",
                kind=EVENT_OVER_CAP,
                time=1765000000.0,
                gpu=G1,
                mem_used_mib=5000,
                cap_mib=4096,
                detail="x",
                shared=True,
            ),
            PodEvent(uid="uid-d", kind=EVENT_OOM, time=1764999999.0, shared=True, neighbour_over_cap=True),
        ),
    )


def _doc() -> dict[str, Any]:
    return report_to_dict(_report())


def test_a_report_survives_its_json_form() -> None:
    report = _report()
    text = render_report(report)
    assert parse_report(text) == report
    assert json.loads(text)["pods"][1]["samples_per_s"] is None


def test_the_contracts_example_parses() -> None:
    report = parse_report(CONTRACT_EXAMPLE)
    assert report.node == "n1" and report.interval_s == 15.0
    assert report.gpus[0].mem_total_mib == 81559 and report.gpus[0].name.startswith("NVIDIA H100")
    assert report.pods[0].gpus == ("GPU-a",) and report.pods[0].step == 1000
    assert report.pods[1].samples_per_s is None and report.pods[1].step is None
    assert report.events[0].kind == EVENT_OVER_CAP and report.events[0].cap_mib == 4096
    assert not report.events[0].shared and not report.events[0].neighbour_over_cap


def test_optional_fields_default_and_unknown_keys_are_ignored() -> None:
    text = json.dumps(
        {
            "version": 1,
            "node": "n",
            "time": 10,
            "interval_s": 5,
            "later": {"anything": True},
            "gpus": [{"uuid": G0, "index": 3, "extra": 1}],
            "pods": [{"uid": "u", "namespace": "ns", "name": "p"}],
        }
    )
    report = parse_report(text)
    assert report.time == 10.0 and report.events == ()
    assert report.gpus == (GpuReadingK8s(uuid=G0, index=3),)
    assert report.pods == (PodReading(uid="u", namespace="ns", name="p"),)


def _set(path: str, value: object) -> dict[str, Any]:
    doc = _doc()
    *parents, last = path.split(".")
    node: Any = doc
    for part in parents:
        node = node[int(part)] if part.isdigit() else node[part]
    if value is _DELETE:
        del node[last]
    else:
        node[int(last) if last.isdigit() else last] = value
    return doc


_DELETE = object()

BAD_FIELDS = [
    ("version", 2, "version"),
    ("version", _DELETE, "version"),
    ("node", "", "node"),
    ("node", "a\nb", "node"),
    ("node", "n" * 254, "node"),
    ("time", "soon", "time"),
    ("time", -1.0, "time"),
    ("interval_s", 0, "interval_s"),
    ("interval_s", 1e9, "interval_s"),
    ("gpus", {}, "gpus"),
    ("gpus.0.uuid", 7, "gpus[0].uuid"),
    ("gpus.0.index", True, "gpus[0].index"),
    ("gpus.0.index", 1.5, "gpus[0].index"),
    ("gpus.0.util", 100.5, "gpus[0].util"),
    ("gpus.0.mem_used_mib", -1, "gpus[0].mem_used_mib"),
    ("gpus.0.mem_total_mib", 10**400, "gpus[0].mem_total_mib"),
    ("gpus.1.uuid", G0, "gpus[1].uuid"),
    ("pods.0", [], "pods[0]"),
    ("pods.0.uid", "", "pods[0].uid"),
    ("pods.1.uid", "uid-a", "pods[1].uid"),
    ("pods.0.namespace", "n" * 64, "pods[0].namespace"),
    ("pods.0.gpus", ["GPU-elsewhere"], "pods[0].gpus[0]"),
    ("pods.0.gpus", [G0, G0], "pods[0].gpus[1].uuid"),
    ("pods.0.util", 10**400, "pods[0].util"),
    ("pods.0.samples_per_s", -3.0, "pods[0].samples_per_s"),
    ("pods.0.samples_per_s", "fast", "pods[0].samples_per_s"),
    ("pods.0.step", 2.5, "pods[0].step"),
    ("pods.0.step", -1, "pods[0].step"),
    ("events.0.kind", "evicted", "events[0].kind"),
    ("events.0.time", None, "events[0].time"),
    ("events.0.cap_mib", "4GiB", "events[0].cap_mib"),
    ("events.0.detail", "d" * 1025, "events[0].detail"),
    ("events.1.gpu", None, "events[1].gpu"),
    ("events.1.shared", 1, "events[1].shared"),
    ("events.1.neighbour_over_cap", "yes", "events[1].neighbour_over_cap"),
]


@pytest.mark.parametrize(
    ("path", "value", "field"), BAD_FIELDS, ids=[f"{p}={str(v)[:12]}" for p, v, _ in BAD_FIELDS]
)
def test_a_bad_field_is_refused_by_name(path: str, value: object, field: str) -> None:
    text = json.dumps(_set(path, value))
    with pytest.raises(ValueError) as err:
        parse_report(text)
    assert str(err.value).startswith(f"{field}:"), str(err.value)


@pytest.mark.parametrize(
    "text",
    ["", "[]", "null", '{"version": 1, "node": "n", "time": NaN, "interval_s": 1}', "{" * 100_000, '{"a": 1'],
    ids=["empty", "list", "null", "nan", "deep", "truncated"],
)
def test_what_is_not_a_report_object_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"^report"):
        parse_report(text)


def test_counts_and_sizes_are_bounded() -> None:
    pods = [{"uid": f"u{i}", "namespace": "ns", "name": f"p{i}"} for i in range(MAX_PODS + 1)]
    with pytest.raises(ValueError, match=r"^pods: 1025 entries, at most 1024"):
        parse_report(json.dumps({**_doc(), "pods": pods}))
    events = [_doc()["events"][0]] * (MAX_EVENTS + 1)
    with pytest.raises(ValueError, match=r"^events: "):
        parse_report(json.dumps({**_doc(), "events": events}))
    with pytest.raises(ValueError, match=r"^report: .* characters"):
        parse_report(json.dumps({**_doc(), "padding": "x" * MAX_REPORT_BYTES}))


def test_render_refuses_what_parse_would() -> None:
    bad_util = NodeReport(
        node="n", time=1.0, interval_s=1.0, gpus=(GpuReadingK8s(uuid=G0, index=0, util=float("nan")),)
    )
    with pytest.raises(ValueError, match=r"^gpus\[0\]\.util"):
        render_report(bad_util)
    orphan = NodeReport(
        node="n", time=1.0, interval_s=1.0, pods=(PodReading(uid="u", namespace="ns", name="p", gpus=(G0,)),)
    )
    with pytest.raises(ValueError, match=r"^pods\[0\]\.gpus\[0\]"):
        render_report(orphan)
    listed = NodeReport(
        node="n",
        time=1.0,
        interval_s=1.0,
        gpus=(GpuReadingK8s(uuid=G0, index=0),),
        pods=(PodReading(uid="u", namespace="ns", name="p", gpus=[G0]),),  # type: ignore[arg-type]
    )
    with pytest.raises(ValueError, match="wrong type"):
        render_report(listed)


def test_configmap_name_and_staleness() -> None:
    assert configmap_name("gpu-node-1") == "horus-node-gpu-node-1"
    with pytest.raises(ValueError, match=r"^node"):
        configmap_name("n" * 250)
    with pytest.raises(ValueError, match=r"^node"):
        configmap_name("")
    report = NodeReport(node="n", time=1000.0, interval_s=15.0)
    assert not is_stale(report, 1045.0)
    assert is_stale(report, 1045.5)
