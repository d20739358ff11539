import ArgumentParser
import Foundation

struct Inspect: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Decode a registration or authentication response (JSON), or an attestation object, and print it readably.")

    @Argument(help: "A file, or - for standard input.")
    var input: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

    func run() throws {
        let inspection = Inspection(try readInput(input))
        if json {
            try printJSON(inspection)
        } else {
            print(inspection.text)
        }
        if inspection.errors.count > 0 && inspection.authenticatorData == nil && inspection.clientData == nil {
            throw ExitCode(1)
        }
    }
}
