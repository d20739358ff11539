import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import PasskeyCore
import PasskeyRuntime

/// HTTP/1.1 connections whose request handling runs on the connection's own event loop.
///
/// Hummingbird runs each connection's handler as a task on Swift's global executor: every
/// request read on an event loop wakes a thread of the cooperative pool, and every answer hops
/// back to the event loop to be written, two thread wake-ups per request (`futex`, `epoll` and
/// scheduler time were ~10% of the server's CPU under load). With the connection's event loop
/// as the handler task's executor preference (SE-0417), bytes read resume the handler on the
/// same thread and its answer is written there too. Nothing else changes: unstructured tasks
/// (webhooks, sweeps) keep the global executor, and password hashing keeps its own bounded pool. Both stores
/// answer on this thread: SQLite runs statements on the calling thread, and PostgreSQL uses the
/// pool of the loop it is called on (`PostgresEngine`).
struct EventLoopHTTP1Channel: ServerChildChannel {
    typealias Value = HTTP1Channel.Value
    let http1: HTTP1Channel

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        http1.setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await withTaskExecutorPreference(EventLoopTaskExecutor.of(value.channel.eventLoop)) {
            await http1.handle(value: value, logger: logger)
        }
    }
}
