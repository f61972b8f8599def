#!/usr/bin/env python3
"""Renders one run of the simulated NeuronCore timeline in a Chrome trace
(MSTEP_TRACE, device "neuron (simulated)") to a PNG: a row per track (run,
program, Tensor, Vector, Scalar, GpSimd, Sync, then one DMA row with the
16 DMA queues' transfers), each instruction a bar coloured by opcode, a
time axis in microseconds and a legend.

    neuron_timeline_png.py TRACE.json OUT.png [--run K] [--width PIXELS]

--run K picks the K-th executable run on the device (0 = first, -1 = the
last, the default: a steady-state step in a training run). Standard
library only (the PNG is written with zlib), so it runs with Debian's
python3 and nothing installed. Exit status 2 with a message for a trace
without the device or with fewer runs than asked for.
"""
import argparse
import json
import struct
import sys
import zlib

DEVICE = "neuron (simulated)"
BG, FG, GRID = (255, 255, 255), (0, 0, 0), (225, 225, 225)
COLOURS = {
    "nc_matmul": (214, 39, 40),
    "dma_copy": (31, 119, 180),
    "tensor_tensor": (44, 160, 44),
    "tensor_scalar": (148, 103, 189),
    "activation": (255, 127, 14),
    "tensor_copy": (23, 190, 207),
    "tensor_reduce": (140, 86, 75),
}
OTHER = (127, 127, 127)

# A 5x7 bitmap font: each glyph is 7 rows of 5 bits (most significant bit
# left). Labels are drawn upper-case.
FONT = {
    " ": [0, 0, 0, 0, 0, 0, 0],
    "A": [14, 17, 17, 31, 17, 17, 17], "B": [30, 17, 17, 30, 17, 17, 30],
    "C": [14, 17, 16, 16, 16, 17, 14], "D": [30, 17, 17, 17, 17, 17, 30],
    "E": [31, 16, 16, 30, 16, 16, 31], "F": [31, 16, 16, 30, 16, 16, 16],
    "G": [14, 17, 16, 23, 17, 17, 15], "H": [17, 17, 17, 31, 17, 17, 17],
    "I": [14, 4, 4, 4, 4, 4, 14], "J": [7, 2, 2, 2, 2, 18, 12],
    "K": [17, 18, 20, 24, 20, 18, 17], "L": [16, 16, 16, 16, 16, 16, 31],
    "M": [17, 27, 21, 21, 17, 17, 17], "N": [17, 17, 25, 21, 19, 17, 17],
    "O": [14, 17, 17, 17, 17, 17, 14], "P": [30, 17, 17, 30, 16, 16, 16],
    "Q": [14, 17, 17, 17, 21, 18, 13], "R": [30, 17, 17, 30, 20, 18, 17],
    "S": [15, 16, 16, 14, 1, 1, 30], "T": [31, 4, 4, 4, 4, 4, 4],
    "U": [17, 17, 17, 17, 17, 17, 14], "V": [17, 17, 17, 17, 17, 10, 4],
    "W": [17, 17, 17, 21, 21, 21, 10], "X": [17, 17, 10, 4, 10, 17, 17],
    "Y": [17, 17, 10, 4, 4, 4, 4], "Z": [31, 1, 2, 4, 8, 16, 31],
    "0": [14, 17, 19, 21, 25, 17, 14], "1": [4, 12, 4, 4, 4, 4, 14],
    "2": [14, 17, 1, 2, 4, 8, 31], "3": [31, 2, 4, 2, 1, 17, 14],
    "4": [2, 6, 10, 18, 31, 2, 2], "5": [31, 16, 30, 1, 1, 17, 14],
    "6": [6, 8, 16, 30, 17, 17, 14], "7": [31, 1, 2, 4, 8, 8, 8],
    "8": [14, 17, 17, 14, 17, 17, 14], "9": [14, 17, 17, 15, 1, 2, 12],
    ".": [0, 0, 0, 0, 0, 12, 12], ",": [0, 0, 0, 0, 12, 4, 8],
    ":": [0, 12, 12, 0, 12, 12, 0], ";": [0, 12, 12, 0, 12, 4, 8],
    "-": [0, 0, 0, 31, 0, 0, 0],
    "_": [0, 0, 0, 0, 0, 0, 31], "#": [10, 10, 31, 10, 31, 10, 10],
    "(": [2, 4, 8, 8, 8, 4, 2], ")": [8, 4, 2, 2, 2, 4, 8],
    "%": [24, 25, 2, 4, 8, 19, 3], "/": [0, 1, 2, 4, 8, 16, 0],
    "=": [0, 0, 31, 0, 31, 0, 0], "?": [14, 17, 1, 2, 4, 0, 4],
}


class Canvas:
    def __init__(self, width, height):
        self.w, self.h = width, height
        self.px = bytearray(bytes(BG) * (width * height))

    def rect(self, x0, y0, x1, y1, colour):
        x0, x1 = max(0, int(x0)), min(self.w, int(x1))
        y0, y1 = max(0, int(y0)), min(self.h, int(y1))
        if x1 <= x0 or y1 <= y0:
            return
        row = bytes(colour) * (x1 - x0)
        for y in range(y0, y1):
            i = 3 * (y * self.w + x0)
            self.px[i:i + len(row)] = row

    def text(self, x, y, s, colour=FG):
        for ch in s.upper():
            glyph = FONT.get(ch, FONT["?"])
            for r, bits in enumerate(glyph):
                for c in range(5):
                    if bits & (16 >> c):
                        self.rect(x + c, y + r, x + c + 1, y + r + 1, colour)
            x += 6

    def png(self):
        raw = b"".join(b"\0" + bytes(self.px[3 * y * self.w:3 * (y + 1) * self.w])
                       for y in range(self.h))

        def chunk(kind, data):
            body = kind + data
            return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

        header = struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) +
                chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def load_device(trace):
    """The device's tracks (tid -> (name, sort index)) and its slices."""
    events = trace.get("traceEvents", [])
    pid = None
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name" and \
                e.get("args", {}).get("name") == DEVICE:
            pid = e["pid"]
    if pid is None:
        return None, None
    tracks = {}
    for e in events:
        if e.get("pid") != pid or e.get("ph") != "M" or e["name"] == "process_name":
            continue
        entry = tracks.setdefault(e["tid"], ["?", 0])
        if e["name"] == "thread_name":
            entry[0] = e["args"]["name"]
        elif e["name"] == "thread_sort_index":
            entry[1] = e["args"]["sort_index"]
    slices = [e for e in events if e.get("pid") == pid and e.get("ph") == "X"]
    return tracks, slices


def render(tracks, slices, run, width):
    names = {tid: name for tid, (name, _) in tracks.items()}
    runs = sorted((s for s in slices if names.get(s["tid"]) == "run"), key=lambda s: s["ts"])
    if not runs:
        raise ValueError("the trace has no run on the device")
    if not -len(runs) <= run < len(runs):
        raise ValueError(f"--run {run}: the trace has {len(runs)} runs on the device")
    chosen = runs[run]
    t0, t1 = chosen["ts"], chosen["ts"] + chosen["dur"]
    # Rows: the tracks in sort order, the DMA queues folded into one row.
    rows = []
    for tid, (name, order) in sorted(tracks.items(), key=lambda kv: (kv[1][1], kv[1][0])):
        row = "DMA" if name.startswith("DMA") else name
        if row not in rows:
            rows.append(row)
    left, right, top, row_h = 70, 10, 24, 22
    legend_y = top + row_h * len(rows) + 24
    height = legend_y + 20
    c = Canvas(width, height)
    span = max(t1 - t0, 1e-9)
    plot_w = width - left - right

    def x_of(t):
        return left + (t - t0) / span * plot_w

    c.text(4, 6, f"neuron (simulated) run {run % len(runs)} of {len(runs)}: "
                 f"{chosen['dur']:.3f} us; {chosen['name'].removeprefix('run: ')}")
    for i, row in enumerate(rows):
        y = top + i * row_h
        c.rect(left, y + row_h - 1, width - right, y + row_h, GRID)
        c.text(4, y + 7, row)
    for s in slices:
        if s["ts"] + s["dur"] < t0 or s["ts"] > t1:
            continue
        name = names.get(s["tid"], "?")
        row = rows.index("DMA" if name.startswith("DMA") else name)
        y = top + row * row_h
        colour = COLOURS.get(s["name"], OTHER)
        if name in ("run", "program"):
            colour = (200, 200, 200) if name == "run" else (170, 170, 170)
        x0 = x_of(s["ts"])
        x1 = max(x_of(s["ts"] + s["dur"]), x0 + 1)
        c.rect(x0, y + 3, x1, y + row_h - 4, colour)
        if name == "program":  # a gap marks where the next program starts
            c.rect(x0, y + 3, x0 + 1, y + row_h - 4, BG)
        if name == "program" and x1 - x0 > 6 * len(s["name"]) + 4:
            c.text(x0 + 2, y + 7, s["name"], FG)
    # Time axis: five ticks in microseconds from the run's start.
    axis_y = top + row_h * len(rows)
    for k in range(6):
        x = left + k * plot_w / 5
        c.rect(x, axis_y, x + 1, axis_y + 4, FG)
        c.text(min(x, width - 60), axis_y + 6, f"{k * span / 5:.1f}US")
    x = left
    for op, colour in COLOURS.items():
        c.rect(x, legend_y, x + 10, legend_y + 8, colour)
        c.text(x + 14, legend_y, op)
        x += 14 + 6 * len(op) + 12
    return c.png()


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace")
    p.add_argument("out")
    p.add_argument("--run", type=int, default=-1)
    p.add_argument("--width", type=int, default=1200)
    a = p.parse_args(argv)
    try:
        with open(a.trace) as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        print(f"neuron_timeline_png: cannot read the trace {a.trace}: {e}", file=sys.stderr)
        return 2
    tracks, slices = load_device(trace)
    if tracks is None:
        print(f"neuron_timeline_png: {a.trace} has no '{DEVICE}' process; record the trace "
              "with MSTEP_TRACE=FILE while training on --device neuron", file=sys.stderr)
        return 2
    try:
        png = render(tracks, slices, a.run, a.width)
    except ValueError as e:
        print(f"neuron_timeline_png: {a.trace}: {e}", file=sys.stderr)
        return 2
    with open(a.out, "wb") as f:
        f.write(png)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
