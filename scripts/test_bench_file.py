#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of scripts/bench_file.py's parts: the figures and the I/O check read from
fio-shaped JSON, the medians and the table, the two sides' command lines, and what --check
changes. Run: python3 scripts/test_bench_file.py (.ci/run does)."""

import json
import unittest

import bench_file


def report(rw, iops, p50_ns, p99_ns, ios=1000, error=0):
    """fio-shaped JSON of one job that did `rw`, the other direction idle."""
    busy = dict(iops=iops, total_ios=ios, io_bytes=ios * 4096,
                clat_ns=dict(percentile={"50.000000": p50_ns, "99.000000": p99_ns}))
    idle = dict(iops=0, total_ios=0, io_bytes=0,
                clat_ns=dict(percentile={"50.000000": 0, "99.000000": 0}))
    reading = "read" in rw
    job = dict(jobname="file", error=error, read=busy if reading else idle,
               write=idle if reading else busy)
    return json.dumps(dict(jobs=[job]))


class Parsing(unittest.TestCase):
    def test_figures_take_the_workloads_direction_in_microseconds(self):
        self.assertEqual(bench_file.figures(report("randread", 98000.5, 307200, 598000),
                                            "randread"), (98000.5, 307.2, 598.0))
        self.assertEqual(bench_file.figures(report("randwrite", 125000, 245000, 477000),
                                            "randwrite"), (125000, 245.0, 477.0))

    def test_a_run_without_io_or_with_an_error_does_not_count(self):
        self.assertIsNone(bench_file.no_io(report("randread", 1, 1, 1), "randread", "fio"))
        self.assertEqual(bench_file.no_io(report("randread", 0, 0, 0, ios=0), "randread", "fio"),
                         "fio randread: no I/O completed")
        # Writes that went to the other direction are no writes.
        self.assertEqual(bench_file.no_io(report("randread", 9, 1, 1), "randwrite", "nvmemu"),
                         "nvmemu randwrite: no I/O completed")
        self.assertEqual(bench_file.no_io(report("randwrite", 9, 1, 1, error=5), "randwrite",
                                          "nvmemu"),
                         "nvmemu randwrite: the job ended with error 5")


class Table(unittest.TestCase):
    def test_a_row_holds_the_medians_of_each_figure(self):
        runs = [(90000, 300, 700), (100000, 250, 500), (120000, 310, 600)]
        self.assertEqual(bench_file.row("randread", "fio", runs),
                         "| randread | fio --ioengine=io_uring --direct=1 | 100.0k | 300 | 600 |")

    def test_the_section_has_the_setup_the_table_and_the_commands(self):
        rows = [bench_file.row("randwrite", who, [(1500, 20, 40)]) for who in ("nvmemu", "fio")]
        md = bench_file.markdown("4 KiB on ext4.", rows, ["nvmemu bench ...", "fio ..."])
        lines = md.splitlines()
        self.assertTrue(lines[0].startswith("## File-backed namespace"))
        self.assertIn("4 KiB on ext4.", lines)
        head = lines.index("| workload | path | IOPS | p50 clat (us) | p99 clat (us) |")
        self.assertEqual(lines[head + 1], "|---|---|---|---|---|")
        self.assertEqual(lines[head + 2],
                         "| randwrite | nvmemu bench --ns file (vfio-user, io_uring) | 1.5k | 20 "
                         "| 40 |")
        self.assertEqual(lines[-4:], ["```", "nvmemu bench ...", "fio ...", "```"])


class Commands(unittest.TestCase):
    def test_both_sides_run_the_same_job_on_the_same_file(self):
        n = bench_file.nvmemu_cmd("nvmemu", "/f.img", "randread", 5)
        f = bench_file.fio_cmd("/f.img", "randread", 5)
        self.assertEqual(n[:4], ["nvmemu", "bench", "--eta=never", "--ns=file:path=/f.img"])
        self.assertEqual(f[:4], ["fio", "--filename=/f.img", "--ioengine=io_uring", "--direct=1"])
        self.assertEqual(n[4:], f[4:])
        self.assertIn("--iodepth=32", f)
        self.assertIn("--runtime=5", f)

    def test_check_is_small_and_never_writes_the_section(self):
        full = bench_file.parse_args([])
        self.assertEqual((full.size, full.runtime, full.runs, full.no_write, full.check),
                         ("1G", 10, 3, False, False))
        check = bench_file.parse_args(["--check"])
        self.assertEqual((check.size, check.runtime, check.runs, check.no_write),
                         ("16M", 1, 1, True))
        given = bench_file.parse_args(["--check", "--runtime", "2", "--size", "64M"])
        self.assertEqual((given.size, given.runtime), ("64M", 2))


if __name__ == "__main__":
    unittest.main()
