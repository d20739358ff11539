#!/usr/bin/env python3
"""Recovery by mail, timed from outside (issue 43): a release `passkeyd serve` on SQLite with mail
sent to a local SMTP server (scripts/smtp_server.py, plain SMTP on loopback), 1,000 accounts of
which 500 have a verified address. "Lost your passkey?" requests (POST /api/auth/recovery/email)
for known addresses, unknown addresses and usernames are sent interleaved, one at a time, and
their answer times compared: the answer must not tell whether an account exists, by its bytes
(checked) or by its time (the medians and the 90th percentiles are printed with their difference
and a bootstrap 95% interval of the difference of medians: an interval that holds 0 is "the same
time within noise"). Then how long the outbox takes to hand the queued mails to the SMTP server.

Usage: scripts/bench_email.py [--requests N] [--binary DIR]   (N per kind, default 1500)
"""
import argparse, json, os, random, sqlite3, statistics, subprocess, sys, tempfile, time, urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http as b  # noqa: E402

ROOT = b.ROOT


def python():
    venv = os.path.join(ROOT, ".venv", "bin", "python")
    return os.environ.get("PASSKEYD_PYTHON") or (venv if os.path.exists(venv) else sys.executable)


def start_smtp(workdir):
    output = os.path.join(workdir, "mail.jsonl")
    process = subprocess.Popen([python(), os.path.join(ROOT, "scripts", "smtp_server.py"), output, "--no-starttls"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        if os.path.exists(output + ".port"):
            return process, output, json.load(open(output + ".port"))["smtp"]
        time.sleep(0.1)
    process.kill()
    raise SystemExit("the SMTP server did not start")


def post(port, identifier):
    body = json.dumps({"identifier": identifier}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/auth/recovery/email", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=10) as response:
        answer = response.read()
        status = response.status
    return (time.perf_counter() - started) * 1000, status, answer


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=1500)
    parser.add_argument("--binary", default=b.RELEASE)
    parser.add_argument("--seed", type=int, default=int(os.environ.get("PASSKEYD_BENCH_SEED", "43")))
    args = parser.parse_args()
    b.RELEASE = args.binary
    rng = random.Random(args.seed)
    print(f"seed {args.seed}")
    workdir = tempfile.mkdtemp(prefix="bench-email-")
    smtp, mail_log, smtp_port = start_smtp(workdir)
    path = os.path.join(workdir, "bench.sqlite")
    database = f"sqlite://{path}"
    os.environ.update(PASSKEYD_SMTP_URL=f"smtp://127.0.0.1:{smtp_port}", PASSKEYD_EMAIL_FROM="Bench <no-reply@example.com>")
    try:
        # The schema, then 1,000 accounts; 500 of them with a verified address.
        subprocess.run([os.path.join(b.RELEASE, "passkeyd"), "migrate", "--database", database], check=True, capture_output=True)
        b.seed_sqlite(path, 0, 1000)
        db = sqlite3.connect(path)
        with db:
            db.execute("""UPDATE accounts SET email = username || '@example.com', email_key = username || '@example.com',
                          email_verified_at = 1 WHERE CAST(substr(username, 5) AS INTEGER) < 500""")
        db.close()
        server = b.Server(database, workdir)
        kinds = {
            "known address": [f"seed{n}@example.com" for n in range(500)],
            "unknown address": [f"nobody{n}@example.com" for n in range(500)],
            "known username without address": [f"seed{n}" for n in range(500, 1000)],
            "unknown username": [f"nobody{n}" for n in range(500)],
        }
        times = {kind: [] for kind in kinds}
        answers = set()
        # Warm up, then interleave the kinds in a seeded random order.
        for n in range(200):
            post(server.port, f"warm{n}@example.com")
        order = [kind for kind in kinds for _ in range(args.requests)]
        rng.shuffle(order)
        for index, kind in enumerate(order):
            elapsed, status, answer = post(server.port, kinds[kind][index % len(kinds[kind])])
            assert status == 202, status
            answers.add(answer)
            times[kind].append(elapsed)
        print(f"answers: {len(answers)} distinct body ({answers.pop().decode()!r}) for {len(order)} requests")
        base = times["known address"]
        for kind, values in times.items():
            line = f"{kind:32s} n={len(values)} p50 {statistics.median(values):.3f} ms  p90 {percentile(values, 90):.3f} ms"
            if kind != "known address":
                diffs = []
                for _ in range(1000):
                    a = [rng.choice(base) for _ in base]
                    c = [rng.choice(values) for _ in values]
                    diffs.append(statistics.median(c) - statistics.median(a))
                low, high = percentile(diffs, 2.5), percentile(diffs, 97.5)
                line += f"  median - known: {statistics.median(values) - statistics.median(base):+.3f} ms (95% {low:+.3f} .. {high:+.3f})"
            print(line)
        # The outbox: every recovery mail handed over.
        started = time.monotonic()
        expected = args.requests  # rate limits are off in the bench (bench_http.Server)
        sent = 0
        while time.monotonic() - started < 120:
            sent = sum(1 for _ in open(mail_log))
            if sent >= expected:
                break
            time.sleep(0.2)
        print(f"outbox: {sent} mails at the SMTP server {time.monotonic() - started:.1f} s after the last request (expected {expected})")
        server.stop()
    finally:
        smtp.kill()


if __name__ == "__main__":
    main()
