#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks that each crate's documented nvmemu dependencies are the ones Cargo.toml declares.

Two places document them: the crate's `src/lib.rs` ("May depend on: ..." or "Depends on: ...",
up to the end of that sentence, parenthesised remarks aside) and CONTRIBUTING.md's table
"Crates and who may depend on whom" (third column). Both must name exactly the workspace
crates that `cargo metadata` lists as the crate's normal or build dependencies; "all" (the
binary) means every other crate, with nothing depending on it. Prints one line per
mismatch, naming the crate, and exits 1 if there is any.

Usage: .ci/crate_deps.py [REPO]   (default: the repository holding this script)
"""

import json
import os
import re
import subprocess
import sys

PREFIX = "nvmemu-"
STATEMENT = re.compile(r"(?:May depend on|Depends on)(?:\*\*)?:?(?:\*\*)?\s*(.*)", re.S)


def metadata(repo):
    """{short name: (manifest dir, set of short names it depends on)} of the workspace."""
    out = subprocess.run(["cargo", "metadata", "--format-version", "1", "--no-deps",
                          "--offline"], cwd=repo, capture_output=True, text=True, check=True)
    pkgs = json.loads(out.stdout)["packages"]
    names = {p["name"] for p in pkgs}
    crates = {}
    for p in pkgs:
        deps = {short(d["name"]) for d in p["dependencies"]
                if d["name"] in names and d["kind"] in (None, "build") and d["name"] != p["name"]}
        crates[short(p["name"])] = (os.path.dirname(p["manifest_path"]), deps)
    return crates


def short(name):
    return name[len(PREFIX):] if name.startswith(PREFIX) else name


def named_crates(text, known):
    """The known crates a dependency statement names; None for "all"."""
    while re.search(r"\([^()]*\)", text):
        text = re.sub(r"\([^()]*\)", "", text)
    if re.match(r"\W*all\b", text):
        return None
    words = re.findall(r"[A-Za-z][\w-]*", text)
    return {short(w) for w in words if short(w) in known}


def lib_rs_statement(src):
    """The dependency sentence of a crate's `//!` docs, or None."""
    doc = " ".join(ln[3:].strip() for ln in src.splitlines() if ln.startswith("//!"))
    m = STATEMENT.search(doc)
    if not m:
        return None
    text = m.group(1)
    # The sentence ends at "Must never" / "Never:" or at a full stop outside parentheses.
    depth, end = 0, len(text)
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and ch == "." and (i + 1 == len(text) or text[i + 1] == " "):
            end = i
            break
    text = re.split(r"\b(?:Must never|Never)\b", text[:end])[0]
    return text


def contributing_table(repo, known):
    """{crate: named crates or None} from CONTRIBUTING.md's crate table."""
    with open(os.path.join(repo, "CONTRIBUTING.md")) as f:
        text = f.read()
    section = text.split("## Crates and who may depend on whom", 1)[-1].split("\n## ", 1)[0]
    rows = {}
    for ln in section.splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split("|")]
        m = re.fullmatch(r"`([\w-]+)`", cells[0]) if len(cells) == 3 else None
        if m:
            deps = cells[2]
            rows[m.group(1)] = set() if re.match(r"none\b", deps) else named_crates(deps, known)
    return rows


def compare(where, crate, documented, actual, crates):
    if documented is None:  # "all": every other crate, and nothing depends on this one
        users = sorted(c for c, (_, deps) in crates.items() if crate in deps)
        documented = set(crates) - {crate}
        if users:
            return [f"{crate}: {where} says nothing depends on it; {', '.join(users)} does"]
    out = []
    missing, extra = sorted(actual - documented), sorted(documented - actual)
    if missing:
        out.append(f"{crate}: Cargo.toml depends on {', '.join(missing)}, "
                   f"which {where} does not name")
    if extra:
        out.append(f"{crate}: {where} names {', '.join(extra)}, which Cargo.toml does not "
                   "depend on")
    return out


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.dirname(os.path.abspath(__file__)))
    crates = metadata(repo)
    known = set(crates)
    table = contributing_table(repo, known)
    errors = []
    for crate, (root, actual) in sorted(crates.items()):
        if crate not in table:
            errors.append(f"{crate}: no row in CONTRIBUTING.md's crate table")
        else:
            errors += compare("CONTRIBUTING.md", crate, table[crate], actual, crates)
        with open(os.path.join(root, "src", "lib.rs")) as f:
            statement = lib_rs_statement(f.read())
        if statement is None:
            if table.get(crate, set()) is not None:  # the binary's lib.rs need not say "all"
                errors.append(f"{crate}: src/lib.rs has no \"May depend on:\" line in its docs")
            continue
        errors += compare("src/lib.rs", crate, named_crates(statement, known), actual, crates)
    for e in errors:
        print(f"crate dependencies: {e}", file=sys.stderr)
    if errors:
        print(f"crate dependencies: {len(errors)} mismatch(es): make the docs say what "
              "Cargo.toml does, or change Cargo.toml", file=sys.stderr)
        return 1
    print(f"crate dependencies: the docs of {len(crates)} crates match Cargo.toml")
    return 0


if __name__ == "__main__":
    sys.exit(main())
