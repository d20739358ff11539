#!/usr/bin/env python3
"""HTTP figures for scripts/bench: a release `passkeyd serve` on loopback (SQLite, then
PostgreSQL), the `passkey load` generator on the same machine, and the server's resident memory.

For each store: seed the database with background accounts (1k, then 100k, then 1M), run
sign-ins with N concurrent users for a bounded time, then sign-ups (each load three times: the
row gives each figure's median, its note every run's); sample the server's RSS at rest and
during load, and the server's and the generator's CPU time (/proc/PID/stat,
getrusage) per ceremony. Then: the SQLite server pinned to CPU 0 with the generator on CPU 1
(`taskset`, three runs too), migrations 10 and 11 timed on the 1M-account SQLite database laid out as version 9 left it
(with a session and an audit line per account), and two instances sharing the PostgreSQL database. Prints one table and the facts
(the machine's speed as the library's raw P-256 verification before and after, database bytes
per account, seeding and start-up times); writes them as JSON with --json FILE.

The background accounts are written with SQL (random user handles, credential IDs and keys): they
size the tables and indexes exactly as real ones would; the load users register real passkeys.
"""
import argparse, json, os, resource, shutil, socket, sqlite3, subprocess, sys, tempfile, threading, time, urllib.request, uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, ".build", "release")


def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port


def cpu_seconds(pid):
    """User + system CPU time the process has used so far (/proc/PID/stat, fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu():
    """CPU seconds per PostgreSQL process (user postgres: the throwaway server of scripts/postgres)."""
    out = subprocess.run(["pgrep", "-u", "postgres"], capture_output=True, text=True).stdout.split()
    seen = {}
    for pid in out:
        try:
            seen[pid] = cpu_seconds(int(pid))
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass
    return seen


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Server:
    def __init__(self, database, workdir, pin=None, port=None, env_more=None):
        self.port = port or free_port()
        started = time.monotonic()
        env = dict(os.environ, PASSKEYD_LISTEN=f"127.0.0.1:{self.port}", PASSKEYD_ORIGINS=f"http://localhost:{self.port}",
                   PASSKEYD_RATE_LIMITS="off", PASSKEYD_LOG_FORMAT="json", LOG_LEVEL="warning", PASSKEYD_CONFIG="")
        env.update(env_more or {})
        self.log = open(os.path.join(workdir, f"server-{self.port}.log"), "w")
        self.process = subprocess.Popen((["taskset", "-c", pin] if pin else []) + [os.path.join(RELEASE, "passkeyd"), "serve", "--database", database],
                                        env=env, stdout=self.log, stderr=self.log, cwd=workdir)
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1).read()
                self.startup = time.monotonic() - started
                return
            except Exception:
                time.sleep(0.1)
        raise SystemExit(f"server on {database} did not start; see {self.log.name}")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            # Kept for a look (gdb -p, the log) rather than lost with the work folder.
            kept = f"/tmp/passkeyd-not-stopped-{self.process.pid}.log"
            shutil.copy(self.log.name, kept)
            raise SystemExit(f"passkeyd (pid {self.process.pid}) did not stop within 30 s of SIGTERM; its log: {kept}")
        self.log.close()


def load(server, mode, users, seconds, store, pin=None, database_cpu=False):
    """Runs `passkey load` while sampling the server's RSS; returns (report, peak RSS KiB). The
    report gains the server's and the generator's CPU milliseconds per ceremony. `pin`: a CPU
    list for `taskset` (the generator then runs there; the caller pins the server)."""
    peak = [0]; done = threading.Event()
    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(server.process.pid)); time.sleep(0.2)
    sampler = threading.Thread(target=sample); sampler.start()
    server_before, generator_before = cpu_seconds(server.process.pid), children_cpu_seconds()
    db_before = postgres_cpu() if database_cpu else {}
    try:
        out = subprocess.run((["taskset", "-c", pin] if pin else []) + [os.path.join(RELEASE, "passkey"), "load", "--server", f"http://localhost:{server.port}", "--users", str(users),
                              "--duration", str(seconds), "--mode", mode, "--store", store, "--json"],
                             check=True, capture_output=True, text=True).stdout
    finally:
        done.set(); sampler.join()
    report = json.loads(out)
    # Registering the users before the timed run is included: 16 sign-ups beside thousands of sign-ins.
    total = max(1, report["ceremonies"] + (users if mode == "sign-in" else 0))
    report["serverCPUms"] = (cpu_seconds(server.process.pid) - server_before) * 1000 / total
    report["generatorCPUms"] = (children_cpu_seconds() - generator_before) * 1000 / total
    if database_cpu:
        after = postgres_cpu()
        report["databaseCPUms"] = sum(cpu - db_before.get(pid, 0) for pid, cpu in after.items()) * 1000 / total
    return report, peak[0]


# Migration 16 (issue 44, tenants) gave every table a tenant owns a `tenant_id` with no default,
# first in its keys; the server's own rows are in the tenant `default`. The seeds name it where a
# table has it and write what they always wrote where it has not (the previous release's schema:
# A/B runs seed both with these functions). Asked on every seed, not remembered: an A/B run
# recreates the schema at the same URL with the other binary.
TENANT = "default"


def tenant_sql(has_tenant):
    """What an INSERT puts first: (its column, its value), or ("", "") on a schema without tenants."""
    return ("tenant_id, ", f"'{TENANT}', ") if has_tenant else ("", "")


def sqlite_tenant(db, table="accounts"):
    """tenant_sql for a table of an open SQLite database."""
    return tenant_sql(db.execute("SELECT 1 FROM pragma_table_info(?) WHERE name = 'tenant_id'", (table,)).fetchone() is not None)


def postgres_tenant(url, table="accounts"):
    """tenant_sql for a table of a PostgreSQL database (its current schema)."""
    out = subprocess.run(["psql", "-qtA", "-v", "ON_ERROR_STOP=1", url.split("?")[0], "-c",
                          "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
                          f"AND table_name = '{table}' AND column_name = 'tenant_id'"], check=True, capture_output=True, text=True).stdout
    return tenant_sql(out.strip() == "1")


def seed_sqlite(path, start, count):
    db = sqlite3.connect(path, timeout=30)
    tenant, in_tenant = sqlite_tenant(db)
    now = int(time.time() * 1000)
    for first in range(start, start + count, 100_000):
        rows, keys = [], []
        for n in range(first, min(first + 100_000, start + count)):
            account = str(uuid.uuid4()).upper()
            rows.append((account, f"seed{n}", f"seed{n}", f"Seed {n}", os.urandom(64), now, 0))
            keys.append((os.urandom(32), account, os.urandom(77), 0, "fbfc3007-154e-4ecc-8c0b-6e020557d7bd", '["internal","hybrid"]',
                         1, 1, 1, "none", 0, "iCloud Keychain", now))
        with db:
            db.executemany(f"INSERT INTO accounts ({tenant}id, username, username_key, display_name, user_handle, created_at, disabled) "
                           f"VALUES ({in_tenant}?,?,?,?,?,?,?)", rows)
            db.executemany(f"""INSERT INTO passkeys ({tenant}credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible,
                               backed_up, user_verified, attestation_format, attestation_trusted, name, created_at)
                               VALUES ({in_tenant}?,?,?,?,?,?,?,?,?,?,?,?,?)""", keys)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()


def sqlite_bytes(path):
    return sum(os.path.getsize(path + suffix) for suffix in ("", "-wal") if os.path.exists(path + suffix))


def postgres_bytes(url):
    out = subprocess.run(["psql", "-tA", url.split("?")[0], "-c", "SELECT pg_database_size(current_database())"], check=True,
                         capture_output=True, text=True).stdout
    return int(out.strip())


def seed_postgres(url, start, count):
    tenant, in_tenant = postgres_tenant(url)
    sql = f"""
    WITH new AS (
      INSERT INTO accounts ({tenant}id, username, username_key, display_name, user_handle, created_at, disabled)
      SELECT {in_tenant}gen_random_uuid(), 'seed' || n, 'seed' || n, 'Seed ' || n,
             decode(md5(random()::text) || md5(random()::text) || md5(random()::text) || md5(random()::text), 'hex'),
             (extract(epoch from now()) * 1000)::bigint, false
      FROM generate_series({start}, {start + count - 1}) AS n
      RETURNING id)
    INSERT INTO passkeys ({tenant}credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible, backed_up,
                          user_verified, attestation_format, attestation_trusted, name, created_at)
    SELECT {in_tenant}decode(md5(random()::text) || md5(random()::text), 'hex'), id, decode(md5(random()::text), 'hex'), 0,
           'fbfc3007-154e-4ecc-8c0b-6e020557d7bd', '["internal","hybrid"]', true, true, true, 'none', false, 'iCloud Keychain',
           (extract(epoch from now()) * 1000)::bigint
    FROM new;
    """
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url.split("?")[0], "-c", sql], check=True, capture_output=True)
    # VACUUM as well as ANALYZE, then a CHECKPOINT (each on its own, not in a transaction): the
    # runs measure the steady state, not autovacuum working through 900,000 new rows and the
    # checkpointer through ~1 GB of dirty buffers on the same two cores.
    for command in ("VACUUM (ANALYZE)", "CHECKPOINT"):
        subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url.split("?")[0], "-c", command], check=True, capture_output=True)


SIZES = (1_000, 100_000, 1_000_000)
# Sign-in runs per size: this VM's speed moves by 5-10% from one 8-second run to the next, more
# than the difference between sizes that the table is read for; each figure in a size's row is
# the median of its runs (the note lists them all).
RUNS = 3


def median_report(reports):
    """Each figure the median of the runs' (errors added up)."""
    merged = {}
    for key in ("perSecond", "p50Milliseconds", "p99Milliseconds", "serverCPUms", "generatorCPUms", "databaseCPUms"):
        values = sorted(r[key] for r in reports if key in r)
        if values:
            merged[key] = values[len(values) // 2]
    errors = {}
    for r in reports:
        for code, count in r["errors"].items():
            errors[code] = errors.get(code, 0) + count
    merged["errors"] = errors
    return merged


def row(store, accounts, mode, users, report, at_rest, peak, note=""):
    return {"store": store, "accounts": accounts, "mode": mode, "users": users, "perSecond": report["perSecond"],
            "p50": report["p50Milliseconds"], "p99": report["p99Milliseconds"], "errors": sum(report["errors"].values()),
            "serverCPUms": report["serverCPUms"], "generatorCPUms": report["generatorCPUms"],
            "rssRestMiB": round(at_rest / 1024, 1), "rssPeakMiB": round(peak / 1024, 1), "note": note}


def median_of_runs(server, mode, users, seconds, vault, database_cpu=False, pin=None):
    """RUNS runs of one load: the median report, the highest RSS, and a note listing every run."""
    runs = [load(server, mode, users, seconds, f"{vault}-{run}.json", pin=pin, database_cpu=database_cpu) for run in range(RUNS)]
    report, peak = median_report([r for r, _ in runs]), max(p for _, p in runs)
    note = f"PostgreSQL's own CPU: {report['databaseCPUms']:.2f} ms/ceremony; " if "databaseCPUms" in report else ""
    listed = lambda key, form: ", ".join(form.format(r[key]) for r, _ in runs)
    note += (f"median of {RUNS} runs: {listed('perSecond', '{:.0f}')}/s, server CPU {listed('serverCPUms', '{:.2f}')} ms, "
             f"p99 {listed('p99Milliseconds', '{:.1f}')} ms")
    return report, peak, note


def run_store(name, database, seed, size_of, workdir, users, seconds, results, facts):
    server = Server(database, workdir)
    try:
        time.sleep(1)
        at_rest = rss_kib(server.process.pid)
        seeded = 0
        for size in SIZES:
            started = time.monotonic()
            seed(seeded, size - seeded); seeded = size
            facts.append(f"{name}: seeded to {size:,} accounts in {time.monotonic() - started:.0f} s; "
                         f"{size_of() / size:,.0f} bytes per account (database size / accounts)")
            report, peak, note = median_of_runs(server, "sign-in", users, seconds, os.path.join(workdir, f"vault-{name}-{size}"),
                                                database_cpu=name == "PostgreSQL")
            results.append(row(name, size, "sign-in", users, report, at_rest, peak, note))
            print(f"  {name} {size:>9,} accounts  sign-in {report['perSecond']:.0f}/s  p99 {report['p99Milliseconds']:.1f} ms  "
                  f"server {report['serverCPUms']:.2f} ms/ceremony  RSS peak {peak / 1024:.0f} MiB", file=sys.stderr)
        report, peak, note = median_of_runs(server, "sign-up", users, max(3, seconds // 2), os.path.join(workdir, f"vault-{name}-signup"))
        results.append(row(name, seeded, "sign-up", users, report, at_rest, peak, note))
    finally:
        server.stop()
    # A restart on the 1M-account database: open, check every migration is applied, serve.
    server = Server(database, workdir)
    facts.append(f"{name}: start on the {seeded:,}-account database (schema check, migrations up to date) to ready: {server.startup:.2f} s")
    server.stop()


def run_pinned(database, workdir, users, seconds, results):
    """The server alone on CPU 0, the generator on CPU 1: the server's own capacity per core."""
    server = Server(database, workdir, pin="0")
    try:
        time.sleep(1)
        at_rest = rss_kib(server.process.pid)
        report, peak, note = median_of_runs(server, "sign-in", users, seconds, os.path.join(workdir, "vault-pinned"), pin="1")
        results.append(row("SQLite", SIZES[-1], "sign-in", users, report, at_rest, peak, "server pinned to CPU 0, generator to CPU 1; " + note))
    finally:
        server.stop()


V9_LAYOUT = """
DROP TABLE challenges;
CREATE TABLE challenges (challenge_hash BLOB PRIMARY KEY, challenge BLOB NOT NULL, ceremony TEXT NOT NULL,
    account_id TEXT REFERENCES accounts(id) ON DELETE CASCADE, pending_username TEXT, pending_display_name TEXT,
    pending_user_handle BLOB, unknown_user INTEGER NOT NULL DEFAULT 0, api TEXT NOT NULL, user_verification TEXT NOT NULL,
    created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, pending_account_id TEXT, conditional INTEGER NOT NULL DEFAULT 0,
    state BLOB);
CREATE INDEX challenges_expiry ON challenges(expires_at);
CREATE TABLE sessions_v9 (token_hash BLOB PRIMARY KEY, account_id TEXT NOT NULL REFERENCES accounts(id) ON DELETE CASCADE,
    created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL, user_agent TEXT, ip_address TEXT, method TEXT NOT NULL DEFAULT 'unknown',
    credential_id BLOB, last_seen_at INTEGER);
INSERT INTO sessions_v9 SELECT token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, credential_id, last_seen_at FROM sessions;
DROP TABLE sessions;
ALTER TABLE sessions_v9 RENAME TO sessions;
CREATE INDEX sessions_account ON sessions(account_id);
CREATE INDEX sessions_expiry ON sessions(expires_at);
CREATE INDEX sessions_credential ON sessions(credential_id);
CREATE INDEX audit_time ON audit_events(time);
DELETE FROM schema_migrations WHERE version >= 10;
"""


def time_migration(path, facts):
    """Migrations 10 and 11 (SQLite: the ceremonies and sessions tables rebuilt WITHOUT ROWID, two
    indexes dropped) timed with `passkeyd migrate` on the 1M-account database laid out as version 9 left
    it, with a live session and an audit line per account and 1,000 open ceremonies."""
    db = sqlite3.connect(path, timeout=30)
    db.executescript("BEGIN;" + V9_LAYOUT + "COMMIT;")
    now = int(time.time() * 1000)
    ids = [row[0] for row in db.execute("SELECT id FROM accounts")]
    # Each table asked apart: V9_LAYOUT rebuilt sessions and challenges without a tenant.
    (session_tenant, session_in), (audit_tenant, audit_in), (challenge_tenant, challenge_in) = (
        sqlite_tenant(db, table) for table in ("sessions", "audit_events", "challenges"))
    with db:
        db.executemany(f"INSERT INTO sessions ({session_tenant}token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, "
                       f"credential_id) VALUES ({session_in}?,?,?,?,?,?,?,?)",
                       ((os.urandom(32), account, now, now + 86_400_000, "Mozilla/5.0 (bench)", "192.0.2.1", "passkey", os.urandom(32))
                        for account in ids))
        db.executemany(f"INSERT INTO audit_events ({audit_tenant}time, kind, account_id, ip_address, user_agent, detail) "
                       f"VALUES ({audit_in}?,?,?,?,?,?)",
                       ((now, "sign_in", account, "192.0.2.1", "Mozilla/5.0 (bench)", "passkey") for account in ids))
        db.executemany(f"INSERT INTO challenges ({challenge_tenant}challenge_hash, challenge, ceremony, api, user_verification, created_at, "
                       f"expires_at) VALUES ({challenge_in}?,?,?,?,?,?,?)",
                       ((os.urandom(32), os.urandom(32), "authentication", "native", "required", now, now + 300_000) for _ in range(1000)))
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    sessions = db.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]
    db.close()
    before = sqlite_bytes(path)
    started = time.monotonic()
    out = subprocess.run([os.path.join(RELEASE, "passkeyd"), "migrate", "--database", f"sqlite://{path}"], check=True, capture_output=True,
                         text=True, env=dict(os.environ, PASSKEYD_CONFIG="")).stdout.strip()
    took = time.monotonic() - started
    facts.append(f"SQLite: migrations 10 and 11 on the {len(ids):,}-account database ({sessions:,} sessions, {len(ids):,} more audit lines, "
                 f"1,000 open ceremonies): {took:.1f} s (`passkeyd migrate`: {out.splitlines()[-1] if out else 'no output'}); "
                 f"database {before / 2**20:,.0f} MiB before, {sqlite_bytes(path) / 2**20:,.0f} MiB after")


def run_two_instances(url, workdir, users, seconds, results):
    """Two passkeyd instances on one PostgreSQL, each with its own generator, at once."""
    servers = [Server(url, workdir), Server(url, workdir)]
    try:
        time.sleep(1)
        reports = [None, None]
        def drive(index):
            reports[index] = load(servers[index], "sign-in", users // 2, seconds, os.path.join(workdir, f"vault-two-{index}.json"))
        threads = [threading.Thread(target=drive, args=(i,)) for i in range(2)]
        for t in threads: t.start()
        for t in threads: t.join()
        (a, peak_a), (b, peak_b) = reports
        total = {"perSecond": a["perSecond"] + b["perSecond"], "p50Milliseconds": max(a["p50Milliseconds"], b["p50Milliseconds"]),
                 "p99Milliseconds": max(a["p99Milliseconds"], b["p99Milliseconds"]), "errors": {**a["errors"], **b["errors"]},
                 "serverCPUms": (a["serverCPUms"] + b["serverCPUms"]) / 2, "generatorCPUms": (a["generatorCPUms"] + b["generatorCPUms"]) / 2}
        results.append(row("PostgreSQL", SIZES[-1], "sign-in", users, total, rss_kib(servers[0].process.pid), max(peak_a, peak_b),
                           "two instances, one database (rate summed; p50/p99 the worse of the two)"))
    finally:
        for server in servers: server.stop()


def p256_microseconds():
    """This machine's speed now: the library's raw P-256 verification (swift-crypto), µs per
    verification over 3,000 of them. On a shared VM it moved by 2x within one day; a ceremony's
    CPU reads better against it than alone."""
    bench = subprocess.Popen([os.path.join(RELEASE, "WebAuthnBenchmarks"), "3000"], stdout=subprocess.PIPE, text=True)
    try:
        for line in bench.stdout:
            if line.startswith("raw P-256 verify"):
                return float(line.split()[-4])
    finally:
        bench.kill()
        bench.wait()
    return None


def run_postgres(workdir, args, results, facts):
    """The PostgreSQL rows, on a throwaway database server on a loopback port."""
    pgdir = tempfile.mkdtemp(prefix="passkeyd-bench-pg-")  # scripts/postgres hands it to the postgres user
    # A database server sized for its data: the 1M-account database (~760 MB) fits in its buffers.
    env = dict(os.environ, PASSKEYD_PG_FSYNC="on", PASSKEYD_PG_SYNCHRONOUS_COMMIT="off", PASSKEYD_PG_SHARED_BUFFERS="1GB")
    url = subprocess.run([os.path.join(ROOT, "scripts", "postgres"), "start", pgdir, str(free_port())], check=True, capture_output=True,
                         text=True, env=env).stdout.strip()
    try:
        run_store("PostgreSQL", url, lambda start, count: seed_postgres(url, start, count), lambda: postgres_bytes(url),
                  workdir, args.users, args.seconds, results, facts)
        run_two_instances(url, workdir, args.users, args.seconds, results)
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "postgres"), "stop", pgdir])
        subprocess.run(["rm", "-rf", pgdir])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=16)
    parser.add_argument("--seconds", type=int, default=8)
    global RUNS
    parser.add_argument("--runs", type=int, default=RUNS, help="runs of each load (the row gives their medians)")
    parser.add_argument("--json")
    parser.add_argument("--stores", default="sqlite,postgres", help="the stores to run: sqlite, postgres or both (comma-separated)")
    args = parser.parse_args()
    stores = {store.strip().lower() for store in args.stores.split(",")}
    if not stores or not stores <= {"sqlite", "postgres"}:
        parser.error("--stores takes sqlite, postgres or both")
    RUNS = max(1, args.runs)
    results, facts = [], []
    speed_before = p256_microseconds()
    with tempfile.TemporaryDirectory(prefix="passkeyd-bench-") as workdir:
        path = os.path.join(workdir, "bench.sqlite")
        if "sqlite" in stores:
            run_store("SQLite", f"sqlite://{path}", lambda start, count: seed_sqlite(path, start, count), lambda: sqlite_bytes(path),
                      workdir, args.users, args.seconds, results, facts)
            run_pinned(f"sqlite://{path}", workdir, args.users, args.seconds, results)
            time_migration(path, facts)
        if "postgres" in stores:
            run_postgres(workdir, args, results, facts)
    speed_after = p256_microseconds()
    if speed_before and speed_after:
        speed = (speed_before + speed_after) / 2
        per_verification = ", ".join(f"{r['store']} {r['mode']} {r['accounts']:,}: {r['serverCPUms'] * 1000 / speed:.1f}" for r in results
                                     if "pinned" not in r["note"] and "two instances" not in r["note"])
        facts.insert(0, f"Machine speed: the library's raw P-256 verification took {speed_before:.1f} µs before these runs and {speed_after:.1f} µs "
                        f"after; server CPU per ceremony in those verifications: {per_verification}")
    print("\n| store | accounts | ceremony | users | per second | p50 ms | p99 ms | errors | server CPU ms/ceremony | generator CPU ms/ceremony | RSS at rest MiB | RSS peak MiB | note |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        print(f"| {r['store']} | {r['accounts']:,} | {r['mode']} | {r['users']} | {r['perSecond']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | {r['errors']} | "
              f"{r['serverCPUms']:.2f} | {r['generatorCPUms']:.2f} | {r['rssRestMiB']} | {r['rssPeakMiB']} | {r['note']} |")
    print()
    for fact in facts:
        print(f"- {fact}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "facts": facts}, f, indent=2)


if __name__ == "__main__":
    main()
