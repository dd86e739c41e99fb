#!/usr/bin/env python3
"""A scripted Hugging Face Hub serving one dataset repo from a folder, for
the bench's `datasets` section (stdlib only).

Usage: bench_hub_server.py FOLDER OWNER/NAME

Serves the files under FOLDER as the one commit of the dataset repo
OWNER/NAME, at the revision `main` and at its sha (made from the files'
hashes, so the same files are the same commit). The part of the Hub's API
a dataset download uses, with the real Hub's headers:

- `GET /api/datasets/OWNER/NAME[/revision/REV]`: `id`, `sha`, `siblings`
  (`rfilename`), `cardData` (empty: the split comes from the file names);
- `GET /api/datasets/OWNER/NAME/tree/REV[/PATH][?recursive=true]`: its
  folders and files, a file with `oid` (the git blob id) and, for an LFS
  file, `lfs` (`oid` its sha256, `size`, `pointerSize`);
- `HEAD` and `GET /datasets/OWNER/NAME/resolve/REV/PATH`: the bytes, with
  `ETag`, `X-Repo-Commit`, `Accept-Ranges`, an LFS file's `X-Linked-Etag`
  (its sha256) and `X-Linked-Size`; `Range: bytes=N-` -> 206. An LFS file
  is served here, not redirected to a CDN.

Parquet and JSONL files are LFS files (the Hub's default .gitattributes);
the others are kept in git. Prints its port on stdout once listening, then
one line per request as it arrives (`METHOD PATH`), so the bench can count
the requests a run made. Nothing else: no paging (one page holds a
dataset of a few files), no tokens, no errors beyond 404 and 416.
"""
import hashlib
import json
import os
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

FOLDER, REPO = sys.argv[1], sys.argv[2]
LFS = (".parquet", ".jsonl", ".json.gz", ".arrow")


def scan():
    """path -> {size, oid, sha256 (LFS only), pointer_size}, sorted by path."""
    files = {}
    for top, dirs, names in os.walk(FOLDER):
        dirs.sort()
        for name in sorted(names):
            full = os.path.join(top, name)
            path = os.path.relpath(full, FOLDER).replace(os.sep, "/")
            data = open(full, "rb").read()
            entry = {"size": len(data)}
            if path.endswith(LFS):
                sha256 = hashlib.sha256(data).hexdigest()
                pointer = (f"version https://git-lfs.github.com/spec/v1\n"
                           f"oid sha256:{sha256}\nsize {len(data)}\n").encode()
                entry.update(sha256=sha256, oid=blob_id(pointer), pointer_size=len(pointer))
            else:
                entry["oid"] = blob_id(data)
            files[path] = entry
    return dict(sorted(files.items()))


def blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


FILES = scan()
SHA = hashlib.sha1(json.dumps(FILES, sort_keys=True).encode()).hexdigest()


def tree(under, recursive):
    """The tree listing of the folder `under` ("" for the root)."""
    prefix = under + "/" if under else ""
    out, folders = [], set()
    for path, f in FILES.items():
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix):].split("/")
        # Folders on the way, each once (as the Hub lists them).
        for depth in range(1, len(rest)):
            folder = prefix + "/".join(rest[:depth])
            if folder not in folders and (recursive or depth == 1):
                folders.add(folder)
                out.append({"type": "directory", "oid": hashlib.sha1(folder.encode()).hexdigest(),
                            "size": 0, "path": folder})
        if len(rest) > 1 and not recursive:
            continue
        entry = {"type": "file", "oid": f["oid"], "size": f["size"], "path": path}
        if "sha256" in f:
            entry["lfs"] = {"oid": f["sha256"], "size": f["size"], "pointerSize": f["pointer_size"]}
        out.append(entry)
    return out


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, *args):
        pass

    def do_HEAD(self):
        self.route(head=True)

    def do_GET(self):
        self.route(head=False)

    def route(self, head):
        # Logged as it arrives: by the time the client has its answer,
        # the bench can count it.
        print(f"{self.command} {self.path}", flush=True)
        url = urlsplit(self.path)
        api = f"/api/datasets/{REPO}"
        resolve = f"/datasets/{REPO}/resolve/"
        if url.path == api or url.path.startswith(api + "/revision/"):
            rev = url.path[len(api + "/revision/"):] if url.path != api else "main"
            if unquote(rev) not in ("main", SHA):
                return self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            return self.json({"id": REPO, "sha": SHA, "private": False, "gated": False,
                              "siblings": [{"rfilename": p} for p in FILES], "cardData": {}})
        if url.path.startswith(api + "/tree/"):
            rest = url.path[len(api + "/tree/"):].split("/", 1)
            if unquote(rest[0]) not in ("main", SHA):
                return self.error(404, "RevisionNotFound", f"Invalid rev id: {rest[0]}")
            under = unquote(rest[1]).strip("/") if len(rest) > 1 else ""
            listing = tree(under, "recursive=true" in url.query or "recursive=True" in url.query)
            if under and not listing:
                return self.error(404, "EntryNotFound", f"{under} does not exist on {rest[0]}")
            return self.json(listing)
        if url.path.startswith(resolve):
            rev, _, path = url.path[len(resolve):].partition("/")
            path = unquote(path)
            if unquote(rev) not in ("main", SHA):
                return self.error(404, "RevisionNotFound", f"Invalid rev id: {rev}")
            if path not in FILES:
                return self.error(404, "EntryNotFound", f"{path} does not exist on {rev}")
            return self.file(path, head)
        return self.error(404, "RepoNotFound", "Repository not found")

    def file(self, path, head):
        f = FILES[path]
        size, start = f["size"], 0
        status = 200
        wanted = self.headers.get("Range", "")
        if wanted.startswith("bytes=") and wanted.endswith("-"):
            start = int(wanted[len("bytes="):-1])
            if start >= size:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(size - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("X-Repo-Commit", SHA)
        if "sha256" in f:
            self.send_header("ETag", f'"{f["sha256"]}"')
            self.send_header("X-Linked-Etag", f'"{f["sha256"]}"')
            self.send_header("X-Linked-Size", str(size))
        else:
            self.send_header("ETag", f'"{f["oid"]}"')
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
        self.end_headers()
        if head:
            return
        with open(os.path.join(FOLDER, path), "rb") as src:
            src.seek(start)
            while chunk := src.read(1 << 20):
                self.wfile.write(chunk)

    def json(self, value):
        reply = json.dumps(value).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply)

    def error(self, status, code, message):
        reply = json.dumps({"error": message}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("X-Error-Code", code)
        self.send_header("X-Error-Message", message)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(reply)


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
