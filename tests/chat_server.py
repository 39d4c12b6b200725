"""A minimal OpenAI-compatible chat-completions server on 127.0.0.1 for the judge and VLM tests."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class ChatServer:
    """A minimal chat-completions endpoint. `script` is a list of actions consumed one per request;
    when empty, `default` is used. Actions: ("ok", text) | ("status", code, retry_after) |
    ("sleep", seconds, text) | ("raw", body_text)."""

    def __init__(self):
        self.requests: list[dict] = []
        self.script: list[tuple] = []
        self.default: tuple = ("ok", "{}")
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):  # noqa: N802
                n = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(n) or b"{}")
                with server.lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    action = server.script.pop(0) if server.script else server.default
                    server.in_flight += 1
                    server.max_in_flight = max(server.max_in_flight, server.in_flight)
                try:
                    self._act(action, body)
                finally:
                    with server.lock:
                        server.in_flight -= 1

            def _send(self, code, payload, headers=None):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def _completion(self, body, text):
                return {"id": "cmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

            def _act(self, action, body):
                kind = action[0]
                if kind == "ok":
                    text = action[1](body) if callable(action[1]) else action[1]
                    self._send(200, self._completion(body, text))
                elif kind == "status":
                    hdr = {"retry-after": str(action[2])} if len(action) > 2 and action[2] is not None else {}
                    self._send(action[1], {"error": {"message": f"injected {action[1]}", "type": "x"}}, hdr)
                elif kind == "sleep":
                    time.sleep(action[1])
                    self._send(200, self._completion(body, action[2]))
                elif kind == "raw":
                    self._send(200, action[1].encode())

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
