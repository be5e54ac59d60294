"""A `dsa serve` process over a tiny GLM checkpoint with the test tokenizer, for the Python tests.

The checkpoint is written by `dsa make-tiny` into a temp dir; tests/data/server/tokenizer.json
(byte-level BPE, BOS <s> = 0) is copied beside it. The server listens on 127.0.0.1, port 0 (the
port is read from its "serving ... on http://HOST:PORT" log line); its stderr goes to a log file
the tests can read. Every wait is bounded.
"""
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time

DSA = os.environ.get("DSA_CLI", "dsa")
DATA = os.environ.get("DSA_TEST_DATA_DIR", os.path.join(os.path.dirname(__file__), "..", "..", "data"))

# The engine limits of the C++ server tests: small, so that CPU runs stay quick.
ENGINE_FLAGS = ["--max-num-seqs", "4", "--max-num-batched-tokens", "48", "--max-prefill-chunk", "16",
                "--max-model-len", "256"]


def make_checkpoint(root):
    d = os.path.join(root, "tiny-glm")
    subprocess.run([DSA, "make-tiny", "--arch", "glm_moe_dsa", "--out", d, "--seed", "1"], check=True,
                   stdout=subprocess.DEVNULL, timeout=120)
    shutil.copy(os.path.join(DATA, "server", "tokenizer.json"), os.path.join(d, "tokenizer.json"))
    return d


class Server:
    def __init__(self, model_dir, extra=(), port=0, log_name="serve.log"):
        self.log_path = os.path.join(os.path.dirname(model_dir), log_name)
        self.log = open(self.log_path, "w")
        self.args = [DSA, "serve", model_dir, "--host", "127.0.0.1", "--port", str(port), *ENGINE_FLAGS, *extra]
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        self.port = None
        deadline = time.time() + 90
        while time.time() < deadline:
            m = re.search(r"serving .* on http://127\.0\.0\.1:(\d+)", self.read_log())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"dsa serve exited with {self.proc.returncode}:\n{self.read_log()}")
            time.sleep(0.1)
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("dsa serve did not start within 90 s:\n" + self.read_log())
        self.url = f"http://127.0.0.1:{self.port}"

    def read_log(self):
        with open(self.log_path) as f:
            return f.read()

    def wait(self, timeout=60):
        """Waits for the process to exit by itself (no signal); its exit code, or None (killed) after
        `timeout` s."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.log.close()
            return None
        self.log.close()
        return self.proc.returncode

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Sends `sig` and waits; returns the exit code (kills after `timeout` s: then None)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.wait(timeout)


class TempDir:
    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="dsa_py_server_")
        return self.path

    def __exit__(self, *exc):
        shutil.rmtree(self.path, ignore_errors=True)
