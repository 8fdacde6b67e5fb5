#!/usr/bin/env python3
"""Stand-in for pi (`pi -p --mode json --session-dir d [--continue] <message>`).

Replays pi's JSON mode: a session header, then AgentSessionEvents
(agent_start, turn_*, message_start/update/end, tool_execution_*,
auto_retry_*, agent_end). Sessions are files in --session-dir; `--continue`
picks the newest. Skills are read from $PI_CODING_AGENT_DIR/skills.
"""

import glob
import json
import os
import sys
import time

sys.path[:0] = ["/usr/local/lib/reeval-standins", os.path.dirname(os.path.abspath(__file__))]
from standin_common import *  # noqa: E402,F403

KEYS = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY", "google": "GEMINI_API_KEY"}

args = Args(
    "pi",
    sys.argv[1:],
    flags={"--print", "--continue", "--no-session", "--no-skills", "--resume"},
    values={"--mode", "--model", "--provider", "--session-dir", "--session", "--thinking", "--api-key"},
    aliases={"-p": "--print", "-c": "--continue", "-r": "--resume"},
)
if not args.flag("--print"):
    die("standin: only print mode is scripted")
if args.value("--mode") != "json":
    die("standin: expected --mode json")
if len(args.positionals) != 1:
    die("standin: expected the prompt as one argument, got %d" % len(args.positionals))
prompt = prompt_arg(args.positionals[0])

agent_dir = os.environ.get("PI_CODING_AGENT_DIR") or os.path.expanduser("~/.pi/agent")
session_dir = args.value("--session-dir") or os.path.join(agent_dir, "sessions", os.getcwd().replace("/", "-"))
os.makedirs(session_dir, exist_ok=True)
resumed = None
existing = sorted(glob.glob(os.path.join(session_dir, "*.jsonl")), key=os.path.getmtime)
if args.flag("--continue") and existing:
    session_file = existing[-1]
    with open(session_file) as f:
        session = json.loads(f.readline())["id"]
    resumed = session
else:
    session = new_id()
    session_file = os.path.join(session_dir, "%s_%s.jsonl" % (time.strftime("%Y-%m-%dT%H-%M-%S", time.gmtime()), session))
    with open(session_file, "w") as f:
        f.write(json.dumps({"type": "session", "version": 3, "id": session, "cwd": os.getcwd()}) + "\n")
with open(session_file, "a") as f:
    f.write(json.dumps({"type": "message", "message": {"role": "user", "content": prompt.decode("utf-8", "replace")}}) + "\n")

model_arg = args.value("--model") or "claude-sonnet-4-5"
provider, _, model = model_arg.rpartition("/")
provider = provider or args.value("--provider") or ("openai" if model.startswith("gpt") else "anthropic")
skills = skills_in(os.path.join(agent_dir, "skills"))
scene = scenario(prompt)
if scene == "hang":
    hang()
if not (os.environ.get(KEYS.get(provider, provider.upper() + "_API_KEY")) or args.value("--api-key")):
    die("No API key found for %s.\n\nUse /login or set an API key environment variable." % provider)

emit({"type": "session", "version": 3, "id": session, "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cwd": os.getcwd()})
emit({"type": "agent_start"})


def assistant(content, usage, stop="stop", error=None):
    msg = {"role": "assistant", "content": content, "api": "anthropic-messages", "provider": provider, "model": model,
           "usage": dict(usage, totalTokens=sum(usage.values()), cost={"total": 0.001}), "stopReason": stop, "timestamp": int(time.time() * 1000)}
    if error:
        msg["errorMessage"] = error
    emit({"type": "message_start", "message": dict(msg, content=[])})
    emit({"type": "message_update", "message": msg, "assistantMessageEvent": {"type": "text_delta", "delta": "…"}})
    emit({"type": "message_end", "message": msg})
    return msg


def usage(i, o, cr, cw):
    return {"input": i, "output": o, "cacheRead": cr, "cacheWrite": cw}


def tool(tid, name, tool_args, text, is_error=False):
    emit({"type": "tool_execution_start", "toolCallId": tid, "toolName": name, "args": tool_args})
    emit({"type": "tool_execution_end", "toolCallId": tid, "toolName": name, "result": {"content": [{"type": "text", "text": text}]}, "isError": is_error})


def end(code=0):
    emit({"type": "agent_end", "messages": []})
    sys.exit(code)


emit({"type": "turn_start"})
emit({"type": "message_start", "message": {"role": "user", "content": [{"type": "text", "text": prompt.decode("utf-8", "replace")}]}})
emit({"type": "message_end", "message": {"role": "user", "content": [{"type": "text", "text": prompt.decode("utf-8", "replace")}]}})
if scene == "edit":
    log_line("[standin] a log line that is not JSON")
    emit({"type": "auto_compaction_start", "reason": "a future event"})
    kind, path, content = edit_hello()
    msg = assistant([{"type": "text", "text": "I'll create hello.py."}, {"type": "toolCall", "id": "t1", "name": "write" if kind == "add" else "edit"}], usage(100, 50, 20, 10), stop="toolUse")
    if kind == "add":
        tool("t1", "write", {"path": path, "content": content}, "Successfully wrote %d bytes to %s" % (len(content), path))
    else:
        tool("t1", "edit", {"path": path, "oldText": "", "newText": "print('hello again')\n"}, "Successfully replaced text in %s." % path)
    emit({"type": "turn_end", "message": msg, "toolResults": []})
    emit({"type": "turn_start"})
    msg = assistant([{"type": "text", "text": summary(session, resumed)}], usage(10, 5, 120, 0))
    emit({"type": "turn_end", "message": msg, "toolResults": []})
    end()
elif scene == "tool_error":
    assistant([{"type": "toolCall", "id": "t1", "name": "bash"}], usage(5, 5, 0, 0), stop="toolUse")
    tool("t1", "bash", {"command": "cat missing.txt"}, "cat: missing.txt: No such file or directory\n\nCommand exited with code 1", is_error=True)
    assistant([{"type": "toolCall", "id": "t2", "name": "bash"}], usage(5, 5, 0, 0), stop="toolUse")
    tool("t2", "bash", {"command": "ls"}, "\n".join(listdir(os.getcwd())))
    assistant([{"type": "text", "text": "Recovered from a failed tool call."}], usage(5, 5, 0, 0))
    end()
elif scene == "rate_limit":
    err = '429 {"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization"}}'
    emit({"type": "auto_retry_start", "attempt": 1, "maxAttempts": 1, "delayMs": 10, "errorMessage": err})
    emit({"type": "auto_retry_end", "success": False, "attempt": 1})
    assistant([], usage(0, 0, 0, 0), stop="error", error=err)
    end(1)
elif scene == "auth":
    assistant([], usage(0, 0, 0, 0), stop="error", error='401 {"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}')
    end(1)
elif scene == "stall":
    assistant([{"type": "text", "text": "Working on it..."}, {"type": "toolCall", "id": "t1", "name": "bash"}], usage(1, 1, 0, 0), stop="toolUse")
    emit({"type": "tool_execution_start", "toolCallId": "t1", "toolName": "bash", "args": {"command": "sleep 600"}})
    hang()
elif scene == "echo":
    path = echo_prompt(prompt)
    assistant([{"type": "toolCall", "id": "t1", "name": "write"}], usage(1, 1, 0, 0), stop="toolUse")
    tool("t1", "write", {"path": path, "content": "<prompt>"}, "ok")
    assistant([{"type": "text", "text": "echoed"}], usage(1, 1, 0, 0))
    end()
elif scene == "config":
    assistant([{"type": "text", "text": config_report([], skills)}], usage(1, 1, 0, 0))
    end()
else:
    assistant([{"type": "text", "text": "Hello."}], usage(1, 1, 0, 0))
    end()
