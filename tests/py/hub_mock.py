"""hub_mock.py: local stand-ins for the Hugging Face Hub and an Ollama registry, for the tests of
`minfer pull` and model references. Nothing here reaches the internet.

Two HTTP/1.1 servers in threads: the hub on 127.0.0.1 (the Hub's API: /api/models/R/refs,
/api/models/R/tree/COMMIT, /R/resolve/REV/PATH; the Ollama registry: /v2/NS/MODEL/manifests/TAG and
/v2/NS/MODEL/blobs/sha256:HEX) and the storage host on 127.0.0.2, where LFS files and blobs are
redirected (302 and 307, as the real services do), with Range support. The storage host records any
Authorization header it is sent, so that "the token never goes to another host" is checked.

Fault modes (HubMock.faults, a set; parameters in HubMock.params):
  range_200       storage answers a range request with 200 and the whole file
  truncate        storage closes each answer after params['truncate_at'] bytes
  corrupt         storage flips one byte of every file it serves
  redirect_loop   the hub's resolve and blob URLs redirect to themselves
  evil_name       the tree lists params['evil_name'] (e.g. '../x.gguf') beside the real files
  status          hub answers params['status'] (e.g. 429, 500, 401, 403, 404) params['status_times'] times
  bad_etag        the resolve redirect carries an X-Linked-Etag other than the file's sha256
HubMock.rate limits each connection of the storage host to that many bytes per second (None: no limit).
Run as a program (python3 tests/py/hub_mock.py --serve DIR) it serves a folder as one repository,
for benchmarks (tools/bench_pull.py).
"""
import hashlib
import http.server
import json
import os
import socket
import socketserver
import threading
import time
import urllib.parse

TOKEN = "hf_minfer_test_token_0123456789abcdefghij"


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for b in iter(lambda: f.read(1 << 20), b""):
            h.update(b)
    return h.hexdigest()


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 64


class HubMock:
    def __init__(self):
        self.repos = {}  # "org/repo" -> {"commit", "files": {path: local file}, "small": {path: bytes}, "private", "gated"}
        self.ollama = {}  # "ns/model:tag" -> manifest bytes
        self.blobs = {}  # sha256 hex -> local file path, or bytes
        self.faults = set()
        self.params = {"truncate_at": 300_000, "status": 500, "status_times": 1 << 30, "evil_name": "../evil.gguf",
                       "page_size": 1000}
        self.rate = None
        self.lock = threading.Lock()
        self.log = []  # (host, method, path, range, authorization)
        self.leaked = []  # requests to the storage host that carried Authorization
        self.served = {}  # sha256 -> body bytes sent by storage
        self._sha = {}
        self.hub = self.storage = None

    # ---- content ----
    def _digest(self, path):
        if path not in self._sha:
            self._sha[path] = sha256_file(path)
        return self._sha[path]

    def add_repo(self, repo, files, small=None, commit=None, private=False, gated=False):
        """files: {path in repo: local file}; small: {path: bytes} served as plain git files."""
        commit = commit or hashlib.sha1(repo.encode()).hexdigest()
        self.repos[repo] = {"commit": commit, "files": dict(files), "small": dict(small or {}), "private": private,
                            "gated": gated}
        for p in files.values():
            self.blobs[self._digest(p)] = p
        return commit

    def add_ollama(self, name, tag, model_file, template="{{ .Prompt }}", params=None):
        def blob(data):
            d = hashlib.sha256(data).hexdigest()
            self.blobs[d] = data
            return {"digest": "sha256:" + d, "size": len(data)}
        d = self._digest(model_file)
        self.blobs[d] = model_file
        layers = [dict(mediaType="application/vnd.ollama.image.model", digest="sha256:" + d, size=os.path.getsize(model_file)),
                  dict(mediaType="application/vnd.ollama.image.template", **blob(template.encode())),
                  dict(mediaType="application/vnd.ollama.image.params", **blob(json.dumps(params or {"stop": ["<|im_end|>"]}).encode()))]
        config = dict(mediaType="application/vnd.docker.container.image.v1+json", **blob(b'{"model_format":"gguf"}'))
        m = {"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json", "config": config,
             "layers": layers}
        if "/" not in name:
            name = "library/" + name
        self.ollama[name + ":" + tag] = json.dumps(m).encode()
        return d

    # ---- servers ----
    def start(self):
        mock = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_HEAD(self):
                self._route(head=True)

            def do_GET(self):
                self._route(head=False)

            def _route(self, head):
                host = self.server.server_address[0]
                auth = self.headers.get("Authorization")
                with mock.lock:
                    mock.log.append((host, self.command, self.path, self.headers.get("Range"), auth))
                try:
                    if host == "127.0.0.2":
                        if auth:
                            with mock.lock:
                                mock.leaked.append(self.path)
                        return mock._storage(self, head)
                    return mock._hub(self, head)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self.hub = _Server(("127.0.0.1", 0), Handler)
        self.storage = _Server(("127.0.0.2", 0), Handler)
        for s in (self.hub, self.storage):
            threading.Thread(target=s.serve_forever, daemon=True).start()
        return self

    def stop(self):
        for s in (self.hub, self.storage):
            if s:
                s.shutdown()
                s.server_close()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.hub.server_address[1]

    @property
    def storage_url(self):
        return "http://127.0.0.2:%d" % self.storage.server_address[1]

    # ---- answers ----
    @staticmethod
    def _send(h, status, body=b"", headers=None, head=False, ctype="application/json"):
        h.send_response(status)
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def _error(self, h, status, code, msg, head):
        self._send(h, status, json.dumps({"error": msg}).encode(), {"X-Error-Code": code, "X-Error-Message": msg}, head)

    def _fault_status(self, h, head):
        if "status" not in self.faults:
            return False
        with self.lock:
            if self.params["status_times"] <= 0:
                return False
            self.params["status_times"] -= 1
        st = self.params["status"]
        hd = {"Retry-After": "0"} if st == 429 else {}
        hd.update({"X-Error-Code": "GatedRepo" if st == 403 else "RepoNotFound" if st == 404 else "",
                   "X-Error-Message": "mock status %d" % st})
        self._send(h, st, b'{"error":"mock"}', hd, head)
        return True

    def _hub(self, h, head):
        u = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(u.path)
        q = urllib.parse.parse_qs(u.query)
        if self._fault_status(h, head):
            return
        if path.startswith("/v2/"):
            return self._ollama(h, path, head)
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 5:
            repo = parts[2] + "/" + parts[3]
            r = self.repos.get(repo)
            if not r:
                return self._error(h, 404, "RepoNotFound", "Repository not found", head)
            if not self._authorized(h, r, head):
                return
            if parts[4] == "refs":
                body = {"branches": [{"name": "main", "ref": "refs/heads/main", "targetCommit": r["commit"]}], "tags": [],
                        "converts": []}
                return self._send(h, 200, json.dumps(body).encode(), head=head)
            if parts[4] == "tree" and len(parts) >= 6:
                if parts[5] not in (r["commit"], "main"):
                    return self._error(h, 404, "RevisionNotFound", "Invalid rev id", head)
                entries = [{"type": "directory", "oid": "0" * 40, "size": 0, "path": "sub"}]
                for p, f in sorted(r["files"].items()):
                    size = os.path.getsize(f)
                    entries.append({"type": "file", "oid": "1" * 40, "size": size, "path": p,
                                    "lfs": {"oid": self._digest(f), "size": size, "pointerSize": 134}})
                for p, data in sorted(r["small"].items()):
                    entries.append({"type": "file", "oid": git_sha1(data), "size": len(data), "path": p})
                if "evil_name" in self.faults:
                    entries.append({"type": "file", "oid": "2" * 40, "size": 10, "path": self.params["evil_name"],
                                    "lfs": {"oid": "3" * 64, "size": 10, "pointerSize": 134}})
                start = int(q.get("cursor", ["0"])[0])
                n = self.params["page_size"]
                hd = {}
                if start + n < len(entries):
                    hd["Link"] = '<%s%s?recursive=true&cursor=%d>; rel="next"' % (self.url, u.path, start + n)
                return self._send(h, 200, json.dumps(entries[start:start + n]).encode(), hd, head)
            return self._error(h, 404, "EntryNotFound", "no such API", head)
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = parts[0] + "/" + parts[1]
            r = self.repos.get(repo)
            if not r:
                return self._error(h, 404, "RepoNotFound", "Repository not found", head)
            if not self._authorized(h, r, head):
                return
            if "redirect_loop" in self.faults:
                return self._send(h, 302, b"", {"Location": h.path}, head)
            if parts[3] not in (r["commit"], "main"):
                return self._error(h, 404, "RevisionNotFound", "Invalid rev id", head)
            fp = "/".join(parts[4:])
            common = {"X-Repo-Commit": r["commit"], "Accept-Ranges": "bytes"}
            if fp in r["small"]:
                data = r["small"][fp]
                common["ETag"] = '"%s"' % git_sha1(data)
                return self._serve_bytes(h, data, head, common, storage=False)
            f = r["files"].get(fp)
            if not f:
                return self._error(h, 404, "EntryNotFound", "Entry not found", head)
            d = self._digest(f)
            etag = ("f" * 64) if "bad_etag" in self.faults else d
            common.update({"X-Linked-Etag": '"%s"' % etag, "X-Linked-Size": str(os.path.getsize(f)), "ETag": '"%s"' % etag,
                           "Location": "%s/cdn/%s?X-Amz-Signature=mock" % (self.storage_url, d)})
            return self._send(h, 302, b"", common, head)
        return self._error(h, 404, "EntryNotFound", "not found", head)

    def _authorized(self, h, r, head):
        if not (r["private"] or r["gated"]):
            return True
        auth = h.headers.get("Authorization")
        if auth == "Bearer " + TOKEN:
            return True
        if r["gated"] and auth:
            self._error(h, 403, "GatedRepo", "Access to this gated repository is restricted", head)
        else:
            self._error(h, 401, "", "Invalid credentials in Authorization header", head)
        return False

    def _ollama(self, h, path, head):
        parts = path.strip("/").split("/")  # v2 NS MODEL manifests TAG | v2 NS MODEL blobs sha256:HEX
        if len(parts) != 5:
            return self._send(h, 404, b'{"errors":[{"code":"NAME_UNKNOWN"}]}', head=head)
        name = parts[1] + "/" + parts[2]
        if parts[3] == "manifests":
            m = self.ollama.get(name + ":" + parts[4])
            if m is None:
                return self._send(h, 404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}', head=head)
            return self._send(h, 200, m, head=head, ctype="application/vnd.docker.distribution.manifest.v2+json")
        if parts[3] == "blobs" and parts[4].startswith("sha256:"):
            d = parts[4][7:]
            if d not in self.blobs:
                return self._send(h, 404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}', head=head)
            if "redirect_loop" in self.faults:
                return self._send(h, 307, b"", {"Location": h.path}, head)
            return self._send(h, 307, b"", {"Location": "%s/cdn/%s" % (self.storage_url, d)}, head)
        return self._send(h, 404, b"{}", head=head)

    def _storage(self, h, head):
        path = urllib.parse.urlsplit(h.path).path
        d = path.rsplit("/", 1)[-1]
        src = self.blobs.get(d)
        if not path.startswith("/cdn/") or src is None:
            return self._send(h, 404, b"NoSuchKey", head=head, ctype="text/plain")
        data = src if isinstance(src, bytes) else None
        return self._serve_bytes(h, data, head, {"ETag": '"mock-cdn-etag"', "Accept-Ranges": "bytes"}, storage=True,
                                 file=None if data is not None else src, digest=d)

    def _serve_bytes(self, h, data, head, headers, storage, file=None, digest=None):
        size = len(data) if data is not None else os.path.getsize(file)
        start, end, status = 0, size - 1, 200
        rng = h.headers.get("Range")
        if rng and not (storage and "range_200" in self.faults):
            try:
                a, b = rng.split("=", 1)[1].split("-", 1)
                start = int(a)
                end = min(int(b), size - 1) if b else size - 1
            except ValueError:
                return self._send(h, 400, b"bad range", head=head, ctype="text/plain")
            if start >= size or start > end:
                return self._send(h, 416, b"", {"Content-Range": "bytes */%d" % size}, head)
            status = 206
        n = end - start + 1
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        if status == 206:
            h.send_header("Content-Range", "bytes %d-%d/%d" % (start, end, size))
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(n))
        h.end_headers()
        if head:
            return
        limit = n
        if storage and "truncate" in self.faults:
            limit = min(n, self.params["truncate_at"])
        f = open(file, "rb") if file else None
        try:
            pos, sent, t0 = start, 0, time.monotonic()
            while sent < limit:
                k = min(1 << 16, limit - sent)
                if f:
                    f.seek(pos)
                    chunk = f.read(k)
                else:
                    chunk = data[pos:pos + k]
                if storage and "corrupt" in self.faults and pos <= size // 2 < pos + k:
                    i = size // 2 - pos
                    chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1:]
                h.wfile.write(chunk)
                pos += k
                sent += k
                if storage and digest:
                    with self.lock:
                        self.served[digest] = self.served.get(digest, 0) + k
                if storage and self.rate:
                    ahead = sent / self.rate - (time.monotonic() - t0)
                    if ahead > 0:
                        time.sleep(ahead)
        finally:
            if f:
                f.close()
        if limit < n:  # truncated: the connection ends mid-answer
            h.wfile.flush()
            h.close_connection = True
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def main():
    import argparse
    ap = argparse.ArgumentParser(description="serve a folder as hf:bench/REPO and ollama:bench (for benchmarks)")
    ap.add_argument("--serve", required=True, help="folder whose files make the repository")
    ap.add_argument("--repo", default="bench/repo")
    ap.add_argument("--rate", type=float, default=0, help="bytes/s per storage connection (0: no limit)")
    a = ap.parse_args()
    m = HubMock()
    m.add_repo(a.repo, {f: os.path.join(a.serve, f) for f in sorted(os.listdir(a.serve))})
    m.rate = a.rate or None
    m.start()
    print(m.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
