#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Raw JSON-RPC checks against `nvmemu serve`, speaking exactly like SPDK's rpc.py client:
sendall(json.dumps(req).encode()) with no newline, then recv() in a loop and
json.JSONDecoder().raw_decode() until a whole reply parses.

Usage: NVMEMU_RPC_SOCK=/var/tmp/nvmemu.sock python3 -m unittest tests/rpc/test_rawrpc.py
Stdlib only. Tests run in order against one fresh server (the reference sequence builds
state the later checks use); the last test sends spdk_kill_instance.
"""

import json
import os
import socket
import unittest

SOCK = os.environ.get("NVMEMU_RPC_SOCK", "/var/tmp/nvmemu.sock")
NQN = "nqn.2016-06.io.spdk:cnode1"
TRADDR = os.environ.get("NVMEMU_VFU_DIR", "/tmp/vfu")


class RawClient:
    """rpc.py's JSONRPCClient, reduced to what the tests need."""

    def __init__(self, path=SOCK, timeout=30.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = ""
        self.next_id = 0

    def close(self):
        self.sock.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def request(self, method, params=None, req_id=None):
        if req_id is None:
            self.next_id += 1
            req_id = self.next_id
        req = {"jsonrpc": "2.0", "method": method, "id": req_id}
        if params:
            req["params"] = params
        self.send_raw(json.dumps(req).encode("utf-8"))
        return self.recv()

    def recv(self):
        while True:
            buf = self.buf.lstrip()
            try:
                obj, idx = json.JSONDecoder().raw_decode(buf)
                self.buf = buf[idx:]
                return obj
            except ValueError:
                pass
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("connection closed with partial response: %r" % self.buf)
            self.buf += data.decode("utf-8")

    def call(self, method, params=None):
        resp = self.request(method, params)
        if "error" in resp:
            raise RpcError(resp["error"])
        return resp["result"]


class RpcError(Exception):
    def __init__(self, err):
        super().__init__("%s: %s" % (err.get("code"), err.get("message")))
        self.code = err.get("code")
        self.message = err.get("message")


class T(unittest.TestCase):
    def setUp(self):
        self.c = RawClient()

    def tearDown(self):
        self.c.close()

    def err(self, method, params=None):
        with self.assertRaises(RpcError) as cm:
            self.c.call(method, params)
        return cm.exception

    # --- the reference sequence, on one connection, params exactly as rpc.py sends them ---
    def test_01_reference_sequence(self):
        c = self.c
        self.assertIs(c.call("framework_wait_init"), True)
        self.assertEqual(
            c.call("bdev_malloc_create", {"num_blocks": 64 * 1024 * 1024 // 512, "block_size": 512,
                                          "name": "Malloc0", "md_interleave": False,
                                          "dif_is_head_of_md": False}),
            "Malloc0")
        self.assertIs(c.call("nvmf_create_transport", {
            "trtype": "VFIOUSER", "zcopy": False, "no_srq": False, "c2h_success": True,
            "dif_insert_or_strip": False, "no_wr_batching": False, "disable_mappable_bar0": False,
            "disable_adaptive_irq": False, "disable_shadow_doorbells": False,
            "disable_command_passthru": False}), True)
        self.assertIs(c.call("nvmf_create_subsystem", {
            "nqn": NQN, "serial_number": "SPDK00", "allow_any_host": True, "ana_reporting": False,
            "passthrough": False, "enable_nssr": False}), True)
        self.assertEqual(c.call("nvmf_subsystem_add_ns", {
            "nqn": NQN, "namespace": {"bdev_name": "Malloc0", "no_auto_visible": False,
                                      "hide_metadata": False}}), 1)
        self.assertIs(c.call("nvmf_subsystem_add_listener", {
            "nqn": NQN, "secure_channel": False,
            "listen_address": {"trtype": "VFIOUSER", "traddr": TRADDR, "trsvcid": "0"}}), True)

    def test_02_state_is_reported_in_spdk_shapes(self):
        bdevs = self.c.call("bdev_get_bdevs", {"name": "Malloc0"})
        self.assertEqual(len(bdevs), 1)
        b = bdevs[0]
        self.assertEqual((b["name"], b["product_name"], b["block_size"], b["num_blocks"]),
                         ("Malloc0", "Malloc disk", 512, 131072))
        for key in ("aliases", "uuid", "assigned_rate_limits", "claimed", "zoned",
                    "supported_io_types", "driver_specific"):
            self.assertIn(key, b)
        self.assertIs(b["claimed"], True)
        self.assertIs(b["supported_io_types"]["read"], True)
        # nvmemu's additions live under driver_specific: the memory is backed, not lazy.
        m = b["driver_specific"]["malloc"]
        self.assertIs(m["lazy"], False)
        self.assertGreaterEqual(m["resident_bytes"], 64 * 1024 * 1024)
        subs = [s for s in self.c.call("nvmf_get_subsystems") if s["nqn"] == NQN]
        self.assertEqual(len(subs), 1)
        s = subs[0]
        self.assertEqual(s["subtype"], "NVMe")
        self.assertEqual(s["serial_number"], "SPDK00")
        self.assertIs(s["allow_any_host"], True)
        self.assertEqual([(n["nsid"], n["bdev_name"]) for n in s["namespaces"]], [(1, "Malloc0")])
        self.assertEqual([(l["trtype"], l["traddr"]) for l in s["listen_addresses"]],
                         [("VFIOUSER", TRADDR)])
        self.assertIn("VFIOUSER", [t["trtype"].upper() for t in self.c.call("nvmf_get_transports")])
        self.assertIn("version", self.c.call("spdk_get_version"))
        self.assertIn("reactors", self.c.call("framework_get_reactors"))
        self.assertIn("poll_groups", self.c.call("nvmf_get_stats"))
        self.assertIn("bdevs", self.c.call("bdev_get_iostat", {"per_channel": False}))
        methods = self.c.call("rpc_get_methods", {"current": False, "include_aliases": False})
        for m in ("bdev_malloc_create", "nvmf_subsystem_add_listener", "spdk_kill_instance"):
            self.assertIn(m, methods)

    def test_03_error_codes(self):
        self.assertEqual(self.err("no_such_method").code, -32601)
        e = self.err("bdev_malloc_create", {"num_blocks": 8})
        self.assertEqual(e.code, -32602)
        self.assertIn("block_size", e.message)
        e = self.err("bdev_malloc_create", {"num_blocks": "eight", "block_size": 512})
        self.assertEqual(e.code, -32602)
        self.assertIn("num_blocks", e.message)
        # State errors: SPDK style (negative errno or JSON-RPC code), never a crash.
        e = self.err("bdev_malloc_create", {"num_blocks": 8, "block_size": 512, "name": "Malloc0"})
        self.assertEqual(e.code, -17)
        e = self.err("nvmf_create_subsystem", {"nqn": NQN})
        self.assertLess(e.code, 0)
        e = self.err("bdev_null_delete", {"name": "Malloc0"})  # not a null bdev
        self.assertEqual(e.code, -19)
        e = self.err("nvmf_subsystem_add_ns", {"nqn": NQN, "namespace": {"bdev_name": "Malloc0"}})
        self.assertEqual(e.code, -16)  # claimed by namespace 1
        self.assertEqual(self.err("bdev_get_bdevs", {"name": "NoSuchBdev"}).code, -19)
        # The server is still serving this connection.
        self.assertIs(self.c.call("framework_wait_init"), True)

    def test_04_framing(self):
        c = self.c
        # Byte by byte.
        for b in json.dumps({"jsonrpc": "2.0", "method": "framework_wait_init", "id": 41}).encode():
            c.send_raw(bytes([b]))
        self.assertEqual(c.recv(), {"jsonrpc": "2.0", "id": 41, "result": True})
        # Two requests in one send, whitespace between them, string id.
        c.send_raw(b'{"jsonrpc":"2.0","method":"framework_wait_init","id":"a"}\n  '
                   b'{"jsonrpc":"2.0","method":"framework_wait_init","id":42}')
        self.assertEqual(c.recv()["id"], "a")
        self.assertEqual(c.recv()["id"], 42)
        # A notification gets no reply: the next reply belongs to the next request.
        c.send_raw(b'{"jsonrpc":"2.0","method":"framework_wait_init"}')
        self.assertEqual(c.request("framework_wait_init", req_id=43)["id"], 43)
        # Invalid request.
        c.send_raw(b'{"jsonrpc":"1.0","method":"framework_wait_init","id":44}')
        self.assertEqual(c.recv()["error"]["code"], -32600)

    def test_05_parse_error_closes_connection(self):
        self.c.send_raw(b'{"jsonrpc": oops}')
        resp = self.c.recv()
        self.assertEqual(resp["error"]["code"], -32700)
        self.assertIsNone(resp["id"])
        self.assertEqual(self.c.sock.recv(4096).strip(), b"")

    def test_06_many_connections(self):
        for _ in range(50):
            c = RawClient()
            try:
                self.assertIs(c.call("framework_wait_init"), True)
            finally:
                c.close()

    def test_06b_oversized_requests_and_batches_are_refused(self):
        # A batch over 128 requests: one -32600, nothing runs, the connection goes on.
        one = {"jsonrpc": "2.0", "method": "framework_wait_init", "id": 1}
        self.c.send_raw(json.dumps([one] * 129).encode())
        resp = self.c.recv()
        self.assertEqual(resp["error"], {"code": -32600, "message":
                                         "Invalid request: a batch of 129 requests exceeds 128"})
        self.assertIs(self.c.call("framework_wait_init"), True)
        # A request over 1 MiB: -32600, then the server closes the connection.
        big = RawClient()
        try:
            try:
                big.send_raw(json.dumps({"jsonrpc": "2.0", "method": "framework_wait_init",
                                         "id": 2, "params": {"pad": "x" * (2 << 20)}}).encode())
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server closed before taking it all; its answer is still there
            resp = big.recv()
            self.assertEqual(resp["error"], {"code": -32600, "message":
                                             "Invalid request: request exceeds 1048576 bytes"})
        finally:
            big.close()
        again = RawClient()
        try:
            self.assertIs(again.call("framework_wait_init"), True)
        finally:
            again.close()

    def test_07_teardown_objects(self):
        c = self.c
        self.assertIs(c.call("nvmf_subsystem_remove_listener", {
            "nqn": NQN, "listen_address": {"trtype": "VFIOUSER", "traddr": TRADDR, "trsvcid": "0"}}), True)
        self.assertIs(c.call("nvmf_subsystem_remove_ns", {"nqn": NQN, "nsid": 1}), True)
        self.assertIs(c.call("nvmf_delete_subsystem", {"nqn": NQN}), True)
        self.assertIs(c.call("bdev_malloc_delete", {"name": "Malloc0"}), True)
        self.assertEqual(c.call("bdev_null_create", {"name": "Null0", "num_blocks": 256,
                                                     "block_size": 4096, "dif_is_head_of_md": False}),
                         "Null0")
        self.assertEqual(c.call("bdev_get_bdevs", {"name": "Null0"})[0]["product_name"], "Null disk")
        self.assertIs(c.call("bdev_null_delete", {"name": "Null0"}), True)
        self.assertEqual(self.err("bdev_get_bdevs", {"name": "Null0"}).code, -19)

    def test_99_kill_instance(self):
        try:
            resp = self.c.request("spdk_kill_instance", {"sig_name": "SIGTERM"})
            self.assertIs(resp["result"], True)
        except ConnectionError:
            pass  # rpc.py also accepts the server closing before replying to a kill


if __name__ == "__main__":
    unittest.main(verbosity=2)
