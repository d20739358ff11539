#!/usr/bin/env python3
"""Figures for apps that trust passkeyd (scripts/bench runs this after bench_http.py):

1. Sign-in latency with no webhook endpoint, with one that answers at once, and with one that
   takes 2 s to answer every delivery: the slow one must cost sign-ins no more than the fast
   one (they only write the outbox row; delivery runs beside them).
2. OpenID Connect authorization-code exchanges per second: a first-party confidential client,
   N threads each doing authorize (with a session) → code → POST /oauth2/token, for a fixed time.

Uses the binaries in --bin (default .build/release); rate limits off (one client address).
"""
import argparse, base64, hashlib, http.server, json, os, secrets, socket, subprocess, tempfile, threading, time
import urllib.parse, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port


class SlowReceiver:
    def __init__(self, delay):
        self.port = free_port(); self.count = 0
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                time.sleep(delay); receiver.count += 1
                self.send_response(204); self.end_headers()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


class Server:
    def __init__(self, binaries, workdir):
        self.binaries = binaries; self.port = free_port(); self.origin = f"http://localhost:{self.port}"
        self.database = "sqlite://" + os.path.join(workdir, f"bench-{self.port}.sqlite")
        env = dict(os.environ, PASSKEYD_LISTEN=f"127.0.0.1:{self.port}", PASSKEYD_ORIGINS=self.origin, PASSKEYD_RATE_LIMITS="off",
                   PASSKEYD_LOG_FORMAT="json", LOG_LEVEL="warning", PASSKEYD_CONFIG="",
                   PASSKEYD_WEBHOOK_ALLOW_PRIVATE="1")
        self.log = open(os.path.join(workdir, f"server-{self.port}.log"), "w")
        self.process = subprocess.Popen([os.path.join(binaries, "passkeyd"), "serve", "--database", self.database],
                                        env=env, stdout=self.log, stderr=self.log, cwd=workdir)
        for _ in range(300):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1).read(); return
            except Exception:
                time.sleep(0.1)
        raise SystemExit("server did not start; see " + self.log.name)

    def admin(self, *args):
        env = dict(os.environ, PASSKEYD_CONFIG="", PASSKEYD_ORIGINS=self.origin, PASSKEYD_WEBHOOK_ALLOW_PRIVATE="1")
        return subprocess.run([os.path.join(self.binaries, "passkeyd"), "admin", *args, "--database", self.database],
                              check=True, capture_output=True, text=True, env=env).stdout

    def stop(self):
        self.process.terminate(); self.process.wait(timeout=30); self.log.close()


def load(server, workdir, users, seconds):
    out = subprocess.run([os.path.join(server.binaries, "passkey"), "load", "--server", server.origin, "--users", str(users),
                          "--duration", str(seconds), "--mode", "sign-in", "--store", os.path.join(workdir, f"vault-{server.port}.json"),
                          "--json"], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def exchanges(server, threads, seconds):
    """authorize → token, as fast as `threads` loops can, for `seconds`."""
    values = dict(line.split("=", 1) for line in server.admin(
        "clients", "add", "Bench", "--first-party", "--redirect-uri", "https://app.example.com/cb").split())
    # A session to authorize with: sign up through the CLI passkey provider.
    vault = os.path.join(os.path.dirname(server.log.name), f"oidc-vault-{server.port}.json")
    subprocess.run([os.path.join(server.binaries, "passkey"), "register", "--username", "bench-oidc", "--server", server.origin,
                    "--store", vault], check=True, capture_output=True)
    session = json.load(open(vault))["sessions"][server.origin]
    basic = base64.b64encode(f"{values['client_id']}:{values['client_secret']}".encode()).decode()
    count = [0]; errors = [0]; latencies = []; lock = threading.Lock(); deadline = time.time() + seconds

    def worker():
        while time.time() < deadline:
            verifier = secrets.token_urlsafe(48)
            challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
            query = urllib.parse.urlencode({"client_id": values["client_id"], "redirect_uri": "https://app.example.com/cb",
                                            "response_type": "code", "scope": "openid", "code_challenge": challenge,
                                            "code_challenge_method": "S256", "state": "s"})
            start = time.time()
            request = urllib.request.Request(f"{server.origin}/oauth2/authorize?{query}", headers={"Authorization": f"Bearer {session}"})
            opener = urllib.request.build_opener(NoRedirect)
            try:
                response = opener.open(request)
                location = response.headers["Location"]
            except urllib.error.HTTPError as error:
                location = error.headers.get("Location")
            code = urllib.parse.parse_qs(urllib.parse.urlparse(location or "").query).get("code", [None])[0]
            if not code:
                with lock: errors[0] += 1
                continue
            body = urllib.parse.urlencode({"grant_type": "authorization_code", "code": code, "redirect_uri": "https://app.example.com/cb",
                                           "code_verifier": verifier}).encode()
            token = urllib.request.Request(f"{server.origin}/oauth2/token", data=body, headers={
                "Content-Type": "application/x-www-form-urlencoded", "Authorization": f"Basic {basic}"})
            try:
                json.load(urllib.request.urlopen(token))["id_token"]
                with lock: count[0] += 1; latencies.append(time.time() - start)
            except Exception:
                with lock: errors[0] += 1

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool: t.start()
    for t in pool: t.join()
    latencies.sort()
    return {"exchanges": count[0], "per_second": round(count[0] / seconds, 1), "errors": errors[0],
            "p50_ms": round(latencies[len(latencies) // 2] * 1000, 1) if latencies else None,
            "p99_ms": round(latencies[int(len(latencies) * 0.99)] * 1000, 1) if latencies else None}


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", default=os.path.join(ROOT, ".build", "release"))
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="passkeyd-bench-int-")
    results = {}
    for label, delay in [("no webhook endpoint", None), ("an endpoint answering at once", 0.0), ("an endpoint answering in 2 s", 2.0)]:
        server = Server(args.bin, workdir)
        try:
            if delay is not None:
                receiver = SlowReceiver(delay)
                server.admin("webhooks", "add", f"http://127.0.0.1:{receiver.port}/hook")
            report = load(server, workdir, args.users, args.seconds)
            results[label] = report
            if delay is not None:
                report["webhook_deliveries_received"] = receiver.count
        finally:
            server.stop()
    server = Server(args.bin, workdir)
    try:
        results["oidc"] = exchanges(server, args.threads, args.seconds)
    finally:
        server.stop()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
