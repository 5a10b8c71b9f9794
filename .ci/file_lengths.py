#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that no source file the repository tracks is over 600 lines.

A file that long holds more than one job; split it by concern (a module directory with one
file per job keeps the public paths). Counts every line of each tracked Rust, Python and
shell file, tests included: a test file over the limit is split like any other. Prints one
line per offender and exits 1 if there is any.

Usage: .ci/file_lengths.py [REPO]   (default: the repository holding this script)
"""

import os
import subprocess
import sys

LIMIT = 600
SUFFIXES = (".rs", ".py", ".sh")


def tracked_sources(repo):
    """Paths, relative to REPO, of the tracked files with a source suffix."""
    out = subprocess.run(["git", "ls-files", "-z"], cwd=repo, capture_output=True, check=True)
    names = out.stdout.decode().split("\0")
    return sorted(n for n in names if n.endswith(SUFFIXES))


def line_count(path):
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))
    bad = 0
    for name in tracked_sources(repo):
        path = os.path.join(repo, name)
        if not os.path.isfile(path):
            continue
        n = line_count(path)
        if n > LIMIT:
            print(f"{name}: {n} lines, over the {LIMIT}-line limit: split it by concern")
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
