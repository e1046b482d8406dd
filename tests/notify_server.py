"""A real local HTTP server for the notification tests: records each POST (headers and
body), answers ``status``; can be taken down and brought back on the same port, and can
hang the first ``hang`` requests until ``release()``."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class Hook:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.hang = 0  # how many of the next requests hang until release()
        self.released = threading.Event()
        self.lock = threading.Lock()
        self.server: ThreadingHTTPServer | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def up(self) -> Hook:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with hook.lock:
                    hook.requests.append(
                        {"headers": dict(self.headers), "body": body, "path": self.path}
                    )
                    hanging = hook.hang > 0
                    hook.hang -= 1 if hanging else 0
                if hanging:
                    hook.released.wait(60)
                self.send_response(hook.status)
                self.end_headers()
                self.wfile.write(b"ok" if hook.status < 300 else b"nope")

            def log_message(self, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def down(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None

    def release(self) -> None:
        self.released.set()

    def bodies(self) -> list[dict[str, Any]]:
        with self.lock:
            return [json.loads(r["body"]) for r in self.requests]
