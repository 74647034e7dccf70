"""Trace parsers (on the real shipped traces), cluster specs and the synthetic generator."""

from __future__ import annotations

from pathlib import Path

import pytest

from horus_core.errors import InvalidArgument
from horus_core.sim import build_cluster, generate_synthetic, load_trace, parse_cluster_spec, parse_synthetic
from horus_core.sim.synthetic import GAVEL_JOB_TYPES, philly_samples
from horus_core.sim.traces import format_csv, parse_trace

REPO = Path(__file__).resolve().parents[2]
PACKAGED = REPO / "horus_core" / "data" / "traces"
SHARED = REPO.parent / "shared" / "data" / "gavel" / "traces"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data not beside the checkout")


def test_packaged_cap_trace_parses_fully() -> None:
    jobs = load_trace(PACKAGED / "msr_seed0_2869ce_cap.trace")
    assert len(jobs) == 533
    first = jobs[0]
    assert (first.job_type, first.total_steps, first.gpus, first.arrival_s) == (
        "Transformer (batch size 128)",
        5352613,
        4,
        0.0,
    )
    assert first.slo_s is None and first.priority_weight == 1.0
    assert {j.gpus for j in jobs} <= {1, 2, 4, 8}
    assert all(j.job_type in GAVEL_JOB_TYPES for j in jobs)


def test_packaged_physical_trace_parses() -> None:
    jobs = load_trace(PACKAGED / "physical_small_test.trace")
    assert len(jobs) == 20
    assert jobs[1].job_type == "Recommendation (batch size 8192)" and jobs[1].total_steps == 36


@needs_shared
def test_shared_msr_seven_column_trace_parses() -> None:
    jobs = load_trace(SHARED / "msr_seed0_2869ce.trace")
    assert len(jobs) == 533
    # The same jobs as the _cap trace, before the GPU counts were capped.
    capped = load_trace(SHARED / "msr_seed0_2869ce_cap.trace")
    assert [j.total_steps for j in jobs] == [j.total_steps for j in capped]
    assert max(j.gpus for j in jobs) > 8
    assert load_trace(SHARED / "msr_seed0_e13805_400_cap.trace")[-1].arrival_s > 0


def test_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    good = (PACKAGED / "physical_small_test.trace").read_text().splitlines()
    bad = tmp_path / "bad.trace"
    bad.write_text("\n".join([good[0], good[1], good[2].replace("\t346\t", "\tmany\t", 1), *good[3:]]))
    bad.write_text("\n".join([*good[:2], good[2].rsplit("\t", 1)[0] + "\tsoon", *good[3:]]))
    with pytest.raises(InvalidArgument, match=r"bad\.trace:3: arrival_time: expected a number, got 'soon'"):
        load_trace(bad)
    short = tmp_path / "short.trace"
    short.write_text(good[0] + "\n" + "\t".join(good[1].split("\t")[:5]) + "\n")
    with pytest.raises(InvalidArgument, match=r"short\.trace:2: expected 10 tab-separated columns, got 5"):
        load_trace(short)


def test_csv_round_trip_and_errors(tmp_path: Path) -> None:
    text = (
        "job_type,gpus,total_steps,arrival_s,priority,duration_s\nA3C,1,100,0,0,\nmy-model,2,50,10.5,3,120\n"
    )
    jobs = parse_trace(text, "csv", "t.csv")
    assert jobs[1].job_type == "my-model" and jobs[1].priority == 3 and jobs[1].duration_s == 120.0
    assert jobs[0].duration_s is None
    assert parse_trace(format_csv(jobs), "csv") == jobs
    minimal = tmp_path / "min.csv"
    minimal.write_text("# comment\njob_type,gpus,total_steps,arrival_s\nA3C,1,10,0\n")
    assert load_trace(minimal)[0].gpus == 1
    with pytest.raises(InvalidArgument, match=r"t\.csv:1: bad header"):
        parse_trace("job,gpus\nA3C,1\n", "csv", "t.csv")
    with pytest.raises(InvalidArgument, match=r"t\.csv:3: GPU count must be"):
        parse_trace("job_type,gpus,total_steps,arrival_s\nA3C,1,1,0\nA3C,0,1,0\n", "csv", "t.csv")
    with pytest.raises(InvalidArgument, match=r"t\.csv:2: expected 4 comma-separated values, got 3"):
        parse_trace("job_type,gpus,total_steps,arrival_s\nA3C,1,1\n", "csv", "t.csv")


def test_unknown_format_and_missing_file(tmp_path: Path) -> None:
    odd = tmp_path / "odd.trace"
    odd.write_text("a\tb\tc\n")
    with pytest.raises(InvalidArgument, match="cannot tell the format"):
        load_trace(odd)
    with pytest.raises(InvalidArgument, match="cannot read"):
        load_trace(tmp_path / "missing.trace")


def test_cluster_specs() -> None:
    assert parse_cluster_spec("k80:32, p100:32,V100:32") == [("k80", 32), ("p100", 32), ("v100", 32)]
    nodes = build_cluster("v100:20", gpus_per_node=8)
    assert [len(n.gpus) for n in nodes] == [8, 8, 4]
    assert nodes[0].name == "v100-000" and nodes[0].gpus[3].uuid == "GPU-v100-000-3"
    assert nodes[0].gpus[0].memory_mib == 16160  # a 16 GB V100 as NVML reports it
    assert build_cluster("k80:8")[0].gpus[0].memory_mib == 11441
    for bad, message in [
        ("v100", "expected TYPE:COUNT"),
        ("h900:8", "unknown GPU type 'h900'"),
        ("v100:0", "must be 1.."),
        ("", "empty cluster spec"),
        ("v100:8,v100:8", "given twice"),
    ]:
        with pytest.raises(InvalidArgument, match=message):
            build_cluster(bad)


def _solo(job_type: str, gpus: int, gpu_type: str) -> float | None:
    if job_type in ("A3C", "CycleGAN") or job_type.startswith("Recommendation"):
        return 2.0 if gpus == 1 else None
    return 10.0 * gpus


def test_synthetic_is_deterministic_and_follows_philly() -> None:
    spec = parse_synthetic("synthetic:jobs=3000,rate=20,seed=7")
    assert (spec.jobs, spec.rate, spec.seed, spec.mix) == (3000, 20.0, 7, "uniform")
    a, b = generate_synthetic(spec, _solo), generate_synthetic(spec, _solo)
    assert a == b
    assert a != generate_synthetic(parse_synthetic("synthetic:jobs=3000,rate=20,seed=8"), _solo)
    assert a[0].arrival_s == 0.0
    mean_gap_h = a[-1].arrival_s / (len(a) - 1) / 3600
    assert mean_gap_h == pytest.approx(1 / 20, rel=0.1)
    assert {j.gpus for j in a} <= {1, 2, 4, 8}
    assert all(_solo(j.job_type, j.gpus, "v100") for j in a)  # only measured (type, GPUs) pairs
    durations = sorted({d for d, _ in philly_samples()})
    for job in a[:30]:
        rate = _solo(job.job_type, job.gpus, "v100") or 0.0
        assert min(abs(job.total_steps / rate - d) for d in durations) <= 0.5 / rate
    assert len({j.job_type for j in a}) == len(GAVEL_JOB_TYPES)


def test_synthetic_family_mix_and_bad_specs() -> None:
    jobs = generate_synthetic(parse_synthetic("synthetic:jobs=4000,rate=5,mix=family"), _solo)
    one_gpu = [j for j in jobs if j.gpus == 1]
    a3c = sum(j.job_type == "A3C" for j in one_gpu) / len(one_gpu)
    assert a3c == pytest.approx(1 / 7, abs=0.03)  # 7 families, A3C alone in its family
    for bad in ("synthetic:jobs=0", "synthetic:rate=x", "synthetic:color=red", "synthetic:mix=odd"):
        with pytest.raises(InvalidArgument):
            parse_synthetic(bad)
