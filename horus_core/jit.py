"""How the compiled helpers (the packing kernel's, the progress ledgers') are built.

A helper takes its caller's arrays and neither allocates nor returns one (nor keeps a view of
one past its return). It is compiled without the runtime's reference counting
(``_nrt=False``), and called rather than inlined into the caller's Numba IR. Built as a plain
``njit`` function, or inlined (``inline="always"``), each call kept an increment and a
decrement of every array handed in (Numba prunes those pairs only where the helper has no
loop and a single exit). At 5-20 ns each, they were most of the cost:

- the packing kernel's table setup for 1,024 GPUs: ~250 us a pass, against ~60 us without;
- a round of 300 progress reports (``Reported.add_many``): 40 us, against 5 us.

LLVM still inlines the calls where it pays.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

import numba

F = TypeVar("F", bound=Callable[..., object])
_OPTIONS: dict[str, Any] = {"cache": True, "_nrt": False}  # (``_nrt`` is a target option numba's stubs omit)


def helper(fn: F) -> F:
    return cast(F, numba.njit(**_OPTIONS)(fn))
