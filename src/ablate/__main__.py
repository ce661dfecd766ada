"""`ablate` and `python -m ablate`: the command line's own imports take about a second on a busy CPU (OmegaConf, rich,
every command's flags), and a Ctrl-C in them printed Python's traceback. Here it ends the command as a Ctrl-C
anywhere else does: one line, exit 130 (docs/runs.md, "Stopping")."""

from __future__ import annotations

import sys

SIGINT_EXIT = 130  # 128 + SIGINT, as ablate.files.signals says it (not imported: it is one of the imports guarded)


def main() -> int:
    try:
        from ablate import cli
    except KeyboardInterrupt:
        print("ablate: stopped by Ctrl-C (SIGINT) while starting; nothing was written", file=sys.stderr)
        return SIGINT_EXIT
    return cli.main()


if __name__ == "__main__":
    sys.exit(main())
