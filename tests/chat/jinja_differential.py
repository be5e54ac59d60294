#!/usr/bin/env python3
"""Differential test of dsa's Jinja engine against Python's jinja2.

Every case (a template and a context) is rendered twice: by jinja2, set up as Hugging Face
transformers renders chat templates (sandboxed, trim_blocks + lstrip_blocks, loop controls, a
`generation` tag that renders its body, a tojson without HTML escaping, raise_exception and
strftime_now), and by `dsa prompt --jinja-batch` (one process, JSON lines in and out). A case
passes when both give the same text, or both fail.

The corpus (tests/data/jinja):
  snippets.json        [{"t": template, "c": context}]: one construct per case
  templates/NAME.jinja with NAME.json (a list of contexts): multi-line constructs
  chat/NAME.jinja      chat templates in the styles of public model families, each rendered
                       with every conversation in messages/*.json, with and without
                       add_generation_prompt
  builtin templates    dsa's own (`dsa prompt --list-builtin`), same conversations

Usage: jinja_differential.py --dsa PATH [--corpus DIR]            (the test: exit 1 on a mismatch)
       jinja_differential.py --dsa PATH --trial DIR [--verbose]   (real templates: a report only)
"""
import argparse
import datetime
import glob
import json
import os
import subprocess
import sys

try:
    import jinja2
    from jinja2.ext import Extension
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("jinja2 is not installed (pip install jinja2, or apt-get install python3-jinja2)")
    sys.exit(77)  # ctest SKIP_RETURN_CODE


class GenerationTag(Extension):
    """{% generation %}...{% endgeneration %} renders its body (the assistant-mask marker)."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.Scope(body, lineno=lineno)


def hf_environment():
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationTag, "jinja2.ext.loopcontrols"]
    )

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def strftime_now(fmt):
        return datetime.datetime.now().strftime(fmt)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def jinja2_render(env, template, context):
    try:
        return True, env.from_string(template).render(**context)
    except Exception as e:  # noqa: BLE001 - any failure counts as "fails"
        return False, f"{type(e).__name__}: {e}"


def dsa_render_all(dsa, cases):
    """Renders every (template, context) with one `dsa prompt --jinja-batch` process."""
    lines = [json.dumps({"template": t, "context": c}, ensure_ascii=False) for t, c in cases]
    proc = subprocess.run(
        [dsa, "prompt", "--jinja-batch"],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        print(proc.stderr)
        raise SystemExit(f"dsa prompt --jinja-batch exited with {proc.returncode}")
    out = [json.loads(x) for x in proc.stdout.split("\n") if x.strip()]
    if len(out) != len(cases):
        raise SystemExit(f"dsa returned {len(out)} results for {len(cases)} cases")
    return [(r["ok"], r["output"] if r["ok"] else r["error"]) for r in out]


def load_conversations(corpus):
    convs = []
    for path in sorted(glob.glob(os.path.join(corpus, "messages", "*.json"))):
        with open(path, encoding="utf-8") as f:
            convs.append((os.path.basename(path), json.load(f)))
    return convs


def chat_contexts(convs, bos="<s>", eos="</s>"):
    for name, conv in convs:
        for agp in (False, True):
            ctx = {"bos_token": bos, "eos_token": eos, "add_generation_prompt": agp}
            ctx.update(conv)
            yield f"{name} agp={agp}", ctx


def builtin_templates(dsa):
    proc = subprocess.run([dsa, "prompt", "--list-builtin"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        raise SystemExit("dsa prompt --list-builtin failed: " + proc.stderr)
    return json.loads(proc.stdout)


def corpus_cases(corpus, dsa):
    cases = []  # (label, template, context)
    with open(os.path.join(corpus, "snippets.json"), encoding="utf-8") as f:
        for i, s in enumerate(json.load(f)):
            cases.append((f"snippets[{i}] {s['t'][:60]!r}", s["t"], s.get("c", {})))
    for path in sorted(glob.glob(os.path.join(corpus, "templates", "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        with open(path[: -len(".jinja")] + ".json", encoding="utf-8") as f:
            contexts = json.load(f)
        for i, c in enumerate(contexts):
            cases.append((f"{os.path.basename(path)} context {i}", text, c))
    convs = load_conversations(corpus)
    chat = []
    for path in sorted(glob.glob(os.path.join(corpus, "chat", "*.jinja"))):
        with open(path, encoding="utf-8") as f:
            chat.append((os.path.basename(path), f.read()))
    for name, text in builtin_templates(dsa).items():
        chat.append((f"builtin:{name}", text))
    for name, text in chat:
        for label, ctx in chat_contexts(convs):
            cases.append((f"{name} with {label}", text, ctx))
    return cases


def compare(cases, dsa, verbose, fail_on_mismatch):
    env = hf_environment()
    want = [jinja2_render(env, t, c) for _, t, c in cases]
    got = dsa_render_all(dsa, [(t, c) for _, t, c in cases])
    same = both_fail = mismatch = 0
    for (label, _, _), (wok, w), (gok, g) in zip(cases, want, got):
        if wok and gok and w == g:
            same += 1
        elif not wok and not gok:
            both_fail += 1
        else:
            mismatch += 1
            if verbose or fail_on_mismatch:
                print(f"MISMATCH {label}")
                print(f"  jinja2 ({'ok' if wok else 'error'}): {w[:600]!r}")
                print(f"  dsa    ({'ok' if gok else 'error'}): {g[:600]!r}")
    return same, both_fail, mismatch


def trial(dsa, trial_dir, corpus, verbose):
    """Real chat templates (*.jinja, or tokenizer_config.json with chat_template) under trial_dir."""
    templates = []
    for path in sorted(glob.glob(os.path.join(trial_dir, "**", "*"), recursive=True)):
        if path.endswith(".jinja"):
            with open(path, encoding="utf-8", errors="replace") as f:
                templates.append((os.path.relpath(path, trial_dir), f.read()))
        elif os.path.basename(path) == "tokenizer_config.json":
            try:
                with open(path, encoding="utf-8") as f:
                    t = json.load(f).get("chat_template")
            except (OSError, ValueError):
                continue
            if isinstance(t, str):
                templates.append((os.path.relpath(path, trial_dir), t))
            elif isinstance(t, list):
                for entry in t:
                    if isinstance(entry, dict) and isinstance(entry.get("template"), str):
                        templates.append((os.path.relpath(path, trial_dir) + ":" + str(entry.get("name")), entry["template"]))
    convs = load_conversations(corpus)
    identical = differs = 0
    totals = [0, 0, 0]
    for name, text in templates:
        cases = [(f"{name} with {label}", text, ctx) for label, ctx in chat_contexts(convs)]
        s, bf, m = compare(cases, dsa, verbose, False)
        totals = [totals[0] + s, totals[1] + bf, totals[2] + m]
        if m == 0:
            identical += 1
        else:
            differs += 1
            print(f"differs: {name}: {m} of {len(cases)} conversations")
    print(f"real-template trial: {len(templates)} templates, {identical} render identically to jinja2 on all "
          f"{2 * len(convs)} conversations (same text or both fail), {differs} differ; renders: {totals[0]} identical text, "
          f"{totals[1]} fail in both, {totals[2]} differ")
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsa", required=True)
    ap.add_argument("--corpus", default=os.path.join(os.path.dirname(__file__), "..", "data", "jinja"))
    ap.add_argument("--trial")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args()
    if a.trial:
        return trial(a.dsa, a.trial, a.corpus, a.verbose)
    cases = corpus_cases(a.corpus, a.dsa)
    same, both_fail, mismatch = compare(cases, a.dsa, a.verbose, True)
    print(f"jinja differential: {len(cases)} cases, {same} identical, {both_fail} fail in both, {mismatch} mismatches")
    return 1 if mismatch else 0


if __name__ == "__main__":
    sys.exit(main())
