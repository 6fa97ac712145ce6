"""A trace rendered as pictures (Pillow): one grid per buffer (the producers computed at the
stage's loops, then the stage), cells lit in the order they are computed, all lanes of a
vector step at once, one colour per thread, unrolled steps marked with a dot, recomputed
producer points in red, and the loop-nest lines of the stage under the grids with the
running loop highlighted. A frame per tick, or per `steps_per_frame` ticks for long traces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

from .trace import Cell, Trace

# One colour per thread (lit now) and its dimmer shade (done).
THREADS = [(66, 133, 244), (234, 134, 0), (52, 168, 83), (171, 71, 188), (0, 172, 193), (240, 98, 146), (124, 179, 66), (255, 202, 40)]
BACKGROUND = (250, 250, 250)
EMPTY = (225, 225, 225)
GRID = (200, 200, 200)
TEXT = (30, 30, 30)
PRODUCER = (120, 120, 120)  # producer points computed earlier
PRODUCER_NOW = (30, 30, 30)
RECOMPUTED = (220, 40, 40)
HIGHLIGHT = (255, 236, 150)
FONT_PATHS = ("/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf", "/usr/share/fonts/truetype/noto/NotoSansMono-Regular.ttf")
MAX_GRID_PX = 520  # a grid wider or taller than this gets smaller cells
CODE_LINES = 14  # loop-nest lines shown under the grids


@dataclass(frozen=True)
class AnimOptions:
    cell_px: int = 16
    steps_per_frame: int | None = None  # ticks per frame; None: enough that frames <= max_frames
    max_frames: int = 400
    frame_ms: int = 80


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for path in FONT_PATHS:
        if Path(path).exists():
            return ImageFont.truetype(path, size)
    return ImageFont.load_default()


def ticks_per_frame(t: Trace, opts: AnimOptions) -> int:
    if opts.steps_per_frame is not None:
        if opts.steps_per_frame < 1:
            raise ValueError(f"steps_per_frame must be at least 1, got {opts.steps_per_frame}")
        return opts.steps_per_frame
    if opts.max_frames < 1:
        raise ValueError(f"max_frames must be at least 1, got {opts.max_frames}")
    return max(1, math.ceil(t.ticks / opts.max_frames))


def frame_count(t: Trace, opts: AnimOptions = AnimOptions()) -> int:
    """Frames `frames` makes: one per `ticks_per_frame` ticks (at least one)."""
    return max(1, math.ceil(t.ticks / ticks_per_frame(t, opts)))


class _Grid:
    """A buffer's cells on screen: the last dim across, the others flattened down."""

    def __init__(self, name: str, title: str, lo: tuple[int, ...], shape: tuple[int, ...], cell: int, x0: int, y0: int) -> None:
        self.name, self.title, self.lo, self.shape = name, title, lo, shape
        self.cols = shape[-1]
        self.rows = math.prod(shape[:-1]) if len(shape) > 1 else 1
        self.cell, self.x0, self.y0 = cell, x0, y0

    @property
    def width(self) -> int:
        return self.cols * self.cell

    @property
    def height(self) -> int:
        return self.rows * self.cell

    def rect(self, c: Cell) -> tuple[int, int, int, int] | None:
        rel = [v - a for v, a in zip(c, self.lo)]
        if any(v < 0 or v >= n for v, n in zip(rel, self.shape)):
            return None  # computed outside the shown box (a RoundUp tail): not drawn
        row = 0
        for v, n in zip(rel[:-1], self.shape[:-1]):
            row = row * n + v
        x, y = self.x0 + rel[-1] * self.cell, self.y0 + row * self.cell
        return (x, y, x + self.cell - 1, y + self.cell - 1)


def _layout(t: Trace, opts: AnimOptions) -> tuple[list[_Grid], int, int, int]:
    """Grids left to right (producers first), the image size and where the text starts."""
    bufs = [(q, tuple(a for a, _ in h), tuple(b - a + 1 for a, b in h)) for q, h in t.producer_boxes().items()]
    bufs.append((t.stage, tuple(0 for _ in t.extent), t.extent))
    dims = [(math.prod(s[:-1]) if len(s) > 1 else 1, s[-1]) for _, _, s in bufs]
    biggest = max(max(r, c) for r, c in dims)
    cell = max(3, min(opts.cell_px, MAX_GRID_PX // max(1, biggest)))
    grids: list[_Grid] = []
    x, top, pad = 12, 34, 24
    for (name, lo, shape), (_rows, cols) in zip(bufs, dims):
        alloc = t.allocations.get(name)
        title = name
        if alloc is not None and name != t.stage:
            title += f" @ {alloc.compute_level.split('.', 1)[-1]}"
            title += f", buffer {'x'.join(map(str, alloc.shape))}" + (" folded" if alloc.folded else "")
        grids.append(_Grid(name, title, lo, shape, cell, x, top))
        x += max(cols * cell, 8 * len(title)) + pad
    height = top + max(r * cell for r, _ in dims) + 16
    return grids, max(x, 640), height, height


def _code_lines(t: Trace) -> tuple[int, int]:
    lines = [lp.line for lp in t.loops if lp.line is not None]
    if not lines:
        return 0, 0
    first = max(0, min(lines) - 1)
    return first, first + CODE_LINES


def frames(t: Trace, opts: AnimOptions = AnimOptions()) -> list[Image.Image]:
    """The animation's frames (RGB images of one size)."""
    per = ticks_per_frame(t, opts)
    grids, width, grid_h, text_y = _layout(t, opts)
    by_name = {g.name: g for g in grids}
    font, small = _font(13), _font(11)
    code = t.text.splitlines()
    first, last = _code_lines(t)
    shown = code[first:last]
    line_h = 16
    height = text_y + 22 + line_h * max(1, len(shown)) + 8 + line_h
    base = Image.new("RGB", (width, height), BACKGROUND)
    d = ImageDraw.Draw(base)
    legend = "colour: thread   outlined: vector lanes   dot: unrolled   grey: producer computed   red: recomputed"
    d.text((12, height - line_h - 2), legend, fill=PRODUCER, font=small)
    for g in grids:
        d.text((g.x0, 10), g.title, fill=TEXT, font=font)
        d.rectangle((g.x0, g.y0, g.x0 + g.width - 1, g.y0 + g.height - 1), fill=EMPTY)
        if g.cell >= 6:
            for cx in range(g.cols + 1):
                d.line((g.x0 + cx * g.cell, g.y0, g.x0 + cx * g.cell, g.y0 + g.height), fill=GRID)
            for cy in range(g.rows + 1):
                d.line((g.x0, g.y0 + cy * g.cell, g.x0 + g.width, g.y0 + cy * g.cell), fill=GRID)
    out: list[Image.Image] = []
    steps = t.steps
    k = 0
    nframes = frame_count(t, opts)
    stage_grid = by_name[t.stage]
    for f in range(nframes):
        end_tick = (f + 1) * per
        now = []
        while k < len(steps) and steps[k].tick < end_tick:
            now.append(steps[k])
            k += 1
        frame = base.copy()
        fd = ImageDraw.Draw(frame)
        recomputed = 0
        for st in now:
            for pr in st.producer_cells:
                g = by_name[pr.producer]
                rec = set(pr.recomputed)
                recomputed += len(rec)
                for c in pr.cells:
                    r = g.rect(c)
                    if r is not None:
                        fd.rectangle(r, fill=RECOMPUTED if c in rec else PRODUCER_NOW)
                        d.rectangle(r, fill=RECOMPUTED if c in rec else PRODUCER)
            col = THREADS[st.thread % len(THREADS)]
            done = tuple(int(v * 0.55 + 255 * 0.45) for v in col)
            for c in st.cells:
                r = stage_grid.rect(c)
                if r is None:
                    continue
                fd.rectangle(r, fill=col, outline=TEXT if len(st.cells) > 1 else None)
                d.rectangle(r, fill=done)
                if st.unrolled and stage_grid.cell >= 6:
                    m = stage_grid.cell // 2
                    dot = (r[0] + m - 2, r[1] + m - 2, r[0] + m + 2, r[1] + m + 2)
                    fd.ellipse(dot, fill=TEXT)
                    d.ellipse(dot, fill=col)
        # The loop nest under the grids, the running loop's line highlighted.
        running = now[-1].loop_line if now else None
        last_step = now[-1] if now else None
        if last_step is not None:
            info = f"step {last_step.index + 1}/{len(steps)}  tick {last_step.tick + 1}/{t.ticks}"
            if t.threads > 1:
                info += f"  threads {t.threads}"
            if last_step.vectorized:
                info += f"  {len(last_step.cells)} lanes"
            if last_step.unrolled:
                info += "  unrolled"
            if recomputed:
                info += f"  recomputed {recomputed}"
            if t.truncated:
                info += "  (trace truncated)"
            fd.text((12, text_y), info, fill=TEXT, font=font)
        for j, line in enumerate(shown):
            y = text_y + 22 + j * line_h
            if running is not None and first + j == running:
                fd.rectangle((8, y - 1, width - 8, y + line_h - 2), fill=HIGHLIGHT)
            fd.text((12, y), line[:160], fill=TEXT, font=small)
        out.append(frame)
    return out


def save_gif(t: Trace, path: Path, opts: AnimOptions = AnimOptions()) -> int:
    """Write the animation as an animated GIF (looping); returns the frames written."""
    fr = frames(t, opts)
    fr[0].save(path, save_all=True, append_images=fr[1:], duration=opts.frame_ms, loop=0, optimize=False, format="GIF")
    return len(fr)


def save_frames(t: Trace, directory: Path, opts: AnimOptions = AnimOptions()) -> int:
    """Write the frames as frame_0000.png, ... into `directory` (made if missing); returns their number."""
    directory.mkdir(parents=True, exist_ok=True)
    fr = frames(t, opts)
    for i, im in enumerate(fr):
        im.save(directory / f"frame_{i:04d}.png", format="PNG")
    return len(fr)
