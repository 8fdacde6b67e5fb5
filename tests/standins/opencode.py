#!/usr/bin/env python3
"""Stand-in for opencode (`opencode run --format json [-m p/m] [-s id] -- <message>`).

Replays opencode's JSON events (step_start, text, tool_use with a state,
step_finish with tokens and cost, error). Config is read from
$XDG_CONFIG_HOME/opencode/opencode.json (permissions must allow edits and
bash); sessions live in $XDG_DATA_HOME/opencode/storage/session/. An `error`
event may come with exit code 0, as in real runs.
"""

import json
import os
import sys
import time

sys.path[:0] = ["/usr/local/lib/reeval-standins", os.path.dirname(os.path.abspath(__file__))]
from standin_common import *  # noqa: E402,F403

KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "google": "GOOGLE_GENERATIVE_AI_API_KEY", "openrouter": "OPENROUTER_API_KEY"}

argv = sys.argv[1:]
if not argv or argv[0] != "run":
    die("standin: only `opencode run` is scripted")
args = Args(
    "opencode",
    argv[1:],
    flags={"--continue", "--print-logs", "--share", "--thinking", "--dangerously-skip-permissions"},
    values={"--format", "--model", "--session", "--agent", "--attach", "--file"},
    aliases={"-m": "--model", "-s": "--session", "-c": "--continue", "-f": "--file"},
)
if args.value("--format") != "json":
    die("standin: expected --format json")
if not args.positionals:
    die("You must provide a message or a command")
prompt = prompt_arg(" ".join(args.positionals))

xdg_config = os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config")
xdg_data = os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")
config = read_json(os.path.join(xdg_config, "opencode", "opencode.json"), {}) or {}
permission = config.get("permission", {})
model = args.value("--model") or "anthropic/claude-sonnet-4-5"
provider = model.split("/", 1)[0]

sessions = os.path.join(xdg_data, "opencode", "storage", "session", "global")
os.makedirs(sessions, exist_ok=True)
resumed = args.value("--session")
if resumed:
    if not os.path.exists(os.path.join(sessions, resumed + ".json")):
        die("Error: Session not found: %s" % resumed)
    session = resumed
else:
    session = "ses_" + new_id().replace("-", "")[:24]
    with open(os.path.join(sessions, session + ".json"), "w") as f:
        json.dump({"id": session, "directory": os.getcwd(), "title": "standin"}, f)

mcp = config.get("mcp", {})
skills = skills_in(os.path.join(xdg_config, "opencode", "skills"))
scene = scenario(prompt)
if scene == "hang":
    hang()

clock = [int(time.time() * 1000)]
part_n = [0]


def ev(kind, part=None, **fields):
    clock[0] += 100
    out = {"type": kind, "timestamp": clock[0], "sessionID": session}
    if part is not None:
        part_n[0] += 1
        part = dict({"id": "prt_%d" % part_n[0], "sessionID": session}, **part)
        out["part"] = part
    out.update(fields)
    emit(out)


def error(name, message, status=None, code=0):
    data = {"message": message}
    if status:
        data.update({"statusCode": status, "isRetryable": status >= 429})
    ev("error", error={"name": name, "data": data})
    sys.exit(code)


def step(mid, tokens, reason):
    ev("step_finish", {"messageID": mid, "type": "step-finish", "reason": reason, "cost": 0.01,
                       "tokens": {"total": sum([tokens[0], tokens[1], tokens[2], tokens[3], tokens[4]]), "input": tokens[0], "output": tokens[1],
                                  "reasoning": tokens[2], "cache": {"read": tokens[3], "write": tokens[4]}}})


def tool(mid, call, name, state):
    ev("tool_use", {"messageID": mid, "type": "tool", "callID": call, "tool": name, "state": state})


if not os.environ.get(KEYS.get(provider, provider.upper() + "_API_KEY")):
    error("ProviderAuthError", "No API key for provider %s" % provider, code=1)
if permission.get("edit") != "allow" or permission.get("bash") != "allow":
    error("PermissionRejectedError", "The user rejected permission to use this specific tool call.", code=1)

ev("step_start", {"messageID": "msg_1", "type": "step-start", "snapshot": "abc"})
if scene == "edit":
    log_line("[standin] a log line that is not JSON")
    ev("snapshot_restored", note="a future event type")
    ev("text", {"messageID": "msg_1", "type": "text", "text": "I'll create hello.py.", "time": {"start": clock[0], "end": clock[0]}})
    existed = os.path.exists(WORKSPACE_FILE)
    kind, path, content = edit_hello()
    if kind == "add":
        tool("msg_1", "call_w", "write", {"status": "completed", "input": {"filePath": path, "content": content}, "output": "", "metadata": {"exists": existed}, "title": "hello.py"})
    else:
        tool("msg_1", "call_w", "edit", {"status": "completed", "input": {"filePath": path, "oldString": "", "newString": "print('hello again')\n"}, "output": "", "title": "hello.py"})
    step("msg_1", (100, 50, 10, 20, 5), "tool-calls")
    ev("step_start", {"messageID": "msg_2", "type": "step-start", "snapshot": "def"})
    ev("text", {"messageID": "msg_2", "type": "text", "text": summary(session, resumed), "time": {"start": clock[0], "end": clock[0]}})
    step("msg_2", (30, 20, 0, 100, 0), "stop")
elif scene == "tool_error":
    tool("msg_1", "call_1", "read", {"status": "error", "input": {"filePath": os.path.join(os.getcwd(), "missing.txt")}, "error": "File not found: %s" % os.path.join(os.getcwd(), "missing.txt")})
    tool("msg_1", "call_2", "bash", {"status": "completed", "input": {"command": "ls"}, "output": "\n".join(listdir(os.getcwd()))})
    step("msg_1", (10, 5, 0, 0, 0), "tool-calls")
    ev("text", {"messageID": "msg_2", "type": "text", "text": "Recovered from a failed tool call."})
    step("msg_2", (10, 5, 0, 0, 0), "stop")
elif scene == "rate_limit":
    error("APIError", "Rate limit exceeded: too many tokens per minute", status=429, code=0)
elif scene == "auth":
    error("APIError", "invalid x-api-key", status=401, code=1)
elif scene == "stall":
    ev("text", {"messageID": "msg_1", "type": "text", "text": "Working on it..."})
    hang()
elif scene == "echo":
    path = echo_prompt(prompt)
    tool("msg_1", "call_e", "write", {"status": "completed", "input": {"filePath": path, "content": "<prompt>"}, "output": ""})
    ev("text", {"messageID": "msg_1", "type": "text", "text": "echoed"})
    step("msg_1", (1, 1, 0, 0, 0), "stop")
elif scene == "config":
    ev("text", {"messageID": "msg_1", "type": "text", "text": config_report(mcp.keys(), skills)})
    step("msg_1", (1, 1, 0, 0, 0), "stop")
else:
    ev("text", {"messageID": "msg_1", "type": "text", "text": "Hello."})
    step("msg_1", (1, 1, 0, 0, 0), "stop")
