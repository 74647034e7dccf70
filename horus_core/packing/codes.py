"""Constants shared by the packing kernel, its reference twin and the policies."""

from __future__ import annotations

# Cost modes
MODE_HORUS = 0  # 1.3 * mem_cost + util_cost / 100 + jobs_on(d): docs/placement.md section 2
MODE_BINPACK = 1  # least free memory left after placement (interference-blind best fit)

# Per-GPU stage reached by a job (higher = closer to fitting)
ST_FULL = 1  # no free slot (max jobs, exclusive job there, or the job wants an idle GPU)
ST_MEMORY = 2  # a slot, but not enough memory (> reserve must stay free)
ST_INTERFERENCE = 3  # slot and memory, but a pair does not fit or someone would drop below min_speed
ST_OK = 4

# Reason codes per queued job
R_PLACED = 0
R_FULL = 1
R_MEMORY = 2
R_INTERFERENCE = 3
R_GANG = 4  # feasible GPUs exist, but no node has enough of them (detail = largest set)
R_LOOKAHEAD = 5  # not tried: too many jobs ahead of it did not fit
R_NO_GPUS = 6
