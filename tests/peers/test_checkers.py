#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Unit tests of the checkers tests/peers/spdk.sh relies on (no SPDK needed):
spdk_results.py must fail on every failure it is there to catch, and rpc_shape.py and
error_bdev_rpc.py must report exactly the differences.

    python3 tests/peers/test_checkers.py
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import error_bdev_rpc  # noqa: E402
import rpc_shape  # noqa: E402
from spdk_results import (  # noqa: E402
    CheckFailed,
    check_compliance,
    check_failed_counts,
    check_identify,
    check_identity,
    check_perf,
)

COMPLIANCE_OK = """
Suite: nvme_compliance
  Test: admin_identify_ns ...passed
  Test: admin_create_io_qp_max_qps ...[2026-11-24 19:55:59.071714] nvme_ctrlr.c:5530:spdk_nvme_ctrlr_alloc_qid: *ERROR*: No free I/O queue IDs
passed

Run Summary:    Type  Total    Ran Passed Failed Inactive
              suites      1      1    n/a      0        0
               tests      2      2      2      0        0
             asserts     40     40     40      0      n/a
"""

COMPLIANCE_FAILED = """
Suite: nvme_compliance
  Test: admin_identify_ns ...passed
  Test: admin_create_io_sq_verify_qsize_cqid ...FAILED
    1. nvme_compliance.c:434  - s.cpl.status.sc == SPDK_NVME_SC_INVALID_QUEUE_IDENTIFIER

Run Summary:    Type  Total    Ran Passed Failed Inactive
              suites      1      1    n/a      0        0
               tests      2      2      1      1        0
             asserts     40     40     39      1      n/a
"""

PERF_OK = """Initialization complete. Launching workers.
Device Information                  :       IOPS      MiB/s    Average        min        max
VFIOUSER (/tmp/x) NSID 1 from core  0:  945614.00    3693.80      16.90       2.00    1000.00
========================================================
Total                               :  945614.00    3693.80      16.90       2.00    1000.00
"""

IDENTIFY = """Serial Number:                         NVMEMU-1
Model Number:                          nvmemu model
Active Namespaces
=================
Namespace ID:1
Size (in LBAs):                        2097152 (1GiB)
LBA Format #00: Data Size:   512  Metadata Size:     0
"""


class SpdkResults(unittest.TestCase):
    def test_compliance_passes_with_log_lines_between_a_test_and_its_result(self):
        self.assertIn("all 2 tests passed", check_compliance(COMPLIANCE_OK))

    def test_compliance_failure_names_the_test_and_the_assert(self):
        with self.assertRaises(CheckFailed) as e:
            check_compliance(COMPLIANCE_FAILED)
        self.assertIn("admin_create_io_sq_verify_qsize_cqid: FAILED", str(e.exception))
        self.assertIn("nvme_compliance.c:434", str(e.exception))
        self.assertIn("1 failed", str(e.exception))

    def test_compliance_without_a_summary_fails(self):
        cut = COMPLIANCE_OK[: COMPLIANCE_OK.index("Run Summary")].replace("\npassed\n", "\n")
        with self.assertRaises(CheckFailed) as e:
            check_compliance(cut)
        self.assertIn("did not finish (last test started: admin_create_io_qp_max_qps)", str(e.exception))

    def test_compliance_fails_when_fewer_tests_ran_than_registered(self):
        with self.assertRaises(CheckFailed):
            check_compliance(COMPLIANCE_OK.replace("tests      2      2      2", "tests      3      2      2"))

    def test_perf(self):
        self.assertIn("945614 IOPS", check_perf(PERF_OK, "x"))
        for bad in (
            PERF_OK + "WRITE sqid:1 cid:3 nsid:1 lba:8 len:8 completed with error (sct=0, sc=2)\n",
            PERF_OK.replace("Total  ", "Totals "),
            PERF_OK.replace("Total                               :  945614.00", "Total : 0.00"),
        ):
            with self.assertRaises(CheckFailed):
                check_perf(bad, "x")

    def test_identify(self):
        self.assertIn("NVMEMU-1", check_identify(IDENTIFY, "NVMEMU-1", "nvmemu model", 2097152, 512))
        for args in (
            ("NVMEMU-2", "nvmemu model", 2097152, 512),
            ("NVMEMU-1", "nvmemu", 2097152, 512),
            ("NVMEMU-1", "nvmemu model", 4096, 512),
            ("NVMEMU-1", "nvmemu model", 2097152, 4096),
        ):
            with self.assertRaises(CheckFailed):
                check_identify(IDENTIFY, *args)


IDENTITY = """Multi-path I/O
  May have multiple subsystem ports:   Yes
  May have multiple controllers:       Yes
  128-bit Host Identifier:             Supported
Reservations:                Supported
Reservation:                           Supported
Namespace Sharing Capabilities:        Multiple Controllers
NGUID:                                 2E97D595264346C38A9C5388E18ADBAB
UUID:                                  2e97d595-2643-46c3-8a9c-5388e18adbab
"""


class FailedCounts(unittest.TestCase):
    RESULT = {"results": [{"job": "Nvme0n1", "io_failed": 40, "iops": 1000.0, "runtime": 2.0}]}

    def faults(self, injected):
        return [{"name": "ns0n1", "faults": [{"id": 1, "injected": injected}]}]

    def test_equal_counts_pass(self):
        line = check_failed_counts(self.RESULT, self.faults(40))
        self.assertIn("40 failed I/O", line)

    def test_a_difference_or_nothing_injected_fails(self):
        for injected in (39, 0):
            with self.assertRaises(CheckFailed):
                check_failed_counts(self.RESULT, self.faults(injected))
        with self.assertRaises(CheckFailed):
            check_failed_counts({"results": [{"job": "x"}]}, self.faults(1))


class Identity(unittest.TestCase):
    def test_two_servers_must_differ_and_share(self):
        other = IDENTITY.replace("2E97D595", "11111111").replace("2e97d595", "11111111")
        self.assertIn("differ", check_identity([IDENTITY, other]))
        for bad in (
            [IDENTITY, IDENTITY],
            [IDENTITY, other.replace("Multiple Controllers", "Private")],
            [IDENTITY, other + "EUI64:                                 BE4F4C00A5DF736C\n"],
            [IDENTITY, other.replace("UUID:                                  1111", "UUID: 2222")],
        ):
            with self.assertRaises(CheckFailed):
                check_identity(bad)


def shape(method, ref, got, nvmemu_methods=()):
    c = rpc_shape.Comparison(method, set(nvmemu_methods))
    c.compare(ref, got, method)
    return c


class RpcShape(unittest.TestCase):
    def test_missing_and_mistyped_keys_are_reported_extra_keys_are_not(self):
        ref = {"a": 1, "b": "x", "c": {"d": True}, "e": 1.5, "f": 2}
        got = {"a": 1, "b": 2, "c": {}, "e": 3, "f": 2.5, "extra": []}
        self.assertEqual(
            shape("m", ref, got).problems,
            ["m.b: integer, SPDK has string", "m.c.d: missing (SPDK: boolean)", "m.f: number, SPDK has integer"],
        )

    def test_list_elements_are_matched_by_identity(self):
        ref = [{"nqn": "disc", "subtype": "Discovery"}, {"nqn": "q", "serial_number": "S", "namespaces": [{"nsid": 1}]}]
        got = [{"nqn": "disc", "subtype": "Discovery"}, {"nqn": "q", "namespaces": [{"nsid": 1}]}]
        self.assertEqual(shape("s", ref, got).problems, ["s[nqn=q].serial_number: missing (SPDK: string)"])
        self.assertEqual(shape("s", ref, got[:1]).problems, ["s[nqn=q]: missing"])

    def test_an_empty_list_where_spdk_has_elements_is_reported(self):
        self.assertEqual(
            shape("b", [{"name": "M", "aliases": ["u"]}], [{"name": "M", "aliases": []}]).problems,
            ["b[name=M].aliases: empty, SPDK lists 1: element shape unchecked"],
        )
        self.assertEqual(shape("b", {"x": []}, {"x": [1]}).problems, [])

    def test_name_keyed_objects_compare_value_types_only(self):
        ref = {"accel": False, "nvmf": True}
        self.assertEqual(shape("log_get_flags", ref, {"nvme": False}).problems, [])
        self.assertEqual(
            shape("log_get_flags", ref, {"nvme": 1}).problems,
            ["log_get_flags.nvme: integer, SPDK's values are ['boolean']"],
        )

    def test_by_shape_lists_compare_elements_with_spdks_first(self):
        ref = {"threads": [{"name": "t", "active_pollers": [{"name": "a", "run_count": 1},
                                                           {"name": "b", "run_count": 2}],
                            "timed_pollers": [{"name": "c", "period_ticks": 5}]}]}
        got = {"threads": [{"name": "t", "active_pollers": [{"name": "x", "run_count": 3}],
                            "timed_pollers": []}]}
        self.assertEqual(shape("thread_get_pollers", ref, got).problems, [])
        got["threads"][0]["active_pollers"][0]["run_count"] = "3"
        self.assertEqual(
            shape("thread_get_pollers", ref, got).problems,
            ["thread_get_pollers.threads[name=t].active_pollers[0].run_count: string, SPDK has integer"],
        )

    def test_optional_keys_and_other_servers_methods_in_save_config(self):
        self.assertEqual(shape("bdev_get_bdevs", [{"name": "M", "memory_domains": []}], [{"name": "M"}]).problems, [])
        ref = {"subsystems": [
            {"subsystem": "iobuf", "config": [{"method": "iobuf_set_options", "params": {}}]},
            {"subsystem": "bdev", "config": [{"method": "bdev_set_options", "params": {}},
                                             {"method": "bdev_malloc_create", "params": {"uuid": "u"}}]},
        ]}
        got = {"subsystems": [{"subsystem": "bdev", "config": [{"method": "bdev_malloc_create", "params": {}}]}]}
        c = shape("save_config", ref, got, ["bdev_malloc_create", "bdev_set_options"])
        self.assertEqual(c.excused, ["subsystem iobuf"])
        self.assertEqual(
            c.problems,
            ["save_config.subsystems[subsystem=bdev].config[method=bdev_set_options]: missing",
             "save_config.subsystems[subsystem=bdev].config[method=bdev_malloc_create].params.uuid: missing (SPDK: string)"],
        )


class ErrorBdevAnswers(unittest.TestCase):
    def test_a_different_code_or_io_error_is_reported_and_the_same_is_not(self):
        step = {"method": "bdev_error_inject_error", "params": {"io_type": "trim"}}
        spdk = [{**step, "error": -32603}]
        self.assertEqual(error_bdev_rpc.compare(spdk, [{**step, "error": -32603}]), [])
        self.assertEqual(len(error_bdev_rpc.compare(spdk, [{**step, "error": -32602}])), 1)
        self.assertEqual(len(error_bdev_rpc.compare(spdk, [])), 1, "a step missing")
        iostat = {"EE_Malloc0": {"failed": 3}, "Malloc0": {}}
        self.assertEqual(error_bdev_rpc.compare(iostat, dict(iostat)), [])
        self.assertEqual(
            error_bdev_rpc.compare(iostat, {"EE_Malloc0": {"failed": 3}, "Malloc0": None}),
            ["Malloc0 io_error: SPDK {}, nvmemu None"],
        )
        self.assertEqual(
            error_bdev_rpc.compare(iostat, {"Malloc0": {}}),
            ["EE_Malloc0: no bdev_get_iostat entry from nvmemu"],
        )


if __name__ == "__main__":
    unittest.main(verbosity=1)
