"""A line echo server on port 7000 that answers "pong <line>", after a slow start."""
import socketserver
import time

time.sleep(1.5)


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        line = self.rfile.readline().decode().strip()
        self.wfile.write(f"pong {line}\n".encode())


socketserver.ThreadingTCPServer(("0.0.0.0", 7000), Echo).serve_forever()
