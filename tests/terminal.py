"""Run a command under a pseudo-terminal and press Ctrl-C, as a user at a terminal would.

The child gets the pty as its controlling terminal and stdin/stdout/stderr,
so a Ctrl-C written to the master is turned by the terminal driver into
SIGINT for the whole foreground process group: the command and every worker
process it started, exactly what happens at a shell prompt.
"""
from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["Interrupted", "interrupt_under_terminal"]


@dataclass
class Interrupted:
    """What an interrupted command did: its status, everything it printed, when Ctrl-C was pressed."""

    status: int
    output: str
    pressed_at_s: float | None
    exited_after_s: float

    def lines(self) -> list[str]:
        """Printed lines, the terminal's own ``^C`` echo and cursor-control codes removed, blanks dropped."""
        import re

        text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.output).replace("^C", "")
        return [line.strip() for line in re.split(r"[\r\n]+", text) if line.strip()]


def interrupt_under_terminal(
    argv: Sequence[str],
    *,
    cwd: str | os.PathLike[str],
    env: dict[str, str] | None = None,
    when: Callable[[str, float], bool],
    timeout_s: float = 120.0,
    grace_s: float = 60.0,
) -> Interrupted:
    """Start ``argv`` on a new pty; press Ctrl-C once ``when(output so far, seconds since start)`` holds;
    wait up to ``grace_s`` for it to exit (it is killed after that, and the status is then -9)."""
    master, slave = pty.openpty()
    start = time.monotonic()
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=env, stdin=slave, stdout=slave, stderr=slave, start_new_session=True,
        preexec_fn=_take_terminal(slave), pass_fds=(slave,),
    )
    os.close(slave)
    chunks: list[bytes] = []
    pressed: float | None = None
    deadline = start + timeout_s
    try:
        while True:
            now = time.monotonic()
            if pressed is None and (when(b"".join(chunks).decode(errors="replace"), now - start) or now > deadline):
                os.write(master, b"\x03")
                pressed = now - start
                deadline = now + grace_s
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every holder of the slave side closed it
                    data = b""
                if data:
                    chunks.append(data)
                    continue
                if proc.poll() is not None:
                    break
            if proc.poll() is not None and not ready:
                # drain what is left, then stop
                while select.select([master], [], [], 0.05)[0]:
                    try:
                        data = os.read(master, 65536)
                    except OSError:
                        data = b""
                    if not data:
                        break
                    chunks.append(data)
                break
            if pressed is not None and time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                break
    finally:
        os.close(master)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return Interrupted(proc.returncode, b"".join(chunks).decode(errors="replace"), pressed,
                       time.monotonic() - start - (pressed or 0.0))


def _take_terminal(slave: int) -> Callable[[], None]:
    """In the child (a new session): make the pty its controlling terminal, so Ctrl-C becomes SIGINT."""

    def preexec() -> None:
        import fcntl
        import termios

        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    return preexec
