#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Reads what SPDK's tools printed in tests/peers/spdk.sh and decides pass or fail.

    spdk_results.py identify LOG --serial S --model M --lbas N --lba-size B
    spdk_results.py identity LOG LOG   (two servers set up alike)
    spdk_results.py perf LOG --label TEXT
    spdk_results.py compliance LOG
    spdk_results.py bdevperf RPC_SOCKET [--timeout SECONDS]   (needs SPDK's python/ on PYTHONPATH)
    spdk_results.py bdevperf-run RPC_SOCKET RESULTS.json [--timeout SECONDS]   (runs the tests only)
    spdk_results.py bdevperf-failed RESULTS.json FAULTS.json   (io_failed = nvmemu's injected)

Each prints a one-line summary and exits 0, or prints every reason it fails and exits 1.
"""

import argparse
import json
import re
import sys


class CheckFailed(Exception):
    """The tool's output shows a failure; the message lists every reason."""


def field(text, label):
    """The value after `label:` on the first line that has it, or None."""
    m = re.search(r"^\s*" + re.escape(label) + r":\s*(.*?)\s*$", text, re.M)
    return m.group(1) if m else None


def check_identify(text, serial, model, lbas, lba_size):
    """spdk_nvme_identify: the controller's serial and model, namespace 1 with its size."""
    problems = []
    for label, want in (("Serial Number", serial), ("Model Number", model)):
        got = field(text, label)
        if got != want:
            problems.append(f"{label}: got {got!r}, nvmemu serves {want!r}")
    if not re.search(r"^Namespace ID:1$", text, re.M):
        problems.append("namespace 1 is not listed among the active namespaces")
    got = field(text, "Size (in LBAs)")
    if got is None or got.split()[0] != str(lbas):
        problems.append(f"Size (in LBAs): got {got!r}, want {lbas}")
    m = re.search(r"^LBA Format #00: Data Size:\s*(\d+)", text, re.M)
    if not m or int(m.group(1)) != lba_size:
        problems.append(f"LBA Format #00 data size: got {m and m.group(1)!r}, want {lba_size}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return f"identify: serial {serial!r}, model {model!r}, namespace 1 of {lbas} LBAs"


# What spdk_nvme_identify must say of a subsystem whose namespaces its listeners share.
SHARED = (
    ("May have multiple subsystem ports", "Yes"),
    ("May have multiple controllers", "Yes"),
    ("128-bit Host Identifier", "Supported"),
    ("Reservations", "Supported"),
    ("Reservation", "Supported"),
    ("Namespace Sharing Capabilities", "Multiple Controllers"),
)


def check_identity(texts):
    """spdk_nvme_identify of two servers set up alike: each namespace has an NGUID and a
    UUID (the same bytes, as SPDK derives them), no EUI-64, the two servers' differ, and
    both report a shared namespace with reservations."""
    problems = []
    ids = []
    for n, text in enumerate(texts, 1):
        nguid, uuid = field(text, "NGUID"), field(text, "UUID")
        if not nguid or not uuid:
            problems.append(f"server {n}: NGUID {nguid!r}, UUID {uuid!r}: both must be listed")
        elif nguid.lower() != uuid.replace("-", "").lower():
            problems.append(f"server {n}: NGUID {nguid} is not the UUID {uuid}")
        if field(text, "EUI64") is not None:
            problems.append(f"server {n}: an EUI64 is listed though none was set")
        for label, want in SHARED:
            got = field(text, label)
            if got != want:
                problems.append(f"server {n}: {label}: got {got!r}, want {want!r}")
        ids.append(nguid)
    if len(ids) == 2 and ids[0] is not None and ids[0] == ids[1]:
        problems.append(f"both servers report NGUID {ids[0]}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return f"identity: NGUIDs {ids[0]} and {ids[1]} differ; namespaces shared, reservations offered"


# SPDK's perf prints per-I/O failures ("... completed with error (sct=..., sc=...)") and
# set-up failures on stderr, which the log holds too.
PERF_ERROR = re.compile(r"error|fail", re.I)


def check_perf(text, label):
    """spdk_nvme_perf: a Total row with IOPS > 0 and no error line."""
    problems = [f"error line: {line.strip()}" for line in text.splitlines() if PERF_ERROR.search(line)]
    m = re.search(r"^Total\s*:\s*([\d.]+)\s+([\d.]+)", text, re.M)
    if not m:
        problems.append("no Total row: the run did not finish")
    elif float(m.group(1)) <= 0:
        problems.append(f"Total IOPS is {m.group(1)}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return f"perf {label}: {float(m.group(1)):.0f} IOPS, {m.group(2)} MiB/s"


TEST_START = re.compile(r"^\s*Test: (\S+) \.\.\.", re.M)
# CUnit writes "passed" or "FAILED" right after "...", or at a line start when the test's
# own log lines came in between.
TEST_RESULT = re.compile(r"(?:\.\.\.|^)(passed|FAILED)\b", re.M)
SUMMARY = re.compile(r"^\s*(suites|tests|asserts)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\S+)", re.M)


def check_compliance(text):
    """nvme_compliance: every test registered ran and passed (CUnit's run summary)."""
    starts = list(TEST_START.finditer(text))
    summary_at = text.find("Run Summary:")
    results, failures = {}, []
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else (summary_at if summary_at >= 0 else len(text))
        body = text[m.end() - 3 : end]
        r = TEST_RESULT.search(body)
        results[m.group(1)] = r.group(1) if r else "did not finish"
        if not r or r.group(1) != "passed":
            detail = [line.strip() for line in body.splitlines()[1:] if re.match(r"\s+\d+\. ", line)]
            failures.append(f"{m.group(1)}: {results[m.group(1)]}" + "".join(f"\n    {d}" for d in detail))
    if summary_at < 0:
        last = starts[-1].group(1) if starts else "none"
        raise CheckFailed(
            "\n".join(failures + [f"no CUnit run summary: the suite did not finish (last test started: {last})"])
        )
    rows = {m.group(1): m.groups()[1:] for m in SUMMARY.finditer(text, summary_at)}
    tests = rows.get("tests")
    if tests is None:
        failures.append("the run summary has no tests row")
    else:
        total, ran, passed, failed, inactive = (int(v) if v.isdigit() else v for v in tests)
        if total == 0 or ran != total or passed != total or failed != 0 or inactive != 0:
            failures.append(
                f"tests: {total} registered, {ran} ran, {passed} passed, {failed} failed, {inactive} inactive"
            )
        if len(results) != total:
            failures.append(f"{len(results)} test results printed for {total} tests")
    asserts = rows.get("asserts")
    if asserts is None:
        failures.append("no asserts row in the CUnit summary")
    elif asserts[3] != "0":
        failures.append(f"{asserts[3]} asserts failed")
    if failures:
        raise CheckFailed("\n".join(failures))
    return f"compliance: all {len(results)} tests passed"


def check_bdevperf(sock, timeout):
    """bdevperf -z: run perform_tests and check each job finished with IOPS > 0, 0 failed."""
    from spdk.rpc.client import JSONRPCClient, JSONRPCException  # SPDK's own client

    try:
        result = JSONRPCClient(sock, timeout=timeout).call("perform_tests")
    except JSONRPCException as e:
        raise CheckFailed(f"perform_tests did not answer within {timeout} s or failed: {str(e).strip()}") from e
    jobs = result.get("results") or []
    problems = [] if jobs else [f"no job results: {result}"]
    for j in jobs:
        name = j.get("job", "?")
        if j.get("status") != "finished":
            problems.append(f"{name}: status {j.get('status')!r}")
        if not j.get("iops", 0) > 0:
            problems.append(f"{name}: {j.get('iops')} IOPS")
        for k in ("io_failed", "io_timeout"):
            if k not in j:
                problems.append(f"{name}: no {k} in the result (bdevperf's format changed?)")
            elif j[k] != 0:
                problems.append(f"{name}: {k} = {j[k]}")
    if problems:
        raise CheckFailed("\n".join(problems))
    return "; ".join(
        f"bdevperf {j['job']} {j.get('workload')} QD{j.get('queue_depth')}: {j['iops']:.0f} IOPS, "
        f"{j.get('io_failed')} failed, {j.get('runtime')} s"
        for j in jobs
    )


def perform_tests(sock, timeout, save):
    """bdevperf -z: run perform_tests; its answer, also written to `save`."""
    from spdk.rpc.client import JSONRPCClient, JSONRPCException  # SPDK's own client

    try:
        result = JSONRPCClient(sock, timeout=timeout).call("perform_tests")
    except JSONRPCException as e:
        raise CheckFailed(f"perform_tests did not answer within {timeout} s or failed: {str(e).strip()}") from e
    with open(save, "w", encoding="utf-8") as f:
        json.dump(result, f)
    return result


def check_failed_counts(result, faults):
    """bdevperf's failed I/O (its jobs' io_failed, -f: it went on after them) against the
    commands nvmemu's fault rules fired on (nvmemu_bdev_get_faults): equal, and not 0."""
    jobs = result.get("results") or []
    if not jobs or any("io_failed" not in j for j in jobs):
        raise CheckFailed(f"no io_failed in bdevperf's results (its format changed?): {result}")
    failed = sum(j["io_failed"] for j in jobs)
    injected = sum(r.get("injected", 0) for b in faults for r in b.get("faults", []))
    if injected == 0 or failed != injected:
        raise CheckFailed(f"bdevperf counted {failed} failed I/O, nvmemu injected {injected}")
    ios = sum(j.get("iops", 0) * j.get("runtime", 0) for j in jobs)
    return f"bdevperf counted {failed} failed I/O of about {ios:.0f}, as many as nvmemu injected"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="tool", required=True)
    p = sub.add_parser("identify")
    p.add_argument("log")
    p.add_argument("--serial", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--lbas", type=int, required=True)
    p.add_argument("--lba-size", type=int, required=True)
    p = sub.add_parser("identity")
    p.add_argument("logs", nargs=2)
    p = sub.add_parser("perf")
    p.add_argument("log")
    p.add_argument("--label", default="")
    p = sub.add_parser("compliance")
    p.add_argument("log")
    p = sub.add_parser("bdevperf")
    p.add_argument("sock")
    p.add_argument("--timeout", type=float, default=60)
    p = sub.add_parser("bdevperf-run")
    p.add_argument("sock")
    p.add_argument("save")
    p.add_argument("--timeout", type=float, default=60)
    p = sub.add_parser("bdevperf-failed")
    p.add_argument("results")
    p.add_argument("faults")
    a = ap.parse_args(argv)
    try:
        if a.tool == "bdevperf":
            line = check_bdevperf(a.sock, a.timeout)
        elif a.tool == "bdevperf-run":
            perform_tests(a.sock, a.timeout, a.save)
            line = f"bdevperf results in {a.save}"
        elif a.tool == "bdevperf-failed":
            with open(a.results, encoding="utf-8") as r, open(a.faults, encoding="utf-8") as f:
                line = check_failed_counts(json.load(r), json.load(f))
        elif a.tool == "identity":
            texts = []
            for log in a.logs:
                with open(log, encoding="utf-8", errors="replace") as f:
                    texts.append(f.read())
            line = check_identity(texts)
        else:
            with open(a.log, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if a.tool == "identify":
                line = check_identify(text, a.serial, a.model, a.lbas, a.lba_size)
            elif a.tool == "perf":
                line = check_perf(text, a.label)
            else:
                line = check_compliance(text)
    except CheckFailed as e:
        print(f"{a.tool}: FAILED\n{e}")
        return 1
    print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
