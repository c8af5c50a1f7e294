"""``python -m onecluster.agent._watchdog_main WORK_DIR AGENT_PID``: the agent's watchdog
process (:mod:`onecluster.agent._watchdog`).  A module of its own, so that running it does
not import it a second time."""

import sys

from onecluster.agent._watchdog import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
