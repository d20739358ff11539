#!/usr/bin/env python3
"""The operator's console on 1M accounts (issue 36): p50 / p99 of its read routes against a
release `passkeyd serve` on loopback, on SQLite and on PostgreSQL.

The database: `passkeyd migrate` on an empty database, then, written with SQL as
scripts/bench_http.py does (random user handles, credential ids and keys: the tables and
indexes are sized as real ones would be):
  - 1M accounts: 700,000 with a passkey, 300,000 password-only (display names and usernames from
    a few hundred first and last names, so a search prefix matches thousands of accounts);
  - 200,000 live sessions;
  - a year of audit lines with adoption metrics: about 3,000 a day over the 365 days before
    today (sign-ins by each method, sign-ups, upgrades by each road, passwords turned off), and
    today's up to now; addresses in 10.0.0.0/8 and 2001:db8::/32;
  - the baselines migration 13 writes on a database with accounts (`baseline_*` on the day
    before the first audited day), chosen so that today's running totals are the accounts
    seeded, and the rollup watermark on the first audited day: nothing is rolled up yet, so the
    server's first adoption request rolls up the whole year (timed apart: a fact below, not a
    sample), and every later one reads the rollups.
The admin is made with `passkeyd admin grant seed… --role admin`. Its console session is a row
written straight into admin_sessions with a known token (the SHA-256 of the cookie's 32 bytes,
as the console stores it): the bench measures the read paths, not the passkey sign-in (that is
the sign-in ceremony scripts/bench_http.py measures, plus one role lookup). Each request still
goes through the console's session check (one UPDATE moving the idle deadline, one SELECT).

Each route is asked `--requests` times (300 by default) in turn by one client on a kept-alive
connection, after a warm-up; the table gives p50 / p99 / max in milliseconds, the bars of the
issue (chart < 100 ms, every page < 200 ms) beside them. Prints a Markdown table and facts.
Usage: python3 scripts/bench_console.py [--stores sqlite,postgres] [--requests 300] [--accounts 1000000]
       [--workdir DIR (keep the SQLite database; a second run measures it again without seeding)]
       [--binary PATH (another passkeyd: a debug build, to check this script quickly)] [--json FILE]
"""
import argparse, base64, hashlib, http.client, json, os, random, sqlite3, subprocess, sys, tempfile, time, urllib.request, uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_http import TENANT, postgres_tenant, sqlite_tenant  # noqa: E402  (tenant_id where the schema has it)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, ".build", "release")
PASSKEYD = os.path.join(RELEASE, "passkeyd")
DAY_MS = 86_400_000

FIRST = ("anna ben carla david emma felix gina hugo ines jonas karla leo maria marc marta martin nina oscar paula quentin "
         "rosa sam sofia tom ursula victor wanda xavier yara zoe").split()
LAST = ("adams baker clark davis evans fischer garcia hall ito jones king lopez martin moreau nguyen ortiz petit "
        "quinn rossi smith tanaka urban vogel weber young zhang").split()
# Metrics a day, on average (sign-ins dominate, as they do on a real server).
DAILY = {
    "sign_in_autofill": 900, "sign_in_passkey": 800, "sign_in_password": 700, "sign_in_recovery": 15, "sign_in_oidc": 300,
    "signup_passkey": 100, "upgrade_conditional": 90, "upgrade_button": 50, "upgrade_recovery": 10, "passkey_added": 40,
    "password_off": 20,
}
KIND = {"sign_in_autofill": "sign_in", "sign_in_passkey": "sign_in", "sign_in_password": "sign_in", "sign_in_recovery": "sign_in",
        "sign_in_oidc": "oidc_authorized", "signup_passkey": "sign_up", "upgrade_conditional": "passkey_added",
        "upgrade_button": "passkey_added", "upgrade_recovery": "passkey_added", "passkey_added": "passkey_added",
        "password_off": "password_removed"}
WITH_PASSKEY_SHARE = 0.7


def free_port():
    import socket
    s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close(); return port


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def person(n):
    first, last = FIRST[n % len(FIRST)], LAST[(n // len(FIRST)) % len(LAST)]
    return f"{first}.{last}{n}", f"{first.title()} {last.title()} {n}"


def address(rng):
    if rng.random() < 0.8:
        return f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
    return f"2001:db8:{rng.randrange(65536):x}::{rng.randrange(1, 65536):x}"


def history(accounts, now_ms, rng):
    """The audit lines (time, kind, account index, metric, address) of 365 days and today, and
    the baselines that make today's totals the seeded accounts."""
    today = now_ms // DAY_MS * DAY_MS
    lines, totals = [], {name: 0 for name in DAILY}
    for day in range(-365, 1):
        start = today + day * DAY_MS
        end = now_ms if day == 0 else start + DAY_MS
        # A year of growth: later days see a little more traffic.
        scale = (0.7 + 0.6 * (day + 365) / 365) * (end - start) / DAY_MS
        for metric, mean in DAILY.items():
            count = max(0, int(rng.gauss(mean * scale, mean * scale * 0.1)))
            totals[metric] += count
            for _ in range(count):
                lines.append((rng.randrange(start, end), KIND[metric], rng.randrange(accounts), metric, address(rng)))
    lines.sort()
    with_passkey = int(accounts * WITH_PASSKEY_SHARE)
    upgrades = totals["upgrade_conditional"] + totals["upgrade_button"] + totals["upgrade_recovery"]
    baselines = {
        "baseline_with_passkey": with_passkey - totals["signup_passkey"] - upgrades,
        "baseline_password_only": accounts - with_passkey + upgrades,
    }
    return lines, baselines, today - 365 * DAY_MS


# MARK: SQLite

def seed_sqlite(path, accounts, rng, facts):
    started = time.monotonic()
    db = sqlite3.connect(path, timeout=30)
    db.execute("PRAGMA journal_mode=WAL"); db.execute("PRAGMA synchronous=OFF")
    tenant, in_tenant = sqlite_tenant(db)
    now = int(time.time() * 1000)
    ids = []
    with_passkey = int(accounts * WITH_PASSKEY_SHARE)
    for first in range(0, accounts, 100_000):
        rows, keys, sessions = [], [], []
        for n in range(first, min(first + 100_000, accounts)):
            account = str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper()
            ids.append(account)
            username, display = person(n)
            password = None if n < with_passkey else "$scrypt$ln=15,r=8,p=1$c2VlZA$" + b64url(os.urandom(32))
            rows.append((account, username, username, display, display.lower(), os.urandom(64), now - rng.randrange(400 * DAY_MS), 0, password))
            if n < with_passkey:
                keys.append((os.urandom(32), account, os.urandom(77), 0, "fbfc3007-154e-4ecc-8c0b-6e020557d7bd", '["internal","hybrid"]',
                             1, 1, 1, "none", 0, "iCloud Keychain", now))
            if n % 5 == 0:
                sessions.append((os.urandom(32), account, now, now + 14 * DAY_MS, "Mozilla/5.0 bench", "10.1.2.3", "passkey", now))
        with db:
            db.executemany(f"""INSERT INTO accounts ({tenant}id, username, username_key, display_name, display_name_key, user_handle,
                               created_at, disabled, password_hash) VALUES ({in_tenant}?,?,?,?,?,?,?,?,?)""", rows)
            db.executemany(f"""INSERT INTO passkeys ({tenant}credential_id, account_id, public_key, sign_count, aaguid, transports,
                               backup_eligible, backed_up, user_verified, attestation_format, attestation_trusted, name, created_at)
                               VALUES ({in_tenant}?,?,?,?,?,?,?,?,?,?,?,?,?)""", keys)
            db.executemany(f"""INSERT INTO sessions ({tenant}token_hash, account_id, created_at, expires_at, user_agent, ip_address, method,
                               last_seen_at) VALUES ({in_tenant}?,?,?,?,?,?,?,?)""", sessions)
    facts.append(f"SQLite: {accounts:,} accounts, {with_passkey:,} passkeys, {accounts // 5:,} sessions written in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    lines, baselines, first_day = history(accounts, now, rng)
    with db:
        db.executemany(f"INSERT INTO audit_events ({tenant}time, kind, account_id, ip_address, user_agent, metric) VALUES ({in_tenant}?,?,?,?,?,?)",
                       ((t, kind, ids[a], ip, "Mozilla/5.0 bench", metric) for t, kind, a, metric, ip in lines))
        db.execute("DELETE FROM daily_metrics"); db.execute("DELETE FROM metrics_rollup")
        db.executemany(f"INSERT INTO daily_metrics ({tenant}day, metric, n) VALUES ({in_tenant}?,?,?)",
                       ((first_day - DAY_MS, name, n) for name, n in baselines.items()))
        db.execute("INSERT INTO metrics_rollup (id, next_day) VALUES (1, ?)", (first_day,))
    db.execute("ANALYZE")
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    facts.append(f"SQLite: {len(lines):,} audit lines with metrics over 366 days written in {time.monotonic() - started:.0f} s")
    return ids, len(lines)


def sqlite_session(path, account_id):
    token = os.urandom(32)
    now = int(time.time() * 1000)
    db = sqlite3.connect(path, timeout=30)
    tenant, in_tenant = sqlite_tenant(db)
    with db:
        db.execute(f"""INSERT INTO admin_sessions ({tenant}token_hash, account_id, created_at, expires_at, idle_expires_at, verified_at,
                       csrf_hash) VALUES ({in_tenant}?,?,?,?,?,?,?)""",
                   (hashlib.sha256(token).digest(), account_id, now, now + 8 * 3600_000, now + 8 * 3600_000, now, os.urandom(32)))
    db.close()
    return b64url(token)


def sqlite_credential(path, account_id):
    db = sqlite3.connect(path)
    row = db.execute("SELECT credential_id FROM passkeys WHERE account_id = ?", (account_id,)).fetchone()
    db.close()
    return b64url(row[0])


def sqlite_plans(path, credential_prefix):
    """EXPLAIN QUERY PLAN of the statements behind the routes, as the store writes them."""
    db = sqlite3.connect(path)
    hi = "\U0010FFFF"
    statements = {
        "search username": ("SELECT id FROM accounts WHERE username_key >= ? AND username_key < ? ORDER BY username_key, id LIMIT 26",
                            ("mar", "mar" + hi)),
        "search display name": ("SELECT id FROM accounts WHERE display_name_key >= ? AND display_name_key < ? ORDER BY display_name_key, id LIMIT 26",
                                ("mar", "mar" + hi)),
        "search credential": ("SELECT p.credential_id FROM passkeys p JOIN accounts a ON a.id = p.account_id WHERE p.credential_id >= ? "
                              "ORDER BY p.credential_id LIMIT 26", (base64.urlsafe_b64decode(credential_prefix + "A" * (-len(credential_prefix) % 4)),)),
        "audit, no filter": ("SELECT * FROM audit_events WHERE 1 = 1 ORDER BY id DESC LIMIT 50", ()),
        "audit by kind": ("SELECT * FROM audit_events WHERE 1 = 1 AND kind = ? ORDER BY id DESC LIMIT 50", ("password_removed",)),
        "audit by address": ("SELECT * FROM audit_events WHERE 1 = 1 AND ip_address >= ? AND ip_address < ? ORDER BY id DESC LIMIT 50",
                             ("10.1.", "10.1." + hi)),
        "audit by time": ("SELECT * FROM audit_events WHERE 1 = 1 AND time >= ? AND time < ? ORDER BY id DESC LIMIT 50", (0, 1 << 62)),
        "live sessions": ("SELECT COUNT(*) FROM sessions WHERE expires_at > ?", (int(time.time() * 1000),)),
        "live metrics (today)": ("SELECT metric, COUNT(*) FROM audit_events WHERE time >= ? AND time < ? AND metric IS NOT NULL GROUP BY metric",
                                 (int(time.time() * 1000) // DAY_MS * DAY_MS, int(time.time() * 1000))),
        "metric totals": ("SELECT metric, SUM(n) FROM daily_metrics WHERE day < ? GROUP BY metric", (int(time.time() * 1000),)),
    }
    plans = {}
    for name, (sql, params) in statements.items():
        plans[name] = "; ".join(row[3] for row in db.execute("EXPLAIN QUERY PLAN " + sql, params))
    db.close()
    return plans


# MARK: PostgreSQL

def psql(url, sql):
    return subprocess.run(["psql", "-qtA", "-v", "ON_ERROR_STOP=1", url.split("?")[0], "-c", sql], check=True, capture_output=True,
                          text=True).stdout.strip()


def seed_postgres(url, accounts, rng, facts):
    started = time.monotonic()
    with_passkey = int(accounts * WITH_PASSKEY_SHARE)
    firsts = "ARRAY[" + ",".join(f"'{f}'" for f in FIRST) + "]"
    lasts = "ARRAY[" + ",".join(f"'{l}'" for l in LAST) + "]"
    tenant, in_tenant = postgres_tenant(url)
    psql(url, f"""
    INSERT INTO accounts ({tenant}id, username, username_key, display_name, display_name_key, user_handle, created_at, disabled, password_hash)
    SELECT {in_tenant}gen_random_uuid(), u, u, d, lower(d),
           decode(md5(random()::text) || md5(random()::text) || md5(random()::text) || md5(random()::text), 'hex'),
           (extract(epoch from now()) * 1000)::bigint - (random() * 400 * {DAY_MS})::bigint, false,
           CASE WHEN n < {with_passkey} THEN NULL ELSE '$scrypt$ln=15,r=8,p=1$c2VlZA$' || md5(random()::text) END
    FROM (SELECT n, f || '.' || l || n AS u, initcap(f) || ' ' || initcap(l) || ' ' || n AS d FROM (
        SELECT n, ({firsts})[n % {len(FIRST)} + 1] AS f, ({lasts})[(n / {len(FIRST)}) % {len(LAST)} + 1] AS l
        FROM generate_series(0, {accounts - 1}) AS n) s) t;
    """)
    psql(url, f"""
    INSERT INTO passkeys ({tenant}credential_id, account_id, public_key, sign_count, aaguid, transports, backup_eligible, backed_up,
                          user_verified, attestation_format, attestation_trusted, name, created_at)
    SELECT {in_tenant}decode(md5(random()::text) || md5(random()::text), 'hex'), id, decode(md5(random()::text), 'hex'), 0,
           'fbfc3007-154e-4ecc-8c0b-6e020557d7bd', '["internal","hybrid"]', true, true, true, 'none', false, 'iCloud Keychain',
           (extract(epoch from now()) * 1000)::bigint
    FROM accounts WHERE password_hash IS NULL;
    INSERT INTO sessions ({tenant}token_hash, account_id, created_at, expires_at, user_agent, ip_address, method, last_seen_at)
    SELECT {in_tenant}decode(md5(random()::text) || md5(random()::text), 'hex'), id, (extract(epoch from now()) * 1000)::bigint,
           (extract(epoch from now()) * 1000)::bigint + 14 * {DAY_MS}, 'Mozilla/5.0 bench', '10.1.2.3', 'passkey',
           (extract(epoch from now()) * 1000)::bigint
    FROM accounts WHERE random() < 0.2;
    """)
    facts.append(f"PostgreSQL: {accounts:,} accounts, {with_passkey:,} passkeys, ~{accounts // 5:,} sessions written in {time.monotonic() - started:.0f} s")
    started = time.monotonic()
    now = int(time.time() * 1000)
    lines, baselines, first_day = history(accounts, now, rng)
    ids = psql(url, "SELECT id FROM accounts ORDER BY username_key").split("\n")
    path = os.path.join(tempfile.gettempdir(), f"passkeyd-bench-audit-{os.getpid()}.tsv")
    first_field = f"{TENANT}\t" if tenant else ""
    with open(path, "w") as f:
        for t, kind, a, metric, ip in lines:
            f.write(f"{first_field}{t}\t{kind}\t{ids[a % len(ids)]}\t{ip}\tMozilla/5.0 bench\t{metric}\n")
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", url.split("?")[0], "-c",
                    f"\\copy audit_events ({tenant}time, kind, account_id, ip_address, user_agent, metric) FROM '{path}'"], check=True,
                   capture_output=True)
    os.remove(path)
    values = ", ".join(f"({in_tenant}{first_day - DAY_MS}, '{name}', {n})" for name, n in baselines.items())
    psql(url, f"""DELETE FROM daily_metrics; DELETE FROM metrics_rollup;
                  INSERT INTO daily_metrics ({tenant}day, metric, n) VALUES {values};
                  INSERT INTO metrics_rollup (id, next_day) VALUES (1, {first_day});""")
    for command in ("VACUUM (ANALYZE)", "CHECKPOINT"):
        psql(url, command)
    facts.append(f"PostgreSQL: {len(lines):,} audit lines with metrics over 366 days written in {time.monotonic() - started:.0f} s")
    return ids, len(lines)


def postgres_session(url, account_id):
    token = os.urandom(32)
    now = int(time.time() * 1000)
    tenant, in_tenant = postgres_tenant(url)
    psql(url, f"""INSERT INTO admin_sessions ({tenant}token_hash, account_id, created_at, expires_at, idle_expires_at, verified_at, csrf_hash)
                  VALUES ({in_tenant}'\\x{hashlib.sha256(token).hexdigest()}', '{account_id}', {now}, {now + 8 * 3600_000}, {now + 8 * 3600_000}, {now},
                  '\\x{os.urandom(32).hex()}')""")
    return b64url(token)


def postgres_credential(url, account_id):
    return b64url(bytes.fromhex(psql(url, f"SELECT encode(credential_id, 'hex') FROM passkeys WHERE account_id = '{account_id}'")))


# MARK: The server and the requests

class Server:
    def __init__(self, database, workdir):
        self.port = free_port()
        env = dict(os.environ, PASSKEYD_LISTEN=f"127.0.0.1:{self.port}", PASSKEYD_ORIGINS=f"http://localhost:{self.port}",
                   PASSKEYD_RATE_LIMITS="off", PASSKEYD_ADMIN_RATE_LIMIT="1000000", PASSKEYD_LOG_FORMAT="json", LOG_LEVEL="warning",
                   PASSKEYD_CONFIG="")
        self.log = open(os.path.join(workdir, f"server-{self.port}.log"), "w")
        self.process = subprocess.Popen([PASSKEYD, "serve", "--database", database], env=env, stdout=self.log, stderr=self.log, cwd=workdir)
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1).read()
                return
            except Exception:
                time.sleep(0.1)
        raise SystemExit(f"server on {database} did not start; see {self.log.name}")

    def stop(self):
        self.process.terminate(); self.process.wait(timeout=30); self.log.close()


class Client:
    def __init__(self, port, token):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        self.headers = {"Cookie": f"passkeyd_admin={token}; __Host-passkeyd_admin={token}", "Accept": "application/json"}

    def get(self, path):
        started = time.perf_counter()
        self.connection.request("GET", path, headers=self.headers)
        response = self.connection.getresponse()
        body = response.read()
        elapsed = (time.perf_counter() - started) * 1000
        if response.status != 200:
            raise SystemExit(f"GET {path}: {response.status} {body[:300]!r}")
        return elapsed, body


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, int(round(p / 100 * len(ordered) + 0.5)) - 1))]


def measure(store, database, workdir, ids, credential, requests, results, facts, session, fresh=True, budget=60):
    server = Server(database, workdir)
    try:
        client = Client(server.port, session)
        first, body = client.get("/admin/api/adoption?days=365")
        days = json.loads(body)["days"]
        if fresh:
            facts.append(f"{store}: the first adoption request rolled up the 365 completed days of audit lines (nothing was rolled up "
                         f"before) and answered in {first:.0f} ms (one time: later requests read the rollups)")
        overview = json.loads(client.get("/admin/api/overview")[1])
        facts.append(f"{store}: overview says {overview['accounts']:,} accounts, {overview['accountsWithPasskey']:,} with a passkey, "
                     f"{overview['passwordOnly']:,} password-only, {overview['activeSessions']:,} live sessions, "
                     f"sign-ins today {sum(overview['signInsToday'].values()):,}")
        rng = random.Random(7)
        prefixes = [f"{f[:3]}" for f in FIRST]
        names = [f"{f.title()} {l[:2].title()}" for f in FIRST for l in LAST]
        account = ids[len(ids) // 2]
        routes = [
            ("overview", lambda: "/admin/api/overview", 200),
            ("adoption, 365 days", lambda: "/admin/api/adoption?days=365", 100),
            ("adoption, 30 days", lambda: "/admin/api/adoption?days=30", 100),
            ("adoption CSV, 365 days", lambda: "/admin/api/adoption.csv?days=365", 200),
            ("accounts by username prefix", lambda: f"/admin/api/accounts?q={rng.choice(prefixes)}&by=username", 200),
            ("accounts by display name prefix", lambda: f"/admin/api/accounts?q={rng.choice(names).replace(' ', '%20')}&by=displayName", 200),
            ("accounts by credential id prefix", lambda: f"/admin/api/accounts?q={b64url(os.urandom(3))[:3]}&by=credentialId", 200),
            ("accounts by id prefix", lambda: f"/admin/api/accounts?q={os.urandom(2).hex()}&by=id", 200),
            ("account page", lambda: f"/admin/api/accounts/{rng.choice(ids).lower()}", 200),
            ("audit, newest 50", lambda: "/admin/api/audit", 200),
            ("audit by kind (rare: password_removed)", lambda: "/admin/api/audit?kind=password_removed", 200),
            ("audit by address prefix (10.N.)", lambda: f"/admin/api/audit?address=10.{rng.randrange(256)}.", 200),
            ("audit by address prefix, worst case (10.: 80% of the log)", lambda: "/admin/api/audit?address=10.", 200),
            ("audit by kind, frequent (sign_in)", lambda: "/admin/api/audit?kind=sign_in", 200),
            ("audit of one account", lambda: f"/admin/api/audit?account={account.lower()}", 200),
            ("audit, one day", lambda: f"/admin/api/audit?from={days[-30]['date']}T00:00:00Z&to={days[-29]['date']}T00:00:00Z", 200),
            ("audit, the whole year as the range", lambda: f"/admin/api/audit?from={days[0]['date']}&to={days[-1]['date']}", 200),
            ("integrations", lambda: "/admin/api/integrations", 200),
            ("policy (providers by AAGUID)", lambda: "/admin/api/policy", 200),
            ("admins", lambda: "/admin/api/admins", 200),
        ]
        for name, path, bar in routes:
            for _ in range(10):
                client.get(path())
            # A route far over its bar stops after `budget` seconds (the row says how many it got).
            samples, started = [], time.monotonic()
            while len(samples) < requests and (len(samples) < 20 or time.monotonic() - started < budget):
                samples.append(client.get(path())[0])
            results.append({"store": store, "route": name, "requests": len(samples), "p50": percentile(samples, 50),
                            "p99": percentile(samples, 99), "max": max(samples), "bar": bar})
            print(f"  {store} {name}: p50 {results[-1]['p50']:.1f} ms, p99 {results[-1]['p99']:.1f} ms", file=sys.stderr)
    finally:
        server.stop()


def grant(database, username):
    out = subprocess.run([PASSKEYD, "admin", "grant", username, "--role", "admin", "--database", database], check=True, capture_output=True,
                         text=True, env=dict(os.environ, PASSKEYD_CONFIG=""))
    return out.stdout.strip()


def migrate(database):
    subprocess.run([PASSKEYD, "migrate", "--database", database], check=True, capture_output=True, env=dict(os.environ, PASSKEYD_CONFIG=""))


def run_sqlite(workdir, args, results, facts):
    path = os.path.join(workdir, "console.sqlite")
    database = f"sqlite://{path}"
    if os.path.exists(path):
        # --workdir with a database seeded by an earlier run: measured again as it is.
        db = sqlite3.connect(path)
        ids = [row[0] for row in db.execute("SELECT id FROM accounts ORDER BY username_key")]
        db.close()
        facts.append(f"SQLite: the database seeded by an earlier run ({len(ids):,} accounts), its rollups done")
        fresh = False
    else:
        fresh = True
        migrate(database)
        ids, _ = seed_sqlite(path, args.accounts, random.Random(1), facts)
        facts.append(f"SQLite: {grant(database, person(0)[0])}; database {os.path.getsize(path) / 2**20:.0f} MiB")
    credential = sqlite_credential(path, ids[0])
    measure("SQLite", database, workdir, ids, credential, args.requests, results, facts, sqlite_session(path, ids[0]), fresh)
    for name, plan in sqlite_plans(path, credential[:3]).items():
        facts.append(f"SQLite plan, {name}: {plan}")


def run_postgres(workdir, args, results, facts):
    pgdir = tempfile.mkdtemp(prefix="passkeyd-bench-pg-")
    env = dict(os.environ, PASSKEYD_PG_FSYNC="on", PASSKEYD_PG_SYNCHRONOUS_COMMIT="off", PASSKEYD_PG_SHARED_BUFFERS="1GB")
    url = subprocess.run([os.path.join(ROOT, "scripts", "postgres"), "start", pgdir, str(free_port())], check=True, capture_output=True,
                         text=True, env=env).stdout.strip()
    try:
        migrate(url)
        ids, _ = seed_postgres(url, args.accounts, random.Random(1), facts)
        facts.append(f"PostgreSQL: {grant(url, person(0)[0])}")
        admin_id = psql(url, f"SELECT id FROM accounts WHERE username_key = '{person(0)[0]}'")
        measure("PostgreSQL", url, workdir, ids, postgres_credential(url, admin_id), args.requests, results, facts,
                postgres_session(url, admin_id))
    finally:
        subprocess.run([os.path.join(ROOT, "scripts", "postgres"), "stop", pgdir])
        subprocess.run(["rm", "-rf", pgdir])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--accounts", type=int, default=1_000_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--stores", default="sqlite,postgres")
    parser.add_argument("--json")
    parser.add_argument("--workdir", help="keep the SQLite database here (and measure an existing one again without seeding)")
    parser.add_argument("--binary", help="another passkeyd (a debug build, for a quick check of this script)")
    args = parser.parse_args()
    if args.binary:
        global PASSKEYD
        PASSKEYD = os.path.abspath(args.binary)
    stores = {s.strip().lower() for s in args.stores.split(",")}
    if not stores or not stores <= {"sqlite", "postgres"}:
        parser.error("--stores takes sqlite, postgres or both")
    results, facts = [], []
    def run(workdir):
        if "sqlite" in stores:
            run_sqlite(workdir, args, results, facts)
        if "postgres" in stores:
            run_postgres(workdir, args, results, facts)
    if args.workdir:
        os.makedirs(args.workdir, exist_ok=True)
        run(args.workdir)
    else:
        with tempfile.TemporaryDirectory(prefix="passkeyd-bench-console-") as workdir:
            run(workdir)
    print(f"\n| store | route ({args.accounts:,} accounts) | requests | p50 ms | p99 ms | max ms | bar ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for r in results:
        flag = "" if r["p99"] < r["bar"] else " **over**"
        print(f"| {r['store']} | {r['route']} | {r['requests']} | {r['p50']:.1f} | {r['p99']:.1f} | {r['max']:.1f} | < {r['bar']}{flag} |")
    print()
    for fact in facts:
        print(f"- {fact}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"results": results, "facts": facts}, f, indent=2)


if __name__ == "__main__":
    main()
