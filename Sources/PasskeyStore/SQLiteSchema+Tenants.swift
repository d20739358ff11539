/// Migration 16 of the SQLite schema (issue 44, tenants): every row a tenant owns carries its
/// tenant, every key and unique key starts with it, and every foreign key is composite
/// (tenant, account), (tenant, client), (tenant, endpoint), so a row can only point at a row of
/// its own tenant. SQLite changes neither keys nor foreign keys in place: each table is rebuilt
/// (created as `<name>_v16`, filled from the old one with every row in the `default` tenant,
/// the old one dropped, the new one renamed). Children are dropped before their parents and the
/// new tables reference the `_v16` parents, so dropping an old parent cascades into nothing; the
/// renames carry the references over to the final names. `tenant_id` has no default: a write that
/// forgets its tenant fails instead of landing in another.
///
/// The previous release cannot run on this schema (its inserts name no tenant): this migration
/// is one of the "stop the previous release first" kind (docs/deploy.md).
extension SQLiteSchema {
    /// A table as migration 16 rebuilds it: its new definition (referencing `<parent>_v16`) and
    /// the columns copied from the old one.
    private struct Rebuild {
        let name: String
        let definition: String
        let columns: [String]
        /// Indexes, created after the renames.
        let indexes: [String]
    }

    private static let tenantRebuilds: [Rebuild] = [
        Rebuild(
            name: "accounts",
            definition: """
                tenant_id TEXT NOT NULL,
                id TEXT NOT NULL,
                username TEXT NOT NULL,
                username_key TEXT NOT NULL,
                display_name TEXT NOT NULL,
                user_handle BLOB NOT NULL,
                created_at INTEGER NOT NULL,
                disabled INTEGER NOT NULL DEFAULT 0,
                last_sign_in_at INTEGER,
                password_hash TEXT,
                external_id TEXT,
                display_name_key TEXT,
                external_id_key TEXT,
                email TEXT,
                email_key TEXT,
                email_verified_at INTEGER,
                email_recovery_closed INTEGER NOT NULL DEFAULT 0,
                email_language TEXT,
                PRIMARY KEY (tenant_id, id),
                UNIQUE (tenant_id, username_key),
                UNIQUE (tenant_id, user_handle)
                """,
            columns: [
                "id", "username", "username_key", "display_name", "user_handle", "created_at", "disabled", "last_sign_in_at",
                "password_hash", "external_id", "display_name_key", "external_id_key", "email", "email_key", "email_verified_at",
                "email_recovery_closed", "email_language",
            ],
            indexes: [
                "CREATE UNIQUE INDEX accounts_external_id ON accounts(tenant_id, external_id) WHERE external_id IS NOT NULL",
                "CREATE INDEX accounts_display_name_key ON accounts(tenant_id, display_name_key, id)",
                "CREATE INDEX accounts_external_id_key ON accounts(tenant_id, external_id_key, id) WHERE external_id_key IS NOT NULL",
                "CREATE UNIQUE INDEX accounts_verified_email ON accounts(tenant_id, email_key) WHERE email_verified_at IS NOT NULL",
                "CREATE INDEX accounts_email ON accounts(tenant_id, email_key) WHERE email_key IS NOT NULL AND email_verified_at IS NULL",
            ]),
        Rebuild(
            name: "passkeys",
            definition: """
                tenant_id TEXT NOT NULL,
                credential_id BLOB NOT NULL,
                account_id TEXT NOT NULL,
                public_key BLOB NOT NULL,
                sign_count INTEGER NOT NULL,
                aaguid TEXT NOT NULL,
                transports TEXT NOT NULL,
                backup_eligible INTEGER NOT NULL,
                backed_up INTEGER NOT NULL,
                user_verified INTEGER NOT NULL,
                attestation_format TEXT NOT NULL,
                attestation_trusted INTEGER NOT NULL,
                name TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                last_used_at INTEGER,
                counter_anomalies INTEGER NOT NULL DEFAULT 0,
                discoverable INTEGER,
                prf_enabled INTEGER,
                cred_protect INTEGER,
                large_blob INTEGER,
                min_pin_length INTEGER,
                prf_salt BLOB,
                PRIMARY KEY (tenant_id, credential_id),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: [
                "credential_id", "account_id", "public_key", "sign_count", "aaguid", "transports", "backup_eligible", "backed_up",
                "user_verified", "attestation_format", "attestation_trusted", "name", "created_at", "last_used_at", "counter_anomalies",
                "discoverable", "prf_enabled", "cred_protect", "large_blob", "min_pin_length", "prf_salt",
            ],
            indexes: [
                "CREATE INDEX passkeys_account ON passkeys(account_id)",
                "CREATE INDEX passkeys_aaguid ON passkeys(tenant_id, aaguid)",
            ]),
        Rebuild(
            name: "challenges",
            definition: """
                tenant_id TEXT NOT NULL,
                challenge_hash BLOB NOT NULL,
                challenge BLOB NOT NULL,
                ceremony TEXT NOT NULL,
                account_id TEXT,
                pending_username TEXT,
                pending_display_name TEXT,
                pending_user_handle BLOB,
                unknown_user INTEGER NOT NULL DEFAULT 0,
                api TEXT NOT NULL,
                user_verification TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                pending_account_id TEXT,
                conditional INTEGER NOT NULL DEFAULT 0,
                state BLOB,
                pending_email TEXT,
                PRIMARY KEY (tenant_id, challenge_hash),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """ + withoutRowID,
            columns: [
                "challenge_hash", "challenge", "ceremony", "account_id", "pending_username", "pending_display_name",
                "pending_user_handle", "unknown_user", "api", "user_verification", "created_at", "expires_at", "pending_account_id",
                "conditional", "state", "pending_email",
            ],
            indexes: ["CREATE INDEX challenges_expiry ON challenges(expires_at)"]),
        Rebuild(
            name: "sessions",
            definition: """
                tenant_id TEXT NOT NULL,
                token_hash BLOB NOT NULL,
                account_id TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                user_agent TEXT,
                ip_address TEXT,
                method TEXT NOT NULL DEFAULT 'unknown',
                credential_id BLOB,
                last_seen_at INTEGER,
                PRIMARY KEY (tenant_id, token_hash),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """ + withoutRowID,
            columns: [
                "token_hash", "account_id", "created_at", "expires_at", "user_agent", "ip_address", "method", "credential_id",
                "last_seen_at",
            ],
            indexes: [
                "CREATE INDEX sessions_account ON sessions(account_id)",
                "CREATE INDEX sessions_expiry ON sessions(expires_at)",
            ]),
        Rebuild(
            name: "audit_events",
            definition: """
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                tenant_id TEXT NOT NULL,
                time INTEGER NOT NULL,
                kind TEXT NOT NULL,
                account_id TEXT,
                credential_id BLOB,
                ip_address TEXT,
                user_agent TEXT,
                detail TEXT,
                metric TEXT,
                trace_parent TEXT
                """,
            columns: ["id", "time", "kind", "account_id", "credential_id", "ip_address", "user_agent", "detail", "metric", "trace_parent"],
            indexes: [
                "CREATE INDEX audit_tenant ON audit_events(tenant_id, id)",
                "CREATE INDEX audit_account ON audit_events(account_id, id)",
                "CREATE INDEX audit_time ON audit_events(tenant_id, time, metric)",
                "CREATE INDEX audit_kind ON audit_events(tenant_id, kind, id)",
                "CREATE INDEX audit_address ON audit_events(tenant_id, ip_address, id)",
            ]),
        Rebuild(
            name: "rate_limits",
            definition: """
                tenant_id TEXT NOT NULL,
                key TEXT NOT NULL,
                window_start INTEGER NOT NULL,
                hits INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                PRIMARY KEY (tenant_id, key, window_start)
                """,
            columns: ["key", "window_start", "hits", "expires_at"],
            indexes: ["CREATE INDEX rate_limits_expiry ON rate_limits(expires_at)"]),
        Rebuild(
            name: "recovery_codes",
            definition: """
                tenant_id TEXT NOT NULL,
                account_id TEXT NOT NULL,
                code_hash BLOB NOT NULL,
                created_at INTEGER NOT NULL,
                used_at INTEGER,
                PRIMARY KEY (tenant_id, account_id, code_hash),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: ["account_id", "code_hash", "created_at", "used_at"],
            indexes: []),
        Rebuild(
            name: "recovery_tokens",
            definition: """
                tenant_id TEXT NOT NULL,
                token_hash BLOB NOT NULL,
                account_id TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                PRIMARY KEY (tenant_id, token_hash),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: ["token_hash", "account_id", "created_at", "expires_at"],
            indexes: []),
        Rebuild(
            name: "signing_keys",
            definition: """
                tenant_id TEXT NOT NULL,
                kid TEXT NOT NULL,
                algorithm TEXT NOT NULL,
                private_key BLOB NOT NULL,
                created_at INTEGER NOT NULL,
                activates_at INTEGER NOT NULL,
                retires_at INTEGER,
                PRIMARY KEY (tenant_id, kid)
                """,
            columns: ["kid", "algorithm", "private_key", "created_at", "activates_at", "retires_at"],
            indexes: []),
        Rebuild(
            name: "api_keys",
            definition: """
                tenant_id TEXT NOT NULL,
                id TEXT NOT NULL,
                name TEXT NOT NULL,
                key_hash BLOB NOT NULL,
                scopes TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                last_used_at INTEGER,
                revoked_at INTEGER,
                PRIMARY KEY (tenant_id, id),
                UNIQUE (tenant_id, key_hash)
                """,
            columns: ["id", "name", "key_hash", "scopes", "created_at", "last_used_at", "revoked_at"],
            indexes: []),
        Rebuild(
            name: "registration_tokens",
            definition: """
                tenant_id TEXT NOT NULL,
                token_hash BLOB NOT NULL,
                account_id TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                PRIMARY KEY (tenant_id, token_hash),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: ["token_hash", "account_id", "created_at", "expires_at"],
            indexes: []),
        Rebuild(
            name: "webhook_endpoints",
            definition: """
                tenant_id TEXT NOT NULL,
                id TEXT NOT NULL,
                url TEXT NOT NULL,
                secret BLOB NOT NULL,
                events TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                disabled INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (tenant_id, id)
                """,
            columns: ["id", "url", "secret", "events", "created_at", "disabled"],
            indexes: []),
        Rebuild(
            name: "webhook_deliveries",
            definition: """
                tenant_id TEXT NOT NULL,
                event_id INTEGER NOT NULL REFERENCES audit_events_v16(id) ON DELETE CASCADE,
                endpoint_id TEXT NOT NULL,
                account_id TEXT,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at INTEGER NOT NULL,
                delivered_at INTEGER,
                last_status INTEGER,
                last_error TEXT,
                lease_until INTEGER,
                lease_token TEXT,
                latency_ms INTEGER,
                head INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (event_id, endpoint_id),
                FOREIGN KEY (tenant_id, endpoint_id) REFERENCES webhook_endpoints_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: [
                "event_id", "endpoint_id", "account_id", "attempts", "next_attempt_at", "delivered_at", "last_status", "last_error",
                "lease_until", "lease_token", "latency_ms", "head",
            ],
            indexes: [
                "CREATE INDEX webhook_deliveries_due ON webhook_deliveries(delivered_at, next_attempt_at)",
                "CREATE INDEX webhook_deliveries_order ON webhook_deliveries(endpoint_id, account_id, event_id)",
                "CREATE INDEX webhook_deliveries_heads ON webhook_deliveries(endpoint_id, next_attempt_at) WHERE head AND delivered_at IS NULL",
                """
                CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(endpoint_id, account_id, event_id)
                WHERE delivered_at IS NULL
                """,
            ]),
        Rebuild(
            name: "oauth_clients",
            definition: """
                tenant_id TEXT NOT NULL,
                id TEXT NOT NULL,
                name TEXT NOT NULL,
                secret_hash BLOB,
                redirect_uris TEXT NOT NULL,
                post_logout_uris TEXT NOT NULL,
                first_party INTEGER NOT NULL DEFAULT 0,
                allow_sign_up INTEGER NOT NULL DEFAULT 0,
                id_token_algorithm TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                PRIMARY KEY (tenant_id, id)
                """,
            columns: [
                "id", "name", "secret_hash", "redirect_uris", "post_logout_uris", "first_party", "allow_sign_up", "id_token_algorithm",
                "created_at",
            ],
            indexes: []),
        Rebuild(
            name: "oauth_requests",
            definition: """
                tenant_id TEXT NOT NULL,
                id_hash BLOB NOT NULL,
                client_id TEXT NOT NULL,
                request BLOB NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                PRIMARY KEY (tenant_id, id_hash),
                FOREIGN KEY (tenant_id, client_id) REFERENCES oauth_clients_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: ["id_hash", "client_id", "request", "created_at", "expires_at"],
            indexes: []),
        Rebuild(
            name: "oauth_codes",
            definition: """
                tenant_id TEXT NOT NULL,
                code_hash BLOB NOT NULL,
                client_id TEXT NOT NULL,
                account_id TEXT NOT NULL,
                grant_data BLOB NOT NULL,
                family TEXT,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                used_at INTEGER,
                PRIMARY KEY (tenant_id, code_hash),
                FOREIGN KEY (tenant_id, client_id) REFERENCES oauth_clients_v16(tenant_id, id) ON DELETE CASCADE,
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: ["code_hash", "client_id", "account_id", "grant_data", "family", "created_at", "expires_at", "used_at"],
            indexes: []),
        Rebuild(
            name: "oauth_refresh_tokens",
            definition: """
                tenant_id TEXT NOT NULL,
                token_hash BLOB NOT NULL,
                family TEXT NOT NULL,
                client_id TEXT NOT NULL,
                account_id TEXT NOT NULL,
                grant_data BLOB NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                used_at INTEGER,
                revoked_at INTEGER,
                PRIMARY KEY (tenant_id, token_hash),
                FOREIGN KEY (tenant_id, client_id) REFERENCES oauth_clients_v16(tenant_id, id) ON DELETE CASCADE,
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: [
                "token_hash", "family", "client_id", "account_id", "grant_data", "created_at", "expires_at", "used_at", "revoked_at",
            ],
            indexes: ["CREATE INDEX oauth_refresh_family ON oauth_refresh_tokens(family)"]),
        Rebuild(
            name: "oauth_consents",
            definition: """
                tenant_id TEXT NOT NULL,
                account_id TEXT NOT NULL,
                client_id TEXT NOT NULL,
                scope TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                PRIMARY KEY (tenant_id, account_id, client_id),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE,
                FOREIGN KEY (tenant_id, client_id) REFERENCES oauth_clients_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: ["account_id", "client_id", "scope", "created_at"],
            indexes: []),
        Rebuild(
            name: "admin_roles",
            definition: """
                tenant_id TEXT NOT NULL,
                account_id TEXT NOT NULL,
                role TEXT NOT NULL,
                granted_at INTEGER NOT NULL,
                granted_by TEXT NOT NULL,
                PRIMARY KEY (tenant_id, account_id),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: ["account_id", "role", "granted_at", "granted_by"],
            indexes: []),
        Rebuild(
            name: "admin_bootstrap",
            definition: """
                tenant_id TEXT NOT NULL,
                token_hash BLOB NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                used_at INTEGER,
                used_by TEXT,
                PRIMARY KEY (tenant_id, token_hash)
                """ + withoutRowID,
            columns: ["token_hash", "created_at", "expires_at", "used_at", "used_by"],
            indexes: []),
        Rebuild(
            name: "admin_sessions",
            definition: """
                tenant_id TEXT NOT NULL,
                token_hash BLOB NOT NULL,
                account_id TEXT NOT NULL,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                idle_expires_at INTEGER NOT NULL,
                verified_at INTEGER NOT NULL,
                csrf_hash BLOB NOT NULL,
                ip_address TEXT,
                user_agent TEXT,
                PRIMARY KEY (tenant_id, token_hash),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """ + withoutRowID,
            columns: [
                "token_hash", "account_id", "created_at", "expires_at", "idle_expires_at", "verified_at", "csrf_hash", "ip_address",
                "user_agent",
            ],
            indexes: ["CREATE INDEX admin_sessions_account ON admin_sessions(account_id)"]),
        Rebuild(
            name: "daily_metrics",
            definition: """
                tenant_id TEXT NOT NULL,
                day INTEGER NOT NULL,
                metric TEXT NOT NULL,
                n INTEGER NOT NULL,
                PRIMARY KEY (tenant_id, day, metric)
                """ + withoutRowID,
            columns: ["day", "metric", "n"],
            indexes: []),
        Rebuild(
            name: "email_tokens",
            definition: """
                tenant_id TEXT NOT NULL,
                id TEXT NOT NULL,
                account_id TEXT NOT NULL,
                purpose TEXT NOT NULL,
                address TEXT NOT NULL,
                link_hash BLOB NOT NULL,
                code_hash BLOB,
                tries INTEGER NOT NULL DEFAULT 0,
                detail TEXT,
                created_at INTEGER NOT NULL,
                expires_at INTEGER NOT NULL,
                used_at INTEGER,
                PRIMARY KEY (tenant_id, id),
                UNIQUE (tenant_id, link_hash),
                FOREIGN KEY (tenant_id, account_id) REFERENCES accounts_v16(tenant_id, id) ON DELETE CASCADE
                """,
            columns: [
                "id", "account_id", "purpose", "address", "link_hash", "code_hash", "tries", "detail", "created_at", "expires_at",
                "used_at",
            ],
            indexes: [
                "CREATE INDEX email_tokens_account ON email_tokens(account_id, purpose)",
                "CREATE INDEX email_tokens_expiry ON email_tokens(expires_at)",
            ]),
        Rebuild(
            name: "mail_outbox",
            definition: """
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                tenant_id TEXT NOT NULL,
                account_id TEXT,
                kind TEXT NOT NULL,
                recipient TEXT NOT NULL,
                sender TEXT NOT NULL,
                message BLOB,
                attempts INTEGER NOT NULL DEFAULT 0,
                created_at INTEGER NOT NULL,
                next_attempt_at INTEGER NOT NULL,
                lease_until INTEGER,
                lease_token BLOB,
                sent_at INTEGER,
                failed_at INTEGER,
                last_error TEXT
                """,
            columns: [
                "id", "account_id", "kind", "recipient", "sender", "message", "attempts", "created_at", "next_attempt_at", "lease_until",
                "lease_token", "sent_at", "failed_at", "last_error",
            ],
            indexes: [
                "CREATE INDEX mail_outbox_due ON mail_outbox(next_attempt_at) WHERE sent_at IS NULL AND failed_at IS NULL",
                "CREATE INDEX mail_outbox_done ON mail_outbox(sent_at, failed_at)",
            ]),
    ]

    private static let withoutRowID = "\n) WITHOUT ROWID"

    /// The tables tenants own, in the order migration 16 creates them (parents first).
    static let tenantTables: [String] = tenantRebuilds.map(\.name)

    static let migration16 = Migration(
        version: 16,
        statements: tenantsTableStatements + tenantRebuildStatements + tenantTriggers)

    /// The tenants the server serves beside its default one (managed by `passkeyd tenant`): a
    /// tenant's name is its id, its settings a JSON object read with the server's own setting
    /// names; `version` counts every change, so instances see one within their next poll.
    static let tenantsTableStatements = [
        """
        CREATE TABLE tenants (
            id TEXT NOT NULL PRIMARY KEY,
            settings TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            version INTEGER NOT NULL
        )
        """,
        "CREATE TABLE tenant_hosts (host TEXT NOT NULL PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id) ON DELETE CASCADE)",
        "CREATE INDEX tenant_hosts_tenant ON tenant_hosts(tenant_id)",
    ]

    private static var tenantRebuildStatements: [String] {
        var statements = ["DROP TRIGGER audit_events_outbox", "DROP TRIGGER webhook_deliveries_pass_head"]
        for table in tenantRebuilds {
            let definition = table.definition.hasSuffix(withoutRowID) ? table.definition : table.definition + "\n)"
            statements.append("CREATE TABLE \(table.name)_v16 (\n\(definition)")
            let columns = table.columns.joined(separator: ", ")
            statements.append("INSERT INTO \(table.name)_v16 (tenant_id, \(columns)) SELECT 'default', \(columns) FROM \(table.name)")
        }
        // Children first: by the time a parent goes, nothing references it any more.
        for table in tenantRebuilds.reversed() { statements.append("DROP TABLE \(table.name)") }
        for table in tenantRebuilds { statements.append("ALTER TABLE \(table.name)_v16 RENAME TO \(table.name)") }
        return statements + tenantRebuilds.flatMap(\.indexes)
    }

    /// The webhook outbox's triggers (migration 14) with the tenant: an event fans out to its own
    /// tenant's endpoints only.
    private static let tenantTriggers = [
        """
        CREATE TRIGGER audit_events_outbox AFTER INSERT ON audit_events
        BEGIN
            INSERT INTO webhook_deliveries (tenant_id, event_id, endpoint_id, account_id, next_attempt_at, head)
            SELECT NEW.tenant_id, NEW.id, e.id, NEW.account_id, NEW.time,
                   NOT EXISTS (SELECT 1 FROM webhook_deliveries p WHERE p.tenant_id = NEW.tenant_id AND p.endpoint_id = e.id
                               AND p.account_id IS NEW.account_id AND p.delivered_at IS NULL)
            FROM webhook_endpoints e
            WHERE e.tenant_id = NEW.tenant_id AND e.disabled = 0
              AND ((e.events = '*' AND NEW.kind <> 'api_key_used') OR instr(',' || e.events || ',', ',' || NEW.kind || ',') > 0);
        END
        """,
        """
        CREATE TRIGGER webhook_deliveries_pass_head AFTER UPDATE OF delivered_at ON webhook_deliveries
        WHEN OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL
        BEGIN
            UPDATE webhook_deliveries SET head = 0
            WHERE tenant_id = NEW.tenant_id AND event_id = NEW.event_id AND endpoint_id = NEW.endpoint_id AND head;
            UPDATE webhook_deliveries SET head = 1
            WHERE tenant_id = NEW.tenant_id AND endpoint_id = NEW.endpoint_id AND NOT head AND event_id = (
                SELECT MIN(event_id) FROM webhook_deliveries
                WHERE tenant_id = NEW.tenant_id AND endpoint_id = NEW.endpoint_id AND account_id IS NEW.account_id
                AND delivered_at IS NULL);
        END
        """,
    ]
}
