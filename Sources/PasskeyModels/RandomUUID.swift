import Foundation

extension UUID {
    /// A random (version 4, RFC 9562 §5.4) UUID from the system's generator: two `getrandom`
    /// calls of 8 bytes. Foundation's `UUID()` on Linux opens, reads and closes `/dev/urandom`
    /// each time, three system calls and a file descriptor per id (one per sign-in showed in
    /// `strace`).
    public static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { buffer in
            buffer.storeBytes(of: generator.next() as UInt64, toByteOffset: 0, as: UInt64.self)
            buffer.storeBytes(of: generator.next() as UInt64, toByteOffset: 8, as: UInt64.self)
            buffer[6] = (buffer[6] & 0x0F) | 0x40  // version 4
            buffer[8] = (buffer[8] & 0x3F) | 0x80  // variant 10xx
        }
        return UUID(uuid: bytes)
    }
}
