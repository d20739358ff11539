import Foundation
import PackagePlugin

/// Writes `BuildInfo.swift` (the version in `VERSION` and the commit the build was made from)
/// before every build of the target that uses it, so `passkeyd --version` names its commit in a
/// checkout, a release and an image alike; and the folder of static C archives passkeyd links
/// (`scripts/prebuild` does both, and rewrites the file only when its contents change).
@main
struct BuildInfo: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let package = context.package.directoryURL
        return [
            .prebuildCommand(
                displayName: "Version and commit for \(target.name)",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: [package.appending(path: "scripts/prebuild").path, package.path, output.path],
                // HOME: git reads the user's configuration (safe.directory for a checkout owned by
                // another user, as in CI containers).
                environment: ProcessInfo.processInfo.environment.filter { ["PASSKEYD_COMMIT", "PATH", "HOME"].contains($0.key) },
                outputFilesDirectory: output
            )
        ]
    }
}
