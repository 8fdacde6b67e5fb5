"""Shared pieces of reeval's stand-in agent CLIs (test fixtures, not agents).

Each stand-in accepts its CLI's real flags (and rejects unknown ones the way a
real CLI does), reads the task the way the real CLI does, keeps its session
state in the CLI's (relocated) config home, and replays that CLI's documented
event format for a scenario chosen by the task text: `SCENARIO:<name>`.
"""

import json
import os
import re
import sys
import time
import uuid

WORKSPACE_FILE = "hello.py"


def die(message, code=1):
    sys.stderr.write(message + "\n")
    sys.stderr.flush()
    sys.exit(code)


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def log_line(text):
    """A non-JSON line on stdout, as real CLIs sometimes print."""
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def scenario(prompt_bytes):
    m = re.search(rb"SCENARIO:([a-z_]+)", prompt_bytes)
    return m.group(1).decode() if m else "answer"


def new_id():
    return str(uuid.uuid4())


def hang():
    """Prints nothing more and waits to be killed."""
    sys.stdout.flush()
    time.sleep(600)
    sys.exit(0)


def edit_hello():
    """Creates hello.py in the working directory, or appends to it: ('add'|'update', abs path, content)."""
    path = os.path.join(os.getcwd(), WORKSPACE_FILE)
    if os.path.exists(path):
        with open(path, "a") as f:
            f.write("print('hello again')\n")
        kind = "update"
    else:
        with open(path, "w") as f:
            f.write("print('hello')\n")
        kind = "add"
    with open(path) as f:
        return kind, path, f.read()


def echo_prompt(prompt_bytes):
    """Writes the exact task bytes to prompt.txt."""
    path = os.path.join(os.getcwd(), "prompt.txt")
    with open(path, "wb") as f:
        f.write(prompt_bytes)
    return path


def summary(session, resumed):
    return "done; session=%s; resumed=%s" % (session, resumed or "no")


def listdir(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def skills_in(path):
    return [d for d in listdir(path) if os.path.isfile(os.path.join(path, d, "SKILL.md"))]


def config_report(mcp_names, skills):
    return "mcp=%s; skills=%s" % (",".join(sorted(mcp_names)) or "none", ",".join(sorted(skills)) or "none")


def read_json(path, default=None):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


class Args:
    """A strict flag parser: unknown options are an error, as in the real CLIs."""

    def __init__(self, cli, argv, flags=(), values=(), aliases=None):
        self.flags = {}
        self.values = {}
        self.positionals = []
        aliases = aliases or {}
        i = 0
        rest = False
        while i < len(argv):
            tok = argv[i]
            i += 1
            if rest or tok == "-" or not tok.startswith("-"):
                self.positionals.append(tok)
                continue
            if tok == "--":
                rest = True
                continue
            name, eq, inline = tok.partition("=")
            name = aliases.get(name, name)
            if name in flags and not eq:
                self.flags[name] = True
            elif name in values:
                if eq:
                    value = inline
                elif i < len(argv):
                    value = argv[i]
                    i += 1
                else:
                    die("error: option '%s' argument missing" % name)
                self.values.setdefault(name, []).append(value)
            else:
                die("error: unknown option '%s'" % tok)
        self.cli = cli

    def flag(self, name):
        return self.flags.get(name, False)

    def value(self, name):
        v = self.values.get(name)
        return v[-1] if v else None


def prompt_arg(s):
    """The exact bytes of an argv element."""
    return os.fsencode(s)


def require_env(name):
    return bool(os.environ.get(name))


def call_api(url, headers, body):
    """A real HTTP(S) request, the way the CLI makes it: through HTTPS_PROXY
    for https URLs (trusting SSL_CERT_FILE), directly for a base URL on
    127.0.0.1 (NO_PROXY). Returns the response body as text."""
    import urllib.request

    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=dict(headers, **{"content-type": "application/json"}), method="POST")
    with urllib.request.urlopen(req, timeout=20) as resp:
        return resp.read().decode()
