"""`dsa serve` as a process: a second server on a port in use exits with a clear error; SIGTERM
drains (a short request finishes, an open stream that cannot finish within --shutdown-timeout
ends with a final chunk and [DONE]) and the process exits 0. Loopback only; bounded waits."""
import json
import signal
import socket
import subprocess
import threading
import time
import unittest
import urllib.request

import openai

import serve_fixture


class LifecycleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = serve_fixture.TempDir()
        cls.model_dir = serve_fixture.make_checkpoint(cls.tmp.__enter__())

    @classmethod
    def tearDownClass(cls):
        cls.tmp.__exit__(None, None, None)

    def test_address_in_use(self):
        first = serve_fixture.Server(self.model_dir, log_name="first.log")
        try:
            p = subprocess.run([serve_fixture.DSA, "serve", self.model_dir, "--host", "127.0.0.1", "--port",
                                str(first.port), *serve_fixture.ENGINE_FLAGS], capture_output=True, text=True, timeout=120)
            self.assertNotEqual(p.returncode, 0)
            self.assertIn("already in use", p.stderr)
            with urllib.request.urlopen(first.url + "/health", timeout=30) as r:  # the first one is unharmed
                self.assertEqual(r.status, 200)
        finally:
            self.assertEqual(first.stop(), 0)

    def test_sigterm_drains_and_ends_open_streams(self):
        s = serve_fixture.Server(self.model_dir, ["--shutdown-timeout", "1"], log_name="drain.log")
        client = openai.OpenAI(base_url=s.url + "/v1", api_key="none", timeout=60, max_retries=0)
        got = {"chunks": [], "done": False, "error": None}
        started = threading.Event()

        def long_stream():
            try:
                for ch in client.completions.create(model="x", prompt="Hello", max_tokens=250, stream=True,
                                                    extra_body={"ignore_eos": True}):
                    got["chunks"].append(ch)
                    started.set()
                got["done"] = True
            except Exception as e:  # noqa: BLE001 - reported below
                got["error"] = repr(e)
                started.set()

        t = threading.Thread(target=long_stream)
        t.start()
        self.assertTrue(started.wait(60), "no first chunk")
        short = {}

        def short_request():
            short["r"] = client.completions.create(model="x", prompt="Hi", max_tokens=2, extra_body={"ignore_eos": True})

        ts = threading.Thread(target=short_request)
        ts.start()
        time.sleep(0.2)
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        ts.join(30)
        t.join(30)
        rc = s.stop(timeout=30)
        self.assertEqual(rc, 0, s.read_log()[-3000:])
        self.assertLess(time.time() - t0, 20)
        self.assertIsNone(got["error"], got["error"])
        self.assertTrue(got["done"], "the stream did not end with [DONE]")
        self.assertEqual(got["chunks"][-1].choices[0].finish_reason, "abort")
        self.assertLess(len(got["chunks"]), 250)
        self.assertEqual(short["r"].choices[0].finish_reason, "length")
        # Nothing listens any more.
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()


if __name__ == "__main__":
    unittest.main()
