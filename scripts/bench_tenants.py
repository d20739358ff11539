"""Tenants (issue 44), measured with the release build and `passkey load` on this machine:

1. sign-in with 1 tenant (the server's own, nothing added) and with 1,000 tenants added (each
   with its host and settings; load on one of them, `t0042.localhost`, and on the default
   tenant): server CPU per sign-in and throughput, which must stay within 5%;
2. the noisy neighbour: tenant A's sign-ins while another tenant, B, is flooded past its per-
   address rate limit (1,000 requests a second from one address on up to 64 kept-alive
   connections, answered 429 past its 50), against A's sign-ins alone; once with the server's
   default refusal hold and once with refusals sent at once.

The server runs on core 0 and the generators (`passkey load`, the flood) on core 1 (taskset), so a
generator's own CPU never takes the server's: what A feels is the server's work for B. PostgreSQL
runs on core 0 beside the server (the service's side of the machine): unpinned, it shared core 1
with the flood's own CPU, and A then felt the flood generator slowing A's database, not the
server's work for B.

SQLite by default; `--postgres` adds the same on a throwaway PostgreSQL. Figures go to
docs/PERFORMANCE.md. Usage: python3 scripts/bench_tenants.py [--seconds S] [--postgres]
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_http as b  # noqa: E402

TENANTS = 1_000


def passkeyd(*args, database):
    env = dict(os.environ, PASSKEYD_CONFIG="", PASSKEYD_ORIGINS="http://localhost:8080")
    return subprocess.run([os.path.join(b.RELEASE, "passkeyd"), *args, "--database", database], env=env, check=True,
                          capture_output=True, text=True)


def add_tenants(database, count, port, limited=None):
    """`count` tenants t0000…, each on tNNNN.localhost with its RP ID and origin, written the way
    `passkeyd tenant add` writes them (one transaction here: 1,000 CLI runs would take minutes).
    `limited`: tenant → its per-address limit (the others inherit the server's: off)."""
    limited = limited or {}
    settings = lambda name: {"rpID": f"{name}.localhost", "origins": [f"http://{name}.localhost:{port}"], "rpName": name,
                             **({"rateLimits": {"enabled": True, "perIP": limited[name]}} if name in limited else {})}
    now = int(time.time() * 1000)
    rows = [(f"t{i:04d}", json.dumps(settings(f"t{i:04d}"), sort_keys=True)) for i in range(count)]
    if database.startswith("sqlite://"):
        db = sqlite3.connect(database[len("sqlite://"):])
        with db:
            db.executemany("INSERT INTO tenants (id, settings, created_at, updated_at, version) VALUES (?, ?, ?, ?, 1)",
                           [(name, text, now, now) for name, text in rows])
            db.executemany("INSERT INTO tenant_hosts (host, tenant_id) VALUES (?, ?)", [(f"{name}.localhost", name) for name, _ in rows])
            db.execute("INSERT INTO settings (name, value) VALUES ('tenants', CAST('1' AS BLOB)) "
                       "ON CONFLICT (name) DO UPDATE SET value = excluded.value")
        db.close()
    else:
        values = ",".join(f"('{name}', $j${text}$j$, {now}, {now}, 1)" for name, text in rows)
        hosts = ",".join(f"('{name}.localhost', '{name}')" for name, _ in rows)
        sql = (f"INSERT INTO tenants (id, settings, created_at, updated_at, version) VALUES {values}; "
               f"INSERT INTO tenant_hosts (host, tenant_id) VALUES {hosts}; "
               "INSERT INTO settings (name, value) VALUES ('tenants', convert_to('1', 'UTF8')) "
               "ON CONFLICT (name) DO UPDATE SET value = excluded.value;")
        subprocess.run(["psql", database, "-q", "-v", "ON_ERROR_STOP=1"], input=sql, text=True, check=True, capture_output=True)


def load(server, host, mode, users, seconds, store):
    """`passkey load` against `host` on the server's port (localhost names reach 127.0.0.1)."""
    out = subprocess.run(["taskset", "-c", "1", os.path.join(b.RELEASE, "passkey"), "load", "--server", f"http://{host}:{server.port}", "--users", str(users),
                          "--duration", str(seconds), "--mode", mode, "--store", store, "--json"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def measured(server, host, users, seconds, vault, runs=3):
    """The median of `runs` sign-in loads on `host`: per second, server CPU ms per sign-in, p99."""
    results = []
    for run in range(runs):
        before = b.cpu_seconds(server.process.pid)
        report = load(server, host, "sign-in", users, seconds, f"{vault}-{run}.json")
        total = max(1, report["ceremonies"] + users)
        report["serverCPUms"] = (b.cpu_seconds(server.process.pid) - before) * 1000 / total
        results.append(report)
    results.sort(key=lambda r: r["serverCPUms"])
    return results[len(results) // 2]


def flood(port, host, stop, rate=1_000, connections=64):
    """Sign-in option requests on `host` from one address (127.0.0.2), `rate` a second spread over up to
    `connections` kept-alive connections (the server's default per-address cap), until `stop`:
    past the tenant's per-address limit they are answered 429. Each connection sends its next
    request once its last is answered; the schedule is shared, so when answers come quickly the
    flood is `rate`, and when they are held it is what the held answers let through. Returns
    [answered, limited] and the threads."""
    import http.client
    counts = [0, 0]
    lock = threading.Lock()
    started = time.monotonic()
    sent = [0]

    def run():
        # From 127.0.0.2: another address than the load generator's (127.0.0.1), whose own
        # connections the flood's 64 would otherwise use up (the cap is per address).
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10, source_address=("127.0.0.2", 0))
        while not stop.is_set():
            with lock:
                slot = sent[0]
                sent[0] += 1
            ahead = started + slot / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
            if stop.is_set():
                break
            try:
                connection.request("POST", "/api/auth/authenticate/options", body="{}",
                                   headers={"Host": f"{host}:{port}", "Origin": f"http://{host}:{port}", "Content-Type": "application/json"})
                response = connection.getresponse()
                response.read()
            except OSError as error:
                print(f"flood connection: {error!r}; reconnecting", file=sys.stderr)
                connection.close()
                continue
            with lock:
                counts[0] += 1
                counts[1] += response.status == 429
    threads = [threading.Thread(target=run) for _ in range(connections)]
    for thread in threads:
        thread.start()
    return counts, threads


def noisy_run(server, users, seconds, vault):
    """t0042's sign-ins while t0007 is flooded; returns (report, [answered, limited], seconds)."""
    stop = threading.Event()
    started = time.monotonic()
    counts, threads = flood(server.port, "t0007.localhost", stop)
    try:
        report = measured(server, "t0042.localhost", users, seconds, vault)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    return report, counts, time.monotonic() - started


def run(label, make_database, workdir, seconds, users, lines):
    database = make_database("plain")
    server = b.Server(database, workdir, pin="0")
    try:
        one = measured(server, "localhost", users, seconds, os.path.join(workdir, f"vault-{label}-one"))
    finally:
        server.stop()
    database = make_database("many")
    server = b.Server(database, workdir, pin="0")
    # Written while the server runs (the origins name its port): served after its next poll.
    add_tenants(database, TENANTS, server.port, limited={"t0007": 50})
    time.sleep(3)
    try:
        default = measured(server, "localhost", users, seconds, os.path.join(workdir, f"vault-{label}-many-default"))
        tenant = measured(server, "t0042.localhost", users, seconds, os.path.join(workdir, f"vault-{label}-many-t0042"))
        # The noisy neighbour: t0007 flooded past its limit while t0042 signs in.
        noisy, counts, flooded = noisy_run(server, users, seconds, os.path.join(workdir, f"vault-{label}-noisy"))
    finally:
        server.stop()
    # The same with refusals sent at once (`rateLimits.refusalHoldMilliseconds` 0), on the same
    # database and port (the tenants' origins name it).
    server = b.Server(database, workdir, pin="0", port=server.port, env_more={"PASSKEYD_RATE_LIMIT_REFUSAL_HOLD_MS": "0"})
    try:
        unheld, unheld_counts, unheld_flooded = noisy_run(server, users, seconds, os.path.join(workdir, f"vault-{label}-unheld"))
    finally:
        server.stop()
    for name, report in [("1 tenant, default", one), (f"{TENANTS:,} tenants, default", default),
                         (f"{TENANTS:,} tenants, t0042", tenant),
                         (f"{TENANTS:,} tenants, t0042 beside a flooded t0007 (refusals held)", noisy),
                         (f"{TENANTS:,} tenants, t0042 beside a flooded t0007 (refusals sent at once)", unheld)]:
        lines.append(f"| {label} | {name} | {report['perSecond']:,.0f}/s | {report['serverCPUms']:.3f} ms | "
                     f"{report['p99Milliseconds']:.1f} ms |")
    for name, (answered, limited), elapsed in [("held", counts, flooded), ("sent at once", unheld_counts, unheld_flooded)]:
        lines.append(f"| {label} | flood of t0007, refusals {name} | {answered:,} requests ({answered / elapsed:,.0f}/s), "
                     f"{limited:,} answered 429 | | |")
    lines.append(f"| {label} | noisy neighbour: t0042 against t0042 alone | held {noisy['perSecond'] / tenant['perSecond'] - 1:+.1%}, "
                 f"sent at once {unheld['perSecond'] / tenant['perSecond'] - 1:+.1%} | | |")
    print("\n".join(lines[-9:]), file=sys.stderr, flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    os.sched_setaffinity(0, {1})  # this script's flood beside the load generator, off the server's core
    lines = ["| store | case | sign-ins | server CPU per sign-in | p99 |", "|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory(prefix="bench-tenants-") as workdir:
        def sqlite_database(name):
            path = os.path.join(workdir, f"{name}.sqlite")
            for suffix in ("", "-wal", "-shm"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            passkeyd("migrate", database=f"sqlite://{path}")
            return f"sqlite://{path}"
        run("SQLite", sqlite_database, workdir, args.seconds, args.users, lines)
        if args.postgres:
            pgdir = tempfile.mkdtemp(prefix="bench-tenants-pg-")
            url = subprocess.run([os.path.join(b.ROOT, "scripts", "postgres"), "start", pgdir, str(b.free_port())], check=True,
                                 capture_output=True, text=True).stdout.strip()
            # Every process of the throwaway server (backends forked later inherit it).
            for pid in subprocess.run(["pgrep", "-u", "postgres"], capture_output=True, text=True).stdout.split():
                subprocess.run(["taskset", "-a", "-p", "-c", "0", pid], capture_output=True)
            try:
                def postgres_database(name):
                    subprocess.run(["psql", url, "-q", "-c", "DROP SCHEMA public CASCADE; CREATE SCHEMA public;"], check=True,
                                   capture_output=True)
                    passkeyd("migrate", database=url)
                    return url
                run("PostgreSQL", postgres_database, workdir, args.seconds, args.users, lines)
            finally:
                subprocess.run([os.path.join(b.ROOT, "scripts", "postgres"), "stop", pgdir], capture_output=True)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
