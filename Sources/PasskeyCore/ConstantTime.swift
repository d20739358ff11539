/// Byte comparison whose time depends only on the lengths: every byte is read, the
/// differences are ORed together and looked at once at the end, so how long it took says
/// nothing of how many leading bytes matched (client secrets' digests, and the like).
package enum ConstantTime {
    @inline(never)
    package static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices {
            difference |= lhs[index] ^ rhs[index]
        }
        return difference == 0
    }
}
