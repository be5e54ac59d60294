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


def engine_requests(url):
    """dsa_requests_running + dsa_requests_waiting from /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    n = 0
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("dsa_requests_running", "dsa_requests_waiting"):
            n += int(float(value))
    return n


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
        # An open completions stream and an open chat stream (the tiny model's chat reply is random
        # text, ignore_eos keeps it going): both must end with a finish_reason "abort" chunk.
        streams = {k: {"chunks": [], "done": False, "error": None} for k in ("completions", "chat")}
        started = {k: threading.Event() for k in streams}

        def long_stream(kind):
            got = streams[kind]
            try:
                if kind == "completions":
                    it = client.completions.create(model="x", prompt="Hello", max_tokens=250, stream=True,
                                                   extra_body={"ignore_eos": True})
                else:
                    it = client.chat.completions.create(model="x", messages=[{"role": "user", "content": "Hello"}],
                                                        max_tokens=200, stream=True, extra_body={"ignore_eos": True})
                for ch in it:
                    if ch.choices:
                        got["chunks"].append(ch)
                    started[kind].set()
                got["done"] = True
            except Exception as e:  # noqa: BLE001 - reported below
                got["error"] = repr(e)
                started[kind].set()

        threads = [threading.Thread(target=long_stream, args=(k,)) for k in streams]
        for t in threads:
            t.start()
        for k in streams:
            self.assertTrue(started[k].wait(60), f"no first {k} chunk")
        short = {}

        def short_request():
            short["r"] = client.completions.create(model="x", prompt="Hi", max_tokens=2, extra_body={"ignore_eos": True})

        ts = threading.Thread(target=short_request)
        ts.start()
        # SIGTERM only once the engine holds the short request (a request still being read when
        # the drain starts is refused with 503, by design): /metrics counts it running or waiting
        # beside the open streams, or it already finished.
        deadline = time.time() + 30
        while "r" not in short and time.time() < deadline:
            if engine_requests(s.url) > len(streams):
                break
            time.sleep(0.02)
        t0 = time.time()
        s.proc.send_signal(signal.SIGTERM)
        ts.join(30)
        for t in threads:
            t.join(30)
        # The SIGTERM above stops it: wait without signalling again (a second SIGTERM that lands
        # after the drain, once the handler is gone, would kill the process: exit 143).
        rc = s.wait(timeout=30)
        self.assertEqual(rc, 0, s.read_log()[-3000:])
        self.assertLess(time.time() - t0, 20)
        for kind, got in streams.items():
            self.assertIsNone(got["error"], f"{kind}: {got['error']}")
            self.assertTrue(got["done"], f"the {kind} stream did not end with [DONE]")
            self.assertEqual(got["chunks"][-1].choices[0].finish_reason, "abort", kind)
            self.assertLess(len(got["chunks"]), 200, kind)
        self.assertEqual(short["r"].choices[0].finish_reason, "length")
        # Nothing listens any more.
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", s.port), timeout=2).close()


if __name__ == "__main__":
    unittest.main()
