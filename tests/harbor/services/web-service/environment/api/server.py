"""The task's API service: /health, /word (from its environment), /reach
(whether it reaches the engine's host or its default gateway: a service has
no way out, so it reaches nothing). Every other request is logged to
/srv/log/requests.txt, the task's artifact of this service."""
import http.server
import os
import socket


def reach():
    targets = []
    with open("/proc/net/route") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == "00000000":
                gateway = socket.inet_ntoa(bytes.fromhex(fields[2])[::-1])
                targets.append((gateway, 80))
    # ip:port of a listener on the engine's host, when the test gives one.
    probe = os.environ.get("HOST_PROBE", "")
    if probe:
        ip, port = probe.rsplit(":", 1)
        targets.append((ip, int(port)))
    reached = []
    for target in targets:
        try:
            socket.create_connection(target, 1).close()
            reached.append("%s:%d" % target)
        except OSError:
            pass
    return "reached " + (", ".join(reached) if reached else "nothing")


def log(path):
    """Each request but the health checks, kept for the task's artifact."""
    os.makedirs("/srv/log", exist_ok=True)
    with open("/srv/log/requests.txt", "a") as f:
        f.write(path + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/health":
            log(self.path)
        if self.path == "/health":
            body = b"ok"
        elif self.path == "/word":
            body = os.environ["SECRET_WORD"].encode()
        elif self.path == "/reach":
            body = reach().encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


http.server.ThreadingHTTPServer(("0.0.0.0", 8000), Handler).serve_forever()
