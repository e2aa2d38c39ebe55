// End-to-end: a HotSpot JVM under crashport (Tests/Fixtures/jvm/Crash.java and crash.c). The JVM
// owns SIGSEGV: its implicit null checks are loads that fault, and its handler turns them into
// NullPointerExceptions. With crashport the program must run as without it: 100,000 caught
// NullPointerExceptions (tens of thousands of real SIGSEGVs) and no report; and a NULL write in
// JNI code, which the JVM's handler answers with its fatal-error banner, hs_err and abort(), must
// end the same way and leave one report naming the original fault (SIGSEGV at 0x0 in the native
// function) and the SIGABRT libjvm.so raised on it. Skipped, with the reason, where no JDK is found.

import Foundation
import ReportModel
import TestSupport
import XCTest

final class JVMTests: XCTestCase {
    static let directory = TestSupport.temporaryDirectory("jvm")
    static let count = 100_000
    /// A JVM starts in about a second here, but a loaded 2-core machine can be much slower.
    static let timeout: TimeInterval = 240

    /// The JDK: $JAVA_HOME if it holds javac, else the one javac on PATH belongs to.
    func javaHome() throws -> String {
        var candidates: [String] = []
        if let home = ProcessInfo.processInfo.environment["JAVA_HOME"], !home.isEmpty { candidates.append(home) }
        if let javac = TestSupport.which("javac") {
            let real = URL(fileURLWithPath: javac).resolvingSymlinksInPath()
            candidates.append(real.deletingLastPathComponent().deletingLastPathComponent().path)
        }
        let usable = candidates.first { home in
            ["bin/java", "bin/javac"].allSatisfy { FileManager.default.isExecutableFile(atPath: home + "/" + $0) }
                && FileManager.default.fileExists(atPath: home + "/include/jni.h")
        }
        guard let usable else {
            throw XCTSkip(
                "no JDK (java, javac and include/jni.h) in $JAVA_HOME or beside javac on PATH: the JVM fixture cannot be built")
        }
        return usable
    }

    struct Built {
        var java: String
        var classes: String
        var library: String
    }

    /// Crash.java compiled, and crash.c built into a JNI library, once per test process.
    func built() throws -> Built {
        let home = try javaHome()
        let classes = Self.directory + "/classes"
        let library = Self.directory + "/libcrashport-jni.so"
        if !FileManager.default.fileExists(atPath: classes + "/Crash.class") {
            let javac = try TestSupport.run(
                [home + "/bin/javac", "-d", classes, TestSupport.fixture("jvm/Crash.java")], timeout: Self.timeout)
            guard javac.status == .exited(0) else { throw TestFailure("javac Crash.java failed:\n\(javac.stderr)") }
        }
        if !FileManager.default.fileExists(atPath: library) {
            _ = try TestSupport.compile(
                [TestSupport.fixture("jvm/crash.c")], output: library,
                flags: ["-O1", "-g", "-shared", "-fPIC", "-I", home + "/include", "-I", home + "/include/linux"])
        }
        return Built(java: home + "/bin/java", classes: classes, library: library)
    }

    /// The java command line. The fatal-error log goes to `errorFile`, never to the working
    /// directory; -XX:-UsePerfData leaves no hsperfdata file in /tmp; a small heap keeps the
    /// start quick.
    func command(_ built: Built, _ mode: String, errorFile: String) -> [String] {
        var command = [
            built.java, "-XX:ErrorFile=" + errorFile, "-XX:-UsePerfData", "-Xmx64m", "-cp", built.classes, "Crash", mode,
        ]
        if mode == "jni" { command.append(built.library) }
        return command + [String(Self.count)]
    }

    /// Everything a failed assertion should show about one run.
    func facts(_ label: String, _ result: RunResult, errorFile: String? = nil) -> String {
        var text =
            "\(label): \(result.status)\n--- stdout\n\(result.stdout.suffix(3000))\n--- stderr\n\(result.stderr.suffix(3000))"
        if let errorFile, let log = try? String(contentsOfFile: errorFile, encoding: .utf8) {
            text += "\n--- \(errorFile) (head)\n\(log.prefix(3000))"
        }
        return text
    }

    func testCaughtNullPointerExceptionsAreNotReported() throws {
        let built = try built()
        let plain = try TestSupport.run(
            command(built, "npe", errorFile: Self.directory + "/npe-plain-hs_err.log"), timeout: Self.timeout)
        let watched = try TestSupport.crashportRun(
            command(built, "npe", errorFile: Self.directory + "/npe-watched-hs_err.log"), timeout: Self.timeout)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }

        XCTAssertEqual(plain.status, .exited(0), facts("plain", plain))
        XCTAssertTrue(plain.stdout.contains("caught \(Self.count)\n"), facts("plain", plain))
        XCTAssertEqual(watched.result.status, plain.status, facts("under crashport", watched.result))
        XCTAssertTrue(watched.result.stdout.contains("caught \(Self.count)\n"), facts("under crashport", watched.result))
        XCTAssertEqual(watched.reportIDs, [], "recovered faults are not crashes: \(facts("under crashport", watched.result))")
    }

    func testNativeCrashThroughJNIIsReportedOnceAsTheOriginalFault() throws {
        let built = try built()
        let plainErrorFile = Self.directory + "/jni-plain-hs_err.log"
        let watchedErrorFile = Self.directory + "/jni-watched-hs_err.log"
        for file in [plainErrorFile, watchedErrorFile] { try? FileManager.default.removeItem(atPath: file) }
        let plain = try TestSupport.run(command(built, "jni", errorFile: plainErrorFile), timeout: Self.timeout)
        let watched = try TestSupport.crashportRun(
            command(built, "jni", errorFile: watchedErrorFile), timeout: Self.timeout)
        defer { try? FileManager.default.removeItem(atPath: watched.reportsDirectory) }
        let plainFacts = facts("plain", plain, errorFile: plainErrorFile)
        let watchedFacts = facts("under crashport", watched.result, errorFile: watchedErrorFile)

        // The JVM's handler ran and gave up, as it does without crashport: its banner (HotSpot
        // prints it on stdout), its hs_err file, abort().
        XCTAssertEqual(plain.status, .signaled(SIGABRT), plainFacts)
        XCTAssertEqual(watched.result.status, plain.status, "the exit status is the one without crashport: \(watchedFacts)")
        let banner = "A fatal error has been detected by the Java Runtime Environment"
        for (label, result, errorFile, text) in [
            ("plain", plain, plainErrorFile, plainFacts), ("under crashport", watched.result, watchedErrorFile, watchedFacts),
        ] {
            XCTAssertTrue(result.stdout.contains("caught \(Self.count)\n"), "\(label): \(text)")
            XCTAssertTrue((result.stdout + result.stderr).contains(banner), "\(label): the JVM's banner: \(text)")
            XCTAssertTrue(
                (result.stdout + result.stderr).contains("crashport_jni_write_null"),
                "\(label): the JVM's problematic frame: \(text)")
            XCTAssertTrue(FileManager.default.fileExists(atPath: errorFile), "\(label): hs_err written: \(text)")
        }

        // One report: the NULL write in the native function, and the SIGABRT libjvm.so raised on it.
        XCTAssertEqual(watched.reportIDs.count, 1, watchedFacts)
        guard watched.reportIDs.count == 1 else { return }
        let event = try watched.event()
        XCTAssertEqual(event.signal?.name, "SIGSEGV", "the original fault: \(watchedFacts)")
        XCTAssertEqual(event.signal?.faultAddress?.value, 0)
        let reraised = event.signal?.reraisedBy
        XCTAssertEqual(reraised?.how, .raised, "\(String(describing: reraised))")
        XCTAssertEqual(reraised?.signal, "SIGABRT", "\(String(describing: reraised))")
        XCTAssertEqual(
            reraised?.module.map { ($0 as NSString).lastPathComponent }, "libjvm.so", "\(String(describing: reraised))")
        let functions = event.crashedFunctions
        XCTAssertEqual(functions.first, "crashport_jni_write_null", "\(functions.prefix(12))")
        XCTAssertTrue(
            containsInOrder(functions, ["crashport_jni_write_null", "Java_Crash_crash"]), "\(functions.prefix(12))")

        // Through the JIT's frames (rbp chains in memory no module covers) to the JVM's own
        // callers and the thread's start: no frame from a stack scan's guess.
        let named = functions.map { $0.split(separator: "(").first.map(String.init) ?? $0 }
        XCTAssertTrue(
            containsInOrder(
                named, ["Java_Crash_crash", "JavaCalls::call_helper", "jni_CallStaticVoidMethod", "JavaMain", "start_thread"]),
            "\(named)")
        let scanned = (event.crashedThreadRecord?.frames ?? []).filter { $0.trust == .scan }.map { $0.function ?? "?" }
        XCTAssertEqual(scanned, [], "frames a stack scan guessed")

        // Offline, from the event and from the minidump (unwound again): the same frames.
        let report = watched.reportsDirectory + "/" + watched.reportIDs[0]
        for file in ["event.json", "minidump.dmp"] {
            let result = try TestSupport.run(
                [TestSupport.crashport, "symbolicate", "--format", "json", report + "/" + file], timeout: Self.timeout)
            XCTAssertEqual(result.status, .exited(0), "\(file): \(result.stderr)")
            guard result.status == .exited(0) else { continue }
            let offline = try Event.decode(Data(result.stdout.utf8))
            XCTAssertEqual(offline.crashedFunctions, functions, file)
            XCTAssertEqual(offline.signal?.name, "SIGSEGV", file)
        }
    }
}
