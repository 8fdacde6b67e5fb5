#!/usr/bin/env python3
"""Stand-in for the Cursor CLI (`cursor-agent -p --output-format stream-json`).

Replays Cursor's stream-json (system/init with a display-name model, user,
assistant, tool_call started/completed keyed by tool kind, result with usage).
Chats live in $HOME/.cursor/chats/<chatId>.json; `--resume <chatId>` needs one.
Failures print to stderr and exit non-zero, with no result event.
"""

import json
import os
import sys

sys.path[:0] = ["/usr/local/lib/reeval-standins", os.path.dirname(os.path.abspath(__file__))]
from standin_common import *  # noqa: E402,F403

DISPLAY = {"composer-2.5": "Composer 2.5", "sonnet-4.5": "Claude 4.5 Sonnet", "gpt-5": "GPT-5"}

args = Args(
    "cursor-agent",
    sys.argv[1:],
    flags={"--print", "--force", "--approve-mcps", "--stream-partial-output", "--browser"},
    values={"--output-format", "--model", "--resume", "--api-key", "--workspace"},
    aliases={"-p": "--print", "-f": "--force", "--yolo": "--force", "-m": "--model"},
)
if not args.flag("--print"):
    die("standin: only print mode is scripted")
if args.value("--output-format") != "stream-json":
    die("standin: expected --output-format stream-json")
if not args.flag("--force"):
    die("standin: without --force every command would need an approval")
if len(args.positionals) != 1:
    die("standin: expected the prompt as one argument, got %d" % len(args.positionals))
prompt = prompt_arg(args.positionals[0])

home = os.path.expanduser("~")
chats = os.path.join(home, ".cursor", "chats")
resumed = args.value("--resume")
if resumed:
    if not os.path.exists(os.path.join(chats, resumed + ".json")):
        die("Error: chat %s not found" % resumed)
    session = resumed
else:
    session = new_id()
os.makedirs(chats, exist_ok=True)
with open(os.path.join(chats, session + ".json"), "a") as f:
    f.write(json.dumps({"prompt": prompt.decode("utf-8", "replace")}) + "\n")

model_slug = args.value("--model") or "composer-2.5"
model = DISPLAY.get(model_slug, model_slug)
mcp = (read_json(os.path.join(home, ".cursor", "mcp.json"), {}) or {}).get("mcpServers", {})
if mcp and not args.flag("--approve-mcps"):
    die("standin: MCP servers need --approve-mcps in print mode")
skills = skills_in(os.path.join(home, ".cursor", "skills"))
scene = scenario(prompt)

if scene == "hang":
    hang()
if scene == "auth" or not (os.environ.get("CURSOR_API_KEY") or args.value("--api-key")):
    die("Error: Authentication required. Please run 'cursor-agent login' first, or set CURSOR_API_KEY environment variable.")

ts = [1767225600000]


def stamp():
    ts[0] += 250
    return ts[0]


emit({"type": "system", "subtype": "init", "apiKeySource": "env", "cwd": os.getcwd(), "session_id": session, "model": model, "permissionMode": "default"})
emit({"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt.decode("utf-8", "replace")}]}, "session_id": session})


def assistant(text):
    emit({"type": "assistant", "message": {"role": "assistant", "content": [{"type": "text", "text": text}]}, "session_id": session,
          "model_call_id": "mc-1", "timestamp_ms": stamp()})


def tool(call_id, key, args_, result):
    emit({"type": "tool_call", "subtype": "started", "call_id": call_id, "tool_call": {key: {"args": args_}}, "session_id": session,
          "model_call_id": "mc-1", "timestamp_ms": stamp()})
    emit({"type": "tool_call", "subtype": "completed", "call_id": call_id, "tool_call": {key: {"args": args_, "result": result}},
          "session_id": session, "model_call_id": "mc-1", "timestamp_ms": stamp()})


def result(text):
    emit({"type": "result", "subtype": "success", "is_error": False, "duration_ms": 1234, "duration_api_ms": 1200, "result": text,
          "session_id": session, "request_id": new_id(), "usage": {"inputTokens": 120, "outputTokens": 30, "cacheReadTokens": 80, "cacheWriteTokens": 5}})
    sys.exit(0)


if scene == "edit":
    log_line("[standin] a log line that is not JSON")
    emit({"type": "thinking", "subtype": "delta", "text": "planning", "session_id": session})
    assistant("I'll create hello.py.")
    kind, path, content = edit_hello()
    if kind == "add":
        tool("tc-w", "writeToolCall", {"path": path, "fileText": content}, {"success": {"path": path, "linesCreated": content.count("\n"), "fileSize": len(content)}})
    else:
        tool("tc-w", "editToolCall", {"path": path, "oldString": "", "newString": "print('hello again')\n"}, {"success": {"path": path, "linesAdded": 1}})
    assistant(summary(session, resumed))
    result(summary(session, resumed))
elif scene == "tool_error":
    tool("tc-1", "shellToolCall", {"command": "cat missing.txt"}, {"failure": {"command": "cat missing.txt", "exitCode": 1, "stdout": "", "stderr": "cat: missing.txt: No such file or directory"}})
    tool("tc-2", "shellToolCall", {"command": "ls"}, {"success": {"command": "ls", "exitCode": 0, "stdout": "\n".join(listdir(os.getcwd())), "stderr": ""}})
    assistant("Recovered from a failed tool call.")
    result("Recovered from a failed tool call.")
elif scene == "rate_limit":
    die("ConnectError: [resource_exhausted] You've hit your usage limit. Rate limit exceeded, please try again later.")
elif scene == "stall":
    assistant("Working on it...")
    hang()
elif scene == "echo":
    path = echo_prompt(prompt)
    tool("tc-e", "writeToolCall", {"path": path, "fileText": "<prompt>"}, {"success": {"path": path, "linesCreated": 1}})
    result("echoed")
elif scene == "config":
    result(config_report(mcp.keys(), skills))
else:
    assistant("Hello.")
    result("Hello.")
