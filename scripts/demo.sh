#!/usr/bin/env bash
# The main job: builds dsa, shows what it sees on this machine (`dsa info`), which attention
# backend each built-in model gets (`dsa select`), then text in, text out. With a checkpoint
# directory as the first argument it generates from that model; with none it makes tiny random
# GLM-5.1 and DeepSeek-V4 checkpoints in the official format (`dsa make-tiny`, with a small
# tokenizer of their own), generates from a text prompt, and sends a chat request through the
# OpenAI-compatible server (`dsa serve`); then a scripted tiny model (its weights make it give a
# fixed reply) shows the reply split into reasoning, content and a tool call. A random model
# writes random words. DSA_DEVICE=cuda runs generation and serving on the GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
dsa=${DSA_BUILD_DIR:-build}/apps/dsa/dsa
device=${DSA_DEVICE:-cpu}
"$dsa" info
for m in deepseek-v4-flash deepseek-v4-pro glm-5.1; do
  echo
  "$dsa" select --model "$m"
done
echo
if [ $# -gt 0 ]; then
  if [ -f "$1/tokenizer.json" ]; then
    "$dsa" generate --model "$1" --prompt "The capital of France is" --max-tokens 16 --device "$device"
  else
    "$dsa" generate --model "$1" --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 16 --device "$device"
  fi
  exit 0
fi
tmp=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
for arch in glm_moe_dsa deepseek_v4; do
  echo "== tiny random $arch checkpoint (dsa make-tiny --seed 1), greedy generation from text"
  "$dsa" make-tiny --arch "$arch" --seed 1 --out "$tmp/$arch" | tail -n 1
  "$dsa" generate --model "$tmp/$arch" --prompt "The weather in Paris is" --max-tokens 16 --device "$device"
done

# A chat request through the server: POST /v1/chat/completions, print the reply message.
chat() {  # chat MODEL_DIR REQUEST_JSON
  "$dsa" serve --model "$1" --port 0 --device "$device" >"$tmp/serve.log" 2>&1 &
  server=$!
  local port=""
  for _ in $(seq 100); do
    port=$(sed -n 's/.*serving .* on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/serve.log")
    [ -n "$port" ] && break
    sleep 0.2
  done
  [ -n "$port" ] || { cat "$tmp/serve.log"; exit 1; }
  echo "POST /v1/chat/completions $2"
  python3 - "$port" "$2" <<'PY'
import json, sys, urllib.request
req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", data=sys.argv[2].encode(),
                             headers={"Content-Type": "application/json"})
r = json.load(urllib.request.urlopen(req, timeout=600))
print(json.dumps({"message": r["choices"][0]["message"], "finish_reason": r["choices"][0]["finish_reason"],
                  "usage": r["usage"]}, indent=2, ensure_ascii=False))
PY
  kill "$server"
  wait "$server" 2>/dev/null || true
  server=""
}
echo
echo "== chat with the tiny random glm_moe_dsa checkpoint through dsa serve (random weights: random words)"
chat "$tmp/glm_moe_dsa" '{"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "max_tokens": 24}'

echo
echo "== a scripted tiny glm_moe_dsa checkpoint (dsa make-tiny --script): a fixed reply, parsed"
cat >"$tmp/script.json" <<'JSON'
["<think>", "Let me check the weather.", "</think>", "Sure.", "<tool_call>", "get_weather", "<arg_key>", "city", "</arg_key>",
 "<arg_value>", "Paris", "</arg_value>", "</tool_call>", "<|observation|>"]
JSON
"$dsa" make-tiny --arch glm_moe_dsa --seed 1 --out "$tmp/scripted" --script "$tmp/script.json" | tail -n 1
chat "$tmp/scripted" '{"messages": [{"role": "user", "content": "What is the weather in Paris?"}], "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]}'

