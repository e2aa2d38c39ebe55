// The fleet's targets (FuzzTarget.swift says what a target is): a process's cgroup file and the
// node's container files, which the container's runtime (and, for a lying path, the process's
// user) wrote; and an OpenTelemetry collector's answers, which whoever runs the collector wrote.

import Foundation
import LiveProcess
import ReportModel
import Upload

extension FuzzTarget {
    /// The node the container target lays its files in: made once, root's, mode 0755 (the
    /// trust check's terms), its files rewritten per input.
    static let containerNode: String = {
        let root = NSTemporaryDirectory() + "crashport-fuzz-node-\(getpid())"
        for directory in [
            "/run/containerd/io.containerd.runtime.v2.task/k8s.io/" + fuzzContainerID,
            "/run/containers/storage/overlay-containers/\(fuzzContainerID)/userdata",
            "/var/lib/docker/containers/" + fuzzContainerID,
            "/var/lib/kubelet/pods/\(fuzzPodUID)/containers/app",
        ] {
            try? FileManager.default.createDirectory(
                atPath: root + directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        return root
    }()
    static let fuzzContainerID = String(repeating: "0123456789abcdef", count: 4)
    static let fuzzPodUID = "7c1d2e3f-0000-4000-8000-0123456789ab"

    /// The input up to its first NUL as /proc/PID/cgroup, parsed and named against the node;
    /// the rest as each runtime's config file and the kubelet's hosts file, read for a
    /// container of each runtime in a pod.
    static func container(_ input: UnsafeRawBufferPointer) {
        let bytes = Array(input)
        let split = bytes.firstIndex(of: 0) ?? bytes.count
        let text = String(decoding: bytes[..<split], as: UTF8.self)
        let file = split < bytes.count ? Array(bytes[(split + 1)...]) : []
        let node = NodeRoot(containerNode)
        for path in [
            "/run/containerd/io.containerd.runtime.v2.task/k8s.io/\(fuzzContainerID)/config.json",
            "/run/containers/storage/overlay-containers/\(fuzzContainerID)/userdata/config.json",
            "/var/lib/docker/containers/\(fuzzContainerID)/config.v2.json",
            "/var/lib/kubelet/pods/\(fuzzPodUID)/etc-hosts",
        ] {
            FileManager.default.createFile(
                atPath: containerNode + path, contents: Data(file), attributes: [.posixPermissions: 0o644])
        }
        var identities: [ContainerIdentity] = []
        if let parsed = ContainerIdentity.parse(procCgroup: text) { identities.append(parsed) }
        for runtime in ContainerIdentity.Runtime.allCases + [nil] {
            var identity = ContainerIdentity(cgroup: "/kubepods.slice/fuzz")
            identity.runtime = runtime
            identity.id = fuzzContainerID
            identity.podUID = fuzzPodUID
            identities.append(identity)
        }
        for var identity in identities {
            var notes: [String] = []
            ContainerNames(node: node).name(&identity, notes: &notes)
            for value in [identity.name, identity.image, identity.podName, identity.podNamespace] {
                guard let value else { continue }
                if value.unicodeScalars.contains(where: { $0.value < 0x20 }) { fatalError("a control character kept: \(value)") }
            }
            var record: ProcessInfoRecord? = nil
            identity.describe(&record)
            if let container = record?.container, !ContainerIdentity.isContainerID(Substring(container)) {
                fatalError("an id that is no container id: \(container)")
            }
        }
    }

    /// A collector's answer, as protobuf and as JSON: its partial success and its refusal.
    static func otlpResponse(_ input: UnsafeRawBufferPointer) {
        let body = Array(input)
        for json in [false, true] {
            _ = OTLPResponse.partialSuccess(body, json: json)
            _ = OTLPResponse.statusMessage(body, json: json)
        }
        _ = ProtobufReader.fields(body)
    }
}
