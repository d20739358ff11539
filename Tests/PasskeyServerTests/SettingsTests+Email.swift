import Foundation
import PasskeyCore
import PasskeyMail
import PasskeyServer
import Testing

/// The mail settings (issue 43): one URL names the SMTP server; its password is never quoted.
extension SettingsTests {
    @Test func mailIsSetByOneURLAndASender() throws {
        let settings = try Self.load([
            "PASSKEYD_SMTP_URL": "smtps://mailer%40example.com:pa%24%24@smtp.example.com",
            "PASSKEYD_EMAIL_FROM": "Example Inc <no-reply@example.com>",
            "PASSKEYD_EMAIL_SIGNUP": "username", "PASSKEYD_EMAIL_UNDO_SECONDS": "7200",
        ])
        let email = settings.domain.email
        #expect(email.enabled && email.signUp == .username && email.undoSeconds == 7200)
        #expect(email.smtp?.security == .implicitTLS && email.smtp?.port == 465 && email.smtp?.username == "mailer@example.com")
        #expect(email.smtp?.password == "pa$$" && email.fromName == "Example Inc" && email.from?.description == "no-reply@example.com")
        #expect(!(try Self.load()).domain.email.enabled)
    }

    @Test(arguments: [
        (["PASSKEYD_SMTP_URL": "smtp://u:Secr3tPw@smtp.example.com"], "email.from"),
        (["PASSKEYD_SMTP_URL": "http://u:Secr3tPw@smtp.example.com", "PASSKEYD_EMAIL_FROM": "a@example.com"], "email.smtpURL"),
        (["PASSKEYD_SMTP_URL": "smtp://u@smtp.example.com", "PASSKEYD_EMAIL_FROM": "a@example.com"], "email.smtpURL"),
        (["PASSKEYD_SMTP_URL": "smtp://smtp.example.com", "PASSKEYD_EMAIL_FROM": "Eve\r\nBcc: x@y.z <a@example.com>"], "email.from"),
        (["PASSKEYD_SMTP_URL": "smtp://smtp.example.com", "PASSKEYD_EMAIL_FROM": "not an address"], "email.from"),
        (["PASSKEYD_SMTP_CA_FILE": "/nonexistent/ca.pem"], "email.smtpCAFile"),
        (["PASSKEYD_EMAIL_SIGNUP": "sometimes"], "email.signUp"),
    ])
    func badMailSettingsStopTheStartWithoutQuotingThePassword(environment: [String: String], setting: String) {
        let error = Self.error(environment)
        #expect(error?.setting.hasPrefix(setting) == true, "\(String(describing: error))")
        #expect(!"\(String(describing: error))".contains("Secr3tPw"))
    }
}
