"""What a packing pass needs to know about each live job, cached across passes by job id.

A job's packing facts (signature, GPUs, exclusive, priority, known work, submission time) are
computed once and kept in flat arrays indexed by a *slot*, with the ``version`` its spec was last
confirmed at: a job seen again at that version is not looked at again; at a new version its spec
is compared (different: the slot is refilled). Signatures are interned to integer codes. A job
entering the table (a new slot, or a new spec) registers the hints of an unknown job type with
the model (``model.enter``; the last to enter with other hints wins): nothing else in a pass
changes the model, and reading a profile changes nothing.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from functools import cached_property
from itertools import repeat

import numba
import numpy as np
from numpy.typing import NDArray

from horus_core.interference import InterferenceModel
from horus_core.model import ClusterSnapshot, Job, JobChanges, JobSpec, ProfileHints
from horus_core.packing._assemble_kernel import BIAS, SHIFT
from horus_core.packing.build import PairFilter, class_speeds
from horus_core.packing.cluster import Kind
from horus_core.packing.numbers import NumberIndex
from horus_core.packing.placed import PlacedGpus

I32 = NDArray[np.int32]
I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
B = NDArray[np.bool_]
Ix = NDArray[np.intp]

_ID, _VERSION = operator.attrgetter("id"), operator.attrgetter("version")
_INT31 = 1 << 31
_INT64_MAX = (1 << 63) - 1
_NO_HINTS = ProfileHints()
_SPEEDS_KEPT = 1024  # class speed matrices kept (a simulator round mostly asks for the same again)
_BEYOND = np.iinfo(np.int32).max  # ``reach`` of a job shaped over nodes: more than any node has


class Interner:
    """Strings (signatures, job types) to dense integer codes, for good."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self.codes: dict[str, int] = {}

    def code(self, name: str) -> int:
        c = self.codes.get(name)
        if c is None:
            c = self.codes[name] = len(self.names)
            self.names.append(name)
        return c

    def codes_of(self, names: list[str]) -> list[int]:
        for name in dict.fromkeys(names):
            self.code(name)
        return list(map(self.codes.__getitem__, names))


@dataclass(eq=False)
class Profiles:
    """``model.profile_of`` per signature code, for one model version."""

    util: F64
    peak: F64
    mem: I64

    @staticmethod
    def of(model: InterferenceModel, names: Sequence[str]) -> Profiles:
        profs = [model.profile_of(s) for s in names]
        return Profiles(
            np.array([p.util_avg for p in profs], np.float64),
            np.array([p.util_peak for p in profs], np.float64),
            np.array([p.mem_mib for p in profs], np.int64),
        )


@dataclass(eq=False)
class Live:
    """The live jobs of one snapshot (pending in snapshot order, active), or of a :meth:`view`."""

    table: JobTable
    pending: list[Job]
    p_slot: Ix
    active: list[Job]
    a_slot: Ix  # slot of each active job
    a_versions: I64  # each active job's version, as the scan read them (a view: the scan's)
    profiles: Profiles = field(init=False)
    duplicates: bool = False  # one job id twice with different specs
    scan: Live | None = None  # a view's: the scan it views (its active jobs' GPUs are kept there)
    placed: tuple[int, ...] = ()  # a view's: positions in ``active`` of jobs placed in the pass
    prio: I64 | None = None  # a view's: the pending jobs' own priorities (ranked by their tier)

    def view(
        self, pending: Sequence[Job], active: Sequence[Job], placed: AbstractSet[str], ranked: bool
    ) -> Live:
        """``pending`` and ``active`` jobs of this scan (``placed``: pending ones shown active;
        ``ranked``: the pending jobs' priorities are their own)."""
        slot = self.table.slot_of
        out = Live(
            self.table, list(pending), np.fromiter(map(slot, map(_ID, pending)), np.intp, len(pending)),
            list(active), np.fromiter(map(slot, map(_ID, active)), np.intp, len(active)), self.a_versions,
            scan=self, placed=tuple(k for k, j in enumerate(active) if j.id in placed) if placed else (),
            prio=_int64([j.spec.priority for j in pending]) if ranked else None,
        )  # fmt: skip
        out.profiles = self.profiles
        return out

    @cached_property
    def p_code(self) -> I32:
        return self.table.code[self.p_slot]

    @cached_property
    def p_gpus(self) -> I32:
        return self.table.gpus[self.p_slot]

    @cached_property
    def p_prio(self) -> I64:
        return self.table.prio[self.p_slot] if self.prio is None else self.prio

    @cached_property
    def p_sub(self) -> F64:
        return self.table.sub[self.p_slot]

    @cached_property
    def p_ids(self) -> list[str]:
        return list(map(_ID, self.pending))

    def p_util(self) -> F64:
        out: F64 = self.profiles.util[self.p_code]
        return out


class JobTable:
    """Slots of per-job facts (see the module doc); grows, and is rebuilt when mostly stale."""

    def __init__(self) -> None:
        self.sigs = Interner()  # signatures and job types share one code space
        self._reset(1024)
        self._model: InterferenceModel | None = None
        self._version = -1
        self._profiles: Profiles | None = None
        self.placed = PlacedGpus()  # the active jobs' slots and kernel GPU indices (assemble)

    def _reset(self, cap: int) -> None:
        self._slot: dict[str, int] = {}
        self.numbers = NumberIndex()  # a source's job numbers -> slots
        self.specs: list[JobSpec] = []
        self.seen: I64 = np.full(cap, -1, np.int64)  # per slot: the version its spec was last confirmed at
        self.code: I32 = np.empty(cap, np.int32)  # signature
        self.tcode: I32 = np.empty(cap, np.int32)  # spec.job_type (may be "")
        self.gpus: I32 = np.empty(cap, np.int32)
        self.excl: B = np.empty(cap, np.bool_)
        self.prio: I64 = np.empty(cap, np.int64)
        self.steps: I64 = np.empty(cap, np.int64)
        self.floor: F64 = np.empty(cap, np.float64)  # spec.min_speed
        self.sub: F64 = np.empty(cap, np.float64)  # the job's submitted_at (confirmed with the spec)
        self.reach: I32 = np.empty(cap, np.int32)  # GPUs it needs on one node (shaped over nodes: beyond any)
        self._speeds: dict[tuple[object, ...], F64] = {}

    def scan(
        self,
        jobs: Sequence[Job],
        model: InterferenceModel,
        split: tuple[Sequence[Job], Sequence[Job]] | None = None,
        changes: JobChanges | None = None,
    ) -> Live:
        """The live jobs of a snapshot (``split``: its pending and active jobs where the caller
        has them; ``changes``: its feed, whose job numbers look slots up in bulk)."""
        if model is not self._model or len(self._slot) > 2 * len(jobs) + 4096:
            self.sigs, self._model, self._version = Interner(), model, -1  # drop what is gone
            self._reset(len(self.code))
            self.placed = PlacedGpus()
        if split is None:
            view = ClusterSnapshot((), tuple(jobs))
            split = (view.pending(), view.active())
        pending, active = split
        seq = [*pending, *active]
        got, missed, versions, stale = self._lookup(seq, changes)
        overwrote = False
        if missed:
            _check_gpus(missed)
            claimed, overwrote = self._claim(missed)
            self._fill(claimed, missed, model)
            new = got < 0
            got[new] = claimed[-got[new] - 1]
        if stale is not None and changes is not None and changes.numbers is not None:
            self.numbers.put(changes.numbers[stale], got[stale])
        p_slot, a_slot = got[: len(pending)], got[len(pending) :]
        live = Live(self, list(pending), p_slot, list(active), a_slot, versions[len(pending) :])
        if overwrote:  # a spec changed under an id: is one id there twice with two specs?
            live.duplicates = len(np.union1d(p_slot, a_slot)) < len(p_slot) + len(a_slot)
            self.placed = PlacedGpus()  # records name slots whose meaning changed
        live.profiles = self.profiles(model)
        return live

    def _lookup(
        self, jobs: list[Job], changes: JobChanges | None = None
    ) -> tuple[Ix, list[Job], I64, Ix | None]:
        """Each job's slot, the jobs to claim one for (their slot: -k for the k-th), each job's
        version, and, where looked up by number, the positions of the jobs not confirmed at
        theirs (None: looked up by id). Only those are looked at one by one."""
        n = len(jobs)
        got: Ix | None = None
        version: I64 | None = None
        numbers = changes.numbers if changes is not None and changes.versions is not None else None
        if changes is not None and numbers is not None and len(numbers) == n:
            found = self.numbers.find(changes.source, numbers)
            got, version = (None if found is None else found[0]), changes.versions
        by_id = got is None
        if got is None or version is None:
            got = np.fromiter(map(self._slot.get, map(_ID, jobs), repeat(-1)), np.intp, n)
            version = np.fromiter(map(_VERSION, jobs), np.int64, n)
        stale = _stale(got, self.seen, version)
        missed: list[Job] = []  # new ids, or a different spec under a known id
        for i in stale.tolist():
            job, s = jobs[i], int(got[i])
            if s < 0 and not by_id:  # (a number not seen yet: the id may have a slot)
                s = self._slot.get(job.id, -1)
                got[i] = s
            spec = self.specs[s] if s >= 0 else None
            same = spec is not None and (spec is job.spec or spec == job.spec)
            if same and self.sub[s] == job.submitted_at:
                self.seen[s] = job.version
            else:
                missed.append(job)
                got[i] = -len(missed)  # resolved by the caller
        return got, missed, version, None if by_id else stale

    def slot_of(self, job_id: str) -> int:
        """The slot of a job of the last scan."""
        return self._slot[job_id]

    def _claim(self, missed: list[Job]) -> tuple[Ix, bool]:
        """Slots for the missed jobs, and whether an old slot got a new spec."""
        ids, first = [j.id for j in missed], len(self.specs)
        # All new (a first pass): in bulk, ~10 % of a first decide over 12,500 jobs.
        if not any(map(self._slot.__contains__, ids)) and len(set(ids)) == len(ids):
            self._slot.update(zip(ids, range(first, first + len(ids)), strict=True))
            self.specs.extend(j.spec for j in missed)
            claimed, overwrote = np.arange(first, first + len(ids), dtype=np.intp), False
        else:
            out, overwrote = [], False
            for job in missed:
                s = self._slot.get(job.id)
                if s is None:
                    s = self._slot[job.id] = len(self.specs)
                    self.specs.append(job.spec)
                else:
                    self.specs[s] = job.spec
                    overwrote = True
                out.append(s)
            claimed = np.array(out, np.intp)
        while len(self.specs) > len(self.code):
            self._grow()
        self.seen[claimed] = [j.version for j in missed]
        return claimed, overwrote

    def _grow(self) -> None:
        for name in (
            "code",
            "tcode",
            "gpus",
            "excl",
            "prio",
            "steps",
            "floor",
            "sub",
            "reach",
            "seen",
        ):
            old = getattr(self, name)
            new = np.empty(2 * len(old), old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def _fill(self, at: Ix, missed: list[Job], model: InterferenceModel) -> None:
        specs = [j.spec for j in missed]
        types = [sp.job_type for sp in specs]
        codes = self.sigs.codes_of([model.demand(sp) for sp in specs])  # (a declared cap: its memory)
        self.code[at] = codes
        self.tcode[at] = self.sigs.codes_of(types)
        for sp in specs:  # a job enters: the model registers its hints (of an unknown job type)
            if sp.job_type and sp.hints != _NO_HINTS:
                model.enter(sp)
        self.gpus[at] = [sp.gpus for sp in specs]  # within int32: _check_gpus
        self.prio[at] = _int64([sp.priority for sp in specs])
        self.steps[at] = _int64([sp.total_steps for sp in specs])
        self.excl[at] = [sp.exclusive for sp in specs]
        self.floor[at] = [sp.min_speed for sp in specs]
        self.sub[at] = [j.submitted_at for j in missed]
        self.reach[at] = [
            _BEYOND if sp.nodes > 1 or 0 < sp.gpus_per_node < sp.gpus else sp.gpus for sp in specs
        ]  # (a gang shape asking for 2+ nodes: wide on any node)

    def class_keys(self, ordered: I64, split_by_gpus: bool) -> tuple[tuple[str, int], ...]:
        """The (signature, GPUs or 0) that :func:`~horus_core.packing.assemble.assemble`'s keys stand for."""
        names = self.sigs.names
        return tuple((names[k // SHIFT], k % SHIFT - BIAS if split_by_gpus else 0) for k in ordered.tolist())

    def speeds(
        self,
        model: InterferenceModel,
        ordered: I64,
        kinds: tuple[Kind, ...],
        split_by_gpus: bool,
        pair_filter: PairFilter | None,
    ) -> F64:
        """:func:`~horus_core.packing.build.class_speeds` of the classes ``ordered``, kept per
        (keys, GPU kinds, model version) without a pair filter (~7 % of ``bench/sim_scale.py``)."""
        if pair_filter is not None:
            keys = self.class_keys(ordered, split_by_gpus)
            return class_speeds(model, keys, kinds, split_by_gpus, pair_filter)
        key = (ordered.tobytes(), kinds, split_by_gpus, model.version)
        got = self._speeds.get(key)
        if got is None:
            if len(self._speeds) >= _SPEEDS_KEPT:
                self._speeds.clear()
            keys = self.class_keys(ordered, split_by_gpus)
            got = self._speeds[key] = class_speeds(model, keys, kinds, split_by_gpus, None)
            got.flags.writeable = False
        return got

    def profiles(self, model: InterferenceModel) -> Profiles:
        names = self.sigs.names
        if self._profiles is None or model.version != self._version or len(self._profiles.util) < len(names):
            self._profiles, self._version = Profiles.of(model, names), model.version
        return self._profiles


def _stale(got: Ix, seen: I64, version: I64) -> Ix:
    """The positions of the jobs with no slot or one confirmed at another version (compiled:
    numpy's four steps are ~4 % of a simulator's decide)."""
    out = np.empty(len(got), np.intp)
    return out[: _stale_into(got, seen, version, out)]


@numba.njit(cache=True, nogil=True)
def _stale_into(got: Ix, seen: I64, version: I64, out: Ix) -> int:
    n = 0
    for k in range(got.shape[0]):
        s = got[k]
        if s < 0 or seen[s] != version[k]:
            out[n] = k
            n += 1
    return n


def _check_gpus(jobs: list[Job]) -> None:
    """Refuse a job whose GPU count is beyond the kernel's int32 arrays, before the table changes."""
    for job in jobs:
        if not -_INT31 <= job.spec.gpus < _INT31:
            raise ValueError(f"job {job.id!r} asks for {job.spec.gpus} GPUs: beyond what the packer holds")


def _int64(values: list[int]) -> I64:
    """``values`` as int64, saturated at +-(2**63 - 1) (so negating one cannot overflow)."""
    if not values or (min(values) >= -_INT64_MAX and max(values) <= _INT64_MAX):  # the usual, in one
        return np.array(values, np.int64)  # step (per value: ~7 % of a first decide over 12,500 jobs)
    return np.array([min(max(v, -_INT64_MAX), _INT64_MAX) for v in values], np.int64)
