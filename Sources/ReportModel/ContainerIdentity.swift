// ContainerIdentity: where a process ran, as its report names it: its cgroup, the systemd unit or
// the container that cgroup is, the container's runtime, name and image, and the Kubernetes pod
// it belongs to. A plain value: LiveProcess reads it (ContainerIdentity+Linux.swift, from the
// cgroup path; ContainerNodeFiles, from the node's and the container's own files) while the
// process is there to read; a capture or an abnormal end carries it; Reports writes it into the
// event's process record, the same for every level that saw the crash.

/// Where a process ran. Every field optional: a process outside any container has a cgroup and
/// perhaps a unit, nothing else.
public struct ContainerIdentity: Sendable, Equatable {
    /// The runtimes a cgroup path names, by the names their own tools use.
    public enum Runtime: String, Sendable, Equatable, CaseIterable {
        case docker
        case containerd
        case crio = "cri-o"
        case podman
        case systemdNspawn = "systemd-nspawn"
    }

    /// The cgroup path the rest was named from (the unified line's, else a v1 controller's).
    public var cgroup: String?
    /// The systemd unit the cgroup is, for a process outside any container.
    public var unit: String?
    public var runtime: Runtime?
    /// The container's id: 64 lowercase hex digits (no id for a systemd-nspawn machine).
    public var id: String?
    /// Its name: the runtime's (docker's, Kubernetes' container name), the machine's name.
    public var name: String?
    public var image: String?
    /// The Kubernetes pod: its uid from the cgroup path, its name and namespace from the node.
    public var podUID: String?
    public var podName: String?
    public var podNamespace: String?
    /// A rootless container (podman in a user's own cgroup tree): labelled from its path, which
    /// its user made, so nothing of the node's is read for it.
    public var rootless = false

    public init(cgroup: String? = nil) { self.cgroup = cgroup }

    /// Names a container.
    public var isContainer: Bool { runtime != nil || id != nil || podUID != nil }

    /// Fills a process record's cgroup, unit, container and pod fields (what is known; the
    /// rest is left as it was), making the record if there is none.
    public func describe(_ record: inout ProcessInfoRecord?) {
        var process = record ?? ProcessInfoRecord()
        describe(&process)
        record = process
    }

    public func describe(_ process: inout ProcessInfoRecord) {
        if let cgroup { process.cgroup = cgroup }
        if let unit { process.unit = unit }
        if let id { process.container = id }
        if let runtime { process.containerRuntime = runtime.rawValue }
        if let name { process.containerName = name }
        if let image { process.containerImage = image }
        if podUID != nil || podName != nil || podNamespace != nil {
            process.pod = PodRecord(uid: podUID, name: podName, namespace: podNamespace)
        }
    }
}

extension ProcessInfoRecord {
    /// Whether the process ran in the container `text` names: its id, or a prefix of the id of
    /// at least 12 digits (docker's short id), or its name.
    public func ranIn(container text: String) -> Bool {
        guard !text.isEmpty else { return false }
        if let id = container, text.count >= 12, id.hasPrefix(text.lowercased()) { return true }
        return containerName == text
    }

    /// Whether the process ran in the pod `text` names: `NAMESPACE/NAME`, its name, or its uid.
    public func ranIn(pod text: String) -> Bool {
        guard let pod, !text.isEmpty else { return false }
        if pod.uid == text.lowercased() { return true }
        if let name = pod.name {
            if name == text { return true }
            if let namespace = pod.namespace, "\(namespace)/\(name)" == text { return true }
        }
        return false
    }
}
