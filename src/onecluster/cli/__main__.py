"""``python -m onecluster.cli``: the same as the ``onecluster`` command (used by ``up`` to start
its children with the running interpreter)."""

from onecluster.cli import main

main()
