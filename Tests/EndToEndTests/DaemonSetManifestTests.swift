// packaging/kubernetes/crashport-daemonset.yaml read as Kubernetes would (PyYAML, through
// python3, turns it into JSON): the parts the host level cannot work without. Privileged (it
// writes core_pattern, which is not namespaced) with the node's pids; `crashport watch --host
// --node-root /host` with the node's root at /host; the binary the kernel runs for the pipe
// helper at the same path on the node as in the pod (a hostPath mounted where it lies), and the
// coredump socket's directory likewise; time to restore core_pattern; every node.

import Foundation
import TestSupport
import XCTest

final class DaemonSetManifestTests: XCTestCase {
    func daemonSet() throws -> [String: Any] {
        let path = TestSupport.repositoryRoot + "/packaging/kubernetes/crashport-daemonset.yaml"
        let script = "import json, sys, yaml; print(json.dumps(list(yaml.safe_load_all(open(sys.argv[1])))))"
        guard let probe = try? TestSupport.run(["/usr/bin/env", "python3", "-c", "import yaml"]), probe.status == .exited(0)
        else { throw XCTSkip("python3 with PyYAML is needed to read the manifest") }
        let result = try TestSupport.run(["/usr/bin/env", "python3", "-c", script, path])
        XCTAssertEqual(result.status, .exited(0), result.stderr)
        let documents = try XCTUnwrap(
            JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]], result.stderr)
        return try XCTUnwrap(documents.first { $0["kind"] as? String == "DaemonSet" })
    }

    func testTheDaemonSetRunsTheHostLevelAsItMust() throws {
        let spec = try XCTUnwrap(
            ((try daemonSet()["spec"] as? [String: Any])?["template"] as? [String: Any])?["spec"] as? [String: Any])
        XCTAssertEqual(spec["hostPID"] as? Bool, true)
        XCTAssertGreaterThanOrEqual(spec["terminationGracePeriodSeconds"] as? Int ?? 0, 35, "past the 30 s dump deadline")
        let tolerations = try XCTUnwrap(spec["tolerations"] as? [[String: Any]])
        XCTAssertTrue(tolerations.contains { $0["operator"] as? String == "Exists" && $0["key"] == nil }, "every node")

        let container = try XCTUnwrap((spec["containers"] as? [[String: Any]])?.first)
        XCTAssertEqual((container["securityContext"] as? [String: Any])?["privileged"] as? Bool, true)
        let limits = (container["resources"] as? [String: Any])?["limits"] as? [String: Any]
        XCTAssertNotNil(limits?["memory"])

        // The command: the binary run from its hostPath, as the host level with the node's root.
        let command = ((container["command"] as? [String]) ?? []) + ((container["args"] as? [String]) ?? [])
        let script = command.joined(separator: " ")
        let exec = try XCTUnwrap(script.range(of: "exec "), script)
        let words = script[exec.upperBound...].split(whereSeparator: \.isWhitespace).map(String.init)
        let binary = try XCTUnwrap(words.first)
        XCTAssertEqual(Array(words.dropFirst().prefix(2)), ["watch", "--host"], script)
        let nodeRoot = try XCTUnwrap(words.firstIndex(of: "--node-root").map { words[$0 + 1] }, script)
        XCTAssertTrue(script.contains("/usr/local/bin/crashport \((binary as NSString).deletingLastPathComponent)"), script)

        // Mounts: path in the pod → (hostPath on the node, read-only).
        let volumes = try XCTUnwrap(spec["volumes"] as? [[String: Any]])
        var hostPaths: [String: String] = [:]
        for volume in volumes {
            if let name = volume["name"] as? String, let path = (volume["hostPath"] as? [String: Any])?["path"] as? String {
                hostPaths[name] = path
            }
        }
        var mounts: [String: (host: String, readOnly: Bool)] = [:]
        for mount in try XCTUnwrap(container["volumeMounts"] as? [[String: Any]]) {
            guard let name = mount["name"] as? String, let path = mount["mountPath"] as? String, let host = hostPaths[name]
            else { continue }
            mounts[path] = (host, mount["readOnly"] as? Bool ?? false)
        }
        XCTAssertEqual(mounts[nodeRoot]?.host, "/", "--node-root is the node's root")
        XCTAssertEqual(mounts[nodeRoot]?.readOnly, true)
        // The kernel runs the pattern's helper from the node's filesystem: the binary's
        // directory is a hostPath at the same path, writable to install it.
        let directory = (binary as NSString).deletingLastPathComponent
        XCTAssertEqual(mounts[directory]?.host, directory, "the pipe helper the kernel runs is the pod's binary")
        XCTAssertEqual(mounts[directory]?.readOnly, false)
        // The coredump socket is connected to by its path on the node.
        XCTAssertEqual(mounts["/run/crashport"]?.host, "/run/crashport")
        XCTAssertEqual(mounts["/var/lib/crashport/reports"]?.host, "/var/lib/crashport/reports")
        // The node's journald gets each report's entry, for coredumpctl on the node.
        XCTAssertEqual(mounts["/run/systemd/journal"]?.host, "/run/systemd/journal")
    }
}
