// ChildProcess on real children: what each is given (arguments, environment, directory,
// descriptors, group, signals, user), the held start, and the one wait's answers (an exit, a
// signal, a deadline that passes, a child already reaped). No mock: /bin/sh, /bin/cat and
// /bin/sleep run.

import BoundedBytes
import Foundation
import Processes
import ReportModel
import TestSupport
import XCTest

final class ChildProcessTests: XCTestCase {
    /// Everything a descriptor gives until its end, then closed.
    func readAll(_ fd: Int32?) -> String {
        guard let fd else { return "" }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `sh -c script`, its stdout read to the end, then waited for.
    func shell(_ script: String, _ options: ChildProcess.Options = .init()) throws -> (ChildProcess.WaitResult, String) {
        var options = options
        options.standardOutput = .pipe
        let child = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", script], options)
        let output = readAll(child.output)
        return (child.wait(), output)
    }

    /// A line of a child's /proc/self/status ("Uid:", "SigBlk:"), read by /bin/cat as the child.
    func statusLine(_ name: String, _ options: ChildProcess.Options = .init()) throws -> String {
        var options = options
        options.standardOutput = .pipe
        let child = try ChildProcess.spawn("/bin/cat", arguments: ["cat", "/proc/self/status"], options)
        let status = readAll(child.output)
        XCTAssertEqual(child.wait(), .ended(.exited(0), coreDumped: false))
        let line = status.split(separator: "\n").first { $0.hasPrefix(name) } ?? ""
        return line.dropFirst(name.count).trimmingCharacters(in: .whitespaces)
    }

    func testAnExitAnExitCodeAndASignalAreWhatTheWaitSays() throws {
        let truth = try ChildProcess.spawn("/bin/true", arguments: ["true"])
        XCTAssertEqual(truth.wait(), .ended(.exited(0), coreDumped: false))
        let three = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", "exit 3"])
        XCTAssertEqual(three.wait(), .ended(.exited(3), coreDumped: false))
        XCTAssertEqual(three.wait(), .notAChild, "reaped once")
        let killed = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", "kill -TERM $$; sleep 5"])
        XCTAssertEqual(killed.wait().exit, .signaled(SIGTERM))
    }

    func testWaitStatusesAreDecodedByProcessExit() {
        XCTAssertEqual(ChildProcess.WaitResult(status: 0x0300), .ended(.exited(3), coreDumped: false))
        XCTAssertEqual(ChildProcess.WaitResult(status: 0x008B), .ended(.signaled(SIGSEGV), coreDumped: true))
        XCTAssertEqual(ChildProcess.WaitResult(status: 0x0009), .ended(.signaled(SIGKILL), coreDumped: false))
        XCTAssertEqual(ChildProcess.WaitResult(status: 0x137F), .stopped(status: 0x137F))
    }

    func testArgumentsEnvironmentAndDirectoryAreTheChildsAndNothingElse() throws {
        let directory = TestSupport.temporaryDirectory("child-directory")
        var options = ChildProcess.Options()
        options.environment = ["GREETING=hello there"]
        options.directory = directory
        let (ended, output) = try shell(#"echo "$0 $GREETING ${HOME-no home}"; pwd -P"#, options)
        XCTAssertEqual(ended, .ended(.exited(0), coreDumped: false))
        let real = URL(fileURLWithPath: directory).resolvingSymlinksInPath().path
        XCTAssertEqual(output, "sh hello there no home\n\(real)\n")
        // Without an environment of its own it has ours.
        setenv("CRASHPORT_CHILD_TEST", "inherited", 1)
        defer { unsetenv("CRASHPORT_CHILD_TEST") }
        XCTAssertEqual(try shell(#"echo "$CRASHPORT_CHILD_TEST""#).1, "inherited\n")
    }

    func testPipesNullAndAFileAppendedTo() throws {
        var options = ChildProcess.Options()
        options.standardInput = .pipe
        options.standardOutput = .pipe
        options.standardError = .standardOutput
        let child = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", "cat; echo to-stderr >&2"], options)
        XCTAssertTrue(writeAll(child.input!, Array("to-stdin\n".utf8)))
        close(child.input!)
        XCTAssertEqual(readAll(child.output), "to-stdin\nto-stderr\n")
        XCTAssertEqual(child.wait(), .ended(.exited(0), coreDumped: false))

        let log = TestSupport.temporaryDirectory("child-append") + "/log"
        var appending = ChildProcess.Options()
        appending.standardInput = .null
        appending.standardOutput = .appending(log)
        appending.standardError = .standardOutput
        for _ in 0..<2 {
            let writer = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", "cat; echo out; echo err >&2"], appending)
            XCTAssertEqual(writer.wait(), .ended(.exited(0), coreDumped: false))
        }
        XCTAssertEqual(try String(contentsOfFile: log, encoding: .utf8), "out\nerr\nout\nerr\n")
        var info = stat()
        XCTAssertEqual(stat(log, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o600)
    }

    func testAFailedStartIsThrownWithItsStepAndLeavesNoChild() throws {
        XCTAssertThrowsError(try ChildProcess.spawn("/nonexistent/program", arguments: ["program"])) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError("execve", errno: ENOENT))
        }
        var options = ChildProcess.Options()
        options.directory = "/nonexistent/directory"
        XCTAssertThrowsError(try ChildProcess.spawn("/bin/true", arguments: ["true"], options)) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError("chdir", errno: ENOENT))
        }
        var status: Int32 = 0
        XCTAssertEqual(waitpid(-1, &status, WNOHANG), -1, "the failed children were reaped")
        XCTAssertEqual(errno, ECHILD)
        // Not waiting for the exec: the child says it by its exit status.
        var detached = ChildProcess.Options()
        detached.waitsForExec = false
        let child = try ChildProcess.spawn("/nonexistent/program", arguments: ["program"], detached)
        XCTAssertEqual(child.wait(), .ended(.exited(127), coreDumped: false))
    }

    func testADeadlinePassesWhileTheChildSleepsThenItIsKilledAndReaped() throws {
        let child = try ChildProcess.spawn("/bin/sleep", arguments: ["sleep", "30"])
        let started = monotonicNanoseconds()
        XCTAssertEqual(child.wait(until: started + 200_000_000), .running)
        let waited = monotonicNanoseconds() - started
        XCTAssertGreaterThanOrEqual(waited, 200_000_000)
        XCTAssertLessThan(waited, 5_000_000_000)
        XCTAssertEqual(child.poll(), .running)
        XCTAssertTrue(child.signal(SIGKILL))
        XCTAssertEqual(child.wait(until: monotonicNanoseconds() + 5_000_000_000), .ended(.signaled(SIGKILL), coreDumped: false))
        XCTAssertEqual(child.poll(), .notAChild)
    }

    func testAHeldChildRunsItsProgramOnlyOnceReleased() throws {
        let marker = TestSupport.temporaryDirectory("child-held") + "/ran"
        let held = try ChildProcess.spawnHeld("/bin/sh", arguments: ["sh", "-c", "touch \(marker); exit 4"])
        usleep(100_000)
        XCTAssertEqual(held.child.poll(), .running)
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker))
        // Still a fork of this process, blocked before its exec.
        XCTAssertEqual(
            ProcFiles.executable(of: held.child.pid), ProcFiles.executable(of: ProcessID(getpid())))
        try held.release()
        XCTAssertEqual(held.child.wait(), .ended(.exited(4), coreDumped: false))
        XCTAssertTrue(FileManager.default.fileExists(atPath: marker))
    }

    func testAHeldChildThatCannotExecIsReapedAtItsRelease() throws {
        let held = try ChildProcess.spawnHeld("/nonexistent/program", arguments: ["program"])
        XCTAssertThrowsError(try held.release()) { error in
            XCTAssertEqual(error as? SystemCallError, SystemCallError("execve", errno: ENOENT))
        }
        XCTAssertEqual(held.child.poll(), .notAChild)
    }

    func testACancelledHeldChildNeverRuns() throws {
        let marker = TestSupport.temporaryDirectory("child-cancelled") + "/ran"
        let held = try ChildProcess.spawnHeld("/bin/sh", arguments: ["sh", "-c", "touch \(marker)"])
        held.cancel()
        XCTAssertEqual(held.child.poll(), .notAChild)
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker))
    }

    func testProcessGroupAndSession() throws {
        func groupAndSession(_ group: ChildProcess.Options.Group) throws -> (pid: Int32, group: Int32, session: Int32) {
            var options = ChildProcess.Options()
            options.group = group
            let child = try ChildProcess.spawn("/bin/sleep", arguments: ["sleep", "30"], options)
            defer {
                child.signal(SIGKILL)
                child.wait()
            }
            let fields = ProcFiles.statFields(of: child.pid) ?? []
            return (child.pid.rawValue, Int32(fields[2]) ?? -1, Int32(fields[3]) ?? -1)
        }
        let inherited = try groupAndSession(.inherit)
        XCTAssertEqual(inherited.group, getpgrp())
        XCTAssertEqual(inherited.session, getsid(0))
        let own = try groupAndSession(.own)
        XCTAssertEqual(own.group, own.pid)
        XCTAssertEqual(own.session, getsid(0))
        let session = try groupAndSession(.session)
        XCTAssertEqual(session.group, session.pid)
        XCTAssertEqual(session.session, session.pid)
    }

    func testSignalMaskAndIgnoredSignals() throws {
        var usr1 = sigset_t()
        sigemptyset(&usr1)
        sigaddset(&usr1, SIGUSR1)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &usr1, &previous)
        let ignored = signal(SIGPIPE, SIG_IGN)
        defer {
            pthread_sigmask(SIG_SETMASK, &previous, nil)
            signal(SIGPIPE, ignored)
        }
        let usr1Bit: UInt64 = 1 << (UInt64(SIGUSR1) - 1)
        let pipeBit: UInt64 = 1 << (UInt64(SIGPIPE) - 1)
        // By default, the calling thread's mask and what we ignore.
        XCTAssertEqual(UInt64(try statusLine("SigBlk:"), radix: 16).map { $0 & usr1Bit }, usr1Bit)
        XCTAssertEqual(UInt64(try statusLine("SigIgn:"), radix: 16).map { $0 & pipeBit }, pipeBit)
        // Or the mask given and defaults back.
        var options = ChildProcess.Options()
        var none = sigset_t()
        sigemptyset(&none)
        options.signalMask = none
        options.defaultSignals = [SIGPIPE]
        XCTAssertEqual(UInt64(try statusLine("SigBlk:", options), radix: 16), 0)
        XCTAssertEqual(UInt64(try statusLine("SigIgn:", options), radix: 16).map { $0 & pipeBit }, 0)
    }

    func testAKillOfItsGroupReachesWhatItStarted() throws {
        var options = ChildProcess.Options()
        options.group = .own
        options.standardOutput = .pipe
        let child = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", "sleep 30 & echo $!; wait"], options)
        var line = ""
        var byte: UInt8 = 0
        while read(child.output!, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(Character(UnicodeScalar(byte))) }
        let grandchild = try XCTUnwrap(Int32(line))
        XCTAssertTrue(child.signal(SIGKILL, group: true))
        XCTAssertEqual(child.wait().exit, .signaled(SIGKILL))
        XCTAssertEqual(readAll(child.output), "", "the sleep, which held the pipe too, is gone")
        let deadline = monotonicNanoseconds() + 5_000_000_000
        while kill(grandchild, 0) == 0, ProcFiles.statFields(of: ProcessID(grandchild))?.first != "Z",
            monotonicNanoseconds() < deadline
        {
            usleep(10_000)
        }
        XCTAssertNotEqual(ProcFiles.statFields(of: ProcessID(grandchild))?.first, "S")
    }

    func testARootParentStartsAChildAsAnotherUserForGood() throws {
        guard geteuid() == 0 else { throw XCTSkip("dropping to another user needs root") }
        var options = ChildProcess.Options()
        options.user = Credentials(uid: 65534, gid: 65534, groups: [])
        XCTAssertEqual(try statusLine("Uid:", options).split(separator: "\t"), ["65534", "65534", "65534", "65534"])
        XCTAssertEqual(try statusLine("Gid:", options).split(separator: "\t"), ["65534", "65534", "65534", "65534"])
        XCTAssertEqual(try statusLine("Groups:", options), "")
        options.user = Credentials(uid: 65534, gid: 65534, groups: [100])
        XCTAssertEqual(try statusLine("Groups:", options), "100")

        // Its file is opened as the user: in a directory only the user may write, it is theirs.
        let directory = TestSupport.temporaryDirectory("child-user")
        XCTAssertEqual(chown(directory, 65534, 65534), 0)
        XCTAssertEqual(chmod(directory, 0o700), 0)
        options.standardOutput = .appending(directory + "/log")
        let child = try ChildProcess.spawn("/bin/sh", arguments: ["sh", "-c", "id -u"], options)
        XCTAssertEqual(child.wait(), .ended(.exited(0), coreDumped: false))
        var info = stat()
        XCTAssertEqual(stat(directory + "/log", &info), 0)
        XCTAssertEqual(info.st_uid, 65534)
        XCTAssertEqual(try String(contentsOfFile: directory + "/log", encoding: .utf8), "65534\n")
    }
}
