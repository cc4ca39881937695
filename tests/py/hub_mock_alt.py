"""hub_mock_alt.py: a second, independently written stand-in for the Hugging Face Hub and an Ollama
registry, to catch what a client would only get right against hub_mock.py's own habits. It answers
as the services (and other servers that speak their protocols correctly) may, each behaviour a
switch in AltMock.opts:

Hugging Face (127.0.0.1; storage on 127.0.0.2):
  routes          which API routes exist: a set of "revision", "model", "refs", "tree"; the rest
                  answer 404 without X-Error-Code (a server that lacks them); resolve always exists
  tree_recursive  False: the tree ignores ?recursive= and lists one folder (folders as entries)
  tree_oids       False: tree entries carry only type, path (no oid, size, lfs)
  sibling_blobs   False: the model info ignores ?blobs=true (siblings are rfilename alone)
  page_size       entries per tree page; Link: <RELATIVE>; rel=next (unquoted, relative)
  redirect        302 or 307 for LFS files; relative_storage True: Location is a relative path on
                  the hub's own host (so the token may go along), else absolute on 127.0.0.2
  chunked         bodies sent with Transfer-Encoding: chunked and no Content-Length
  ignore_range    every GET answers 200 with the whole body
  renamed         {"old/name": "new/name"}: any URL of the old name answers 307 to the new, relative
  rate            bytes per second of each answer's body (0: no limit)
Header names are sent in lower case, ETags as W/"...", plain (non-LFS) files are served by the
hub itself with ETag = git blob SHA-1 and no X-Linked-* headers, as the Hub does.

Ollama (same hosts): manifests served with the OCI media type only when the request's Accept
allows it (else the Docker v2 type), blobs by 302 to the storage host (opts["ollama_redirect"]).
opts["ollama_auth"]: the registry wants a Bearer token, handed out anonymously by GET /token
(Docker's token flow: 401 with WWW-Authenticate: Bearer realm=...,service=...,scope=...).
opts["short"]: the storage host holds that many bytes fewer of each file than listed.

Every request is logged as (host, method, path, range, authorization).
"""
import hashlib
import http.server
import json
import os
import socketserver
import threading
import time
import urllib.parse

TOKEN = "hf_alt_mock_token_abcdefghijklmnopqrstuvwxyz01"
OCI = "application/vnd.oci.image.manifest.v1+json"
DOCKER = "application/vnd.docker.distribution.manifest.v2+json"
REGISTRY_TOKEN = "registry-anonymous-token-1"


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class _Threads(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


class AltMock:
    def __init__(self):
        self.repos = {}   # repo -> {"revs": {name: commit}, "trees": {commit: {path: (bytes, lfs)}}, "private": bool}
        self.registry = {}  # "ns/model:tag" -> (manifest bytes, media type)
        self.store = {}   # sha256 -> bytes (LFS files and Ollama blobs)
        self.opts = {}
        self.log = []
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        self.opts.clear()
        self.opts.update(routes={"revision", "model", "refs", "tree"}, tree_recursive=True, tree_oids=True, page_size=1000,
                         redirect=302, relative_storage=False, chunked=False, ignore_range=False, renamed={},
                         ollama_redirect=302, ollama_auth=False, short=0, sibling_blobs=True, rate=0)
        self.log.clear()

    # ---- content ----
    def repo(self, name, revs, private=False):
        """revs: {branch or tag: {path: (bytes, is_lfs)}}; each gets its own commit."""
        r = {"revs": {}, "trees": {}, "private": private}
        for rev, files in revs.items():
            commit = hashlib.sha1((name + "@" + rev).encode()).hexdigest()
            r["revs"][rev] = commit
            r["trees"][commit] = dict(files)
            for data, lfs in files.values():
                if lfs:
                    self.store[_sha256(data)] = data
        self.repos[name] = r
        return r["revs"]

    def ollama(self, name, tag, model, extra=(), oci=True):
        def layer(mt, data):
            d = _sha256(data)
            self.store[d] = data
            return {"mediaType": mt, "digest": "sha256:" + d, "size": len(data)}
        cfg = layer("application/vnd.oci.image.config.v1+json" if oci else "application/vnd.docker.container.image.v1+json",
                    b'{"model_format":"gguf","model_family":"qwen2"}')
        layers = [layer("application/vnd.ollama.image.model", model)]
        layers += [layer("application/vnd.ollama.image." + k, v) for k, v in extra]
        mt = OCI if oci else DOCKER
        body = json.dumps({"schemaVersion": 2, "mediaType": mt, "config": cfg, "layers": layers}, indent=1).encode()
        self.registry[name + ":" + tag] = (body, mt)
        return body

    # ---- servers ----
    def start(self):
        mock = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                self._go(False)

            def do_HEAD(self):
                self._go(True)

            def _go(self, head):
                host = self.server.server_address[0]
                with mock.lock:
                    mock.log.append((host, self.command, self.path, self.headers.get("range"),
                                     self.headers.get("authorization")))
                try:
                    mock._dispatch(self, host, head)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True

        self.servers = [_Threads(("127.0.0.1", 0), H), _Threads(("127.0.0.2", 0), H)]
        for s in self.servers:
            threading.Thread(target=s.serve_forever, daemon=True).start()
        return self

    def stop(self):
        for s in self.servers:
            s.shutdown()
            s.server_close()

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.servers[0].server_address[1]

    @property
    def storage(self):
        return "http://127.0.0.2:%d" % self.servers[1].server_address[1]

    # ---- the wire: lower-case header names, chunked bodies when asked ----
    def _answer(self, h, status, body=b"", headers=(), head=False, chunked=None):
        chunked = self.opts["chunked"] if chunked is None else chunked
        reason = {200: "OK", 206: "Partial Content", 302: "Found", 307: "Temporary Redirect", 401: "Unauthorized",
                  404: "Not Found", 416: "Range Not Satisfiable"}.get(status, "Status")
        out = ["HTTP/1.1 %d %s" % (status, reason)]
        out += ["%s: %s" % (k.lower(), v) for k, v in headers]
        if chunked and status in (200, 206) and not head:
            out.append("transfer-encoding: chunked")
        else:
            out.append("content-length: %d" % len(body))
        h.wfile.write(("\r\n".join(out) + "\r\n\r\n").encode())
        if head:
            return
        rate, t0 = self.opts["rate"], time.monotonic()
        for i in range(0, len(body), 65536):
            part = body[i:i + 65536]
            h.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if chunked and status in (200, 206) else part)
            if rate and i / rate > time.monotonic() - t0:
                time.sleep(i / rate - (time.monotonic() - t0))
        if chunked and status in (200, 206):
            h.wfile.write(b"0\r\n\r\n")

    def _missing(self, h, head):  # a route this server does not have: no X-Error-Code
        self._answer(h, 404, b"Not Found", [("content-type", "text/plain")], head, chunked=False)

    def _bytes(self, h, data, head, headers):
        rng = h.headers.get("range")
        if rng and not self.opts["ignore_range"]:
            a, b = rng.split("=", 1)[1].split("-", 1)
            a = int(a)
            b = min(int(b), len(data) - 1) if b else len(data) - 1
            if a >= len(data):
                return self._answer(h, 416, b"", headers + [("content-range", "bytes */%d" % len(data))], head, chunked=False)
            return self._answer(h, 206, data[a:b + 1], headers + [("content-range", "bytes %d-%d/%d" % (a, b, len(data)))], head)
        return self._answer(h, 200, data, headers, head)

    def _dispatch(self, h, host, head):
        u = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(u.path)
        q = urllib.parse.parse_qs(u.query)
        if host == "127.0.0.2" or path.startswith("/storage/"):
            d = path.rsplit("/", 1)[-1]
            if d not in self.store:
                return self._missing(h, head)
            data = self.store[d][:len(self.store[d]) - self.opts["short"]]
            return self._bytes(h, data, head, [("etag", '"s3-%s"' % d[:32]), ("accept-ranges", "bytes")])
        if path == "/token":
            ok = q.get("service") == ["alt-registry"] and q.get("scope", [""])[0].startswith("repository:")
            return self._answer(h, 200 if ok else 404, json.dumps({"token": REGISTRY_TOKEN} if ok else {}).encode(),
                                [("content-type", "application/json")], head)
        if path.startswith("/v2/"):
            return self._registry(h, path, head)
        for old, new in self.opts["renamed"].items():
            for pre in ("/api/models/", "/"):
                if path.startswith(pre + old + "/"):
                    loc = pre + new + "/" + h.path[len(pre + old + "/"):]
                    return self._answer(h, 307, b"", [("location", loc)], head, chunked=False)
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            return self._api(h, "/".join(parts[2:4]), parts[4:], q, head)
        if len(parts) >= 5 and parts[2] == "resolve":
            return self._resolve(h, "/".join(parts[:2]), parts[3], "/".join(parts[4:]), head)
        return self._missing(h, head)

    def _repo(self, h, name, head):
        r = self.repos.get(name)
        if r is None:
            self._answer(h, 404, b'{"error":"Repository not found"}', [("x-error-code", "RepoNotFound")], head, chunked=False)
            return None
        if r["private"] and h.headers.get("authorization") != "Bearer " + TOKEN:
            self._answer(h, 401, b'{"error":"Invalid credentials"}', [("x-error-code", "RepoNotFound")], head, chunked=False)
            return None
        return r

    def _commit(self, r, rev):
        if rev in r["trees"]:
            return rev
        return r["revs"].get(rev)

    def _api(self, h, name, rest, q, head):
        kind = rest[0] if rest else "model"
        if kind not in self.opts["routes"]:
            return self._missing(h, head)
        r = self._repo(h, name, head)
        if r is None:
            return
        js = lambda obj: self._answer(h, 200, json.dumps(obj).encode(), [("content-type", "application/json")], head)
        if kind in ("model", "revision"):
            commit = self._commit(r, rest[1] if kind == "revision" and len(rest) > 1 else "main")
            if commit is None:
                return self._answer(h, 404, b"{}", [("x-error-code", "RevisionNotFound")], head, chunked=False)
            sib = []
            for p, (data, lfs) in sorted(r["trees"][commit].items()):
                e = {"rfilename": p}
                if q.get("blobs") == ["true"] and self.opts["sibling_blobs"]:
                    e.update(size=len(data), blobId=_git_sha1(data))
                    if lfs:
                        e["lfs"] = {"sha256": _sha256(data), "size": len(data), "pointerSize": 132}
                sib.append(e)
            return js({"_id": "x", "id": name, "sha": commit, "private": r["private"], "siblings": sib})
        if kind == "refs":
            return js({"branches": [{"name": b, "ref": "refs/heads/" + b, "targetCommit": c} for b, c in r["revs"].items()],
                       "tags": [], "converts": []})
        if kind == "tree" and len(rest) >= 2:
            commit = self._commit(r, rest[1])
            if commit is None:
                return self._answer(h, 404, b"{}", [("x-error-code", "RevisionNotFound")], head, chunked=False)
            under = "/".join(rest[2:])
            rec = self.opts["tree_recursive"] and q.get("recursive", [""])[0].lower() == "true"
            entries, dirs = [], set()
            for p, (data, lfs) in sorted(r["trees"][commit].items()):
                if under and not p.startswith(under + "/"):
                    continue
                tail = p[len(under) + 1:] if under else p
                if "/" in tail and not rec:
                    d = (under + "/" if under else "") + tail.split("/", 1)[0]
                    if d not in dirs:
                        dirs.add(d)
                        entries.append({"type": "directory", "oid": "d" * 40, "size": 0, "path": d})
                    continue
                e = {"type": "file", "path": p}
                if self.opts["tree_oids"]:
                    e.update(oid=_git_sha1(data), size=len(data))
                    if lfs:
                        e["lfs"] = {"oid": _sha256(data), "size": len(data), "pointerSize": 132}
                entries.append(e)
            start = int(q.get("cursor", ["0"])[0])
            n = self.opts["page_size"]
            hd = [("content-type", "application/json")]
            if start + n < len(entries):
                hd.append(("link", "<%s?recursive=true&cursor=%d>; rel=next" % (urllib.parse.urlsplit(h.path).path, start + n)))
            return self._answer(h, 200, json.dumps(entries[start:start + n]).encode(), hd, head)
        return self._missing(h, head)

    def _resolve(self, h, name, rev, fp, head):
        r = self._repo(h, name, head)
        if r is None:
            return
        commit = self._commit(r, rev)
        if commit is None:
            return self._answer(h, 404, b"", [("x-error-code", "RevisionNotFound")], head, chunked=False)
        f = r["trees"][commit].get(fp)
        if f is None:
            return self._answer(h, 404, b"", [("x-error-code", "EntryNotFound")], head, chunked=False)
        data, lfs = f
        common = [("x-repo-commit", commit), ("accept-ranges", "bytes")]
        if not lfs:  # the hub serves it itself: ETag is the git blob SHA-1, no X-Linked-*
            return self._bytes(h, data, head, common + [("etag", 'W/"%s"' % _git_sha1(data))])
        d = _sha256(data)
        loc = ("/storage/" if self.opts["relative_storage"] else self.storage + "/xet-bridge/") + d
        return self._answer(h, self.opts["redirect"], b"", common + [
            ("x-linked-etag", '"%s"' % d), ("x-linked-size", str(len(data))), ("etag", 'W/"%s"' % d),
            ("x-xet-hash", "0" * 64), ("location", loc)], head, chunked=False)

    def _registry(self, h, path, head):
        p = path.strip("/").split("/")
        if len(p) < 5:
            return self._missing(h, head)
        name, what, ref = "/".join(p[1:-2]), p[-2], p[-1]
        if self.opts["ollama_auth"] and h.headers.get("authorization") != "Bearer " + REGISTRY_TOKEN:
            chal = 'Bearer realm="%s/token",service="alt-registry",scope="repository:%s:pull"' % (self.url, name)
            return self._answer(h, 401, b'{"errors":[{"code":"UNAUTHORIZED"}]}', [("www-authenticate", chal)], head,
                                chunked=False)
        if what == "manifests":
            m = self.registry.get(name + ":" + ref)
            if m is None:
                return self._answer(h, 404, b'{"errors":[{"code":"MANIFEST_UNKNOWN"}]}', [], head, chunked=False)
            body, mt = m
            accept = h.headers.get("accept", "")
            if mt == OCI and OCI not in accept and "*/*" not in accept:
                return self._answer(h, 404, b'{"errors":[{"code":"MANIFEST_UNKNOWN","message":"OCI index only"}]}', [],
                                    head, chunked=False)
            return self._answer(h, 200, body, [("content-type", mt), ("docker-content-digest", "sha256:" + _sha256(body))],
                                head)
        if what == "blobs" and ref.startswith("sha256:") and ref[7:] in self.store:
            return self._answer(h, self.opts["ollama_redirect"], b"", [("location", self.storage + "/blobs/" + ref[7:])], head,
                                chunked=False)
        return self._answer(h, 404, b'{"errors":[{"code":"BLOB_UNKNOWN"}]}', [], head, chunked=False)
