// TestSupport: helpers shared by the test targets. Fixtures are real programs compiled during
// the test run; the watcher is the real `crashport` executable; nothing here mocks ptrace, the
// kernel or the file system.

import Foundation
#if canImport(Glibc)
import Glibc
#endif

public enum TestSupport {
    /// The repository root (this file is Tests/TestSupport/TestSupport.swift).
    public static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The directory holding the built products (the test bundle runs from it).
    public static let productsDirectory: String = {
        let executable =
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var directory = (executable as NSString).deletingLastPathComponent
        // An .xctest bundle directory on some layouts.
        if directory.hasSuffix(".xctest") { directory = (directory as NSString).deletingLastPathComponent }
        return directory
    }()

    /// The real `crashport` executable built next to the tests.
    public static var crashport: String { productsDirectory + "/crashport" }

    /// A fresh temporary directory, removed at process exit is not guaranteed: callers remove it.
    public static func temporaryDirectory(_ label: String = "crashport-test") -> String {
        let path = NSTemporaryDirectory() + "\(label)-\(getpid())-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// A new directory named `name` and a short random suffix inside `directory` (a test
    /// class's temporary directory): one per test, so that tests never share a socket or a store.
    public static func freshDirectory(in directory: String, _ name: String) -> String {
        let path = directory + "/" + name + "-" + UUID().uuidString.prefix(6)
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    static let lock = NSLock()
    nonisolated(unsafe) private static var builtStub: String?

    /// libcrashport.so built by tools/build-stub (once per test process), or $CRASHPORT_STUB.
    public static func stub() throws -> String {
        lock.lock()
        defer { lock.unlock() }
        if let builtStub { return builtStub }
        if let explicit = ProcessInfo.processInfo.environment["CRASHPORT_STUB"], !explicit.isEmpty {
            builtStub = explicit
            return explicit
        }
        let output = productsDirectory + "/stub"
        let result = try TestSupport.run([repositoryRoot + "/tools/build-stub", output])
        guard result.status == .exited(0) else {
            throw TestFailure("tools/build-stub failed: \(result.stderr)\(result.stdout)")
        }
        builtStub = output + "/libcrashport.so"
        return builtStub!
    }

    /// Compiles C/C++ sources into an executable; returns its path.
    public static func compile(
        _ sources: [String], output: String, compiler: String = "cc", flags: [String] = ["-O2", "-g"],
        linkFlags: [String] = []
    ) throws -> String {
        let result = try TestSupport.run([compiler] + flags + sources + linkFlags + ["-o", output])
        guard result.status == .exited(0) else {
            throw TestFailure("\(compiler) \(sources.joined(separator: " ")) failed:\n\(result.stderr)")
        }
        return output
    }

    /// A C fixture (Tests/Fixtures/`fixture`) linked with the stub the tests use (-lcrashport,
    /// its directory as the rpath), crashport.h on the include path; returns its path.
    public static func compileLinkedToStub(
        _ fixture: String, output: String, flags: [String] = ["-O1", "-g"]
    ) throws
        -> String
    {
        let libraries = (try stub() as NSString).deletingLastPathComponent
        return try compile(
            [self.fixture(fixture)], output: output,
            flags: flags + ["-I", repositoryRoot + "/CSupport/stub/include"],
            linkFlags: ["-L", libraries, "-Wl,-rpath," + libraries, "-lcrashport"])
    }

    /// An executable named `name` in PATH, else in one of `also`; nil when there is none.
    public static func which(_ name: String, also: [String] = []) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let directories = path.split(separator: ":").map(String.init) + also
        return directories.map { $0 + "/" + name }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    public static func fixture(_ name: String) -> String { repositoryRoot + "/Tests/Fixtures/" + name }

    public static func run(
        _ command: [String], environment: [String: String]? = nil, input: String? = nil, timeout: TimeInterval = 60
    ) throws -> RunResult {
        try TestSupport_run(command, environment: environment, input: input, timeout: timeout)
    }
}

public struct TestFailure: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

public enum ExitStatus: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signaled(Int32)
    case timedOut

    public var description: String {
        switch self {
        case .exited(let code): return "exit \(code)"
        case .signaled(let signal): return "killed by signal \(signal)"
        case .timedOut: return "timed out"
        }
    }
}

public struct RunResult {
    public var status: ExitStatus
    public var stdout: String
    public var stderr: String
}

/// Runs a command to completion with a timeout (then SIGKILL); stdin is empty or `input`.
public func run(
    _ command: [String], environment: [String: String]? = nil, input: String? = nil, timeout: TimeInterval = 60
) throws -> RunResult {
    try TestSupport_run(command, environment: environment, input: input, timeout: timeout)
}

func TestSupport_run(
    _ command: [String], environment: [String: String]? = nil, input: String? = nil, timeout: TimeInterval = 60
) throws -> RunResult {
    let process = Process()
    var executable = command[0]
    if !executable.contains("/") {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        executable =
            path.split(separator: ":").map { "\($0)/\(executable)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) } ?? executable
    }
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = Array(command.dropFirst())
    if let environment {
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    }
    let out = Pipe(), err = Pipe(), inPipe = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = inPipe
    try process.run()
    if let input { inPipe.fileHandleForWriting.write(Data(input.utf8)) }
    try? inPipe.fileHandleForWriting.close()
    // Read both pipes concurrently so a chatty child never blocks.
    nonisolated(unsafe) var outData = Data(), errData = Data()
    let group = DispatchGroup()
    group.enter()
    DispatchQueue.global().async {
        outData = out.fileHandleForReading.readDataToEndOfFile(); group.leave()
    }
    group.enter()
    DispatchQueue.global().async {
        errData = err.fileHandleForReading.readDataToEndOfFile(); group.leave()
    }
    let deadline = Date().addingTimeInterval(timeout)
    var timedOut = false
    while process.isRunning {
        if Date() > deadline {
            timedOut = true
            kill(process.processIdentifier, SIGKILL)
            break
        }
        usleep(2000)
    }
    process.waitUntilExit()
    group.wait()
    let status: ExitStatus
    if timedOut {
        status = .timedOut
    } else if process.terminationReason == .uncaughtSignal {
        status = .signaled(process.terminationStatus)
    } else {
        status = .exited(process.terminationStatus)
    }
    return RunResult(
        status: status, stdout: String(decoding: outData, as: UTF8.self), stderr: String(decoding: errData, as: UTF8.self))
}

extension TestSupport {
    /// A TCP port on 127.0.0.1 that was free a moment ago (bound, then closed): a server that
    /// is not there.
    public static func closedPort() -> Int {
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(probe, $0, length) == 0 && getsockname(probe, $0, &length) == 0
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

extension TestSupport {
    /// The build-id of an ELF file, as `readelf -n` prints it (hex).
    public static func buildID(of path: String) throws -> String {
        let notes = try run(["readelf", "-n", path]).stdout
        guard let line = notes.split(separator: "\n").first(where: { $0.contains("Build ID") }),
            let id = line.split(separator: " ").last.map(String.init)
        else { throw TestFailure("\(path) has no build-id") }
        return id
    }

    /// Copies (or moves) `file` to `directory`/.build-id/xx/rest.debug for `buildID`, where
    /// debug files are looked for by build-id (replacing what is there); returns its path.
    @discardableResult
    public static func placeDebugFile(
        _ file: String, buildID: String, in directory: String, move: Bool = false
    ) throws
        -> String
    {
        let target = directory + "/.build-id/\(buildID.prefix(2))/\(buildID.dropFirst(2)).debug"
        try FileManager.default.createDirectory(
            atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(atPath: target)
        if move {
            try FileManager.default.moveItem(atPath: file, toPath: target)
        } else {
            try FileManager.default.copyItem(atPath: file, toPath: target)
        }
        return target
    }
}
