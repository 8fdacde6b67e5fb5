#!/usr/bin/env python3
"""Stand-in for Gemini CLI in headless mode (`gemini --output-format stream-json`).

Replays Gemini's stream-json events (init, message with deltas, tool_use,
tool_result, error, result with stats) and its headless exit codes (41 for
auth). Sessions live in $HOME/.gemini/tmp/<project>/chats/; `--resume latest`
continues the newest one.
"""

import glob
import hashlib
import json
import os
import sys
import time

sys.path[:0] = ["/usr/local/lib/reeval-standins", os.path.dirname(os.path.abspath(__file__))]
from standin_common import *  # noqa: E402,F403

args = Args(
    "gemini",
    sys.argv[1:],
    flags={"--yolo", "--debug", "--sandbox"},
    values={"--prompt", "--output-format", "--approval-mode", "--model", "--resume"},
    aliases={"-p": "--prompt", "-o": "--output-format", "-y": "--yolo", "-m": "--model", "-r": "--resume", "-d": "--debug"},
)
if args.value("--output-format") != "stream-json":
    die("standin: expected --output-format stream-json")
if args.value("--prompt") is not None:
    prompt = prompt_arg(args.value("--prompt"))
elif args.positionals:
    prompt = prompt_arg(" ".join(args.positionals))
else:
    die("standin: no prompt given", 42)
yolo = args.flag("--yolo") or args.value("--approval-mode") == "yolo"
if yolo and os.environ.get("GEMINI_CLI_TRUST_WORKSPACE") != "true":
    die("standin: the folder is not trusted, so yolo mode was downgraded and tools would wait for approval", 1)
if not yolo:
    die("standin: without --approval-mode yolo every tool call would wait for an approval", 1)

home = os.path.expanduser("~")
settings = read_json(os.path.join(home, ".gemini", "settings.json"), {}) or {}
scene = scenario(prompt)
if scene == "hang":
    hang()
if not settings.get("security", {}).get("auth", {}).get("selectedType"):
    die("Please set an Auth method in your %s/.gemini/settings.json or specify one of the following environment variables before running: GEMINI_API_KEY, GOOGLE_GENAI_USE_VERTEXAI, GOOGLE_GENAI_USE_GCA" % home, 41)
if scene == "auth" or not os.environ.get("GEMINI_API_KEY"):
    die("When using Gemini API, you must specify the GEMINI_API_KEY environment variable.\nAPI key not valid. Please pass a valid API key.", 41)

chats = os.path.join(home, ".gemini", "tmp", hashlib.sha256(os.getcwd().encode()).hexdigest(), "chats")
os.makedirs(chats, exist_ok=True)
resumed = None
if args.value("--resume") is not None:
    found = sorted(glob.glob(os.path.join(chats, "session-*.json")), key=os.path.getmtime)
    if not found:
        die("Error resuming session: No previous sessions found for this project.", 1)
    session_file = found[-1] if args.value("--resume") == "latest" else None
    if session_file is None:
        die("standin: only --resume latest is scripted", 1)
    session = read_json(session_file)["sessionId"]
    resumed = session
else:
    session = new_id()
    session_file = os.path.join(chats, "session-%s-%s.json" % (time.strftime("%Y-%m-%dT%H-%M", time.gmtime()), session[:8]))
data = read_json(session_file, {"sessionId": session, "messages": []})
data["messages"].append({"type": "user", "content": prompt.decode("utf-8", "replace")})
with open(session_file, "w") as f:
    json.dump(data, f)

model = args.value("--model") or "gemini-2.5-pro"
mcp = settings.get("mcpServers", {})
skills = skills_in(os.path.join(home, ".gemini", "skills"))


def now():
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


def ev(kind, **fields):
    fields = dict({"type": kind, "timestamp": now()}, **fields)
    emit(fields)


def say(text):
    for i in range(0, len(text), 6):
        ev("message", role="assistant", content=text[i:i + 6], delta=True)


def tool(tid, name, params, status, output, error=None):
    ev("tool_use", tool_name=name, tool_id=tid, parameters=params)
    fields = {"tool_id": tid, "status": status, "output": output}
    if error:
        fields["error"] = error
    ev("tool_result", **fields)


def result(status="success", error=None, code=0):
    fields = {"status": status, "stats": {"total_tokens": 1500, "input_tokens": 1200, "output_tokens": 300, "cached": 800, "input": 400, "duration_ms": 5400, "tool_calls": 1}}
    if error:
        fields["error"] = error
    ev("result", **fields)
    sys.exit(code)


ev("init", session_id=session, model=model)
ev("message", role="user", content=prompt.decode("utf-8", "replace"))

if scene == "edit":
    log_line("[standin] a log line that is not JSON")
    ev("loop_detected", note="a future event type")
    say("I'll create hello.py.")
    kind, path, content = edit_hello()
    if kind == "add":
        tool("t1", "write_file", {"file_path": path, "content": content}, "success", "Successfully created and wrote to new file: %s." % path)
    else:
        tool("t1", "replace", {"file_path": path, "old_string": "", "new_string": "print('hello again')\n"}, "success", "Successfully modified file: %s (1 replacements)." % path)
    say(summary(session, resumed))
    result()
elif scene == "tool_error":
    tool("t1", "run_shell_command", {"command": "cat missing.txt"}, "error", "cat: missing.txt: No such file or directory",
         error={"type": "execution_failed", "message": "Command exited with code 1: cat: missing.txt: No such file or directory"})
    tool("t2", "run_shell_command", {"command": "ls"}, "success", "\n".join(listdir(os.getcwd())))
    say("Recovered from a failed tool call.")
    result()
elif scene == "rate_limit":
    ev("error", severity="warning", message="Attempt 1 failed with status 429. Retrying with backoff...")
    result("error", {"type": "ApiError", "message": '[API Error: got status: 429 Too Many Requests. {"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota).","status":"RESOURCE_EXHAUSTED"}}]'}, code=1)
elif scene == "stall":
    say("Working on it...")
    hang()
elif scene == "echo":
    path = echo_prompt(prompt)
    tool("t1", "write_file", {"file_path": path, "content": "<prompt>"}, "success", "ok")
    say("echoed")
    result()
elif scene == "config":
    say(config_report(mcp.keys(), skills))
    result()
else:
    say("Hello.")
    result()
