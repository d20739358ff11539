#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// Random bytes from the operating system's secure generator, a whole buffer per system call.
///
/// Swift's `SystemRandomNumberGenerator` (and swift-crypto's `SymmetricKey(size:)`, built on
/// it) makes one `getrandom` call per 8 bytes: a 32-byte session token was four system calls
/// and a challenge about nine, 17 per sign-in in `strace`. On Linux this reads the kernel's
/// generator through one `/dev/urandom` descriptor opened once (the same generator as
/// `getrandom`, which Swift's Glibc module does not declare); on Apple platforms it is
/// `arc4random_buf`. If the device cannot be opened or read, it falls back to
/// `SystemRandomNumberGenerator`, never to anything weaker.
enum SystemRandom {
    static func bytes(_ count: Int) -> [UInt8] {
        guard count > 0 else { return [] }
        return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            fill(UnsafeMutableRawBufferPointer(buffer))
            initialized = count
        }
    }

    static func fill(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        #if canImport(Darwin)
            arc4random_buf(base, buffer.count)
        #else
            if let device = urandom, readAll(device, into: base, count: buffer.count) { return }
            var generator = SystemRandomNumberGenerator()
            for index in buffer.indices { buffer[index] = generator.next() }
        #endif
    }

    #if !canImport(Darwin)
        /// `/dev/urandom`, opened on first use and kept for the life of the process.
        private static let urandom: Int32? = {
            let descriptor = open("/dev/urandom", O_RDONLY | O_CLOEXEC)
            return descriptor >= 0 ? descriptor : nil
        }()

        /// Fills `count` bytes at `base` from `device` (short reads continue, interrupted reads
        /// retry).
        private static func readAll(_ device: Int32, into base: UnsafeMutableRawPointer, count: Int) -> Bool {
            var done = 0
            while done < count {
                let got = read(device, base + done, count - done)
                if got > 0 {
                    done += got
                } else if got < 0 && errno == EINTR {
                    continue
                } else {
                    return false
                }
            }
            return true
        }
    #endif
}
