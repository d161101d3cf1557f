"""How a Vicar process ends, `vicar` commands and `python -m vicar.worker` alike.

Once Temporal's native bridge is loaded, its Rust runtime's threads outlive the work: they
can call into Python while the interpreter finalizes and abort the process with SIGABRT
("PyGILState_Release: thread state ... must be current") after it has done its work
(temporalio/sdk-python#300; seen as `vicar answer` exiting -6, and as a refused worker
exiting -6 instead of 5). Such a process closes what it opened before it gets here, so
only the flushed output and the exit code are left to give.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

# The SDK's native bridge: once loaded, its Rust runtime's threads outlive the process's work.
TEMPORAL_BRIDGE = "temporalio.bridge.temporal_sdk_bridge"


def end_process(code: int) -> NoReturn:
    """Exit with `code`, without the interpreter's teardown if the bridge was loaded."""
    tracing = sys.modules.get("vicar.runtime.tracing")
    if tracing is not None:
        tracing.flush()  # os._exit skips the exporter's own flush at exit
    if TEMPORAL_BRIDGE in sys.modules:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        os._exit(code)
    sys.exit(code)
