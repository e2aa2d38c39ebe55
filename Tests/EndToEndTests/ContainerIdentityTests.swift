// End-to-end: a crash in a container's cgroup, named by its node's files. The test makes real
// cgroups under the names docker and the kubelet (with containerd) give theirs, in the cgroup v2
// hierarchy, moves a crashing program into one (a shell writes its own pid to cgroup.procs and
// execs the program), and lays the node's files out in a temporary node root
// (CRASHPORT_NODE_ROOT): containerd's OCI bundle, the kubelet's pod directory, docker's config.
// The reports of `crashport run` and of the sidecar name the runtime, the id, the pod and the
// container; `crashport list --pod/--container` find the one and not the other; a config.json a
// user could have written names nothing, with a note. The host level names it the same way (its
// one test saves and restores core_pattern). The cgroups are removed in tearDown.

import Foundation
import ReportModel
import TestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

final class ContainerIdentityTests: XCTestCase {
    let podUID = "7c1d2e3f-4a5b-4c6d-8e9f-0a1b2c3d4e5f"
    /// Fresh ids per test process: a leftover of an earlier run never matches.
    let containerdID = ContainerIdentityTests.randomID()
    let dockerID = ContainerIdentityTests.randomID()
    var node = ""
    var reports = ""
    /// The cgroup v2 hierarchy's mount point, and the directories made under it (outermost first).
    var hierarchy = ""
    var made: [String] = []

    static func randomID() -> String {
        (0..<4).map { _ in String(format: "%016llx", UInt64.random(in: 0...UInt64.max)) }.joined()
    }

    var podCgroup: String {
        "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod\(podUID.replacingOccurrences(of: "-", with: "_")).slice/cri-containerd-\(containerdID).scope"
    }
    var dockerCgroup: String { "/system.slice/docker-\(dockerID).scope" }

    override func setUpWithError() throws {
        guard geteuid() == 0 else { throw XCTSkip("making cgroups and root's node files needs root") }
        hierarchy = try Self.unifiedHierarchy()
        let directory = TestSupport.temporaryDirectory("containers")
        node = directory + "/node"
        reports = directory + "/reports"
        try FileManager.default.createDirectory(atPath: node, withIntermediateDirectories: true)
        chmod(node, 0o755)
        try makeCgroup(podCgroup)
        try makeCgroup(dockerCgroup)
    }

    override func tearDown() {
        // Innermost first; a process still in one (a test that failed midway) goes to the root.
        for path in made.reversed() {
            let procs = (try? String(contentsOfFile: path + "/cgroup.procs", encoding: .utf8)) ?? ""
            for pid in procs.split(separator: "\n") {
                try? "\(pid)\n".write(toFile: hierarchy + "/cgroup.procs", atomically: false, encoding: .utf8)
            }
            for _ in 0..<50 where rmdir(path) != 0 && errno == EBUSY { usleep(20_000) }
        }
        made = []
        if !node.isEmpty { try? FileManager.default.removeItem(atPath: (node as NSString).deletingLastPathComponent) }
    }

    /// The cgroup v2 hierarchy, when this process's cgroup namespace sees it from its root (a
    /// container cgroup must sit at its runtime's place from the top).
    static func unifiedHierarchy() throws -> String {
        let mountinfo = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8)) ?? ""
        for line in mountinfo.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard let separator = fields.firstIndex(of: "-"), fields.count > separator + 1, fields[separator + 1] == "cgroup2"
            else { continue }
            guard fields[3] == "/" else { continue }
            let own = (try? String(contentsOfFile: "/proc/self/cgroup", encoding: .utf8))?.split(separator: "\n")
                .first { $0.hasPrefix("0::") }
            guard own != nil else { continue }
            return String(fields[4])
        }
        throw XCTSkip("no cgroup v2 hierarchy mounted from its root here: the test makes its containers' cgroups there")
    }

    /// Makes the cgroup at `path` (from the hierarchy's root), each missing directory noted for tearDown.
    func makeCgroup(_ path: String) throws {
        var directory = hierarchy
        for component in path.split(separator: "/") {
            directory += "/" + component
            if mkdir(directory, 0o755) == 0 {
                made.append(directory)
            } else if errno != EEXIST {
                throw XCTSkip("cannot make the cgroup \(directory): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Writes a node file (directories root's, 0755; the file 0644, `owner`'s).
    func lay(_ path: String, _ text: String, owner: uid_t = 0) throws {
        let full = node + path
        try FileManager.default.createDirectory(
            atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755])
        try text.write(toFile: full, atomically: false, encoding: .utf8)
        chmod(full, 0o644)
        XCTAssertEqual(chown(full, owner, owner), 0)
    }

    func layThePod(configOwner: uid_t = 0) throws {
        try lay(
            "/run/containerd/io.containerd.runtime.v2.task/k8s.io/\(containerdID)/config.json",
            """
            {"ociVersion":"1.1.0","annotations":{"io.kubernetes.cri.container-type":"container",
            "io.kubernetes.cri.container-name":"checkout","io.kubernetes.cri.sandbox-name":"checkout-6b9f",
            "io.kubernetes.cri.sandbox-namespace":"shop","io.kubernetes.cri.sandbox-uid":"\(podUID)",
            "io.kubernetes.cri.image-name":"registry.example/shop/checkout:3.2"}}
            """, owner: configOwner)
        try lay(
            "/var/lib/kubelet/pods/\(podUID)/etc-hosts",
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n10.244.0.12\tcheckout-6b9f\n")
    }

    func layTheDockerContainer() throws {
        try lay(
            "/var/lib/docker/containers/\(dockerID)/config.v2.json",
            #"{"ID":"\#(dockerID)","Name":"/batch-1","Config":{"Image":"alpine:3.20","Labels":{}}}"#)
    }

    /// The crash corpus's program, run in `cgroup`: a shell moves itself there and execs it.
    func inCgroup(_ cgroup: String) throws -> [String] {
        let crash = try TestSupport.corpus()[0].path
        return ["/bin/sh", "-c", "echo $$ > '\(hierarchy + cgroup)/cgroup.procs' && exec \"$0\" null", crash]
    }

    func run(in cgroup: String) throws -> Event {
        let run = try TestSupport.crashportRun(
            try inCgroup(cgroup), reports: reports, environment: ["CRASHPORT_NODE_ROOT": node])
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        let newest = try XCTUnwrap(run.reportIDs.last, run.result.stderr)
        let data = try XCTUnwrap(FileManager.default.contents(atPath: reports + "/" + newest + "/event.json"))
        return try Event.decode(data)
    }

    func assertNamesThePod(_ process: ProcessInfoRecord?, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(process?.cgroup, podCgroup, file: file, line: line)
        XCTAssertEqual(process?.containerRuntime, "containerd", file: file, line: line)
        XCTAssertEqual(process?.container, containerdID, file: file, line: line)
        XCTAssertEqual(process?.containerName, "checkout", file: file, line: line)
        XCTAssertEqual(process?.containerImage, "registry.example/shop/checkout:3.2", file: file, line: line)
        XCTAssertEqual(process?.pod, PodRecord(uid: podUID, name: "checkout-6b9f", namespace: "shop"), file: file, line: line)
    }

    func list(_ arguments: [String]) throws -> [String] {
        let result = try TestSupport.run(
            [TestSupport.crashport, "list", "--reports", reports, "--format", "json"] + arguments)
        let entries = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]]
        return try XCTUnwrap(entries, result.stdout + result.stderr).compactMap { $0["id"] as? String }
    }

    // MARK: -

    /// `crashport run`: a pod's container and a docker container, each named from the node's
    /// files, and told apart by `list --pod` and `--container`.
    func testRunNamesThePodAndTheContainer() throws {
        try layThePod()
        try layTheDockerContainer()
        let pod = try run(in: podCgroup)
        assertNamesThePod(pod.process)
        let docker = try run(in: dockerCgroup)
        XCTAssertEqual(docker.process?.cgroup, dockerCgroup)
        XCTAssertEqual(docker.process?.containerRuntime, "docker")
        XCTAssertEqual(docker.process?.container, dockerID)
        XCTAssertEqual(docker.process?.containerName, "batch-1")
        XCTAssertEqual(docker.process?.containerImage, "alpine:3.20")
        XCTAssertNil(docker.process?.pod)

        let (podID, dockerReport) = (try XCTUnwrap(pod.id), try XCTUnwrap(docker.id))
        XCTAssertEqual(try list(["--pod", "shop/checkout-6b9f"]), [podID])
        XCTAssertEqual(try list(["--pod", "checkout-6b9f"]), [podID])
        XCTAssertEqual(try list(["--pod", podUID]), [podID])
        XCTAssertEqual(try list(["--pod", "other/checkout-6b9f"]), [])
        XCTAssertEqual(try list(["--container", "checkout"]), [podID])
        XCTAssertEqual(try list(["--container", String(dockerID.prefix(12))]), [dockerReport])
        XCTAssertEqual(try list(["--container", String(dockerID.prefix(11))]), [], "an id prefix is at least 12 digits")
        XCTAssertEqual(try list(["--container", "batch-1"]), [dockerReport])

        let show = try TestSupport.run([TestSupport.crashport, "show", "--reports", reports, podID])
        XCTAssertTrue(
            show.stdout.contains(
                "Container: containerd checkout (registry.example/shop/checkout:3.2, id \(containerdID.prefix(12))); pod shop/checkout-6b9f (uid \(podUID))"
            ), show.stdout)
        let text = try TestSupport.run([TestSupport.crashport, "list", "--reports", reports])
        XCTAssertTrue(text.stdout.contains("pod shop/checkout-6b9f"), text.stdout)
    }

    /// Where the pod's names go: the journal entry (a socket the test reads as journald would),
    /// OpenTelemetry's resource (a receiver decoding with opentelemetry-proto) and Sentry's
    /// tags (a collector on 127.0.0.1), each from the one report of one crash.
    func testThePodsNamesGoToTheJournalOpenTelemetryAndSentry() throws {
        try layThePod()
        let directory = TestSupport.temporaryDirectory("containers-out")
        let socket = directory + "/journal.sock"
        let listener = try JournalEntryTests.datagramSocket(boundTo: socket)
        defer { close(listener) }
        let run = try TestSupport.crashportRun(
            try inCgroup(podCgroup), reports: reports,
            environment: ["CRASHPORT_NODE_ROOT": node, "CRASHPORT_JOURNAL_SOCKET": socket])
        XCTAssertEqual(run.result.status, .signaled(SIGSEGV), run.result.stderr)
        let fields = try XCTUnwrap(JournalEntryTests.receiveEntry(listener), run.result.stderr)
        XCTAssertEqual(fields["COREDUMP_CGROUP"], podCgroup)
        XCTAssertEqual(fields["COREDUMP_CONTAINER_ID"], containerdID)
        XCTAssertEqual(fields["CRASHPORT_CONTAINER_NAME"], "checkout")
        XCTAssertEqual(fields["CRASHPORT_POD_NAME"], "checkout-6b9f")
        XCTAssertEqual(fields["CRASHPORT_POD_NAMESPACE"], "shop")
        XCTAssertEqual(fields["CRASHPORT_POD_UID"], podUID)

        let receiver = try OTLPReceiver(answers: [["status": 200]], directory: directory)
        let sentry = try Collector(answers: [["status": 200, "body": "{\"id\":\"$EVENT_ID\"}"]], directory: directory)
        let upload = try TestSupport.run(
            [
                TestSupport.crashport, "upload", "--reports", reports, "--sentry-dsn",
                "http://key@127.0.0.1:\(sentry.port)/42",
            ], environment: ["OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint])
        XCTAssertEqual(upload.status, .exited(0), upload.stderr + upload.stdout)
        let request = try XCTUnwrap(receiver.requests.first, upload.stderr + upload.stdout)
        let resource = DecodedLogs(request).resource
        for (key, value) in [
            ("container.id", containerdID), ("container.name", "checkout"), ("container.runtime", "containerd"),
            ("container.image.name", "registry.example/shop/checkout:3.2"), ("k8s.pod.uid", podUID),
            ("k8s.pod.name", "checkout-6b9f"), ("k8s.namespace.name", "shop"), ("k8s.container.name", "checkout"),
        ] {
            XCTAssertEqual(resource[key] as? String, value, "\(key): \(resource)")
        }
        let items = sentry.requests.first?["items"] as? [[String: Any]] ?? []
        let saved = try XCTUnwrap(items.first { $0["type"] as? String == "event" }?["saved"] as? String, "\(items)")
        let payload = try XCTUnwrap(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: saved))) as? [String: Any])
        let tags = payload["tags"] as? [String: String] ?? [:]
        for (key, value) in [
            ("container.id", containerdID), ("container.name", "checkout"), ("k8s.pod.name", "checkout-6b9f"),
            ("k8s.namespace.name", "shop"), ("k8s.container.name", "checkout"),
        ] {
            XCTAssertEqual(tags[key], value, "\(key): \(tags)")
        }
    }

    /// The sidecar names the pod the same way (its capture reads the same files).
    func testSidecarNamesThePod() throws {
        try layThePod()
        let sidecar = try SidecarProcess(
            directory: TestSupport.temporaryDirectory("containers-sidecar"), environment: ["CRASHPORT_NODE_ROOT": node])
        defer { sidecar.stop() }
        let result = try TestSupport.run(
            try inCgroup(podCgroup),
            environment: ["LD_PRELOAD": try TestSupport.stub(), "CRASHPORT_SOCKET": sidecar.socket])
        XCTAssertEqual(result.status, .signaled(SIGSEGV), result.stderr)
        let events = try sidecar.waitForReports(1)
        assertNamesThePod(events.last?.process)
    }

    /// The host level (`crashport watch --host --node-root`): a crash no stub saw, read from
    /// the kernel's core stream while the kernel holds the process, names its pod the same way.
    /// The machine's core_pattern is saved and put back (CorePattern.Reservation).
    func testHostLevelNamesThePod() throws {
        if let why = CorePattern.unavailable { throw XCTSkip("the host level cannot be installed: \(why)") }
        try layThePod()
        let reservation = try CorePattern.Reservation()
        defer { reservation.release() }
        let host = "/tmp/cph-" + UUID().uuidString.prefix(6)
        defer { try? FileManager.default.removeItem(atPath: host) }
        let directory = TestSupport.temporaryDirectory("containers-host")
        chmod(directory, 0o755)
        let sidecar = try SidecarProcess(
            directory: directory, arguments: ["--host", "--host-directory", host, "--node-root", node])
        defer { sidecar.stop() }
        try waitUntil("the sidecar installs the host level; log:\n\(sidecar.log)", timeout: 30) {
            sidecar.log.contains("host: the machine's core handler")
        }
        let result = try TestSupport.run(try inCgroup(podCgroup))
        XCTAssertEqual(result.status, .signaled(SIGSEGV), result.stderr)
        let events = try sidecar.waitForReports(1, uid: 0)
        XCTAssertEqual(events.last?.source, "host")
        assertNamesThePod(events.last?.process)
        XCTAssertEqual(sidecar.stop(), 0)
        XCTAssertEqual(
            (try? String(contentsOfFile: CorePattern.patternFile, encoding: .utf8))?.trimmingCharacters(in: .newlines),
            reservation.pattern, "the pattern is put back at SIGTERM")
    }

    /// A config.json a user could have written: its names are not believed, and the report says
    /// why; what the cgroup path says (the runtime, the id, the pod's uid) stays.
    func testAConfigAUserOwnsNamesNothing() throws {
        try layThePod(configOwner: 65534)
        try FileManager.default.removeItem(atPath: node + "/var/lib/kubelet")
        let event = try run(in: podCgroup)
        XCTAssertEqual(event.process?.containerRuntime, "containerd")
        XCTAssertEqual(event.process?.container, containerdID)
        XCTAssertEqual(event.process?.pod?.uid, podUID)
        XCTAssertNil(event.process?.containerName)
        XCTAssertNil(event.process?.containerImage)
        XCTAssertNil(event.process?.pod?.name)
        XCTAssertTrue(
            (event.notes ?? []).contains { $0.contains("config.json") && $0.contains("owner 65534") }, "\(event.notes ?? [])")
    }
}
