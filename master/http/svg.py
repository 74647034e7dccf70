"""Server-rendered SVG for the dashboard: a line chart over time and a heat map. No JavaScript.

Every text that reaches the SVG goes through :func:`html.escape`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape

W, H, PAD = 640, 200, 36


def line_chart(points: Sequence[tuple[float, float]], *, y_max: float = 100.0, label: str = "%") -> str:
    """Value over time (seconds), y from 0 to ``y_max``; an empty chart says so."""
    head = f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="{W}" height="{H}" role="img">'
    frame = (
        f'<rect x="{PAD}" y="8" width="{W - PAD - 8}" height="{H - PAD - 8}" fill="#fafafa" stroke="#ccc"/>'
        f'<text x="4" y="16" font-size="11">{y_max:g}{escape(label)}</text>'
        f'<text x="4" y="{H - PAD}" font-size="11">0</text>'
    )
    if len(points) < 2:
        return f'{head}{frame}<text x="{W // 2 - 60}" y="{H // 2}" font-size="13">no samples yet</text></svg>'
    t0, t1 = points[0][0], points[-1][0]
    span = max(t1 - t0, 1e-9)
    xs = [PAD + (t - t0) / span * (W - PAD - 8) for t, _ in points]
    ys = [8 + (1 - min(max(v, 0.0), y_max) / y_max) * (H - PAD - 8) for _, v in points]
    path = " ".join(f"{x:.1f},{y:.1f}" for x, y in zip(xs, ys, strict=True))
    axis = f'<text x="{PAD}" y="{H - 12}" font-size="11">last {span:.0f} s</text>'
    line = f'<polyline class="series" fill="none" stroke="#1f77b4" stroke-width="2" points="{path}"/>'
    return f"{head}{frame}{axis}{line}</svg>"


def speed_colour(speed: float) -> str:
    """Red (0.0, slowed to a halt) through yellow (0.5) to green (1.0, as fast as alone)."""
    s = min(max(speed, 0.0), 1.0)
    red = 220 if s < 0.5 else int(220 * (1 - s) * 2)
    green = int(200 * s * 2) if s < 0.5 else 200
    return f"rgb({red},{green},60)"


def speed_legend(steps: int = 10, cell: int = 28) -> str:
    """What the heat maps' colours mean: speed next to the co-runner over speed alone, from 0
    (halted) through 0.5 to 1.0 (as fast as alone), and grey for a pair not measured."""
    left, width = 8, cell * (steps + 1)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="legend" width="{left + width + 150}" height="52" '
        'role="img" aria-label="colour legend: speed next to the co-runner, relative to alone">'
    ]
    for i in range(steps + 1):
        value = i / steps
        parts.append(
            f'<rect x="{left + i * cell}" y="4" width="{cell}" height="18" fill="{speed_colour(value)}">'
            f"<title>{value:.1f}x</title></rect>"
        )
    for value, label in ((0.0, "0x: halted"), (0.5, "0.5x"), (1.0, "1.0x: as fast as alone")):
        x = left + round(value * steps) * cell + cell // 2
        anchor = "start" if value == 0.0 else "middle"
        parts.append(f'<text x="{x - (cell // 2 if anchor == "start" else 0)}" y="38" font-size="11" '
                     f'text-anchor="{anchor}">{label}</text>')  # fmt: skip
    grey = left + width + 14
    parts.append(f'<rect x="{grey}" y="4" width="{cell}" height="18" fill="#eee" stroke="#ccc"/>')
    parts.append(f'<text x="{grey + cell + 6}" y="17" font-size="11">not measured</text></svg>')
    return "".join(parts)


def heat_map(speeds: Mapping[tuple[str, str], float], names: Sequence[str], *, cell: int = 56) -> str:
    """Row = the job type measured, column = its co-runner, cell = its speed next to it."""
    left, top = 260, 150
    width, height = (
        left + cell * len(names) + 160,
        top + cell * len(names) + 8,
    )  # (room for the slanted names)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="heatmap" width="{width}" height="{height}">']
    for i, name in enumerate(names):
        short = escape(name[:40])
        y = top + i * cell + cell // 2 + 4
        x = left + i * cell + cell // 2
        parts.append(f'<text x="{left - 6}" y="{y}" font-size="11" text-anchor="end">{short}</text>')
        parts.append(
            f'<text x="{x}" y="{top - 6}" font-size="11" transform="rotate(-45 {x} {top - 6})">{short}</text>'
        )
    for i, a in enumerate(names):
        for j, b in enumerate(names):
            value = speeds.get((a, b))
            x, y = left + j * cell, top + i * cell
            fill = speed_colour(value) if value is not None else "#eee"
            title = escape(f"{a} next to {b}: " + (f"{value:.2f}x" if value is not None else "not measured"))
            parts.append(
                f'<rect x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" fill="{fill}">'
                f"<title>{title}</title></rect>"
            )
            if value is not None:
                parts.append(
                    f'<text class="cell" x="{x + cell // 2 - 1}" y="{y + cell // 2 + 4}" font-size="12" '
                    f'text-anchor="middle">{value:.2f}</text>'
                )
    parts.append("</svg>")
    return "".join(parts)
