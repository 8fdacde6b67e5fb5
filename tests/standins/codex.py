#!/usr/bin/env python3
"""Stand-in for the OpenAI Codex CLI: `codex exec --json [resume <id>] [--] <prompt>`.

Replays `codex exec --json` ThreadEvents (thread.started, turn.*, item.*) and
keeps a rollout file in $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<id>.jsonl
with turn_context (model) and token_count (reasoning) entries, as codex does.
As codex 0.163.0 does, `turn.completed.usage` is the thread's running total
(a resumed turn's includes every earlier turn), and a tool that cannot start
(code mode without its helper) is a non-fatal `item.completed` of type `error`.
"""

import glob
import json
import os
import sys
import time

sys.path[:0] = ["/usr/local/lib/reeval-standins", os.path.dirname(os.path.abspath(__file__))]
from standin_common import *  # noqa: E402,F403

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

argv = sys.argv[1:]
if not argv or argv[0] != "exec":
    die("standin: only `codex exec` is scripted")
args = Args(
    "codex",
    argv[1:],
    flags={"--json", "--dangerously-bypass-approvals-and-sandbox", "--skip-git-repo-check", "--full-auto", "--last"},
    values={"--model", "--config", "--sandbox", "--output-last-message", "--output-schema", "--enable", "--cd"},
    aliases={"-m": "--model", "-c": "--config", "-s": "--sandbox", "-o": "--output-last-message", "-C": "--cd"},
)
if not args.flag("--json"):
    die("standin: expected --json")
if not args.flag("--skip-git-repo-check") and not os.path.isdir(".git"):
    die("Not inside a trusted directory and --skip-git-repo-check was not specified.")
if not args.flag("--dangerously-bypass-approvals-and-sandbox"):
    die("standin: without --dangerously-bypass-approvals-and-sandbox the workspace is read-only")

pos = list(args.positionals)
resumed = None
if pos and pos[0] == "resume":
    pos.pop(0)
    if not pos:
        die("error: resume needs a SESSION_ID or --last")
    resumed = pos.pop(0)
if len(pos) > 1:
    die("error: unexpected argument '%s' found" % pos[1])
prompt = prompt_arg(pos[0]) if pos and pos[0] != "-" else sys.stdin.buffer.read()

home = os.environ.get("CODEX_HOME") or os.path.expanduser("~/.codex")
model = args.value("--model") or "gpt-5-codex"
if resumed:
    found = glob.glob(os.path.join(home, "sessions", "*", "*", "*", "rollout-*-%s.jsonl" % resumed))
    if not found:
        die("Error: thread/resume failed: no rollout found for thread id %s" % resumed)
    rollout = found[0]
    thread = resumed
else:
    thread = new_id()
    day = time.strftime("%Y/%m/%d", time.gmtime())
    os.makedirs(os.path.join(home, "sessions", day), exist_ok=True)
    rollout = os.path.join(home, "sessions", day, "rollout-%s-%s.jsonl" % (time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime()), thread))
    with open(rollout, "w") as f:
        f.write(json.dumps({"type": "session_meta", "payload": {"id": thread, "cwd": os.getcwd(), "originator": "codex_exec"}}) + "\n")

TOTALS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens", "cache_write_input_tokens", "total_tokens")
previous = dict.fromkeys(TOTALS, 0)
with open(rollout) as f:
    for line in f:
        entry = json.loads(line)
        info = entry.get("payload", {}).get("info") if entry.get("type") == "event_msg" else None
        if info:
            previous = {k: info["total_token_usage"].get(k, 0) for k in TOTALS}


def rollout_append(*entries):
    with open(rollout, "a") as f:
        for e in entries:
            f.write(json.dumps(e) + "\n")


rollout_append({"type": "turn_context", "payload": {"cwd": os.getcwd(), "model": model, "approval_policy": "never"}},
               {"type": "response_item", "payload": {"type": "message", "role": "user", "content": [{"type": "input_text", "text": prompt.decode("utf-8", "replace")}]}})

mcp = {}
config_path = os.path.join(home, "config.toml")
if tomllib and os.path.exists(config_path):
    with open(config_path, "rb") as f:
        mcp = tomllib.load(f).get("mcp_servers", {})
skills = skills_in(os.path.join(home, "skills"))
scene = scenario(prompt)

if scene == "hang":
    hang()

emit({"type": "thread.started", "thread_id": thread})
emit({"type": "turn.started"})


def fail(message):
    emit({"type": "error", "message": message})
    emit({"type": "turn.failed", "error": {"message": message}})
    sys.exit(1)


def complete(text, reasoning):
    last = {"input_tokens": 1200, "cached_input_tokens": 1000, "output_tokens": 50, "reasoning_output_tokens": reasoning,
            "cache_write_input_tokens": 0, "total_tokens": 1250}
    total = {k: previous[k] + last[k] for k in TOTALS}
    rollout_append({"type": "event_msg", "payload": {"type": "token_count", "info": None, "rate_limits": {}}},
                   {"type": "event_msg", "payload": {"type": "token_count", "info": {"total_token_usage": total, "last_token_usage": last}}})
    emit({"type": "item.completed", "item": {"id": "item_9", "type": "agent_message", "text": text}})
    # The thread's totals, earlier turns included.
    emit({"type": "turn.completed", "usage": {k: total[k] for k in TOTALS if k != "total_tokens"}})
    sys.exit(0)


def command(item_id, cmd, output, code):
    emit({"type": "item.started", "item": {"id": item_id, "type": "command_execution", "command": cmd, "aggregated_output": "", "status": "in_progress"}})
    emit({"type": "item.completed", "item": {"id": item_id, "type": "command_execution", "command": cmd, "aggregated_output": output,
                                             "exit_code": code, "status": "completed" if code == 0 else "failed"}})


if not (os.environ.get("CODEX_API_KEY") or os.environ.get("OPENAI_API_KEY")):
    fail("unexpected status 401 Unauthorized: Missing bearer or basic authentication in header")

if scene == "edit":
    log_line("[standin] a log line that is not JSON")
    emit({"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Creating hello.py**"}})
    emit({"type": "item.plan.delta", "delta": "future event"})
    command("item_1", "bash -lc ls", "\n".join(listdir(os.getcwd())), 0)
    kind, path, _ = edit_hello()
    emit({"type": "item.started", "item": {"id": "item_2", "type": "file_change", "changes": [{"path": path, "kind": kind}], "status": "in_progress"}})
    emit({"type": "item.completed", "item": {"id": "item_2", "type": "file_change", "changes": [{"path": path, "kind": kind}], "status": "completed"}})
    complete(summary(thread, resumed), 30)
elif scene == "tool_error":
    command("item_1", "bash -lc 'cat missing.txt'", "cat: missing.txt: No such file or directory\n", 1)
    command("item_2", "bash -lc ls", "\n".join(listdir(os.getcwd())), 0)
    complete("Recovered from a failed tool call.", 5)
elif scene == "rate_limit":
    emit({"type": "error", "message": "Reconnecting... 1/5"})
    fail("exceeded retry limit, last status: 429 Too Many Requests")
elif scene == "auth":
    fail("unexpected status 401 Unauthorized: Incorrect API key provided")
elif scene == "stall":
    emit({"type": "item.completed", "item": {"id": "item_0", "type": "agent_message", "text": "Working on it..."}})
    emit({"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "command": "bash -lc 'sleep 600'", "aggregated_output": "", "status": "in_progress"}})
    hang()
elif scene == "echo":
    path = echo_prompt(prompt)
    emit({"type": "item.completed", "item": {"id": "item_1", "type": "file_change", "changes": [{"path": path, "kind": "add"}], "status": "completed"}})
    complete("echoed", 1)
elif scene == "config":
    complete(config_report(mcp.keys(), skills), 1)
elif scene == "notice":
    # Code mode without codex-code-mode-host: the tool fails closed, the turn completes without it.
    emit({"type": "item.completed", "item": {"id": "item_0", "type": "error",
                                             "message": "Code Mode is unavailable: install codex-code-mode-host next to the codex binary"}})
    complete("I could not run any tool.", 1)
elif scene == "api":
    # No base URL: HTTPS to the API through the proxy, the key as a bearer token.
    key = os.environ.get("CODEX_API_KEY") or os.environ.get("OPENAI_API_KEY")
    complete(call_api("https://api.openai.com/v1/responses", {"authorization": "Bearer " + key}, {"model": "gpt-5", "input": "hi"}), 1)
else:
    complete("Hello.", 1)
