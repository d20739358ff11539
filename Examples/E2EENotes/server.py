#!/usr/bin/env python3
"""End-to-end-encrypted notes: the example app's server (Python standard library only).

It serves the page (index.html, notes.js), passes passkeyd's browser API through to a passkeyd
it is given the address of (/api/auth/*, /passkeyd.js, /i18n/*.json), so the page talks to one
origin, and keeps the notes API:

  GET /notes                  -> {"userId", "note": b64url|null, "keys": {passkeyId: b64url}}
  PUT /notes      {"note"}    -> 204   the note, encrypted in the browser with the data key
  PUT /keys/<id>  {"wrapped"} -> 204   the data key wrapped with passkey <id>'s PRF key
  DELETE /keys/<id>           -> 204   that wrapped key forgotten (the passkey no longer opens the notes)

A passkey's wrapped key goes with the passkey: removed through this server (DELETE
/api/auth/passkeys/<id>), or noticed gone at the next GET /notes (removed on passkeyd's own
pages, the operator's console or the CLI). Removing the only passkey that opens the notes, or its
wrapped key, is refused (409 last_key): with no recovery key (README.md), that would lose them.

Each call's session is checked with passkeyd (GET /api/auth/session with the caller's cookie or
bearer token). The server stores only what the browser sends: ciphertext and wrapped keys. It
holds no key and cannot read a note. Usage and the settings passkeyd needs: README.md.
"""
import argparse
import base64
import http.server
import json
import pathlib
import re
import sqlite3
import threading
import urllib.error
import urllib.request
from datetime import datetime, timezone

HERE = pathlib.Path(__file__).resolve().parent
PAGES = {"/": ("index.html", "text/html; charset=utf-8"), "/notes.js": ("notes.js", "text/javascript; charset=utf-8")}
PROXIED = re.compile(r"^/(api/auth/[A-Za-z0-9/_.-]*|passkeyd\.js|i18n/[a-z]{2}\.json)$")
# What goes to passkeyd and what comes back: enough for its origin checks, sessions and errors.
REQUEST_HEADERS = ("Content-Type", "Cookie", "Authorization", "Origin", "Sec-Fetch-Site", "Accept", "Accept-Language", "User-Agent")
RESPONSE_HEADERS = ("Content-Type", "Set-Cookie", "Retry-After", "Cache-Control", "WWW-Authenticate")
MAX_BODY = 256 * 1024
MAX_CIPHERTEXT = 64 * 1024  # bytes of one note, encrypted
B64URL = re.compile(r"^[A-Za-z0-9_-]*$")
PASSKEY_ID = re.compile(r"^[A-Za-z0-9_-]{16,1400}$")
REMOVE_PASSKEY = re.compile(r"^/api/auth/passkeys/([A-Za-z0-9_-]+)$")

SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (user_id TEXT PRIMARY KEY, ciphertext BLOB NOT NULL, updated_at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS wrapped_keys (user_id TEXT NOT NULL, passkey_id TEXT NOT NULL, wrapped BLOB NOT NULL,
                                         PRIMARY KEY (user_id, passkey_id));
"""


def b64url_decode(text):
    if not isinstance(text, str) or not B64URL.match(text):
        raise ValueError("not base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Refused(Exception):
    def __init__(self, status, code, message):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class Notes:
    """The example's database: ciphertext and wrapped keys per passkeyd account."""

    def __init__(self, path):
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.executescript(SCHEMA)
        self.lock = threading.Lock()

    def read(self, user_id):
        with self.lock:
            note = self.db.execute("SELECT ciphertext FROM notes WHERE user_id = ?", (user_id,)).fetchone()
            keys = self.db.execute("SELECT passkey_id, wrapped FROM wrapped_keys WHERE user_id = ?", (user_id,)).fetchall()
        return {"userId": user_id, "note": b64url(note[0]) if note else None, "keys": {pid: b64url(w) for pid, w in keys}}

    def write_note(self, user_id, ciphertext):
        now = datetime.now(timezone.utc).isoformat()
        with self.lock, self.db:
            self.db.execute("INSERT INTO notes VALUES (?, ?, ?) ON CONFLICT (user_id) DO UPDATE SET ciphertext = excluded.ciphertext, "
                            "updated_at = excluded.updated_at", (user_id, ciphertext, now))

    def write_key(self, user_id, passkey_id, wrapped):
        with self.lock, self.db:
            self.db.execute("INSERT INTO wrapped_keys VALUES (?, ?, ?) ON CONFLICT (user_id, passkey_id) DO UPDATE SET wrapped = excluded.wrapped",
                            (user_id, passkey_id, wrapped))

    def key_ids(self, user_id):
        """The passkey ids the account's data key is wrapped for."""
        with self.lock:
            return {row[0] for row in self.db.execute("SELECT passkey_id FROM wrapped_keys WHERE user_id = ?", (user_id,))}

    def delete_keys(self, user_id, passkey_ids):
        """Forgets these passkeys' wrapped keys; the number forgotten."""
        with self.lock, self.db:
            return sum(self.db.execute("DELETE FROM wrapped_keys WHERE user_id = ? AND passkey_id = ?", (user_id, pid)).rowcount
                       for pid in passkey_ids)


def make_handler(passkeyd, origins, notes):
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        # MARK: routes

        def do_GET(self):
            self.route("GET")

        def do_POST(self):
            self.route("POST")

        def do_PUT(self):
            self.route("PUT")

        def do_PATCH(self):
            self.route("PATCH")

        def do_DELETE(self):
            self.route("DELETE")

        def route(self, method):
            path = self.path.split("?", 1)[0]
            try:
                body = self.body()
                removed = REMOVE_PASSKEY.match(path) if method == "DELETE" else None
                if removed:
                    return self.remove_passkey(removed.group(1), body)
                if PROXIED.match(path):
                    return self.proxy(method, body)
                if method == "GET" and path in PAGES:
                    name, kind = PAGES[path]
                    return self.send(200, (HERE / name).read_bytes(), kind)
                if path == "/notes" and method == "GET":
                    user_id = self.user_id()
                    # Wrapped keys of passkeys removed elsewhere go now. The ids are read before the
                    # list: a passkey added meanwhile (and its key) is never taken for a removed one.
                    wrapped_for = notes.key_ids(user_id)
                    if wrapped_for:
                        notes.delete_keys(user_id, wrapped_for - self.passkey_ids())
                    return self.send_json(200, notes.read(user_id))
                if path == "/notes" and method == "PUT":
                    user_id = self.user_id(changing=True)
                    notes.write_note(user_id, self.ciphertext(body, "note", MAX_CIPHERTEXT))
                    return self.send(204, b"", None)
                match = re.fullmatch(r"/keys/([^/]+)", path)
                if match and method == "PUT":
                    user_id = self.user_id(changing=True)
                    passkey_id = match.group(1)
                    if not PASSKEY_ID.match(passkey_id) or passkey_id not in self.passkey_ids():
                        raise Refused(404, "passkey_not_found", "That passkey is not on this account.")
                    # 12-byte nonce, the 32-byte key encrypted, 16-byte tag.
                    wrapped = self.ciphertext(body, "wrapped", 60)
                    if len(wrapped) != 60:
                        raise Refused(400, "invalid_value", "A wrapped data key is 60 bytes.")
                    notes.write_key(user_id, passkey_id, wrapped)
                    return self.send(204, b"", None)
                if match and method == "DELETE":
                    # Any of the account's wrapped keys, the passkey still there (it keeps signing
                    # in, no longer opens the notes) or not (a key left from before this route).
                    user_id = self.user_id(changing=True)
                    passkey_id = match.group(1)
                    if passkey_id not in notes.key_ids(user_id):
                        raise Refused(404, "key_not_found", "No key of these notes is wrapped for that passkey.")
                    self.refuse_last_key(user_id, passkey_id)
                    notes.delete_keys(user_id, [passkey_id])
                    return self.send(204, b"", None)
                raise Refused(404, "not_found", "Not found.")
            except Refused as refused:
                self.send_json(refused.status, {"error": {"code": refused.code, "message": refused.message}})

        # MARK: passkeyd

        def remove_passkey(self, passkey_id, body):
            """DELETE /api/auth/passkeys/<id>, passed to passkeyd with the passkey's wrapped key:
            refused first when it is the only passkey that opens the notes, forgotten once
            passkeyd has removed the passkey."""
            user_id = self.user_id()
            self.refuse_last_key(user_id, passkey_id)
            if 200 <= self.proxy("DELETE", body) < 300:
                notes.delete_keys(user_id, [passkey_id])

        def refuse_last_key(self, user_id, passkey_id):
            """409 last_key when `passkey_id` is an account passkey whose wrapped key is the only
            one of a passkey still on the account: without it nothing opens the notes."""
            wrapped_for = notes.key_ids(user_id)
            if passkey_id not in wrapped_for:
                return
            live = self.passkey_ids()
            if passkey_id in live and not (wrapped_for & live) - {passkey_id}:
                raise Refused(409, "last_key", "This is the only passkey that opens your notes: add another one that opens them first.")

        def proxy(self, method, body):
            """Passes the request to passkeyd and its answer back; returns the answer's status."""
            request = urllib.request.Request(passkeyd + self.path, data=body if method not in ("GET", "HEAD") else None, method=method)
            for name in REQUEST_HEADERS:
                if self.headers.get(name) is not None:
                    request.add_header(name, self.headers[name])
            try:
                response = urllib.request.urlopen(request, timeout=30)
            except urllib.error.HTTPError as error:
                response = error  # passkeyd's own 4xx/5xx answer, passed on as it is
            except OSError:
                raise Refused(502, "network", "passkeyd cannot be reached.")
            with response:
                payload = response.read()
                self.send_response(response.status)
                for name in RESPONSE_HEADERS:
                    for value in response.headers.get_all(name) or []:
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
                return response.status

        def passkeyd_json(self, path):
            """GET `path` on passkeyd as the caller (their cookie or bearer token)."""
            request = urllib.request.Request(passkeyd + path)
            for name in ("Cookie", "Authorization", "User-Agent"):
                if self.headers.get(name) is not None:
                    request.add_header(name, self.headers[name])
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as error:
                if error.code == 401:
                    raise Refused(401, "not_signed_in", "Sign in first.")
                raise Refused(502, "passkeyd_error", f"passkeyd answered {error.code}.")
            except OSError:
                raise Refused(502, "network", "passkeyd cannot be reached.")

        def user_id(self, changing=False):
            # A cookie rides along on a request from any page of the site (every port of
            # localhost): a change must come from this app's own pages, as JSON.
            if changing:
                if self.headers.get("Origin") not in origins:
                    raise Refused(403, "csrf_origin_mismatch", "This request did not come from the notes page.")
                # A DELETE has no body (and a cross-site one needs a preflight this server never answers).
                if self.command != "DELETE" and (self.headers.get("Content-Type") or "").split(";")[0].strip() != "application/json":
                    raise Refused(415, "unsupported_media_type", "Send JSON.")
            return self.passkeyd_json("/api/auth/session")["user"]["id"]

        def passkey_ids(self):
            return {passkey["id"] for passkey in self.passkeyd_json("/api/auth/passkeys")["passkeys"]}

        # MARK: bodies

        def body(self):
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY:
                raise Refused(413, "body_too_large", "The request is too large.")
            return self.rfile.read(length) if length else b""

        def ciphertext(self, body, member, limit):
            try:
                value = b64url_decode(json.loads(body)[member])
            except (ValueError, KeyError, TypeError):
                raise Refused(400, "invalid_value", f"'{member}' is base64url bytes.")
            if not 28 <= len(value) <= limit:  # at least a nonce and a tag
                raise Refused(400, "invalid_value", f"'{member}' has a wrong length.")
            return value

        def send_json(self, status, value):
            self.send(status, json.dumps(value).encode(), "application/json")

        def send(self, status, payload, kind):
            self.send_response(status)
            if kind:
                self.send_header("Content-Type", kind)
            self.send_header("Cache-Control", "no-store")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--passkeyd", default="http://127.0.0.1:8080", help="passkeyd's address (default %(default)s)")
    parser.add_argument("--listen", default="127.0.0.1:8090", help="host:port to listen on (default %(default)s)")
    parser.add_argument("--origin", help="this page's origin as the browser sees it (default http://localhost:PORT)")
    parser.add_argument("--database", default=str(HERE / "notes.sqlite"), help="SQLite file (default %(default)s)")
    arguments = parser.parse_args()
    host, port = arguments.listen.rsplit(":", 1)
    origin = arguments.origin or f"http://localhost:{port}"
    handler = make_handler(arguments.passkeyd.rstrip("/"), {origin}, Notes(arguments.database))
    server = http.server.ThreadingHTTPServer((host, int(port)), handler)
    print(f"E2EE notes on {origin} (passkeyd: {arguments.passkeyd}, database: {arguments.database})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
