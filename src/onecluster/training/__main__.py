"""``python -m onecluster.training launch [options] -- CMD …``: the site launcher."""

from __future__ import annotations

import sys

from onecluster.training._launcher import main


def _main() -> int:
    args = sys.argv[1:]
    if not args or args[0] != "launch":
        sys.stderr.write("usage: python -m onecluster.training launch [--workers N] -- CMD ...\n")
        return 2
    return main(args[1:])


if __name__ == "__main__":
    sys.exit(_main())
