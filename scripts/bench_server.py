#!/usr/bin/env python3
"""A scripted OpenAI-compatible server for benchmarks (stdlib only).

Every request is answered at once with one `bash` tool call running
COMMAND, until the conversation holds TURNS assistant answers; then with a
final text. Prints its port on the first line of stdout, and on exit (stdin
closed) the number of requests and the seconds spent handling them, so the
bench can subtract the server's own time from what it measures.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TURNS = int(sys.argv[1])
COMMAND = sys.argv[2]
LATENCY = float(sys.argv[3]) if len(sys.argv) > 3 else 0.0
stats = {"requests": 0, "seconds": 0.0}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        start = time.perf_counter()
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answered = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if answered < TURNS:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{
                    "id": f"call-{answered}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": COMMAND})},
                }],
            }
            finish = "tool_calls"
        else:
            message = {"role": "assistant", "content": "done"}
            finish = "stop"
        reply = json.dumps({
            "id": "bench", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }).encode()
        with lock:
            stats["requests"] += 1
            stats["seconds"] += time.perf_counter() - start
        if LATENCY:
            time.sleep(LATENCY)
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
print(stats["requests"], round(stats["seconds"], 4), flush=True)
