/// What a log line shows of the service: its relying party, never its configuration, which holds
/// the webhook secrets, the receivers' URLs (a `?token=` among them) and the metrics token.
/// ServiceLifecycle logs each service it starts and stops at `debug` as `"\(service)"`, and
/// ``MetadataRefresher`` holds the service: without this, that line printed the configuration
/// whole.
extension PasskeyService: CustomStringConvertible {
    public var description: String { "PasskeyService(rpID: \(configuration.rpID))" }
}
