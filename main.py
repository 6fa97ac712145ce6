"""Schedule Explorer launcher: the desktop app by default, headless subcommands otherwise.

python main.py                     # the app, on its start page (the blur example open behind it)
python main.py blur                # the app, opening a pipeline (zoo name or .json)
python main.py measure blur --json # headless; `python main.py --help` lists the app's options and the commands
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    from engine.cli import commands  # noqa: PLC0415  # keep `--help` and the GUI start light

    if argv and argv[0] in ("-h", "--help"):
        from app.main import full_help  # noqa: PLC0415

        print(full_help(), end="")  # the app's options and the headless subcommands
        return 0
    if argv and argv[0] in commands():
        from engine.cli import main as cli_main  # noqa: PLC0415

        return cli_main(argv)
    from app.main import run_app  # noqa: PLC0415

    return run_app(argv)


if __name__ == "__main__":
    sys.exit(main())
