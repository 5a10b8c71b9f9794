# SPDX-License-Identifier: Apache-2.0
"""A server (`nvmemu serve`, SPDK's nvmf_tgt) run in the background by the Python scripts:
start it, wait until it listens, stop it. The shell twin is scripts/lib/serve.sh.

    with Server([nvmemu, "serve", "-r", sock, ...], wait_for=[sock], log="serve.log"):
        ...  # the server listens on every path in wait_for

A server that exits before listening, or does not listen within `timeout` seconds, raises
ServeError whose message names the command and carries the last lines of its log.
"""

import os
import shlex
import signal
import subprocess
import time


class ServeError(RuntimeError):
    pass


def niced(cmd, nice):
    """`cmd` run at priority `nice` (None: as it is). Linux shares the CPUs between sessions
    first (autogroups), so the command gets a session of its own with that nice value; plain
    `nice` would only rank it within ours, beside every other job of the session."""
    if nice is None or str(nice) == "":
        return list(cmd)
    n = str(nice)
    return ["setsid", "sh", "-c", f'echo {n} > /proc/$$/autogroup && exec nice -n {n} "$@"',
            "sh", *cmd]


def log_tail(path, lines=20):
    """The last `lines` lines of the file at `path`, indented; a note if there are none."""
    try:
        with open(path, errors="replace") as f:
            text = f.read().splitlines()[-lines:]
    except OSError:
        text = []
    if not text:
        return f"    (the server wrote nothing to {path})"
    return "\n".join(f"    > {ln}" for ln in text)


class Server:
    """One background server; its stdout and stderr go to `log` (a file path)."""

    def __init__(self, cmd, wait_for, log, timeout=30.0):
        self.cmd = [str(c) for c in cmd]
        self.wait_for = list(wait_for)
        self.log = log
        self.timeout = timeout
        self.proc = None

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def start(self):
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.timeout
        for path in self.wait_for:
            while not os.path.exists(path):
                if self.proc.poll() is not None:
                    self.fail(f"exited ({self.proc.returncode}) before listening on {path}")
                if time.monotonic() > deadline:
                    self.fail(f"not listening on {path} after {self.timeout:.0f} s")
                time.sleep(0.1)
        return self

    def fail(self, what):
        self.stop()
        raise ServeError(f"{shlex.join(self.cmd)}: {what}\n{log_tail(self.log)}")

    def stop(self, grace=20.0):
        """SIGTERM, SIGKILL after `grace` seconds (a wedged server may ignore SIGTERM)."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
