#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Compares the shape of nvmemu's JSON-RPC answers with SPDK's answers to the same calls.

    rpc_shape.py SPDK_DIR NVMEMU_DIR

Each directory holds METHOD.json files: rpc.py's output for the same set-up script, one
from SPDK's nvmf_tgt (the reference) and one from `nvmemu serve`. Values differ (UUIDs,
counters, paths); what a parser relies on must not, so for every file in SPDK_DIR:

- every key of an SPDK object is in nvmemu's object, recursively (extra keys are fine);
- a value has the same JSON type: object, array, string, boolean, integer, number (an
  integer is acceptable where SPDK has a number; SPDK's null accepts anything);
- list elements are compared with their SPDK counterpart, found by an identifying key
  (`method`, `subsystem`, `nqn`, `nsid`, `name`, `lcore`, `trtype`); without one, with
  SPDK's first element. An SPDK element without a counterpart is missing, and a list
  SPDK fills but nvmemu leaves empty cannot be checked and is a difference too.

Allowed to be missing, and why:
- OPTIONAL_KEYS below: keys SPDK itself omits for some objects.
- NAME_KEYED below: objects whose keys name each program's own components (log flags);
  only the type of their values is compared.
- BY_SHAPE below: lists of each program's own pollers, channels or events; their elements
  are compared with SPDK's first element, and an empty list is allowed.
- In `save_config`, calls of methods that nvmemu's `rpc_get_methods` does not list (SPDK's
  global options of components nvmemu does not have: sockets, iobuf, accel, RAID, the
  bdev_nvme initiator, the scheduler, ...), and SPDK subsystems made only of such calls:
  nvmemu could not replay them, and `nvmemu serve --json` skips them in SPDK's files.
  They are listed in the output.

Prints every difference as `path: what` and exits 1 if there is any.
"""

import json
import os
import sys

# (method, key) -> why nvmemu may omit it.
OPTIONAL_KEYS = {
    ("bdev_get_bdevs", "memory_domains"): (
        "SPDK omits it for bdevs without DMA memory domains (its null bdev); nvmemu's bdevs have none"
    ),
}

# method -> why its keys are not compared.
NAME_KEYED = {
    "log_get_flags": "flags name components: SPDK's (accel, iobuf, ...) are not nvmemu's",
}

# (method, key of a list) -> why its elements are compared by shape only.
BY_SHAPE = {
    ("thread_get_pollers", "active_pollers"): "each program's pollers (SPDK's malloc and accel pollers)",
    ("thread_get_pollers", "timed_pollers"): "nvmemu has no timed pollers",
    ("thread_get_io_channels", "io_channels"): "each program's channels (SPDK's iobuf, accel, bdev_mgr)",
}

IDENTITY_KEYS = ("method", "subsystem", "nqn", "nsid", "name", "lcore", "trtype")


def json_type(v):
    """The JSON type name of a decoded value (bool before int: bool is an int in Python)."""
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def type_ok(ref, got):
    r, g = json_type(ref), json_type(got)
    return r == "null" or r == g or (r == "number" and g == "integer")


def identity(elem):
    """(key, value) naming a list element, or None."""
    if isinstance(elem, dict):
        for k in IDENTITY_KEYS:
            if isinstance(elem.get(k), (str, int)) and not isinstance(elem.get(k), bool):
                return k, elem[k]
    return None


class Comparison:
    def __init__(self, method, nvmemu_methods):
        self.method = method
        self.nvmemu_methods = nvmemu_methods
        self.problems = []
        self.excused = []

    def excusable(self, elem):
        """An SPDK save_config element nvmemu may leave out (see the module doc)."""
        if self.method != "save_config" or not isinstance(elem, dict):
            return False
        if "method" in elem:
            return elem["method"] not in self.nvmemu_methods
        if "subsystem" in elem and "config" in elem:
            return all(self.excusable(e) for e in elem["config"] or [])
        return False

    def compare(self, ref, got, path):
        if not type_ok(ref, got):
            self.problems.append(f"{path}: {json_type(got)}, SPDK has {json_type(ref)}")
        elif isinstance(ref, dict) and self.method in NAME_KEYED:
            types = {json_type(v) for v in ref.values()}
            for k, v in got.items():
                if not any(type_ok(t_ref, v) for t_ref in ref.values()):
                    self.problems.append(f"{path}.{k}: {json_type(v)}, SPDK's values are {sorted(types)}")
        elif isinstance(ref, dict):
            for k, v in ref.items():
                if k in got and (self.method, k) in BY_SHAPE and isinstance(v, list):
                    for i, g in enumerate(got[k] if isinstance(got[k], list) else [got[k]]):
                        if v:
                            self.compare(v[0], g, f"{path}.{k}[{i}]")
                elif k in got:
                    self.compare(v, got[k], f"{path}.{k}")
                elif (self.method, k) not in OPTIONAL_KEYS:
                    self.problems.append(f"{path}.{k}: missing (SPDK: {json_type(v)})")
        elif isinstance(ref, list) and ref:
            self.compare_lists(ref, got, path)

    def compare_lists(self, ref, got, path):
        if not got:
            if not all(self.excusable(e) for e in ref):
                self.problems.append(f"{path}: empty, SPDK lists {len(ref)}: element shape unchecked")
            return
        if identity(ref[0]) is None:
            for i, g in enumerate(got):
                self.compare(ref[0], g, f"{path}[{i}]")
            return
        seen = set()
        for r in ref:
            ident = identity(r)
            if ident is None or ident in seen:
                continue
            seen.add(ident)
            key, value = ident
            label = f"{path}[{key}={value}]"
            matches = [g for g in got if identity(g) == ident]
            if not matches and self.excusable(r):
                self.excused.append(f"{key} {value}")
            elif not matches:
                self.problems.append(f"{label}: missing")
            for g in matches:
                self.compare(r, g, label)


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    spdk_dir, nvmemu_dir = argv
    with open(os.path.join(nvmemu_dir, "rpc_get_methods.json"), encoding="utf-8") as f:
        nvmemu_methods = set(json.load(f))
    total = 0
    for name in sorted(os.listdir(spdk_dir)):
        if not name.endswith(".json"):
            continue
        method = name[: -len(".json")]
        with open(os.path.join(spdk_dir, name), encoding="utf-8") as f:
            ref = json.load(f)
        try:
            with open(os.path.join(nvmemu_dir, name), encoding="utf-8") as f:
                got = json.load(f)
        except (OSError, ValueError) as e:
            print(f"{method}: no nvmemu answer ({e})")
            total += 1
            continue
        c = Comparison(method, nvmemu_methods)
        c.compare(ref, got, method)
        total += len(c.problems)
        status = "same shape" if not c.problems else f"{len(c.problems)} differences"
        print(f"{method}: {status}")
        for p in c.problems:
            print(f"  {p}")
        if c.excused:
            print(f"  not nvmemu methods, not compared: {', '.join(c.excused)}")
    print(f"rpc shape: {total} differences from SPDK")
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
