"""The ``torchdx`` command: the same CLI as the Rust binary, every subcommand, in process.

Installed as the console script ``torchdx`` and runnable as ``python -m torchdx``.
"""

import signal
import sys
from typing import List, Optional


def main(argv: Optional[List[str]] = None) -> int:
    from ._native import cli_main

    if argv is None:  # the console script: this process is the command
        argv = sys.argv[1:]
        # Behave like the native binary: Ctrl-C ends the command at once (the engine
        # does not return to Python while it reads a large log), with no traceback.
        try:
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        except (ValueError, OSError, AttributeError):  # no signals here
            pass
    # The CLI writes to file descriptors 1 and 2 itself: nothing buffered in Python may
    # come after it.
    for s in (sys.stdout, sys.stderr):
        try:
            s.flush()
        except Exception:
            pass
    return int(cli_main(list(argv)))


if __name__ == "__main__":
    sys.exit(main())
