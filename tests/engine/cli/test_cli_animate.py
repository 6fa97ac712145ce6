"""`animate` from the command line (in process): a valid GIF with one frame per tick (or per
several ticks), PNG frames, and one-line errors."""

import json

from PIL import Image

from engine import zoo
from engine.cli import main
from engine.schedule import Schedule
from engine.teaching.animate import AnimOptions, frame_count
from engine.teaching.trace import trace

TILE_VEC = {
    "stages": {
        "blur_y": {"pure": [{"kind": "tile", "x": "x", "y": "y", "xo": "xo", "yo": "yo", "xi": "xi", "yi": "yi", "xf": 4, "yf": 4},
                            {"kind": "vectorize", "loop": "xi", "factor": 4}]},
        "blur_x": {"pure": [{"kind": "compute_at", "consumer": "blur_y", "loop": "xo"}]},
    }
}  # fmt: skip


def test_animate_writes_a_gif_with_a_frame_per_step(tmp_path, capsys):
    sched = tmp_path / "tile.json"
    sched.write_text(json.dumps(TILE_VEC))
    out = tmp_path / "anim.gif"
    code = main(["animate", "blur", "--stage", "blur_y", "--schedule", str(sched), "--extent", "8x8", "--out", str(out), "--json"])
    text, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(text)
    # 8x8 points, 4 lanes per step: 16 steps, one thread, one frame each.
    assert (obj["steps"], obj["ticks"], obj["frames"], obj["ticks_per_frame"]) == (16, 16, 16, 1)
    # A 4x4 tile needs 6x4 of blur_x: the second row of tiles recomputes the 2 halo rows, 8 wide.
    assert obj["recomputed"] == {"blur_x": 16} and obj["allocations"]["blur_x"]["shape"] == [6, 4]
    with Image.open(out) as im:
        assert im.format == "GIF" and im.n_frames == 16 and im.is_animated
        first = im.convert("RGB")
        im.seek(15)
        last = im.convert("RGB")
    assert first.size == last.size and first.tobytes() != last.tobytes()


def test_animate_caps_frames_and_writes_png_frames(tmp_path, capsys):
    d = tmp_path / "frames"
    code = main(["animate", "blur", "--stage", "blur_y", "--extent", "6x8", "--max-frames", "10", "--frames", str(d)])
    _, err = capsys.readouterr()
    assert code == 0, err
    pngs = sorted(d.glob("frame_*.png"))
    # 48 scalar steps, at most 10 frames: 5 ticks per frame, 10 frames.
    p = zoo.get("blur", "small")
    t = trace(p, Schedule(), "blur_y", (6, 8))
    assert len(pngs) == frame_count(t, AnimOptions(max_frames=10)) == 10
    with Image.open(pngs[0]) as im:
        assert im.format == "PNG" and im.size[0] >= 640


def test_animate_errors_are_one_line(tmp_path, capsys):
    out = str(tmp_path / "a.gif")
    for argv, needle in (
        (["animate", "blur", "--stage", "nope", "--out", out], "no such stage"),
        (["animate", "blur", "--stage", "blur_y", "--extent", "8", "--out", out], "2 dims"),
        (["animate", "blur", "--stage", "blur_y", "--extent", "8xq", "--out", out], "extent '8xq'"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1
    assert not (tmp_path / "a.gif").exists()


def test_footprint_command_reports_reads_storage_and_caches(tmp_path, capsys):
    sched = tmp_path / "tile.json"
    sched.write_text(json.dumps(TILE_VEC))
    code = main(["footprint", "blur", "--size", "small", "--stage", "blur_y", "--loop", "xo", "--schedule", str(sched), "--json"])
    text, err = capsys.readouterr()
    assert code == 0, err
    obj = json.loads(text)
    assert obj["loops"] == ["yo", "xo", "yi", "xi", "xi_v"] and obj["iterations"] == 16 * 16
    # One 4x4 tile reads a 6x4 block of blur_x (computed there), which reads 6x6 of the input.
    assert {r["source"]: r["region"] for r in obj["reads"]} == {"blur_x": [6, 4], "input": [6, 6]}
    assert obj["read_bytes"] == (24 + 36) * 4 and obj["stored"] == [
        {"stage": "blur_x", "level": "blur_y.xo", "shape": [6, 4], "elements": 24, "bytes": 96}
    ]
    assert all(c["source"] for c in obj["caches"])
    assert main(["footprint", "blur", "--stage", "blur_y", "--loop", "y", "--schedule", str(sched)]) == 2
    assert "no loop 'y'" in capsys.readouterr().err
