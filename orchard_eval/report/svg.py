"""Small inline SVG plots (bars, histogram, scatter, lines): no plotting dependency, no network,
and cheap enough to draw thousands of them for a 400-case run."""
from __future__ import annotations

from html import escape
from typing import Sequence

COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")


def _frame(w: int, h: int, body: str, title: str, cls: str = "") -> str:
    return (f'<svg{cls} xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img">'
            f'<title>{escape(title)}</title><rect width="{w}" height="{h}" fill="#fff"/>{body}</svg>')


def bars(labels: Sequence[str], series: Sequence[Sequence[float | None]], names: Sequence[str], title: str,
         w: int = 460, h: int = 220, vmax: float = 1.0) -> str:
    """Grouped bars, one group per label, one bar per series (value in [0, vmax])."""
    left, bottom, top = 36, 40, 20
    n, m = max(len(labels), 1), max(len(series), 1)
    gw = (w - left - 10) / n
    bw = gw * 0.8 / m
    out = [f'<text x="{left}" y="14" font-size="12">{escape(title)}</text>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - 5}" y2="{h - bottom}" stroke="#333"/>']
    for t in (0.0, 0.5, 1.0):
        y = h - bottom - t * (h - bottom - top)
        out.append(f'<text x="2" y="{y + 4:.1f}" font-size="10">{t * vmax:.1f}</text>'
                   f'<line x1="{left}" y1="{y:.1f}" x2="{w - 5}" y2="{y:.1f}" stroke="#ddd"/>')
    for i, lab in enumerate(labels):
        x0 = left + i * gw + gw * 0.1
        for j, s in enumerate(series):
            v = s[i] if i < len(s) else None
            if v is None:
                continue
            bh = max(0.0, min(1.0, v / vmax)) * (h - bottom - top)
            out.append(f'<rect x="{x0 + j * bw:.1f}" y="{h - bottom - bh:.1f}" width="{bw:.1f}" height="{bh:.1f}" '
                       f'fill="{COLOURS[j % len(COLOURS)]}"><title>{escape(names[j])} {escape(lab)}: {v:.3f}</title></rect>')
        out.append(f'<text x="{left + i * gw + gw / 2:.1f}" y="{h - bottom + 14}" font-size="10" '
                   f'text-anchor="middle">{escape(lab)}</text>')
    if m > 1:
        for j, nm in enumerate(names):
            out.append(f'<rect x="{left + j * 120}" y="{h - 14}" width="10" height="10" fill="{COLOURS[j % len(COLOURS)]}"/>'
                       f'<text x="{left + j * 120 + 14}" y="{h - 5}" font-size="10">{escape(nm[:18])}</text>')
    return _frame(w, h, "".join(out), title)


def histogram(values: Sequence[float], title: str, bins: int = 10, w: int = 260, h: int = 150) -> str:
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int(float(v) * bins)))] += 1
    peak = max(counts) or 1
    left, bottom, top = 24, 22, 18
    bw = (w - left - 6) / bins
    out = [f'<text x="4" y="12" font-size="11">{escape(title)} (n={len(values)})</text>']
    for i, c in enumerate(counts):
        bh = c / peak * (h - bottom - top)
        out.append(f'<rect x="{left + i * bw:.1f}" y="{h - bottom - bh:.1f}" width="{bw - 1:.1f}" height="{bh:.1f}" '
                   f'fill="{COLOURS[0]}"><title>[{i / bins:.1f}, {(i + 1) / bins:.1f}): {c}</title></rect>')
    out.append(f'<text x="{left}" y="{h - 6}" font-size="10">0</text>'
               f'<text x="{w - 12}" y="{h - 6}" font-size="10">1</text><text x="2" y="{top + 8}" font-size="10">{peak}</text>')
    return _frame(w, h, "".join(out), title)


def scatter(points: Sequence[tuple[float, float]], title: str, xlabel: str, ylabel: str,
            w: int = 260, h: int = 240) -> str:
    left, bottom, top, right = 30, 30, 18, 8
    pw, ph = w - left - right, h - bottom - top
    out = [f'<text x="4" y="12" font-size="11">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>',
           f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top}" stroke="#bbb" stroke-dasharray="3,3"/>',
           f'<text x="{left}" y="{h - 6}" font-size="10">{escape(xlabel)}</text>',
           f'<text x="2" y="{top + 10}" font-size="10" transform="rotate(-90 10 {top + ph / 2})">{escape(ylabel)}</text>']
    for x, y in points:
        cx, cy = left + max(0, min(1, x)) * pw, top + ph - max(0, min(1, y)) * ph
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="2.5" fill="{COLOURS[0]}" fill-opacity="0.6"/>')
    return _frame(w, h, "".join(out), title)


def _tick(v: float) -> str:
    return f"{v:.3g}"


def lines(series: Sequence[tuple[str, Sequence[float], Sequence[float | None]]], title: str, w: int = 330,
          h: int = 210, xlabel: str = "", ylabel: str = "", ymin: float | None = None) -> str:
    """Polylines (name, xs, ys) on shared axes fitted to the data, with the axis ranges labelled;
    a None y breaks its line. Names starting with "answer" are dashed (GT solid). `ymin` pins the
    bottom of the y axis (0 for speeds), so a near-constant series is not blown up to full height."""
    pts = [(x, y) for _, a, b in series for x, y in zip(a, b) if y is not None]
    cls = ' class="lines"'
    if not pts:
        return _frame(w, h, f'<text x="4" y="14" font-size="11">{escape(title)}: no data</text>', title, cls)
    x0, x1 = min(p[0] for p in pts), max(p[0] for p in pts)
    y0, y1 = min(p[1] for p in pts), max(p[1] for p in pts)
    if ymin is not None:
        y0 = min(ymin, y0)
    if y1 - y0 < 1e-9:
        y0, y1 = y0 - 1.0, y1 + 1.0
    sx, sy = (x1 - x0) or 1.0, y1 - y0
    left, right, top, bottom = 42, 8, 30, 30
    pw, ph = w - left - right, h - top - bottom
    out = [f'<text x="4" y="12" font-size="11">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>',
           f'<text x="{left - 3}" y="{top + 4}" font-size="9" text-anchor="end">{_tick(y1)}</text>',
           f'<text x="{left - 3}" y="{top + ph}" font-size="9" text-anchor="end">{_tick(y0)}</text>',
           f'<text x="{left}" y="{top + ph + 11}" font-size="9">{_tick(x0)}</text>',
           f'<text x="{left + pw}" y="{top + ph + 11}" font-size="9" text-anchor="end">{_tick(x1)}</text>',
           f'<text x="{left + pw / 2:.0f}" y="{h - 4}" font-size="10" text-anchor="middle">{escape(xlabel)}</text>',
           f'<text x="10" y="{top + ph / 2:.0f}" font-size="10" text-anchor="middle" '
           f'transform="rotate(-90 10 {top + ph / 2:.0f})">{escape(ylabel)}</text>']
    for k, (name, a, b) in enumerate(series):
        colour = COLOURS[(k // 2 if len(series) > 1 and _paired(series) else k) % len(COLOURS)]
        dash = ' stroke-dasharray="4,3"' if name.startswith("answer") else ""
        runs: list[list[str]] = [[]]
        for x, y in zip(a, b):
            if y is None:
                runs.append([])
                continue
            runs[-1].append(f"{left + (x - x0) / sx * pw:.1f},{top + (1 - (y - y0) / sy) * ph:.1f}")
        for r in runs:
            if r:
                out.append(f'<polyline points="{" ".join(r)}" fill="none" stroke="{colour}" stroke-width="1.5"{dash}>'
                           f'<title>{escape(name)}</title></polyline>')
        if len(series) > 1:
            out.append(f'<line x1="{left + (k % 4) * 72}" y1="{18 + (k // 4) * 10}" x2="{left + (k % 4) * 72 + 12}" '
                       f'y2="{18 + (k // 4) * 10}" stroke="{colour}" stroke-width="1.5"{dash}/>'
                       f'<text x="{left + (k % 4) * 72 + 15}" y="{21 + (k // 4) * 10}" font-size="9">{escape(name[:12])}</text>')
    return _frame(w, h, "".join(out), title, cls)


def _paired(series) -> bool:
    """GT/answer pairs (GT x, answer x, GT y, answer y…) share a colour per object."""
    names = [n for n, _, _ in series]
    return len(names) % 2 == 0 and all(names[i].startswith("GT") and names[i + 1].startswith("answer")
                                       for i in range(0, len(names), 2))
