# SPDX-License-Identifier: Apache-2.0
"""Sections of BENCHMARKS.md that other scripts own.

scripts/bench.sh writes the file as a whole; the TCP, guest, device-model and file-backed
benchmarks each own one section between two markers and rewrite only that. bench.sh keeps
those sections when it rewrites the rest, so running one script never loses another's table.
"""

import re

BEGIN = "<!-- section {name}: written by {by}; do not edit by hand -->"
END = "<!-- end section {name} -->"
_SECTION = re.compile(r"<!-- section (\S+): .*? -->\n.*?<!-- end section \1 -->\n", re.S)


def sections(text):
    """The owned sections in text, in order, each with its markers."""
    return [m.group(0) for m in _SECTION.finditer(text)]


def read_sections(path):
    """The owned sections of the file at path, or none when it does not exist."""
    try:
        with open(path) as f:
            return sections(f.read())
    except FileNotFoundError:
        return []


def splice(path, name, by, body):
    """Replace section `name` of the file at path with body (appended when new)."""
    block = BEGIN.format(name=name, by=by) + "\n" + body.rstrip("\n") + "\n" + END.format(name=name) + "\n"
    with open(path) as f:
        text = f.read()
    pattern = re.compile(r"<!-- section " + re.escape(name) + r": .*? -->\n.*?<!-- end section "
                         + re.escape(name) + r" -->\n", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: block, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + block
    with open(path, "w") as f:
        f.write(text)
