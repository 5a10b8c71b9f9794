#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of scripts/bench_model.py's prediction and report: the log-normal matches the
model's (crates/bdev/src/model/sampler.rs), the simulated queue gives the configured
percentiles at QD1 and units / mean at saturation, and the verdicts, table and plot come out
of a report. Run: python3 scripts/test_bench_model.py (.ci/run does)."""

import math
import types
import unittest
import xml.dom.minidom

import bench_model
from lib.model_predict import lognormal_params, simulate, within
from lib.model_report import markdown, svg


class Prediction(unittest.TestCase):
    def test_lognormal_has_the_configured_mean_and_p99(self):
        mu, sigma = lognormal_params(80, 250)
        self.assertAlmostEqual(math.exp(mu + sigma * sigma / 2), 80, places=6)
        self.assertAlmostEqual(math.exp(mu + 2.326347874040841 * sigma), 250, places=6)
        self.assertEqual(lognormal_params(20, 20), (math.log(20), 0.0))

    def test_qd1_is_the_service_distribution_and_saturation_units_over_mean(self):
        qd1 = simulate(500, 2000, 4, 1, commands=60000)
        mu, _ = lognormal_params(500, 2000)
        self.assertLess(abs(qd1["p50_us"] / math.exp(mu) - 1), 0.03)
        self.assertLess(abs(qd1["p99_us"] / 2000 - 1), 0.08)
        self.assertLess(abs(qd1["iops"] / 2000 - 1), 0.03)
        deep = simulate(500, 2000, 4, 64, commands=60000)
        self.assertLess(abs(deep["iops"] / 8000 - 1), 0.03)
        # Little's law: 64 outstanding at 8 K IOPS wait about 8 ms.
        self.assertLess(abs(deep["p50_us"] / 8000 - 1), 0.1)

    def test_unlimited_units_never_queue(self):
        r = simulate(100, 100, 0, 32, commands=5000)
        self.assertEqual((round(r["p50_us"]), round(r["p99_us"])), (100, 100))
        self.assertLess(abs(r["iops"] / 320000 - 1), 0.01)

    def test_the_spdk_tail_takes_p99_for_one_command_in_a_hundred(self):
        r = simulate(50, 900, 0, 1, commands=40000, tail="spdk")
        self.assertEqual(r["p50_us"], 50)
        # Mean 0.99 x 50 + 0.01 x 900 = 58.5 us: 17.1 K IOPS at QD1.
        self.assertLess(abs(r["iops"] / (1e6 / 58.5) - 1), 0.03)

    def test_within_allows_the_host_round_trip_above_only(self):
        self.assertTrue(within(120, 100, 0.15, 10))
        self.assertFalse(within(130, 100, 0.15, 10))
        self.assertFalse(within(80, 100, 0.15, 10))


def point(qd, iops, p50, p99):
    return dict(qd=qd, iops=iops, p50_us=p50, p99_us=p99)


class Report(unittest.TestCase):
    def report(self):
        model = dict(preset=None, tail="lognormal", units=4, unit_mib_per_sec=0, seed=1,
                     read=dict(avg_us=500, p99_us=2000))
        host = [point(1, 60000, 15, 30), point(64, 400000, 150, 400)]
        measured = [point(1, 1990, 400, 2100), point(64, 5000, 12000, 20000)]
        res = bench_model.judge(model, measured, host)
        return dict(started="2026-11-26 14:00 UTC", runtime_s=3, note="", host=host,
                    tolerance=bench_model.TOL, tolerance_abs_us=bench_model.TOL_ABS_US,
                    models={"hand": res}, load=(12.0, 11.0, 10.0)), res

    def test_verdicts_and_the_table(self):
        report, res = self.report()
        self.assertEqual([p["ok"] for p in res["points"]], [True, False])
        a = types.SimpleNamespace(qds=[1, 64], client_cpu=0, poller_cpu=1)
        md = markdown(report, a)
        self.assertIn("| 1 | 2.0 K | 2.0 K |", md)
        self.assertIn("| **no** |", md)
        self.assertIn("ceiling 8.0 K IOPS", md)

    def test_check_names_each_point_outside_and_refuses_nothing_judged(self):
        report, _ = self.report()
        failed = bench_model.out_of_tolerance(report)
        self.assertEqual(len(failed), 1)
        self.assertTrue(failed[0].startswith("hand QD64: measured 5000 IOPS"), failed[0])
        report["models"]["hand"]["points"].pop()
        self.assertEqual(bench_model.out_of_tolerance(report), [])
        report["models"]["hand"]["points"][0]["ok"] = None
        self.assertIn("no point was judged", bench_model.out_of_tolerance(report)[0])

    def test_a_point_the_host_cannot_reach_is_not_judged(self):
        model = dict(preset="tlc", tail="lognormal", units=80, read=dict(avg_us=80, p99_us=250))
        res = bench_model.judge(model, [point(256, 300000, 800, 2000)],
                                [point(256, 350000, 700, 1500)])
        self.assertIsNone(res["points"][0]["ok"])

    def test_the_plot_is_well_formed_svg(self):
        report, _ = self.report()
        doc = xml.dom.minidom.parseString(svg(report))
        self.assertEqual(len(doc.getElementsByTagName("polyline")), 2)


if __name__ == "__main__":
    unittest.main()
