#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of scripts/guest_tcp_report.py, which turns the tcp_bench guest's results into
BENCHMARKS.md's guest-tcp section: reading the results file, medians over rounds, ratios to
nvmet + null_blk, and refusing incomplete results. Run: python3 scripts/test_guest_tcp_report.py"""

import contextlib
import io
import json
import os
import tempfile
import types
import unittest

import guest_tcp_report as r


def fio_json(side, iops, p50_ns, p99_ns):
    job = {"jobname": "x", "read": {"total_ios": 0}, "write": {"total_ios": 0}}
    job[side] = {"total_ios": int(iops * 8), "iops": iops, "lat_ns": {"mean": p50_ns},
                 "clat_ns": {"percentile": {"50.000000": p50_ns, "99.000000": p99_ns}}}
    return json.dumps({"fio version": "fio-3.39", "jobs": [job]}, indent=1)


# IOPS per target and round; latencies follow from IOPS so the ratios are predictable.
IOPS = {"nvmet-null": (1000, 1200, 1100), "nvmet-brd": (900, 500, 950),
        "nvmemu": (2000, 2400, 1500)}


def results(drop=None, end=True):
    parts = ["=== guest.meta", "kernel=6.12.117+deb13-amd64", "vcpus=2", "fio=fio-3.39",
             "mode=full size_mb=128 seconds=8 rounds=3 jobs=2 engine=io_uring"]
    for t in IOPS:
        parts += [f"=== {t}.meta", "dev=/dev/nvme0n1 queue_count=3 sqsize=127"]
    for rw, side in (("randread", "read"), ("randwrite", "write")):
        for t, rounds in IOPS.items():
            for n, iops in enumerate(rounds, 1):
                name = f"{t}.{rw}.{n}.json"
                if name != drop:
                    parts += [f"=== {name}", fio_json(side, iops, 64e9 / iops, 2 * 64e9 / iops)]
    if end:
        parts.append("=== END")
    return "\n".join(parts) + "\n"


ARGS = types.SimpleNamespace(command="scripts/guest-tcp-bench.sh", qemu="QEMU 11.1.3",
                             load=("3.1", "4.2"), raw=None)


class Report(unittest.TestCase):
    def test_medians_and_ratios_to_nvmet_null_blk(self):
        files = r.split_results(results())
        md = r.markdown(files, r.collect(files), ARGS)
        rows = [ln for ln in md.splitlines() if ln.startswith("| rand")]
        self.assertEqual(len(rows), 6)
        # Medians: nvmet-null 1100, nvmet-brd 900, nvmemu 2000 IOPS; the ratios are medians of
        # each round's ratio (nvmemu randread: 2.0, 2.0, 1.36), not ratios of the medians.
        self.assertIn("| randread 4k QD64 x2 | nvmet + null_blk | 1.1 K | 58.2 ms | 116.4 ms "
                      "| 1.00 | 1.00 | 1.00 | 1.0 K / 1.2 K / 1.1 K |", rows)
        self.assertIn("| randwrite 4k QD64 x2 | nvmet + brd | 0.9 K | 71.1 ms | 142.2 ms "
                      "| 0.86 | 1.16 | 1.16 | 0.9 K / 0.5 K / 0.9 K |", rows)
        self.assertIn("| randread 4k QD64 x2 | nvmemu serve --tcp | 2.0 K | 32.0 ms | 64.0 ms "
                      "| 2.00 | 0.50 | 0.50 | 2.0 K / 2.4 K / 1.5 K |", rows)
        self.assertIn("Linux 6.12.117+deb13-amd64, 2 vCPUs under TCG", md)
        self.assertIn("load average 3.1 at the start, 4.2 at the end", md)
        self.assertIn("nvme-tcp made 2 I/O queues of 128 entries to each target", md)

    def test_cut_short_results_are_refused(self):
        with self.assertRaisesRegex(ValueError, "without '=== END'"):
            r.split_results(results(end=False))

    def test_a_missing_workload_is_refused(self):
        text = results(drop="nvmemu.randwrite.1.json").replace("nvmemu.randwrite.", "nvmemu.x.")
        with self.assertRaisesRegex(ValueError, "no runs for nvmemu randwrite"):
            r.collect(r.split_results(text))

    def test_splice_writes_the_section_and_keeps_the_rest(self):
        with tempfile.TemporaryDirectory() as d:
            res, bm = os.path.join(d, "results"), os.path.join(d, "BENCHMARKS.md")
            with open(res, "w") as f:
                f.write(results())
            with open(bm, "w") as f:
                f.write("# Benchmarks\n\nother tables\n")
            with contextlib.redirect_stdout(io.StringIO()):
                rc = r.main([res, "--command", "c", "--splice", bm])
            self.assertEqual(rc, 0)
            with open(bm) as f:
                text = f.read()
            self.assertTrue(text.startswith("# Benchmarks\n\nother tables\n"))
            self.assertIn("<!-- section guest-tcp: written by scripts/guest-tcp-bench.sh", text)
            self.assertIn("| randwrite 4k QD64 x2 | nvmemu serve --tcp |", text)


if __name__ == "__main__":
    unittest.main()
