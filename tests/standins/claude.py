#!/usr/bin/env python3
"""Stand-in for Claude Code (`claude`) in print mode with `--output-format stream-json`.

Replays Claude Code's stream-json events as 2.1.332 prints them: system/init,
one `assistant` event per content block, each carrying its message's
`message_start` usage snapshot (output 1), user tool results, and the result,
the only event with the invocation's totals. API errors come as an assistant
message of the model `<synthetic>`, then an error result with a numeric status. Sessions live in
$CLAUDE_CONFIG_DIR/projects/<cwd>/<session_id>.jsonl; `--resume <id>` needs one.
"""

import json
import os
import sys

sys.path[:0] = ["/usr/local/lib/reeval-standins", os.path.dirname(os.path.abspath(__file__))]
from standin_common import *  # noqa: E402,F403

MODELS = {"sonnet": "claude-sonnet-4-5-20250929", "opus": "claude-opus-4-1-20250805", "haiku": "claude-haiku-4-5-20251001"}

args = Args(
    "claude",
    sys.argv[1:],
    flags={"--print", "--verbose", "--continue", "--dangerously-skip-permissions", "--strict-mcp-config", "--include-partial-messages"},
    values={"--output-format", "--input-format", "--permission-mode", "--model", "--resume", "--max-turns", "--mcp-config",
            "--settings", "--append-system-prompt", "--allowedTools", "--disallowedTools", "--max-budget-usd", "--effort"},
    aliases={"-p": "--print", "-c": "--continue", "-r": "--resume"},
)
if not args.flag("--print"):
    die("standin: only print mode (-p) is scripted")
if args.value("--output-format") != "stream-json":
    die("standin: expected --output-format stream-json")
if not args.flag("--verbose"):
    die("Error: When using --print, --output-format=stream-json requires --verbose")
if args.value("--permission-mode") != "bypassPermissions" and not args.flag("--dangerously-skip-permissions"):
    die("standin: without bypassPermissions every tool call would wait for an approval")

prompt = prompt_arg(args.positionals[0]) if args.positionals else sys.stdin.buffer.read()
if not prompt.strip():
    die("Error: Input must be provided either through stdin or as a prompt argument when using --print")

home = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.expanduser("~/.claude")
project = os.path.join(home, "projects", os.getcwd().replace("/", "-"))
resumed = args.value("--resume")
if resumed:
    if not os.path.exists(os.path.join(project, resumed + ".jsonl")):
        die("No conversation found with session ID: %s" % resumed)
    session = resumed
else:
    session = new_id()
os.makedirs(project, exist_ok=True)
with open(os.path.join(project, session + ".jsonl"), "a") as f:
    f.write(json.dumps({"type": "user", "message": {"role": "user", "content": prompt.decode("utf-8", "replace")}, "sessionId": session}) + "\n")

model = MODELS.get(args.value("--model") or "sonnet", args.value("--model"))
mcp = (read_json(os.path.join(home, ".claude.json"), {}) or {}).get("mcpServers", {})
skills = skills_in(os.path.join(home, "skills"))
scene = scenario(prompt)

if scene == "hang":
    hang()

key = os.environ.get("ANTHROPIC_API_KEY")
emit({"type": "system", "subtype": "init", "cwd": os.getcwd(), "session_id": session, "tools": ["Bash", "Read", "Write", "Edit"],
      "mcp_servers": [{"name": n, "status": "connected"} for n in mcp], "model": model, "permissionMode": "bypassPermissions",
      "apiKeySource": "ANTHROPIC_API_KEY" if key else "none", "slash_commands": [], "skills": skills, "claude_code_version": "2.1.332", "uuid": new_id()})


def usage(inp, cw, cr, out):
    return {"input_tokens": inp, "cache_creation_input_tokens": cw, "cache_read_input_tokens": cr, "output_tokens": out, "service_tier": "standard"}


def snapshot(inp, cw, cr):
    """The usage of a message's `message_start`, which every block of it repeats."""
    return usage(inp, cw, cr, 1)


def assistant(mid, content, u, of=None):
    emit({"type": "assistant", "message": {"id": mid, "type": "message", "role": "assistant", "model": of or model, "content": content,
                                           "stop_reason": None, "usage": u}, "parent_tool_use_id": None, "session_id": session})


def api_error(text):
    """What an API error looks like before its result: a message no model wrote."""
    assistant(new_id(), [{"type": "text", "text": text}], usage(0, 0, 0, 0), of="<synthetic>")


def tool_result(tid, text, is_error=False, extra=None):
    ev = {"type": "user", "message": {"role": "user", "content": [{"tool_use_id": tid, "type": "tool_result", "content": text, "is_error": is_error}]},
          "parent_tool_use_id": None, "session_id": session}
    if extra:
        ev["tool_use_result"] = extra
    emit(ev)


def result(text, u, is_error=False, status=None, code=0):
    of = "<synthetic>" if is_error else model
    ev = {"type": "result", "subtype": "success", "is_error": is_error, "duration_ms": 1200, "duration_api_ms": 1100, "num_turns": 3,
          "result": text, "stop_reason": "end_turn", "session_id": session, "total_cost_usd": 0.0123, "usage": u,
          "modelUsage": {of: {"inputTokens": u["input_tokens"], "outputTokens": u["output_tokens"], "costUSD": 0.0123}},
          "permission_denials": [], "uuid": new_id()}
    if status:
        ev["api_error_status"] = status
    emit(ev)
    sys.exit(code)


if not key:
    result("Not logged in · Please run /login", usage(0, 0, 0, 0), is_error=True, code=1)

if scene == "edit":
    log_line("[standin] a log line that is not JSON")
    emit({"type": "standin_future_event", "payload": {"anything": [1, 2, 3]}})
    assistant("msg_a", [{"type": "text", "text": "I'll create hello.py."}], snapshot(3, 100, 0))
    kind, path, content = edit_hello()
    assistant("msg_a", [{"type": "tool_use", "id": "toolu_w", "name": "Write", "input": {"file_path": path, "content": content}}], snapshot(3, 100, 0))
    if kind == "add":
        tool_result("toolu_w", "File created successfully at: %s" % path, extra={"type": "create", "filePath": path})
    else:
        tool_result("toolu_w", "The file %s has been updated successfully." % path, extra={"type": "update", "filePath": path})
    assistant("msg_b", [{"type": "text", "text": summary(session, resumed)}], snapshot(4, 0, 100))
    # The invocation's totals (a resumed turn's cover that turn only).
    result(summary(session, resumed), usage(7, 100, 100, 32))
elif scene == "tool_error":
    assistant("msg_a", [{"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "cat missing.txt"}}], snapshot(2, 0, 0))
    tool_result("toolu_1", "cat: missing.txt: No such file or directory", is_error=True)
    assistant("msg_b", [{"type": "tool_use", "id": "toolu_2", "name": "Bash", "input": {"command": "ls"}}], snapshot(2, 0, 0))
    tool_result("toolu_2", "\n".join(listdir(os.getcwd())))
    assistant("msg_c", [{"type": "text", "text": "Recovered from a failed tool call."}], snapshot(2, 0, 0))
    result("Recovered from a failed tool call.", usage(6, 0, 0, 21))
elif scene == "rate_limit":
    emit({"type": "rate_limit_event", "rate_limit_info": {"status": "rejected", "resetsAt": 1767225600, "rateLimitType": "five_hour"}, "session_id": session})
    text = 'API Error: 429 {"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}'
    api_error(text)
    result(text, usage(0, 0, 0, 0), is_error=True, status=429, code=1)
elif scene == "auth":
    api_error("Invalid API key · Fix external API key")
    result("Invalid API key · Fix external API key", usage(0, 0, 0, 0), is_error=True, status=401, code=1)
elif scene == "stall":
    assistant("msg_a", [{"type": "text", "text": "Working on it..."}], snapshot(1, 0, 0))
    hang()
elif scene == "echo":
    path = echo_prompt(prompt)
    assistant("msg_a", [{"type": "tool_use", "id": "toolu_e", "name": "Write", "input": {"file_path": path, "content": "<prompt>"}}], usage(1, 0, 0, 1))
    tool_result("toolu_e", "File created successfully at: %s" % path)
    result("echoed", usage(1, 0, 0, 1))
elif scene == "config":
    result(config_report(mcp.keys(), skills), usage(1, 0, 0, 1))
elif scene == "api":
    # The real CLI's route: ANTHROPIC_BASE_URL, the key in x-api-key.
    base = os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com")
    answer = call_api(base + "/v1/messages", {"x-api-key": key, "anthropic-version": "2023-06-01"}, {"model": model, "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]})
    assistant("msg_a", [{"type": "text", "text": answer}], usage(1, 0, 0, 1))
    result(answer, usage(1, 0, 0, 1))
else:
    assistant("msg_a", [{"type": "text", "text": "Hello."}], usage(1, 0, 0, 1))
    result("Hello.", usage(1, 0, 0, 1))
