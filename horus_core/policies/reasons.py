"""Human-readable reasons for jobs that stay pending after a packing pass."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from horus_core import reasoncodes as rc
from horus_core.packing import codes
from horus_core.packing.problem import PackParams


@dataclass(frozen=True, slots=True)
class WaitFacts:
    """What a reason may mention about the job and the pass."""

    gpus: int
    exclusive: bool
    mem_mib: int
    code: int
    detail: int  # R_GANG: the largest suitable set on one node
    largest_node: int  # GPUs on the biggest ready node
    blocked_ahead: int  # R_LOOKAHEAD: jobs ahead of it that did not fit


def wait_reason(facts: WaitFacts, params: PackParams, refuse_text: str) -> str:
    """One sentence; ``refuse_text`` says what the policy's co-location rule refused."""
    f = facts
    if f.code == codes.R_NO_GPUS:
        return "no ready GPU in the cluster"
    if f.gpus > f.largest_node:
        return f"needs {f.gpus} GPUs on one node, the largest node has {f.largest_node}"
    if f.code == codes.R_LOOKAHEAD:
        return (
            f"queued behind {f.blocked_ahead} jobs that do not fit now "
            f"(look-ahead {params.lookahead}): served when they are"
        )
    if f.code == codes.R_GANG:
        what = "idle GPUs" if f.exclusive else "GPUs"
        return f"needs {f.gpus} {what} on one node, largest suitable set is {f.detail}"
    if f.code == codes.R_FULL:
        if f.exclusive:
            return f"needs {_gpus(f.gpus)} nobody else uses (exclusive); every GPU is in use"
        return f"every GPU already runs {params.max_per_gpu} job(s) or an exclusive job"
    if f.code == codes.R_MEMORY:
        return (
            f"needs {f.mem_mib} MiB of GPU memory plus {params.reserve_mib} MiB headroom; "
            "no GPU with a free slot has that much free"
        )
    return refuse_text


def wait_code(facts: WaitFacts) -> str:
    """The reason code (:mod:`horus_core.reasoncodes`) of the sentence :func:`wait_reason` gives."""
    return _CODES[_category(np.array([facts.code]), np.array([facts.gpus]), facts.largest_node)[0]]


# wait_reason's categories (see _category) -> their codes
_CODES = (
    rc.NO_READY_NODES, rc.GANG_TOO_LARGE, rc.PRIORITY, rc.RESOURCES, rc.RESOURCES, rc.RESOURCES,
    rc.INTERFERENCE,
)  # fmt: skip


def _category(code: NDArray[np.int32], gpus: NDArray[np.int64], largest_node: int) -> NDArray[np.int64]:
    """Which branch of :func:`wait_reason` each job's sentence comes from (0..6): the first
    rule that holds, in this order (written last to first, each over what the later ones wrote)."""
    cat = np.full(len(code), 6, np.int64)
    cat[code == codes.R_MEMORY] = 5
    cat[code == codes.R_FULL] = 4
    cat[code == codes.R_GANG] = 3
    cat[code == codes.R_LOOKAHEAD] = 2
    cat[gpus > largest_node] = 1
    cat[code == codes.R_NO_GPUS] = 0
    return cat


_CODE_NAMES = np.array(_CODES, dtype=object)


def wait_codes(code: NDArray[np.int32], gpus: NDArray[np.int32], largest_node: int) -> list[str]:
    """:func:`wait_code` for many jobs at once (arrays aligned per job)."""
    if not len(code):
        return []
    out: list[str] = _CODE_NAMES[_category(code, gpus.astype(np.int64), largest_node)].tolist()
    return out


def _gpus(n: int) -> str:
    return "a GPU" if n == 1 else f"{n} GPUs on one node"


def interference_text(min_speed: float = 0.0, min_gain: float = -math.inf) -> str:
    """What a refusal by the pair table, a speed floor or a throughput-gain rule means."""
    rules = []
    if min_gain > -math.inf:
        rules.append(f"raise the GPU's summed normalised speed by less than {min_gain:g}")
    if min_speed > 0.0:
        rules.append(f"slow a co-runner or this job below {min_speed:g}x")
    if rules:
        return "every GPU with enough memory would " + " or ".join(rules) + " if this job joined it"
    return "every GPU with enough memory runs a job it does not fit next to (out-of-memory pair)"


_CAT = 1 << 57  # wait_texts: category * _CAT + the facts that category's sentence mentions


def wait_texts(
    code: NDArray[np.int32],
    gpus: NDArray[np.int32],
    exclusive: NDArray[np.bool_],
    mem_mib: NDArray[np.int64],
    detail: NDArray[np.int32],
    blocked_ahead: NDArray[np.int64],
    largest_node: int,
    params: PackParams,
    refuse_text: str,
) -> list[str]:
    """:func:`wait_reason` for many jobs at once (arrays aligned per job): jobs whose sentence
    would mention the same facts share one string, computed once."""
    g, ex, det = gpus.astype(np.int64), exclusive.astype(np.int64), detail.astype(np.int64)
    cat = _category(code, g, largest_node)
    # the gang key's base: above its GPUs (<= largest_node there) and its detail (a set size)
    big = np.int64(max(largest_node, int(det[cat == 3].max(initial=0))) + 1)
    value = np.select(
        [cat == 1, cat == 2, cat == 3, cat == 4, cat == 5],
        [g, blocked_ahead, (ex * big + g) * big + det, ex * (big + g), mem_mib],
        0,
    )
    _, first, inverse = np.unique(cat * _CAT + value, return_index=True, return_inverse=True)
    texts = []
    for j in first.tolist():
        facts = WaitFacts(
            int(gpus[j]), bool(exclusive[j]), int(mem_mib[j]), int(code[j]), int(detail[j]),
            largest_node, int(blocked_ahead[j]),
        )  # fmt: skip
        texts.append(wait_reason(facts, params, refuse_text))
    out: list[str] = np.array(texts, dtype=object)[inverse.reshape(-1)].tolist()
    return out
