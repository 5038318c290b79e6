#!/usr/bin/python3
"""Checks a --plot picture against the run's --log, from the SVG alone.

usage: svg_check.py SVG LOG SPEC...
  SPEC = CHART:XCOL:YCOL[,YCOL...]:lin|log|auto
CHART is the chart's index (<g class="chart"> in document order), XCOL the
log column on the x axis, the YCOLs the curves in legend order (the first
drawn in the palette's first colour, ...), lin|log the y axis expected
(auto: log when every value is positive and they span two decades).

For every chart: the SVG parses as XML; the tick labels are round numbers
(1, 2 or 5 x 10^k apart, or whole decades on a log axis) evenly spaced; the
pixel <-> value map read back from the ticks puts every point of every
curve where the log says, within half a pixel.
"""
import math
import re
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
PALETTE = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def label_value(text):
    """A tick label's number: '0.25', '1e+07' or 10 with a <tspan> exponent."""
    if text.tag == NS + "text" and len(text):
        return 10.0 ** float(text[0].text)
    return float(text.text)


def ticks(chart, anchor):
    out = []
    for t in chart.iter(NS + "text"):
        if t.get("font-size") == "10" and t.get("text-anchor") == anchor:
            out.append((label_value(t), float(t.get("x" if anchor == "middle" else "y"))))
    return out


def fit(tick_list, log, what):
    if len(tick_list) < 2:
        fail("%s: fewer than two ticks" % what)
    vals = [math.log10(v) if log else v for v, _ in tick_list]
    pix = [p for _, p in tick_list]
    steps = [b - a for a, b in zip(vals, vals[1:])]
    if any(abs(s - steps[0]) > 1e-9 * max(1, abs(steps[0])) for s in steps):
        fail("%s: ticks not evenly spaced: %s" % (what, [v for v, _ in tick_list]))
    if log:
        if abs(steps[0] - round(steps[0])) > 1e-9 or any(abs(v - round(v)) > 1e-9 for v in vals):
            fail("%s: log ticks are not whole decades" % what)
    else:
        mant = steps[0] / 10 ** math.floor(math.log10(steps[0]) + 1e-12)
        if not any(abs(mant - m) < 1e-6 for m in (1, 2, 5, 10)):
            fail("%s: tick step %g is not 1, 2 or 5 x 10^k" % (what, steps[0]))
        for v in vals:
            if abs(v / steps[0] - round(v / steps[0])) > 1e-6:
                fail("%s: tick %g is not a multiple of the step %g" % (what, v, steps[0]))
    scale = (pix[-1] - pix[0]) / (vals[-1] - vals[0])
    return lambda v: pix[0] + ((math.log10(v) if log else v) - vals[0]) * scale


def main():
    svg, logfile, specs = sys.argv[1], sys.argv[2], sys.argv[3:]
    root = ET.parse(svg).getroot()
    if root.tag != NS + "svg":
        fail("the root is not <svg>")
    rows = [[float(x) for x in line.split()] for line in open(logfile) if line.strip() and not line.startswith("#")]
    charts = [g for g in root.iter(NS + "g") if g.get("class") == "chart"]
    for spec in specs:
        ci, xcol, ycols, scale = spec.split(":")
        ci, xcol, ycols = int(ci), int(xcol), [int(c) for c in ycols.split(",")]
        what = "%s chart %d" % (svg, ci)
        chart = charts[ci]
        ylabel = [t for t in chart.iter(NS + "text") if t.get("transform", "").startswith("rotate")][0].text
        log = "(log scale)" in ylabel
        if scale == "auto":
            ys = [r[c] for r in rows for c in ycols if math.isfinite(r[c])]
            scale = "log" if ys and min(ys) > 0 and max(ys) / min(ys) >= 100 else "lin"
        if log != (scale == "log"):
            fail("%s: y axis is %s, expected %s" % (what, "log" if log else "linear", scale))
        fx = fit(ticks(chart, "middle"), False, what + " x")
        yt = ticks(chart, "end")
        fy = fit([(v, p - 3.5) for v, p in yt], log, what + " y")
        for k, yc in enumerate(ycols):
            pts = [(r[xcol], r[yc]) for r in rows
                   if math.isfinite(r[xcol]) and math.isfinite(r[yc]) and (not log or r[yc] > 0)]
            lines = [p for p in chart.iter(NS + "polyline") if p.get("stroke") == PALETTE[k]]
            drawn = [tuple(map(float, xy.split(","))) for p in lines for xy in p.get("points").split()]
            if len(drawn) != len(pts):
                fail("%s curve %d: %d points drawn, the log has %d" % (what, k, len(drawn), len(pts)))
            for (x, y), (px, py) in zip(pts, drawn):
                if abs(fx(x) - px) > 0.5 or abs(fy(y) - py) > 0.5:
                    fail("%s curve %d: (%g, %g) drawn at (%.2f, %.2f), expected (%.2f, %.2f)"
                         % (what, k, x, y, px, py, fx(x), fy(y)))
    print("ok: %s, %d chart(s) checked against %s" % (svg, len(specs), logfile))


main()
