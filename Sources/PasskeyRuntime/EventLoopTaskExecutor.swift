import NIOCore
import Synchronization

/// A task executor that runs jobs on one NIO event loop (in order, on its thread): a task that
/// prefers it (SE-0417) stays on that loop's thread. The HTTP server runs each connection's
/// handler on its connection's loop this way, and the PostgreSQL store runs an operation on the
/// loop it was called from, where that loop's own database connections answer it.
public final class EventLoopTaskExecutor: TaskExecutor {
    public let eventLoop: any EventLoop

    private init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    /// The executor for `eventLoop`, one per loop (the cache holds the loop, so its identifier
    /// cannot be reused; past 256 loops, as a process making event loop groups over and over
    /// might, executors are made anew instead of kept).
    public static func of(_ eventLoop: any EventLoop) -> EventLoopTaskExecutor {
        executors.withLock { executors in
            if let executor = executors[ObjectIdentifier(eventLoop)] { return executor }
            let executor = EventLoopTaskExecutor(eventLoop)
            if executors.count < 256 { executors[ObjectIdentifier(eventLoop)] = executor }
            return executor
        }
    }

    private static let executors = Mutex<[ObjectIdentifier: EventLoopTaskExecutor]>([:])

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
