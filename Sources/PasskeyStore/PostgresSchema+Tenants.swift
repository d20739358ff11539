/// Migration 16 of the PostgreSQL schema (issue 44, tenants; SQLiteSchema+Tenants.swift says
/// why): `tenant_id` on every table a tenant owns (existing rows in `default`, then no default,
/// so a write that forgets its tenant fails), every key and unique key led by it, every foreign
/// key composite. PostgreSQL changes keys in place; each swap builds an index under the table's
/// exclusive lock.
extension PostgresSchema {
    /// A tenant-owned table's keys after migration 16.
    private struct TenantKeys {
        let table: String
        /// The new primary key's columns after `tenant_id` (nil: the key stays, e.g. a serial id).
        let primaryKey: [String]?
        /// Unique constraints replaced: (old constraint, column).
        var uniques: [(old: String, column: String)] = []
        /// Foreign keys made composite: (column, parent table).
        var references: [(column: String, parent: String)] = []
    }

    private static let tenantKeys: [TenantKeys] = [
        TenantKeys(
            table: "accounts", primaryKey: ["id"],
            uniques: [("accounts_username_key_key", "username_key"), ("accounts_user_handle_key", "user_handle")]),
        TenantKeys(table: "passkeys", primaryKey: ["credential_id"], references: [("account_id", "accounts")]),
        TenantKeys(table: "challenges", primaryKey: ["challenge_hash"], references: [("account_id", "accounts")]),
        TenantKeys(table: "sessions", primaryKey: ["token_hash"], references: [("account_id", "accounts")]),
        TenantKeys(table: "audit_events", primaryKey: nil),
        TenantKeys(table: "rate_limits", primaryKey: ["key", "window_start"]),
        TenantKeys(table: "recovery_codes", primaryKey: ["account_id", "code_hash"], references: [("account_id", "accounts")]),
        TenantKeys(table: "recovery_tokens", primaryKey: ["token_hash"], references: [("account_id", "accounts")]),
        TenantKeys(table: "signing_keys", primaryKey: ["kid"]),
        TenantKeys(table: "api_keys", primaryKey: ["id"], uniques: [("api_keys_key_hash_key", "key_hash")]),
        TenantKeys(table: "registration_tokens", primaryKey: ["token_hash"], references: [("account_id", "accounts")]),
        TenantKeys(table: "webhook_endpoints", primaryKey: ["id"]),
        TenantKeys(table: "webhook_deliveries", primaryKey: nil, references: [("endpoint_id", "webhook_endpoints")]),
        TenantKeys(table: "oauth_clients", primaryKey: ["id"]),
        TenantKeys(table: "oauth_requests", primaryKey: ["id_hash"], references: [("client_id", "oauth_clients")]),
        TenantKeys(
            table: "oauth_codes", primaryKey: ["code_hash"], references: [("client_id", "oauth_clients"), ("account_id", "accounts")]),
        TenantKeys(
            table: "oauth_refresh_tokens", primaryKey: ["token_hash"],
            references: [("client_id", "oauth_clients"), ("account_id", "accounts")]),
        TenantKeys(
            table: "oauth_consents", primaryKey: ["account_id", "client_id"],
            references: [("account_id", "accounts"), ("client_id", "oauth_clients")]),
        TenantKeys(table: "admin_roles", primaryKey: ["account_id"], references: [("account_id", "accounts")]),
        TenantKeys(table: "admin_bootstrap", primaryKey: ["token_hash"]),
        TenantKeys(table: "admin_sessions", primaryKey: ["token_hash"], references: [("account_id", "accounts")]),
        TenantKeys(table: "daily_metrics", primaryKey: ["day", "metric"]),
        TenantKeys(
            table: "email_tokens", primaryKey: ["id"], uniques: [("email_tokens_link_hash_key", "link_hash")],
            references: [("account_id", "accounts")]),
        TenantKeys(table: "mail_outbox", primaryKey: nil),
    ]

    /// The tables tenants own (the same as SQLite's).
    static let tenantTables: [String] = tenantKeys.map(\.table)

    static let migration16 = SQLiteSchema.Migration(version: 16, statements: tenantStatements)

    /// Migration 17: row-level security, the second line behind every statement's own
    /// `tenant_id = …`. Each tenant table shows and takes only the rows of the tenant its
    /// connection names (`passkeyd.tenant`, set by the store before its statements, see
    /// `PostgresEngine.onConnection`), or every row for upkeep (`*`). A connection that names
    /// none reads nothing and writes nothing. FORCE makes the policies hold for the tables'
    /// owner too (passkeyd's own role); only a superuser or a BYPASSRLS role is above them.
    static let migration17 = SQLiteSchema.Migration(
        version: 17,
        statements: tenantTables.flatMap { table in
            [
                "ALTER TABLE \(table) ENABLE ROW LEVEL SECURITY",
                "ALTER TABLE \(table) FORCE ROW LEVEL SECURITY",
                """
                CREATE POLICY \(table)_tenant ON \(table)
                USING (current_setting('passkeyd.tenant', true) IN (tenant_id, '*'))
                WITH CHECK (current_setting('passkeyd.tenant', true) IN (tenant_id, '*'))
                """,
            ]
        })

    /// Migration 18: a tenant may keep its rows in a database of its own (`passkeyd tenant add
    /// --database`); the registry names it. The same statement on SQLite.
    static let migration18 = SQLiteSchema.Migration(version: 18, statements: ["ALTER TABLE tenants ADD COLUMN database_url TEXT"])

    private static var tenantStatements: [String] {
        var statements: [String] = []
        for keys in tenantKeys {
            statements.append("ALTER TABLE \(keys.table) ADD COLUMN tenant_id TEXT COLLATE \"C\" NOT NULL DEFAULT 'default'")
            statements.append("ALTER TABLE \(keys.table) ALTER COLUMN tenant_id DROP DEFAULT")
        }
        // Foreign keys go first: a primary key they lean on cannot be dropped under them.
        for keys in tenantKeys {
            for reference in keys.references {
                statements.append("ALTER TABLE \(keys.table) DROP CONSTRAINT \(keys.table)_\(reference.column)_fkey")
            }
        }
        for keys in tenantKeys {
            if let primaryKey = keys.primaryKey {
                statements.append(
                    "ALTER TABLE \(keys.table) DROP CONSTRAINT \(keys.table)_pkey, ADD PRIMARY KEY (tenant_id, \(primaryKey.joined(separator: ", ")))"
                )
            }
            for unique in keys.uniques {
                statements.append(
                    "ALTER TABLE \(keys.table) DROP CONSTRAINT \(unique.old), ADD CONSTRAINT \(keys.table)_tenant_\(unique.column) UNIQUE (tenant_id, \(unique.column))"
                )
            }
        }
        for keys in tenantKeys {
            for reference in keys.references {
                statements.append(
                    """
                    ALTER TABLE \(keys.table) ADD CONSTRAINT \(keys.table)_\(reference.column)_fkey FOREIGN KEY (tenant_id, \(reference.column))
                    REFERENCES \(reference.parent) (tenant_id, id) ON DELETE CASCADE
                    """)
            }
        }
        return statements + tenantIndexes + tenantsTableStatements + [tenantOutboxTrigger, tenantPassHeadTrigger]
    }

    /// Indexes whose leading column is not a random id now start with the tenant.
    private static let tenantIndexes = [
        "DROP INDEX accounts_external_id",
        "CREATE UNIQUE INDEX accounts_external_id ON accounts(tenant_id, external_id) WHERE external_id IS NOT NULL",
        "DROP INDEX accounts_display_name_key",
        "CREATE INDEX accounts_display_name_key ON accounts(tenant_id, display_name_key, id)",
        "DROP INDEX accounts_external_id_key",
        "CREATE INDEX accounts_external_id_key ON accounts(tenant_id, external_id_key, id) WHERE external_id_key IS NOT NULL",
        "DROP INDEX accounts_verified_email",
        "CREATE UNIQUE INDEX accounts_verified_email ON accounts(tenant_id, email_key) WHERE email_verified_at IS NOT NULL",
        "DROP INDEX accounts_email",
        "CREATE INDEX accounts_email ON accounts(tenant_id, email_key) WHERE email_key IS NOT NULL AND email_verified_at IS NULL",
        "DROP INDEX passkeys_aaguid",
        "CREATE INDEX passkeys_aaguid ON passkeys(tenant_id, aaguid)",
        "CREATE INDEX audit_tenant ON audit_events(tenant_id, id)",
        "DROP INDEX audit_time",
        "CREATE INDEX audit_time ON audit_events(tenant_id, time, metric)",
        "DROP INDEX audit_kind",
        "CREATE INDEX audit_kind ON audit_events(tenant_id, kind, id)",
        "DROP INDEX audit_address",
        "CREATE INDEX audit_address ON audit_events(tenant_id, ip_address, id)",
    ]

    /// The tenants table (SQLiteSchema+Tenants.swift says what it holds).
    private static let tenantsTableStatements = [
        """
        CREATE TABLE tenants (
            id TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            settings TEXT NOT NULL,
            created_at BIGINT NOT NULL,
            updated_at BIGINT NOT NULL,
            version BIGINT NOT NULL
        )
        """,
        """
        CREATE TABLE tenant_hosts (
            host TEXT COLLATE "C" NOT NULL PRIMARY KEY,
            tenant_id TEXT COLLATE "C" NOT NULL REFERENCES tenants(id) ON DELETE CASCADE
        )
        """,
        "CREATE INDEX tenant_hosts_tenant ON tenant_hosts(tenant_id)",
    ]

    /// Migration 14's head hand-over with the tenant: the next head is its own tenant's delivery.
    private static let tenantPassHeadTrigger = """
        CREATE OR REPLACE FUNCTION webhook_deliveries_pass_head() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            NEW.head := FALSE;
            IF NEW.account_id IS NULL THEN
                UPDATE webhook_deliveries SET head = TRUE
                WHERE tenant_id = NEW.tenant_id AND endpoint_id = NEW.endpoint_id AND NOT head AND event_id = (
                    SELECT MIN(event_id) FROM webhook_deliveries
                    WHERE tenant_id = NEW.tenant_id AND endpoint_id = NEW.endpoint_id AND account_id IS NULL
                    AND delivered_at IS NULL AND event_id <> NEW.event_id);
            ELSE
                UPDATE webhook_deliveries SET head = TRUE
                WHERE tenant_id = NEW.tenant_id AND endpoint_id = NEW.endpoint_id AND NOT head AND event_id = (
                    SELECT MIN(event_id) FROM webhook_deliveries
                    WHERE tenant_id = NEW.tenant_id AND endpoint_id = NEW.endpoint_id AND account_id = NEW.account_id
                    AND delivered_at IS NULL AND event_id <> NEW.event_id);
            END IF;
            RETURN NEW;
        END
        $$
        """

    /// Migration 14's outbox trigger with the tenant: an event fans out to its own tenant's
    /// endpoints only, and its deliveries carry the tenant.
    private static let tenantOutboxTrigger = """
        CREATE OR REPLACE FUNCTION audit_events_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
            endpoint UUID;
        BEGIN
            FOR endpoint IN
                SELECT e.id FROM webhook_endpoints e
                WHERE e.tenant_id = NEW.tenant_id AND NOT e.disabled
                  AND ((e.events = '*' AND NEW.kind <> 'api_key_used') OR position(',' || NEW.kind || ',' IN ',' || e.events || ',') > 0)
                ORDER BY e.id
            LOOP
                IF NEW.account_id IS NULL THEN
                    PERFORM 1 FROM webhook_deliveries
                    WHERE tenant_id = NEW.tenant_id AND endpoint_id = endpoint AND account_id IS NULL AND delivered_at IS NULL
                    ORDER BY event_id LIMIT 1 FOR SHARE;
                ELSE
                    PERFORM 1 FROM webhook_deliveries
                    WHERE tenant_id = NEW.tenant_id AND endpoint_id = endpoint AND account_id = NEW.account_id AND delivered_at IS NULL
                    ORDER BY event_id LIMIT 1 FOR SHARE;
                END IF;
                INSERT INTO webhook_deliveries (tenant_id, event_id, endpoint_id, account_id, next_attempt_at, head)
                VALUES (NEW.tenant_id, NEW.id, endpoint, NEW.account_id, NEW.time, NOT FOUND);
            END LOOP;
            RETURN NEW;
        END
        $$
        """
}
