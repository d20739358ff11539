import Foundation

/// What one `write(2)` did: a count of bytes written (possibly fewer than asked), or the `errno`
/// of a failure.
package enum WriteOutcome: Equatable, Sendable {
    case wrote(Int)
    case failed(Int32)
}

/// Writes every byte of a buffer, as `write(2)` alone does not promise: a signal can interrupt
/// the call before anything is written (`EINTR`), and a pipe or terminal can take fewer bytes
/// than asked (a short write). The common case is one call.
package enum FullWrite {
    /// Writes `bytes` through `write` (one `write(2)`-shaped call per attempt): retries after
    /// `EINTR`, goes on with the rest after a short write, and stops at any other error or a call
    /// that makes no progress. Returns nil when every byte was written, else the `errno` it
    /// stopped at (`EIO` for a call that wrote nothing and reported no error).
    @discardableResult
    package static func all(_ bytes: UnsafeRawBufferPointer, with write: (UnsafeRawBufferPointer) -> WriteOutcome) -> Int32? {
        var offset = 0
        while offset < bytes.count {
            switch write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .wrote(let count) where count > 0:
                offset += min(count, bytes.count - offset)
            case .wrote:
                return EIO
            case .failed(EINTR):
                continue
            case .failed(let error):
                return error
            }
        }
        return nil
    }

    /// Writes `bytes` to the file descriptor `descriptor` with `write(2)`, as ``all(_:with:)``.
    @discardableResult
    package static func all(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Int32? {
        all(bytes) { rest in
            let written = Foundation.write(descriptor, rest.baseAddress, rest.count)
            return written < 0 ? .failed(errno) : .wrote(written)
        }
    }
}
