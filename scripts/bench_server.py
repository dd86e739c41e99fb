#!/usr/bin/env python3
"""A scripted OpenAI-compatible server for benchmarks (stdlib only).

Usage: bench_server.py TURNS COMMAND PORT_FILE STATS_FILE [LATENCY_S [FINAL_COMMAND]]

Every request is answered with one `bash` tool call running COMMAND, until
the conversation holds TURNS assistant answers; then with a final text, or
with a last tool call running FINAL_COMMAND when one is given (an agent
such as mini-swe-agent ends when a command prints its submit marker).
Writes its port to PORT_FILE once listening; on SIGTERM writes "REQUESTS
SECONDS MAX_IN_FLIGHT SPAN" to STATS_FILE: the time spent handling requests,
latency aside, so the bench can subtract the server's own time from what
it measures; the most requests it held at once, so the bench can check
that LATENCY_S overlapped across connections (one thread per connection);
and the seconds from the first request's arrival to the last answer's
end, the time the agents were calling (their start-up and exit aside).
"""
import json
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TURNS = int(sys.argv[1])
COMMAND = sys.argv[2]
PORT_FILE, STATS_FILE = sys.argv[3], sys.argv[4]
LATENCY = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
FINAL_COMMAND = sys.argv[6] if len(sys.argv) > 6 else None
stats = {"requests": 0, "seconds": 0.0, "in_flight": 0, "max_in_flight": 0,
         "first": None, "last": None}
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without this, Nagle and
    # delayed ACKs add ~40 ms to every answer, which is not onebash's time.
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_POST(self):
        start = time.perf_counter()
        with lock:
            if stats["first"] is None:
                stats["first"] = start
            stats["in_flight"] += 1
            stats["max_in_flight"] = max(stats["max_in_flight"], stats["in_flight"])
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        answered = sum(1 for m in body["messages"] if m["role"] == "assistant")
        command = COMMAND if answered < TURNS else FINAL_COMMAND
        if command is not None:
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{
                    "id": f"call-{answered}",
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
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
        with lock:
            stats["in_flight"] -= 1
            stats["last"] = time.perf_counter()


def stop(*_):
    with lock:
        with open(STATS_FILE, "w") as f:
            span = stats["last"] - stats["first"] if stats["last"] is not None else 0.0
            f.write(f"{stats['requests']} {stats['seconds']:.6f} {stats['max_in_flight']} {span:.6f}\n")
    sys.exit(0)


class Server(ThreadingHTTPServer):
    # The default listen backlog (5) drops the SYNs of a burst of new
    # connections (-j 32 opens 32 at once); each dropped one waits a 1 s
    # retransmit, which would be billed to onebash.
    request_queue_size = 256


signal.signal(signal.SIGTERM, stop)
server = Server(("127.0.0.1", 0), Handler)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os  # noqa: E402  (only needed here)
os.replace(PORT_FILE + ".tmp", PORT_FILE)
server.serve_forever()
