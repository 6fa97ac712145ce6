"""engine.teaching.footprint: per-loop reads and storage derived by hand, and this machine's
cache sizes as the OS reports them (a fake sysfs tree for the parsing, the real one when present)."""

from pathlib import Path

import pytest

from engine import zoo
from engine.schedule import S, Schedule
from engine.teaching.footprint import CACHE_DIR, FootprintError, cache_sizes, footprint, loop_levels

BLUR = zoo.get("blur", "small")  # input 66x66 -> blur_x 66x64 (3 taps along x) -> blur_y 64x64 (3 taps along y)


def at_x() -> Schedule:
    s = Schedule()
    S(s, "blur_x").compute_at("blur_y", "x")
    return s


def test_footprint_per_loop_level_of_a_compute_at_schedule():
    s = at_x()
    assert loop_levels(BLUR, s, "blur_y") == ["y", "x"]
    x = footprint(BLUR, s, "blur_y", "x", caches=())
    reads = {r.source: (r.kind, r.region, r.elements, r.bytes) for r in x.reads}
    # One point of blur_y reads a 3x1 column of blur_x, which reads a 3x3 box of the input.
    assert reads == {"blur_x": ("at", (3, 1), 3, 12), "input": ("input", (3, 3), 9, 36)}
    assert x.iterations == 64 * 64 and x.read_bytes == 48
    assert [(b.stage, b.level, b.shape, b.bytes) for b in x.stored] == [("blur_x", "blur_y.x", (3, 1), 12)]
    y = footprint(BLUR, s, "blur_y", "y", caches=())
    reads = {r.source: r.region for r in y.reads}
    assert reads == {"blur_x": (3, 64), "input": (3, 66)} and y.iterations == 64
    whole = footprint(BLUR, s, "blur_y", None, caches=())
    assert {r.source: r.region for r in whole.reads} == {"blur_x": (66, 64), "input": (66, 66)} and whole.iterations == 1


def test_root_producer_is_read_not_stored_here():
    f = footprint(BLUR, Schedule(), "blur_y", "y", caches=())
    assert [(r.source, r.kind, r.region) for r in f.reads] == [("blur_x", "root", (3, 64))]
    assert f.stored == ()


def test_bad_loop_is_one_clear_error():
    with pytest.raises(FootprintError, match="no loop 'z'"):
        footprint(BLUR, at_x(), "blur_y", "z")
    s = Schedule()
    S(s, "blur_x").compute_inline()
    with pytest.raises(FootprintError, match="inlined"):
        footprint(BLUR, s, "blur_x", None)


def test_cache_sizes_parse_sysfs(tmp_path: Path):
    levels = [(1, "Data", "48K"), (1, "Instruction", "32K"), (2, "Unified", "2048K"), (3, "Unified", "96M")]
    for i, (level, kind, size) in enumerate(levels):
        d = tmp_path / f"index{i}"
        d.mkdir()
        (d / "level").write_text(f"{level}\n")
        (d / "type").write_text(f"{kind}\n")
        (d / "size").write_text(f"{size}\n")
    got = cache_sizes(tmp_path)
    assert [(c.label, c.size_bytes) for c in got] == [("L1d", 48 * 1024), ("L1i", 32 * 1024), ("L2", 2 << 20), ("L3", 96 << 20)]
    assert all(c.source.startswith(str(tmp_path)) for c in got)
    f = footprint(BLUR, at_x(), "blur_y", "y", caches=got)
    assert f.fits() == "L1d"  # 768 + 792 bytes per row
    assert footprint(BLUR, at_x(), "blur_y", "y", caches=()).fits() is None  # unknown sizes: no claim


def test_cache_sizes_without_sysfs_are_never_invented(tmp_path: Path):
    for c in cache_sizes(tmp_path / "missing"):
        assert c.source in ("sysconf", "unknown")
        assert (c.size_bytes is None) == (c.source == "unknown")


@pytest.mark.skipif(not (CACHE_DIR / "index0" / "size").exists(), reason="this OS does not publish cache sizes in sysfs")
def test_cache_sizes_of_this_machine_come_from_the_os():
    got = cache_sizes()
    files = sorted(CACHE_DIR.glob("index*"))
    assert len(got) == len(files)
    by_source = {c.source: c for c in got}
    for d in files:
        size = (d / "size").read_text().strip()
        mult = {"K": 1 << 10, "M": 1 << 20}[size[-1]]
        assert by_source[str(d / "size")].size_bytes == int(size[:-1]) * mult
