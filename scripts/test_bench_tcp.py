#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of scripts/bench_tcp.py's parts that need no target: choosing a subset of
workloads and clients, reading `ss`'s segment counters, and the goals' verdicts and the
table over the rows a run made. Run: python3
scripts/test_bench_tcp.py (.ci/run does)."""

import unittest

import bench_tcp


def row(client, workload, spdk, nvmemu, spdk_core=(), nvmemu_core=()):
    return {"client": client, "workload": workload, "spdk": list(spdk), "nvmemu": list(nvmemu),
            "spdk_per_busy_core": list(spdk_core), "nvmemu_per_busy_core": list(nvmemu_core)}


class Choose(unittest.TestCase):
    def test_no_list_keeps_everything_in_table_order(self):
        self.assertEqual(bench_tcp.choose(None, bench_tcp.WORKLOADS, "workload"),
                         list(bench_tcp.WORKLOADS))

    def test_named_labels_come_in_table_order(self):
        got = bench_tcp.choose("128 KiB read QD8, 4 KiB randread QD32", bench_tcp.WORKLOADS,
                               "workload")
        self.assertEqual([w[0] for w in got], ["4 KiB randread QD32", "128 KiB read QD8"])
        self.assertEqual(bench_tcp.choose("spdk_nvme_perf", bench_tcp.CLIENTS, "client"),
                         ["spdk_nvme_perf"])

    def test_an_unknown_name_exits_naming_it_and_the_known_ones(self):
        with self.assertRaises(SystemExit) as e:
            bench_tcp.choose("4 KiB randread QD64", bench_tcp.WORKLOADS, "workload")
        self.assertIn("QD64", str(e.exception.code))
        self.assertIn("512 B randread QD16", str(e.exception.code))


class Segments(unittest.TestCase):
    SS = ("0      0      127.0.0.1:4420 127.0.0.1:51000\n"
          "\t bbr wscale:10,10 mss:32768 segs_out:9 segs_in:12 data_segs_out:7 "
          "data_segs_in:11 bbr:(bw:1bps) lastsnd:4\n"
          "0      0      127.0.0.1:4420 127.0.0.1:51002\n"
          "\t bbr wscale:10,10 segs_out:900 segs_in:401 data_segs_out:800 data_segs_in:400\n")

    def test_each_connection_gets_its_own_received_data_segments(self):
        self.assertEqual(bench_tcp.data_segments(self.SS),
                         {"127.0.0.1:51000": 11, "127.0.0.1:51002": 400})

    def test_a_connection_without_data_yet_is_left_out(self):
        # A socket that has received nothing prints no data_segs_in at all.
        ss = "0 0 127.0.0.1:4420 127.0.0.1:51004\n\t bbr segs_out:1 segs_in:1\n"
        self.assertEqual(bench_tcp.data_segments(ss), {})
        self.assertEqual(bench_tcp.data_segments(""), {})

    def test_the_table_shows_the_median_client_batch_of_each_target(self):
        r = row("spdk_nvme_perf", "4 KiB randread QD32", [400e3], [500e3], [420e3], [520e3])
        r.update(spdk_batches=[19.0, 21.0, 20.0], nvmemu_batches=[8.25])
        self.assertEqual((bench_tcp.batch(r, "spdk"), bench_tcp.batch(r, "nvmemu")),
                         ("20.0", "8.2"))
        self.assertEqual(bench_tcp.batch(row("c", "w", [1], [1]), "spdk"), "-")


class Goals(unittest.TestCase):
    def test_the_per_core_goal_is_judged_on_its_case(self):
        rows = [row("spdk_nvme_perf", "4 KiB randread QD32", [600e3], [700e3], [500e3], [660e3])]
        lines = bench_tcp.goal_lines(rows)
        self.assertIn("1.32x", lines[0])
        self.assertTrue(lines[0].endswith("met."), lines[0])
        self.assertEqual(lines[1], "- Goal: not behind anywhere (plain IOPS): met.")

    def test_a_subset_without_the_goal_case_judges_only_what_ran(self):
        rows = [row("spdk_nvme_perf", "128 KiB read QD8", [40e3], [39e3])]
        self.assertEqual(bench_tcp.goal_lines(rows), [
            "- Goal: not behind anywhere (plain IOPS): missed (spdk_nvme_perf 128 KiB read QD8)."])


if __name__ == "__main__":
    unittest.main()
