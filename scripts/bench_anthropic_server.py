#!/usr/bin/env python3
"""A scripted Anthropic Messages server that bills like Anthropic, for the
bench's `caching` section (stdlib only).

Usage: bench_anthropic_server.py TURNS COMMAND PORT_FILE

Every request is answered with one `bash` tool_use running COMMAND, until
the conversation holds TURNS assistant answers; then with a final text.
Writes its port to PORT_FILE once listening.

Usage is billed as the API bills prompt caching (the same rule as the
strict test server, tests/it/support/messages.rs): the request is cut into
items in cache order (tools, system blocks, each message's content blocks),
each worth the bytes of its compact JSON / 4 tokens, cache markers left out.
At each `cache_control` breakpoint the prefix up to it has a hash. The
longest breakpoint prefix an earlier request wrote is read
(cache_read_input_tokens); from there to the last breakpoint is written
(cache_creation_input_tokens); the rest is input_tokens. No minimum length,
no expiry. Output: the answer's compact JSON bytes / 4.
"""
import hashlib
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TURNS = int(sys.argv[1])
COMMAND = sys.argv[2]
PORT_FILE = sys.argv[3]
cache = set()
lock = threading.Lock()


def compact(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def tokens(value):
    return len(compact(value).encode()) // 4


def unmarked(block):
    return {k: v for k, v in block.items() if k != "cache_control"} if isinstance(block, dict) else block


def items(body):
    """(item, marked) in cache order."""
    out = [(unmarked(t), "cache_control" in t) for t in body.get("tools", [])]
    system = body.get("system", "")
    if isinstance(system, str):
        if system:
            out.append(({"type": "text", "text": system}, False))
    else:
        out.extend((unmarked(b), "cache_control" in b) for b in system)
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        for block in content:
            out.append(({"role": message["role"], "block": unmarked(block)}, "cache_control" in block))
    return out


def bill(body):
    digest = hashlib.sha256()
    total = 0
    breakpoints = []
    for item, marked in items(body):
        digest.update(compact(item).encode())
        total += tokens(item)
        if marked:
            breakpoints.append((digest.copy().hexdigest(), total))
    with lock:
        read = max((t for h, t in breakpoints if h in cache), default=0)
        cache.update(h for h, _ in breakpoints)
    write = max(0, (breakpoints[-1][1] if breakpoints else 0) - read)
    return {
        "input_tokens": total - read - write,
        "cache_creation_input_tokens": write,
        "cache_read_input_tokens": read,
    }


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_GET(self):
        # onebash's preflight asks for the list of models.
        self.answer(200, {"data": [{"id": "bench", "type": "model"}]})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answered = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if answered < TURNS:
            content = [{"type": "tool_use", "id": f"toolu_{answered}", "name": "bash",
                        "input": {"command": COMMAND}}]
            stop = "tool_use"
        else:
            content = [{"type": "text", "text": "done"}]
            stop = "end_turn"
        usage = bill(body)
        usage["output_tokens"] = tokens(content)
        self.answer(200, {"id": f"msg_{answered}", "type": "message", "role": "assistant",
                          "model": body["model"], "content": content, "stop_reason": stop,
                          "usage": usage})

    def answer(self, status, value):
        reply = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402  (only needed here)
os.replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
