"""Before the first window on Linux/X11: are the system libraries Qt's xcb platform plugin
needs installed? A fresh Debian or Ubuntu machine lacks some (libxcb-cursor0,
libxcb-icccm4, ...) and Qt then aborts with a long message that does not name them. This
asks the dynamic loader (`ldd` on the plugin: the same search the plugin's loading does)
and says in one line what to install."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

LDD_TIMEOUT_S = 10
NOT_FOUND = re.compile(r"^\s*(\S+)\s+=>\s+not found", re.MULTILINE)


def xcb_plugin() -> Path | None:
    """Qt's xcb platform plugin of the PySide6 in use, if it has one."""
    from PySide6.QtCore import QLibraryInfo  # noqa: PLC0415  # QtCore needs no X libraries

    path = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms" / "libqxcb.so"
    return path if path.is_file() else None


def missing_libraries(binary: Path) -> list[str]:
    """The shared libraries `binary` needs that the dynamic loader cannot find (sonames, in
    ldd's order); empty when all are found or ldd is not there to ask."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    try:
        out = subprocess.run([ldd, str(binary)], capture_output=True, text=True, timeout=LDD_TIMEOUT_S, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return list(dict.fromkeys(NOT_FOUND.findall(out)))


def debian_package(soname: str) -> str:
    """The Debian/Ubuntu package that ships a library: 'libxcb-icccm.so.4' -> 'libxcb-icccm4',
    'libxkbcommon-x11.so.0' -> 'libxkbcommon-x11-0' (Debian's rule: a name ending in a digit
    takes a hyphen before the version), 'libX11-xcb.so.1' -> 'libx11-xcb1'."""
    base, _, version = soname.partition(".so")
    version = version.lstrip(".").split(".")[0]
    base = base.lower()
    return f"{base}-{version}" if base[-1:].isdigit() else f"{base}{version}"


def install_hint(missing: list[str]) -> str:
    """One line: what to install for `missing` (or what else is wrong)."""
    qt_own = [m for m in missing if m.startswith("libQt6")]
    if qt_own:
        return f"error: PySide6's own Qt libraries are missing ({', '.join(qt_own)}): reinstall PySide6 (make install)"
    packages = " ".join(debian_package(m) for m in missing)
    return (
        f"error: Qt's X11 (xcb) platform needs system libraries that are not installed ({', '.join(missing)}); "
        f"on Debian/Ubuntu: sudo apt-get install {packages} (or run headless: QT_QPA_PLATFORM=offscreen, --screenshot)"
    )


def wants_xcb(environ: dict[str, str] | None = None, platform: str = sys.platform) -> bool:
    """Whether Qt will try its xcb plugin: Linux, QT_QPA_PLATFORM unset or xcb, and not a
    Wayland session (there Qt starts on Wayland first)."""
    env = os.environ if environ is None else environ
    chosen = env.get("QT_QPA_PLATFORM", "").split(":")[0].strip().lower()
    if not platform.startswith("linux"):
        return False
    if chosen:
        return chosen == "xcb"
    return not env.get("WAYLAND_DISPLAY")


def check() -> str | None:
    """The one line to print before starting a window, or None when nothing is missing."""
    if not wants_xcb():
        return None
    plugin = xcb_plugin()
    missing = missing_libraries(plugin) if plugin is not None else []
    return install_hint(missing) if missing else None
