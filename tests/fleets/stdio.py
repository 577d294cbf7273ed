"""A raw JSON-RPC session with `fleetdeck mcp` as a subprocess: frames as bytes, replies read with a deadline,
stderr kept. For tests that need what the official client hides (oversized frames, `_meta`, stderr)."""

from __future__ import annotations

import json
import queue
import subprocess
import threading


class StdioSession:
    """`fleetdeck mcp` started and initialised (legacy handshake); `request` sends one frame, waits for its reply."""

    def __init__(self, argv: list[str], env: dict[str, str], timeout: float = 60.0) -> None:
        self.argv, self.env, self.timeout = argv, env, timeout
        self.stderr = ""
        self._next = 0
        self._replies: queue.Queue = queue.Queue()

    def __enter__(self) -> "StdioSession":
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=self.env)
        threading.Thread(target=self._read, daemon=True).start()
        self._err = threading.Thread(target=self._read_err, daemon=True)
        self._err.start()
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "raw-test", "version": "0"}})
        self.send_bytes(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode() + b"\n")
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._err.join(timeout=5)

    def _read(self) -> None:
        for line in self.proc.stdout:
            self._replies.put(json.loads(line))  # anything but JSON-RPC on stdout fails the test here
        self._replies.put(None)

    def _read_err(self) -> None:
        self.stderr = self.proc.stderr.read().decode("utf-8", "replace")

    def send_bytes(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def reply(self, id_: int) -> dict:
        """The reply with this id (other messages, e.g. notifications or error replies without an id, are
        returned too when they carry `error` and no id)."""
        while True:
            message = self._replies.get(timeout=self.timeout)
            if message is None:
                raise EOFError("fleetdeck mcp closed stdout")
            if message.get("id") == id_ or ("error" in message and message.get("id") is None):
                return message

    def request(self, method: str, params: dict) -> dict:
        self._next += 1
        self.send_bytes(json.dumps({"jsonrpc": "2.0", "id": self._next, "method": method,
                                    "params": params}).encode() + b"\n")
        return self.reply(self._next)

    def call_tool(self, name: str, arguments: dict) -> dict:
        return self.request("tools/call", {"name": name, "arguments": arguments})
