"""`dsa serve` through the official `openai` client (what users and tools send), raw HTTP, and
`prometheus_client`'s parser; `dsa bench serve` against it. One server for the module: a tiny GLM
checkpoint on the CPU with the test tokenizer, an API key. Loopback only; bounded waits."""
import json
import os
import re
import subprocess
import time
import unittest
import urllib.error
import urllib.request

import openai
from prometheus_client.parser import text_string_to_metric_families

import serve_fixture

KEY = "test-key"


def metrics(url):
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        return {f.name: f for f in text_string_to_metric_families(r.read().decode())}


def sample(families, family, name, labels=None):
    for s in families[family].samples:
        if s.name == name and (labels is None or all(s.labels.get(k) == v for k, v in labels.items())):
            return s.value
    raise KeyError(f"{name} {labels} not in /metrics")


class OpenAIClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = serve_fixture.TempDir()
        root = cls.tmp.__enter__()
        cls.model_dir = serve_fixture.make_checkpoint(root)
        cls.server = serve_fixture.Server(cls.model_dir, ["--api-key", KEY, "--served-model-name", "tiny"])
        cls.client = openai.OpenAI(base_url=cls.server.url + "/v1", api_key=KEY, timeout=60, max_retries=2)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()
        cls.tmp.__exit__(None, None, None)

    def complete(self, **kw):
        kw.setdefault("model", "tiny")
        kw.setdefault("temperature", 0)
        return self.client.completions.create(**kw)

    def test_models(self):
        models = self.client.models.list()
        self.assertEqual([m.id for m in models.data], ["tiny"])
        self.assertEqual(self.client.models.retrieve("tiny").id, "tiny")
        with self.assertRaises(openai.NotFoundError):
            self.client.models.retrieve("gpt-4")

    def test_text_and_list_prompts(self):
        r = self.complete(prompt="Hello world", max_tokens=5, extra_body={"ignore_eos": True})
        self.assertEqual(len(r.choices), 1)
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 5)
        self.assertIsInstance(r.choices[0].text, str)
        # What LangChain and lm-eval-harness send: lists of strings / of token-id lists.
        r2 = self.complete(prompt=["Hello world", "The weather is"], max_tokens=3, extra_body={"ignore_eos": True})
        self.assertEqual([c.index for c in r2.choices], [0, 1])
        self.assertEqual(r2.usage.completion_tokens, 6)
        ids = json.loads(urllib.request.urlopen(urllib.request.Request(
            self.server.url + "/tokenize", data=json.dumps({"prompt": "Hello world"}).encode(),
            headers={"Authorization": f"Bearer {KEY}", "Content-Type": "application/json"}), timeout=30).read())["tokens"]
        r3 = self.complete(prompt=[ids], max_tokens=5, extra_body={"ignore_eos": True})
        self.assertEqual(r3.choices[0].text, r.choices[0].text)
        r4 = self.complete(prompt="Hello world", max_tokens=3, n=2, seed=5, temperature=1.0,
                           extra_body={"ignore_eos": True})
        self.assertEqual([c.index for c in r4.choices], [0, 1])

    def test_stop_logprobs_echo(self):
        full = self.complete(prompt="The quick brown fox", max_tokens=24, extra_body={"ignore_eos": True}).choices[0].text
        r = self.complete(prompt="The quick brown fox", max_tokens=24, stop=["\n", full[5:8]],
                          extra_body={"ignore_eos": True})
        cut = min(i for i in (full.find("\n"), full.find(full[5:8])) if i >= 0)
        self.assertEqual(r.choices[0].text, full[:cut])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        lp = self.complete(prompt="Hello again", max_tokens=3, logprobs=2, echo=True, extra_body={"ignore_eos": True})
        c = lp.choices[0]
        self.assertTrue(c.text.startswith("Hello again"))
        self.assertIsNone(c.logprobs.token_logprobs[0])
        self.assertEqual(len(c.logprobs.tokens), len(c.logprobs.token_logprobs))
        for v in c.logprobs.token_logprobs[1:]:
            self.assertLessEqual(v, 0.0)
        for top, chosen, v in zip(c.logprobs.top_logprobs[1:], c.logprobs.tokens[1:], c.logprobs.token_logprobs[1:]):
            self.assertIn(chosen, top)
            self.assertAlmostEqual(top[chosen], v, places=5)

    def test_stream_with_usage(self):
        text, finish, usage = "", None, None
        for ch in self.client.completions.create(model="tiny", prompt="Hello world", max_tokens=6, temperature=0,
                                                 stream=True, stream_options={"include_usage": True},
                                                 extra_body={"ignore_eos": True}):
            if ch.choices:
                text += ch.choices[0].text
                finish = ch.choices[0].finish_reason or finish
            if ch.usage:
                usage = ch.usage
        whole = self.complete(prompt="Hello world", max_tokens=6, extra_body={"ignore_eos": True})
        self.assertEqual(text, whole.choices[0].text)
        self.assertEqual(finish, "length")
        self.assertEqual(usage.completion_tokens, 6)

    def test_client_errors_are_4xx_and_not_retried(self):
        before = metrics(self.server.url)
        n400 = sum(s.value for s in before["dsa_http_responses"].samples if s.labels.get("status") == "400") \
            if "dsa_http_responses" in before else 0
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(prompt="Hi", max_tokens=3, extra_body={"frobnicate": 1})
        self.assertIn("frobnicate", str(e.exception))
        with self.assertRaises(openai.BadRequestError):
            self.complete(prompt="Hi", max_tokens=100000)
        with self.assertRaises(openai.BadRequestError):
            self.complete(prompt="Hi", max_tokens=3, suffix="!")
        with self.assertRaises(openai.BadRequestError) as e:  # chat refuses what it does not know too
            self.client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": "hi"}],
                                                max_tokens=3, extra_body={"frobnicate": 1})
        self.assertIn("frobnicate", str(e.exception))
        after = metrics(self.server.url)
        n400_after = sum(s.value for s in after["dsa_http_responses"].samples if s.labels.get("status") == "400")
        self.assertEqual(n400_after - n400, 4, "a 400 was retried")
        bad = openai.OpenAI(base_url=self.server.url + "/v1", api_key="wrong", max_retries=0, timeout=30)
        with self.assertRaises(openai.AuthenticationError):
            bad.models.list()

    def test_health_and_metrics_are_open_and_parse(self):
        with urllib.request.urlopen(self.server.url + "/health", timeout=30) as r:
            self.assertEqual(r.status, 200)
        self.complete(prompt="Hello", max_tokens=4, extra_body={"ignore_eos": True})
        m = metrics(self.server.url)
        for h in ("dsa_time_to_first_token_seconds", "dsa_inter_token_latency_seconds",
                  "dsa_e2e_request_latency_seconds", "dsa_request_queue_time_seconds"):
            self.assertEqual(m[h].type, "histogram", h)
            self.assertGreater(sample(m, h, h + "_count"), 0, h)
            inf = sample(m, h, h + "_bucket", {"le": "+Inf"})
            self.assertEqual(inf, sample(m, h, h + "_count"))
        self.assertEqual(m["dsa_kv_cache_usage_ratio"].type, "gauge")
        self.assertGreater(sample(m, "dsa_kv_cache_total_pages", "dsa_kv_cache_total_pages", {"group": "tokens"}), 0)
        self.assertGreater(sample(m, "dsa_generation_tokens", "dsa_generation_tokens_total"), 0)
        self.assertGreater(sample(m, "dsa_prompt_tokens", "dsa_prompt_tokens_total"), 0)
        self.assertEqual(sample(m, "dsa_build_info", "dsa_build_info"), 1)
        for g in ("dsa_requests_running", "dsa_requests_waiting"):
            self.assertEqual(m[g].type, "gauge")
        self.assertEqual(m["dsa_preemptions"].type, "counter")

    def test_requests_are_logged(self):
        r = self.complete(prompt="Hello", max_tokens=2, extra_body={"ignore_eos": True})
        deadline = time.time() + 10
        line = None
        while time.time() < deadline and line is None:
            m = re.search(r"request " + re.escape(r.id) + r" POST /v1/completions 200 prompt=(\d+) output=2 "
                          r"ttft=[0-9.]+s duration=[0-9.]+s", self.server.read_log())
            line = m
            time.sleep(0.1)
        self.assertIsNotNone(line, self.server.read_log()[-2000:])
        self.assertEqual(int(line.group(1)), r.usage.prompt_tokens)

    def test_bench_serve(self):
        out = os.path.join(os.path.dirname(self.model_dir), "bench.json")
        for extra in (["--max-concurrency", "3"], ["--request-rate", "40"]):
            p = subprocess.run([serve_fixture.DSA, "bench", "serve", "--base-url", self.server.url, "--api-key", KEY,
                                "--num-prompts", "6", "--random-input-len", "12", "--random-output-len", "5",
                                "--random-vocab-size", "500", "--ignore-eos", "--no-progress", "--json", out, *extra],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("Serving Benchmark Result", p.stdout)
            for row in ("Request throughput", "Output token throughput", "Mean TTFT", "Median TPOT", "P99 ITL",
                        "Mean E2EL"):
                self.assertIn(row, p.stdout)
            with open(out) as f:
                r = json.load(f)
            self.assertEqual(r["completed"], 6)
            self.assertEqual(r["failed"], 0)
            self.assertEqual(r["total_output_tokens"], 30)
            self.assertEqual(r["total_input_tokens"], 72)
            self.assertGreater(r["output_throughput"], 0)
            self.assertGreater(r["median_ttft_ms"], 0)
            self.assertLessEqual(r["median_ttft_ms"], r["p99_ttft_ms"])


if __name__ == "__main__":
    unittest.main()
