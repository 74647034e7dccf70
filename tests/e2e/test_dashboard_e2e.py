"""The cluster seen from outside: a live master and a simulated worker as real processes, job
files through ``hctl apply``, the worker's and the master's ``/metrics`` scraped and parsed with
prometheus-client, and every dashboard page loaded in headless Chromium (DOM checked, screenshots
saved as dashboard-*.png in the test's temporary directory, or where ``HORUS_SCREENSHOTS`` says:
``HORUS_SCREENSHOTS=docs/img`` refreshes the ones the README and docs show).

Without a chromium binary the browser test is skipped, unless HORUS_REQUIRE_BROWSER=1 (CI after
installing it), where a missing browser fails.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from horus_core import jobfile
from horus_core.cli.submit import local_context
from horus_core.floor import DEFAULT_MIN_SPEED
from master.store import Store
from master.store.learned import PairMeasurement, RecordRatesOp
from tests.e2e.cluster import LocalCluster, free_port, workload_cmd

TYPES = ("ResNet-18 (batch size 32)", "LM (batch size 5)", "Transformer (batch size 64)")
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def browser() -> str | None:
    found = next((p for p in map(shutil.which, BROWSERS) if p), None)
    if found is None and os.environ.get("HORUS_REQUIRE_BROWSER") == "1":
        pytest.fail("HORUS_REQUIRE_BROWSER=1 but no chromium binary is installed")
    return found


def chromium(binary: str, *args: str) -> str:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"]
    done = subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


class Dom(HTMLParser):
    """Tables by id (rows of cell texts), texts by element id, and every link."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.by_id: dict[str, str] = {}
        self.links: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._open: list[tuple[str, str]] = []  # (tag, id) of elements with an id
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(str(a["href"]))
        if tag == "table" and a.get("id"):
            self._table = str(a["id"])
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []
        if a.get("id"):
            self._open.append((tag, str(a["id"])))
            self.by_id.setdefault(str(a["id"]), "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        if tag == "table":
            self._table = None
        if self._open and self._open[-1][0] == tag:
            self._open.pop()

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        for _, ident in self._open:
            self.by_id[ident] += data


def seed_pairs(db: pathlib.Path) -> None:
    """Pair speeds as the learner stores them, written beside the running master (WAL allows it)."""

    async def go() -> None:
        store = await Store.open(db)
        try:
            for a, b, speed in (
                (TYPES[0], TYPES[1], 0.82),
                (TYPES[1], TYPES[0], 0.64),
                (TYPES[2], TYPES[0], 0.4),
            ):
                await store.write(
                    RecordRatesOp(a, "v100", 1, None, (PairMeasurement(b, 100 * speed, 100.0),), 0.0)
                )
        finally:
            await store.close()

    asyncio.run(go())


def job_file(
    tmp: pathlib.Path, name: str, job_type: str, gpus: int = 1, exclusive: bool = False
) -> pathlib.Path:
    doc = {
        "name": name,
        "resources": {"accelerators": f"V100:{gpus}"},
        "job_type": job_type,
        "exclusive": exclusive,
        "run": workload_cmd(180.0, steps=1800, extra=("--job-type", job_type)),
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def poll(what: str, fn: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.3)


def scrape(port: int) -> dict[str, list[Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    out: dict[str, list[Any]] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


@pytest.fixture
def live(tmp_path: pathlib.Path) -> Iterator[tuple[LocalCluster, dict[str, int]]]:
    ports = {"http": free_port(), "metrics": free_port(), "worker": free_port()}
    c = LocalCluster(tmp_path, policy="horus")
    try:
        c.start_master(
            "--http-listen", f"127.0.0.1:{ports['http']}", "--metrics-listen", f"127.0.0.1:{ports['metrics']}"
        )
        c.start_worker("w1", "4xV100", "--metrics-listen", f"127.0.0.1:{ports['worker']}")
        c.wait_nodes(1)
        yield c, ports
    finally:
        c.stop()


def placed(c: LocalCluster, n: int) -> list[dict[str, Any]] | None:
    """``hctl gpus`` once ``n`` jobs run and every GPU with jobs has the worker's per-job numbers."""
    gpus: list[dict[str, Any]] = c.hctl_json("gpus")
    on = [j for g in gpus for j in g["job_ids"]]
    ok = len(set(on)) >= n and all(len(g["jobs"]) == len(g["job_ids"]) for g in gpus)
    return gpus if ok else None


def test_job_files_metrics_and_dashboard(
    live: tuple[LocalCluster, dict[str, int]], tmp_path: pathlib.Path
) -> None:
    c, ports = live
    names = ["alpha", "beta", "gamma", "delta", "eps"]
    files = {n: job_file(tmp_path, n, TYPES[i % 2]) for i, n in enumerate(names)}
    ids = {n: c.hctl("apply", "-f", str(f)).stdout.strip() for n, f in files.items()}

    # get -o yaml prints the job file back: applying it again would make an equal spec (the file's,
    # with the directory and PATH hctl apply sends for a job without an image, and the cluster's
    # default speed floor, which the master wrote into it at submission).
    printed = c.hctl("get", "job", ids["alpha"], "-o", "yaml").stdout
    submitted = local_context(jobfile.load(files["alpha"].read_text()).spec)
    assert jobfile.load(printed).spec == dataclasses.replace(submitted, min_speed=DEFAULT_MIN_SPEED)
    bad = c.hctl("apply", "-f", str(tmp_path / "nope.yaml"), check=False)
    assert bad.returncode == 2 and "cannot read" in bad.stderr
    (tmp_path / "typo.yaml").write_text("run: x\nresources:\n  acelerators: 1\n")
    bad = c.hctl("apply", "-f", str(tmp_path / "typo.yaml"), check=False)
    assert bad.returncode == 2 and "resources.acelerators" in bad.stderr and "line 3" in bad.stderr

    try:
        gpus = poll("placements with per-job readings", lambda: placed(c, 4), 180)  # (cold Numba: slow)
    except AssertionError:
        raise AssertionError(c.hctl("gpus").stdout + c.hctl("jobs").stdout + c.logs()) from None
    big = c.hctl(
        "apply", "-f", str(job_file(tmp_path, "big", TYPES[2], gpus=4, exclusive=True))
    ).stdout.strip()
    poll(
        "the exclusive job's wait reason",
        lambda: "scheduling pass" not in c.hctl_json("job", big)["reason"],
        30,
    )

    seed_pairs(tmp_path / "horus.db")  # what the master would have learned earlier (same SQLite file)
    check_worker_metrics(c, ports["worker"])
    check_master_metrics(c, ports["metrics"], big)
    binary = browser()
    if binary is None:
        pytest.skip("no chromium binary (apt-get install chromium); HORUS_REQUIRE_BROWSER=1 makes this fail")
    shots = pathlib.Path(os.environ.get("HORUS_SCREENSHOTS") or tmp_path)  # (docs/img: the docs' own)
    check_pages(c, binary, f"http://127.0.0.1:{ports['http']}", gpus, big, shots)


def test_missing_browser_fails_only_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("HORUS_REQUIRE_BROWSER", raising=False)
    assert browser() is None
    monkeypatch.setenv("HORUS_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="no chromium"):
        browser()


def test_bad_metrics_listen_stops_the_daemons(tmp_path: pathlib.Path) -> None:
    bin_dir = pathlib.Path(sys.executable).parent
    worker = [str(bin_dir / "horus-worker"), "--master", "127.0.0.1:9", "--fake-gpus", "1"]
    worker += ["--state-dir", str(tmp_path / "w"), "--metrics-listen", "no-port"]
    done = subprocess.run(worker, capture_output=True, text=True, timeout=60)
    assert (
        done.returncode == 2 and "--metrics-listen: no port in 'no-port' (expected HOST:PORT" in done.stderr
    )
    master = [str(bin_dir / "horus-master"), "--listen", "127.0.0.1:0", "--db", str(tmp_path / "m.db")]
    done = subprocess.run(
        [*master, "--http-listen", "127.0.0.1:x"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "--http-listen: port 'x' of '127.0.0.1:x' is not a number" in done.stderr


def check_worker_metrics(c: LocalCluster, port: int) -> None:
    got = scrape(port)
    api = {g["uuid"]: g for g in c.hctl_json("gpus")}
    used = {s.labels["UUID"]: s.value for s in got["DCGM_FI_DEV_FB_USED"]}
    assert used == {u: g["mem_used_mib"] for u, g in api.items()}
    util = {s.labels["UUID"]: s.value for s in got["DCGM_FI_DEV_GPU_UTIL"]}
    assert {u for u, v in util.items() if v > 0} == {u for u, g in api.items() if g["job_ids"]}
    assert {s.labels["Hostname"] for s in got["DCGM_FI_DEV_GPU_TEMP"]} == {"w1"}
    per_job = {(s.labels["job"], s.labels["UUID"]) for s in got["horus_job_gpu_utilization"]}
    assert per_job == {(j, u) for u, g in api.items() for j in g["job_ids"]}
    mem = {(s.labels["job"], s.labels["UUID"]): s.value for s in got["horus_job_gpu_memory_used_bytes"]}
    for u, g in api.items():
        for j in g["jobs"]:
            assert mem[(j["job_id"], u)] == j["mem_used_mib"] * 2**20


def check_master_metrics(c: LocalCluster, port: int, big: str) -> None:
    got = scrape(port)
    api = {g["uuid"]: g for g in c.hctl_json("gpus")}
    jobs_on = {(s.labels["job"], s.labels["UUID"]) for s in got["horus_job_gpu_utilization"]}
    assert jobs_on == {(j, u) for u, g in api.items() for j in g["job_ids"]}
    pending = c.hctl_json("queue")
    assert [j["id"] for j in pending] == [big]
    assert sum(s.value for s in got["horus_pending_jobs"]) == len(pending)
    assert got["horus_placements_total"][0].value >= 5
    assert {s.labels["state"]: s.value for s in got["horus_nodes"]}["READY"] == 1


def check_pages(
    c: LocalCluster, binary: str, base: str, gpus: list[dict[str, Any]], big: str, img: pathlib.Path
) -> None:
    def load(path: str, shot: str) -> Dom:
        chromium(
            binary, "--window-size=1280,1100", f"--screenshot={img / f'dashboard-{shot}.png'}", base + path
        )
        return Dom(chromium(binary, "--dump-dom", base + path))

    cluster = load("/", "cluster")
    rows = cluster.tables["gpus"][1:]
    api = c.hctl_json("gpus")
    assert len(rows) == len(api) == 4
    for row in rows:
        g = next(x for x in api if str(x["index"]) == row[1])
        assert all(j in row[5] for j in g["job_ids"]), (row, g)
    assert "1 pending" in cluster.by_id["summary"]

    queue = load("/queue", "queue")
    (first,) = queue.tables["queue"][1:]
    record = c.hctl_json("job", big)
    assert first[:2] == ["default", "1"] and big in first[2]
    assert first[7] == record["reason_code"] and " ".join(record["reason"].split()) == first[8]

    shared = max(api, key=lambda g: len(g["job_ids"]))
    job_id = shared["job_ids"][0]
    poll(
        "two utilisation samples",
        lambda: "<polyline" in chromium(binary, "--dump-dom", f"{base}/jobs/{job_id}"),
    )
    job = load(f"/jobs/{job_id}", "job")
    facts = {r[0]: r[1] for r in job.tables["job"][1:]}
    assert facts["State"] == "RUNNING" and facts["Predicted speed"].endswith("x")
    others = set(shared["job_ids"]) - {job_id}
    corunners = " ".join(r[0] for r in job.tables.get("corunners", [])[1:])
    assert all(o in corunners for o in others)
    assert "workload" in job.by_id["log"]

    pairs = load("/pairs", "pairs")
    listed = {(r[0], r[1]): r[3] for r in pairs.tables["pairs"][1:]}
    assert listed[(TYPES[0], TYPES[1])] == "0.82x" and listed[(TYPES[2], TYPES[0])] == "0.40x"
