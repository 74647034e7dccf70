"""GPU counts as users write them: ``N`` or an elastic range ``MIN:MAX`` (``MIN-MAX`` in job files).

Pure text <-> ``(gpus, gpus_min, gpus_max)`` as :class:`horus_core.model.JobSpec` holds them: a
range asks for ``MIN`` GPUs first (the policies may give it any count in the range later).
"""

from __future__ import annotations

import re

from horus_core.errors import InvalidArgument
from horus_core.model import Job, JobSpec

_COUNT = re.compile(r"^\s*(?P<lo>[0-9]{1,6})\s*(?:(?P<sep>[:-])\s*(?P<hi>[0-9]{1,6})\s*)?$")


def parse_gpus(text: str, field: str = "gpus") -> tuple[int, int, int]:
    """``"4"`` -> ``(4, 0, 0)``; ``"2:8"`` or ``"2-8"`` -> ``(2, 2, 8)`` (gpus, gpus_min, gpus_max).
    Bounds are checked by :func:`horus_core.validation.validate_spec`; here only the shape."""
    match = _COUNT.match(text)
    if match is None:
        raise InvalidArgument(field, f"expected a GPU count N or a range MIN:MAX like 2:8, got {text!r}")
    lo = int(match["lo"])
    if match["hi"] is None:
        return lo, 0, 0
    hi = int(match["hi"])
    if hi < lo:
        raise InvalidArgument(field, f"range {text.strip()!r} ends below its start")
    return lo, lo, hi


def format_gpus(spec: JobSpec, sep: str = ":") -> str:
    """The count as :func:`parse_gpus` reads it back: ``"4"`` or ``"2:8"``."""
    if spec.elastic:
        return f"{spec.gpus_min}{sep}{spec.gpus_max}"
    return str(spec.gpus)


def gpus_text(job: Job) -> str:
    """hctl's GPUS column: the count asked for, or for an elastic job the count it runs on now
    (or was last given) with its range, e.g. ``4 (2:8)``."""
    if not job.spec.elastic:
        return str(job.spec.gpus)
    now = len(job.gpus) if job.gpus else job.spec.gpus
    return f"{now} ({format_gpus(job.spec)})"
