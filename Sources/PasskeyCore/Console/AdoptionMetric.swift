import Foundation
import PasskeyStore

/// What an audit line counts for in the adoption picture (`audit_events.metric`): at most one
/// metric a line, chosen by the service when it writes the line, so the daily rollups are a
/// `GROUP BY` over the audit log and never a scan of the accounts.
///
/// The running totals (accounts with a passkey, password-only accounts, accounts with no way in)
/// are sums of the transitions below from the baselines migration 13 wrote. A transition is
/// judged from what the service read before the change: two first passkeys registered on one
/// account in the same instant could both count as its first (docs/admin.md).
public enum AdoptionMetric: String, Sendable, CaseIterable {
    /// An account created with its first passkey (sign-up).
    case signUpPasskey = "signup_passkey"
    /// The console's first administrator, made by the bootstrap link with its passkey: in the
    /// totals (the account exists), but not a sign-up nor a new passkey (the console's own).
    case adminBootstrap = "admin_bootstrap"
    /// The first passkey of an account that had neither a passkey nor a password.
    case firstPasskey = "passkey_first"
    /// Another passkey on an account that had one.
    case passkeyAdded = "passkey_added"
    /// The first passkey of a password-only account, by the road it came: the browser's
    /// conditional create after a password sign-in, the "add a passkey" button, or a recovery.
    case upgradeConditional = "upgrade_conditional"
    case upgradeButton = "upgrade_button"
    case upgradeRecovery = "upgrade_recovery"
    /// The account's last passkey went; it has nothing left / only its password.
    case lastPasskeyRemoved = "last_passkey_removed"
    case lastPasskeyRemovedPassword = "last_passkey_removed_password"
    /// A password turned off (the account keeps its passkeys).
    case passwordOff = "password_off"
    /// An account imported with its password.
    case importPassword = "import_password"
    /// An account created by the server API with no way in yet.
    case accountCreatedEmpty = "account_created_empty"
    case accountDeletedPasskey = "account_deleted_passkey"
    case accountDeletedPassword = "account_deleted_password"
    case accountDeletedEmpty = "account_deleted_empty"
    /// Sign-ins by method: a passkey from the browser's AutoFill (conditional mediation), a
    /// passkey from a button (a modal prompt, an app), a password, a recovery code or link, and
    /// an OpenID Connect authorization.
    case signInAutofill = "sign_in_autofill"
    case signInPasskey = "sign_in_passkey"
    case signInPassword = "sign_in_password"
    case signInRecovery = "sign_in_recovery"
    case signInOIDC = "sign_in_oidc"
    /// The counts when migration 13 ran (on the day before it).
    case baselineWithPasskey = "baseline_with_passkey"
    case baselinePasswordOnly = "baseline_password_only"
    case baselineEmpty = "baseline_empty"

    /// How the metric moves the three running totals (with a passkey, password-only, no way in).
    var transition: (withPasskey: Int, passwordOnly: Int, empty: Int) {
        switch self {
        case .signUpPasskey, .adminBootstrap: (1, 0, 0)
        case .firstPasskey: (1, 0, -1)
        case .upgradeConditional, .upgradeButton, .upgradeRecovery: (1, -1, 0)
        case .lastPasskeyRemoved: (-1, 0, 1)
        case .lastPasskeyRemovedPassword: (-1, 1, 0)
        case .importPassword: (0, 1, 0)
        case .accountCreatedEmpty: (0, 0, 1)
        case .accountDeletedPasskey: (-1, 0, 0)
        case .accountDeletedPassword: (0, -1, 0)
        case .accountDeletedEmpty: (0, 0, -1)
        case .baselineWithPasskey: (1, 0, 0)
        case .baselinePasswordOnly: (0, 1, 0)
        case .baselineEmpty: (0, 0, 1)
        case .passkeyAdded, .passwordOff, .signInAutofill, .signInPasskey, .signInPassword, .signInRecovery, .signInOIDC: (0, 0, 0)
        }
    }

    /// The metric of a sign-in by `method` (a session's method), nil for methods not charted.
    package static func signIn(method: String, autofill: Bool = false) -> AdoptionMetric? {
        switch method {
        case "passkey": autofill ? .signInAutofill : .signInPasskey
        case "password": .signInPassword
        case "recovery_code", "recovery_link", "email_recovery": .signInRecovery
        default: nil
        }
    }

    /// The metric of a new passkey on an account that had `existing` passkeys, `hasPassword`,
    /// and was signed in by `sessionMethod` (nil: no session, e.g. a registration token);
    /// `conditional` for the browser's conditional create.
    package static func newPasskey(existing: Int, hasPassword: Bool, conditional: Bool, sessionMethod: String?) -> AdoptionMetric {
        guard existing == 0 else { return .passkeyAdded }
        guard hasPassword else { return .firstPasskey }
        if conditional { return .upgradeConditional }
        if sessionMethod == "recovery_code" || sessionMethod == "recovery_link" || sessionMethod == "email_recovery" {
            return .upgradeRecovery
        }
        return .upgradeButton
    }

    /// The metric of a passkey removed from an account that had `existing` passkeys (nil when it
    /// was not the last).
    package static func removedPasskey(existing: Int, hasPassword: Bool) -> AdoptionMetric? {
        guard existing == 1 else { return nil }
        return hasPassword ? .lastPasskeyRemovedPassword : .lastPasskeyRemoved
    }

    /// The metric of deleting an account with `passkeys` passkeys and maybe a password.
    package static func deleted(passkeys: Int, hasPassword: Bool) -> AdoptionMetric {
        passkeys > 0 ? .accountDeletedPasskey : hasPassword ? .accountDeletedPassword : .accountDeletedEmpty
    }
}

extension AuditEvent {
    /// This line, counted for `metric` in the adoption picture.
    package func counted(_ metric: AdoptionMetric?) -> AuditEvent {
        var event = self
        event.metric = metric?.rawValue
        return event
    }
}

extension PasskeyService {
    /// Writes one audit line built by the caller (a failed write is logged, not thrown: the
    /// change it records is made).
    package func audit(_ event: AuditEvent) async {
        do {
            try await store.appendAudit(event)
        } catch {
            logger.error("audit write failed", metadata: ["kind": "\(event.kind)", "error": "\(error)"])
        }
    }
}
