"""Run the pytest subprocess of ``python -m properties`` so that stopping it loses nothing.

The child runs in a process group of its own, so a Ctrl-C at the terminal reaches
only this process, which passes it on exactly once as SIGINT -- and so does a
SIGTERM, and the end of a time limit.  pytest then stops the law that is running
(the runner keeps the failures it had found), writes the report of what it
checked marked interrupted, and exits with its interrupted status (2), which is
returned here.  A second Ctrl-C or SIGTERM is passed on too (pytest then stops
at once); a child still running ``GRACE_SECONDS`` after its time limit is killed.
"""
from __future__ import annotations

import signal
import subprocess

#: seconds a stopped child gets to write its report before it is killed
GRACE_SECONDS = 120
#: pytest's exit status of an interrupted session (pytest.ExitCode.INTERRUPTED)
INTERRUPTED = 2


class Stopped:
    """Why a run was stopped (``None``: it was not): ``"SIGINT"``, ``"SIGTERM"`` or
    ``"time limit"``."""

    def __init__(self):
        self.why = None


def _default_sigint():
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run(cmd, env=None, seconds=None, stopped=None):
    """Run ``cmd``; stop it cleanly on SIGINT/SIGTERM or after ``seconds``.

    Returns the child's exit status.  ``stopped`` (a :class:`Stopped`) records why
    it was stopped, for a caller that runs several children (a hunt)."""
    stopped = stopped if stopped is not None else Stopped()
    # SIGINT is what the child is stopped with: it must not inherit an ignored SIGINT
    # (as from a shell's background job), which Python would then keep ignoring
    proc = subprocess.Popen(cmd, env=env, process_group=0, preexec_fn=_default_sigint)

    def stop(why):
        if stopped.why is None:
            stopped.why = why
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)

    def on_signal(signum, frame):
        stop(signal.Signals(signum).name)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        if seconds is not None:
            try:
                return proc.wait(timeout=max(seconds, 0.0))
            except subprocess.TimeoutExpired:
                stop("time limit")
            try:
                return proc.wait(timeout=GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                proc.kill()
        return proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
