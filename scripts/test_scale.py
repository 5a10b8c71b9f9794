#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of scripts/scale.py's parts that a 2-CPU machine cannot run end to end: the
placement of many pairs, spdk_nvme_perf's per-subsystem lines, the summary's efficiency and
ratio, the table and the plot. Run: python3 scripts/test_scale.py (.ci/run does)."""

import os
import tempfile
import types
import unittest
import xml.dom.minidom

import scale
from lib.scale_report import markdown, svg

PERF_OUTPUT = """\
Initializing NVMe Controllers
Attached to NVMe over Fabrics controller at /w/spdk-vfu1:: nqn.2016-06.io.spdk:cnode1
========================================================
                                                                 Latency(us)
Device Information                                  :       IOPS      MiB/s    Average        min        max
VFIOUSER (/w/spdk-vfu1) NSID 1 from core  3:   30000.25      14.65     533.00     100.00    2000.00
VFIOUSER (/w/spdk-vfu0) NSID 1 from core  1:   20000.50       9.77     799.00     100.00    2000.00
========================================================
Total                                               :   50000.75      24.41     640.00     100.00    2000.00
"""


def row(target, pairs, per_pair, client="nvmemu bench"):
    return dict(target=target, client=client, ns="malloc", bs=512, qd=16, pairs=pairs, rep=0,
                per_pair=per_pair)


def fake_sysfs(root, cpus):
    """cpus: {cpu: (node, package, core)} as sysfs lays them out."""
    for cpu, (node, pkg, core) in cpus.items():
        d = os.path.join(root, "cpu", f"cpu{cpu}")
        os.makedirs(os.path.join(d, "topology"))
        os.makedirs(os.path.join(d, f"node{node}"))
        for name, value in (("physical_package_id", pkg), ("core_id", core)):
            with open(os.path.join(d, "topology", name), "w") as f:
                f.write(f"{value}\n")


class Placement(unittest.TestCase):
    def test_pairs_take_neighbouring_cores(self):
        pairs = scale.pairs_of([0, 2, 4, 6, 8, 10], {})
        self.assertEqual(scale.placement(pairs, 2), ([0, 4], [2, 6], [0, 0]))
        self.assertEqual(scale.placement(scale.pairs_of([0, 1], {}), 1), ([0], [1], [0]))

    def test_two_nodes_pairs_never_span_a_node(self):
        # Node 0: CPUs 0, 2, 4 (three cores; 6 is 0's SMT sibling), node 1: CPUs 1, 3, 5, 7.
        cpus = {0: (0, 0, 0), 2: (0, 0, 1), 4: (0, 0, 2), 6: (0, 0, 0),
                1: (1, 1, 0), 3: (1, 1, 1), 5: (1, 1, 2), 7: (1, 1, 3)}
        with tempfile.TemporaryDirectory() as root:
            fake_sysfs(root, cpus)
            cores, nodes = scale.physical_cores(sysfs=root, cpus=cpus)
            self.assertEqual(scale.node_of(3, root), 1)
        self.assertEqual(cores, [0, 2, 4, 1, 3, 5, 7])
        pairs = scale.pairs_of(cores, nodes)
        self.assertEqual(pairs, [(0, 2, 0), (1, 3, 1), (5, 7, 1)])
        self.assertEqual(scale.placement(pairs, 3), ([0, 1, 5], [2, 3, 7], [0, 1, 1]))
        table = scale.summarize([row("nvmemu", 1, [4e6])])
        a = types.SimpleNamespace(peers=None, runtime=4, reps=1, ns_mib=256)
        self.assertIn("0 / 2 node 0, 1 / 3 node 1", markdown(table, a, cores, pairs[:2]))

    def test_mask(self):
        self.assertEqual(scale.mask([1, 3]), "0xa")


class SpdkPerf(unittest.TestCase):
    def test_each_subsystem_gets_its_own_line(self):
        a = types.SimpleNamespace(peers="/p", runtime=1)
        target = types.SimpleNamespace(dirs=["/w/spdk-vfu0", "/w/spdk-vfu1"])
        real = scale.run
        scale.run = lambda cmd, timeout: PERF_OUTPUT
        try:
            self.assertEqual(scale.spdk_clients(a, target, [1, 3], 512, 16), [20000.50, 30000.25])
        finally:
            scale.run = real

    def test_a_missing_line_is_an_error(self):
        a = types.SimpleNamespace(peers="/p", runtime=1)
        target = types.SimpleNamespace(dirs=["/w/spdk-vfu0", "/w/spdk-vfu1", "/w/spdk-vfu2"])
        real = scale.run
        scale.run = lambda cmd, timeout: PERF_OUTPUT
        try:
            with self.assertRaisesRegex(RuntimeError, "2 device lines for 3 subsystems"):
                scale.spdk_clients(a, target, [1, 3, 5], 512, 16)
        finally:
            scale.run = real


class Summary(unittest.TestCase):
    def test_efficiency_and_ratio(self):
        rows = [row("nvmemu", 1, [4e6]), row("nvmemu", 2, [3e6, 3e6]),
                row("spdk", 1, [2e6]), row("spdk", 2, [2e6, 2e6]),
                row("nvmemu", 1, [5e6]), row("nvmemu", 1, [6e6])]  # median of 4, 5, 6: 5
        one, two = scale.summarize(rows)
        self.assertEqual(one["nvmemu"], dict(iops=5e6, per_pair=5e6, efficiency=1.0))
        self.assertEqual(one["ratio"], 2.5)
        self.assertEqual(two["nvmemu"]["per_pair"], 3e6)
        self.assertAlmostEqual(two["nvmemu"]["efficiency"], 0.6)
        self.assertAlmostEqual(two["spdk"]["efficiency"], 1.0)
        self.assertEqual(two["ratio"], 1.5)

    def test_table_and_plot(self):
        table = scale.summarize([row("nvmemu", 1, [4e6]), row("spdk", 1, [2e6]),
                                 row("nvmemu", 2, [3e6, 3e6]), row("spdk", 2, [2e6, 2e6])])
        a = types.SimpleNamespace(peers="/p", runtime=4, reps=1, ns_mib=256)
        text = markdown(table, a, [0, 1, 2, 3])
        self.assertIn("| nvmemu bench | malloc | 512 B QD16 | 2 | 6.000 M | 3.000 M | 0.75 | "
                      "4.000 M | 2.000 M | 1.00 | 1.50x |", text)
        doc = xml.dom.minidom.parseString(svg(table))
        self.assertEqual(len(doc.getElementsByTagName("polyline")), 2)


if __name__ == "__main__":
    unittest.main()
