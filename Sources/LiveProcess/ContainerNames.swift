// ContainerNames: a container's name, image and pod, from the node's files, named by the id and
// pod uid its cgroup path gave (ContainerIdentity+Linux.swift): containerd's OCI bundle, CRI-O's
// and podman's container config, docker's, the kubelet's pod directory.
//
// Whose files are believed: the node's runtimes write these as root, in directories only root
// may write. So a file is read only when it, and every directory between the node's root and
// it, is root's and no one else may write it (a file a user could have written is ignored, with
// a note), with BoundedFile's rules: the last component not followed, never blocking (a FIFO),
// at most 1 MiB. Paths are built only from a validated id (64 hex digits) or pod uid (a UUID),
// never from anything else a path said. A rootless container's (its user made its cgroup, and
// may have made any file it would name) are not looked for.
//
// The container's own /etc/hostname (Kubernetes and docker write the pod's name or the short id
// there) is a last resort: its user could write anything there, so it is read as that user
// (ProcessAccess), through no symbolic link, one printable line at most, and never overrides
// what the node's files said.
//
// The node's files are under a root of their own (`NodeRoot`): `/` where crashport runs on the
// node, the node's filesystem mounted into a DaemonSet's pod (`--node-root /host`), or a test's
// directory (CRASHPORT_NODE_ROOT).

import BoundedBytes
import FoundationEssentials
import ReportModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Where the node's files are: a directory that stands for the node's `/`.
public struct NodeRoot: Sendable, Equatable {
    /// The prefix of every node path: "" for `/`.
    public let prefix: String

    public init(_ path: String) {
        var path = path
        while path.count > 1, path.hasSuffix("/") { path.removeLast() }
        prefix = path == "/" || path.isEmpty ? "" : path
    }

    /// `crashport watch --node-root`'s, else $CRASHPORT_NODE_ROOT, else `/`.
    public static var configured: NodeRoot {
        chosen.withLock { $0 } ?? NodeRoot(getenv("CRASHPORT_NODE_ROOT").map { String(cString: $0) } ?? "/")
    }

    /// Sets the node root for every capture of this process (`--node-root`).
    public static func choose(_ path: String) { chosen.withLock { $0 = NodeRoot(path) } }

    private static let chosen = Mutex<NodeRoot?>(nil)

    /// The node's `path` (absolute) under this root.
    public func path(_ path: String) -> String { prefix + path }
}

public struct ContainerNames: Sendable {
    public let node: NodeRoot
    /// The most bytes read of one node file.
    public static let fileLimit = 1 << 20

    public init(node: NodeRoot = .configured) { self.node = node }

    /// Names what `identity` identifies from the node's files, then from `hostname` (the
    /// container's own /etc/hostname, read while it was there: `ownHostname`) where the node
    /// said no name. What could not be believed goes into `notes`.
    public func name(_ identity: inout ContainerIdentity, hostname: String? = nil, notes: inout [String]) {
        guard identity.isContainer else { return }
        if !identity.rootless, let id = identity.id {
            switch identity.runtime {
            case .containerd?: containerd(id, &identity, notes: &notes)
            case .crio?, .podman?: containersStorage(id, &identity, notes: &notes)
            case .docker?: docker(id, &identity, notes: &notes)
            case .systemdNspawn?: break
            case nil:
                // The cgroupfs driver's /kubepods/…/<id>: which runtime's files name it.
                if containerd(id, &identity, notes: &notes) {
                    identity.runtime = .containerd
                } else if containersStorage(id, &identity, notes: &notes) {
                    identity.runtime = .crio
                } else if docker(id, &identity, notes: &notes) {
                    identity.runtime = .docker
                }
            }
        }
        if !identity.rootless, let uid = identity.podUID { kubelet(uid, &identity, notes: &notes) }
        if identity.name == nil, let hostname {
            identity.name = hostname
            notes.append(
                "container name \(hostname) is the container's own /etc/hostname (written inside the container; the node's files did not name it)"
            )
        }
    }

    // MARK: - The runtimes' files

    /// containerd's OCI bundle of a task: the CRI's annotations name the Kubernetes container,
    /// its pod and its image; nerdctl's its name.
    @discardableResult
    func containerd(_ id: String, _ identity: inout ContainerIdentity, notes: inout [String]) -> Bool {
        for namespace in ["k8s.io", "moby", "default"] {
            let path = "/run/containerd/io.containerd.runtime.v2.task/\(namespace)/\(id)/config.json"
            guard let config: OCIConfig = decode(path, notes: &notes) else { continue }
            let annotations = config.annotations ?? [:]
            fill(
                &identity, name: annotations["io.kubernetes.cri.container-name"] ?? annotations["nerdctl/name"],
                image: annotations["io.kubernetes.cri.image-name"], podName: annotations["io.kubernetes.cri.sandbox-name"],
                podNamespace: annotations["io.kubernetes.cri.sandbox-namespace"],
                podUID: annotations["io.kubernetes.cri.sandbox-uid"], source: path, notes: &notes)
            return true
        }
        return false
    }

    /// CRI-O's (and podman's) container config in containers/storage; podman's names are in its
    /// containers.json instead.
    @discardableResult
    func containersStorage(_ id: String, _ identity: inout ContainerIdentity, notes: inout [String]) -> Bool {
        let path = "/run/containers/storage/overlay-containers/\(id)/userdata/config.json"
        if let config: OCIConfig = decode(path, notes: &notes) {
            let annotations = config.annotations ?? [:]
            fill(
                &identity, name: annotations["io.kubernetes.container.name"],
                image: annotations["io.kubernetes.cri-o.ImageName"], podName: annotations["io.kubernetes.pod.name"],
                podNamespace: annotations["io.kubernetes.pod.namespace"], podUID: annotations["io.kubernetes.pod.uid"],
                source: path, notes: &notes)
            if identity.name != nil || identity.runtime == .crio { return true }
        }
        guard identity.runtime == .podman else { return false }
        let list = "/var/lib/containers/storage/overlay-containers/containers.json"
        guard let containers: [StorageContainer] = decode(list, notes: &notes),
            let entry = containers.first(where: { $0.id == id })
        else { return false }
        fill(&identity, name: entry.names?.first, source: list, notes: &notes)
        return true
    }

    /// docker's own config of a container: its name, its image, and a Kubernetes pod's labels
    /// (dockershim's).
    @discardableResult
    func docker(_ id: String, _ identity: inout ContainerIdentity, notes: inout [String]) -> Bool {
        let path = "/var/lib/docker/containers/\(id)/config.v2.json"
        guard let config: DockerConfig = decode(path, notes: &notes) else { return false }
        let labels = config.config?.labels ?? [:]
        var name = config.name.map { $0.hasPrefix("/") ? String($0.dropFirst()) : $0 }
        if let kubernetes = labels["io.kubernetes.container.name"] { name = kubernetes }
        fill(
            &identity, name: name, image: config.config?.image, podName: labels["io.kubernetes.pod.name"],
            podNamespace: labels["io.kubernetes.pod.namespace"], podUID: labels["io.kubernetes.pod.uid"], source: path,
            notes: &notes)
        return true
    }

    /// The kubelet's directory of the pod: its etc-hosts names the pod's hostname (its name,
    /// unless the pod set spec.hostname), and a pod of one container names that container.
    func kubelet(_ uid: String, _ identity: inout ContainerIdentity, notes: inout [String]) {
        let directory = "/var/lib/kubelet/pods/\(uid)"
        if identity.podName == nil,
            let hosts = trusted(directory + "/etc-hosts", limit: 64 << 10, notes: &notes)
        {
            // "# Kubernetes-managed hosts file." … "<pod ip>\t<hostname>[.subdomain…]": the last line's.
            let text = String(decoding: hosts, as: UTF8.self)
            if let line = text.split(separator: "\n").last(where: { !$0.hasPrefix("#") && !$0.allSatisfy(\.isWhitespace) }),
                let field = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).dropFirst().last,
                let name = Self.label(String(field.split(separator: ".").first ?? field))
            {
                identity.podName = name
            }
        }
        if identity.name == nil, identity.runtime != .systemdNspawn,
            let names = trustedDirectory(directory + "/containers", notes: &notes), names.count == 1,
            let name = Self.label(names[0])
        {
            identity.name = name
        }
    }

    /// Fills what is not known yet from a runtime's file, each value checked (printable, one
    /// line, bounded); a pod uid that is not the cgroup's is said, and the cgroup's kept.
    func fill(
        _ identity: inout ContainerIdentity, name: String?, image: String? = nil, podName: String? = nil,
        podNamespace: String? = nil, podUID: String? = nil, source: String, notes: inout [String]
    ) {
        if identity.name == nil { identity.name = name.flatMap(Self.printable) }
        if identity.image == nil { identity.image = image.flatMap(Self.printable) }
        if identity.podUID != nil || podUID != nil {
            if identity.podName == nil { identity.podName = podName.flatMap(Self.label) }
            if identity.podNamespace == nil { identity.podNamespace = podNamespace.flatMap(Self.label) }
        }
        if let podUID, let uid = identity.podUID, podUID != uid {
            notes.append("\(node.path(source)) names pod uid \(Self.printable(podUID) ?? "?"), not the cgroup's \(uid)")
        } else if identity.podUID == nil, let podUID, ContainerIdentity.isPodUID(Substring(podUID)) {
            identity.podUID = podUID
        }
    }

    // MARK: - Reading what root wrote

    /// A node file decoded as JSON, when it is there, root's, and decodes.
    func decode<T: Decodable>(_ path: String, notes: inout [String]) -> T? {
        guard let bytes = trusted(path, limit: Self.fileLimit, notes: &notes) else { return nil }
        do {
            return try JSONDecoder().decode(T.self, from: Data(bytes))
        } catch {
            notes.append("\(node.path(path)) is not the JSON its runtime writes; not used")
            return nil
        }
    }

    /// The bytes of the node's file at `path` (absolute, from the node's root), when it and
    /// every directory from the node's root down to it are root's and no one else's to write.
    /// Nil when it is not there or may not be read (said in `notes` when someone else could
    /// have written it, or it is not a plain file of its size).
    func trusted(_ path: String, limit: Int, notes: inout [String]) -> [UInt8]? {
        guard directoriesTrusted(above: path, notes: &notes) else { return nil }
        do {
            return try BoundedFile.read(node.path(path), limit: limit, longer: .refuse, owners: [0], whose: "root's")?.bytes
        } catch {
            // One the watcher may not open (a `crashport run` that is not root) says nothing.
            if error.reason != String(cString: strerror(EACCES)) {
                notes.append("\(error.description); the container's name is not read from it")
            }
            return nil
        }
    }

    /// The names in the node's directory `path` (itself and every directory above it root's),
    /// at most 64 of them; nil when it is not there or not believed.
    func trustedDirectory(_ path: String, notes: inout [String]) -> [String]? {
        guard directoriesTrusted(above: path + "/.", notes: &notes),
            let directory = opendir(node.path(path))
        else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        while names.count <= 64, let entry = readdir(directory) {
            let name = directoryEntryName(entry)
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    /// Whether every directory from the node's root down to `path`'s parent is a directory
    /// (not a symbolic link) of root's that no one else may write. Said in `notes` when one is
    /// someone else's.
    func directoriesTrusted(above path: String, notes: inout [String]) -> Bool {
        var directory = node.prefix
        for component in path.split(separator: "/").dropLast() {
            guard component != "..", component != "." else { return false }
            directory += "/" + component
            var info = stat()
            guard lstat(directory, &info) == 0 else { return false }
            guard info.st_mode & S_IFMT == S_IFDIR, info.st_uid == 0, info.st_mode & (S_IWGRP | S_IWOTH) == 0 else {
                let mode = String(info.st_mode & 0o7777, radix: 8)
                notes.append(
                    "\(directory): not a directory only root may write (owner \(info.st_uid), mode \(mode)); the container's name is not read under it"
                )
                return false
            }
        }
        return true
    }

    // MARK: - The container's own word

    /// The first line of the container's /etc/hostname, read as the process's user through its
    /// /proc/PID/root, following no symbolic link (a directory or file the container made a
    /// link would otherwise lead to the watcher's own files): nil when it is not there, not one
    /// printable name, or the process shares the watcher's mount namespace (the hostname
    /// would be the machine's, not the container's).
    public static func ownHostname(_ access: ProcessAccess) -> String? {
        let pid = access.pid
        let line: String?? = try? access.perform {
            var own = stat(), theirs = stat()
            guard stat("/proc/self/ns/mnt", &own) == 0, stat("/proc/\(pid)/ns/mnt", &theirs) == 0,
                own.st_ino != theirs.st_ino || own.st_dev != theirs.st_dev
            else { return nil }
            let etc = open("/proc/\(pid)/root/etc", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            guard etc >= 0 else { return nil }
            defer { close(etc) }
            guard let contents = try? BoundedFile.read("/proc/self/fd/\(etc)/hostname", limit: 256, longer: .head),
                let first = contents.bytes.split(separator: UInt8(ascii: "\n")).first
            else { return nil }
            return label(String(decoding: first, as: UTF8.self))
        }
        return line ?? nil
    }

    // MARK: - Checks

    /// A value shown as it is: printable, one line, at most 256 bytes; nil otherwise.
    static func printable(_ text: String) -> String? {
        guard !text.isEmpty, text.utf8.count <= 256,
            text.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7f && !($0.value >= 0x80 && $0.value < 0xa0) })
        else { return nil }
        return text
    }

    /// A name as Kubernetes and hostnames spell them: letters, digits, `-`, `_`, `.`, at most
    /// 253 bytes; nil otherwise.
    static func label(_ text: String) -> String? {
        let trimmed = String(text.drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" }.reversed())
        guard !trimmed.isEmpty, trimmed.utf8.count <= 253, trimmed != ".", trimmed != "..",
            trimmed.utf8.allSatisfy({
                ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x5a) || ($0 >= 0x61 && $0 <= 0x7a) || $0 == 0x2d
                    || $0 == 0x2e || $0 == 0x5f
            })
        else { return nil }
        return trimmed
    }
}

/// The part of an OCI runtime spec (config.json) that names a container.
struct OCIConfig: Decodable {
    var annotations: [String: String]?
}

/// An entry of containers/storage's containers.json (podman's names).
struct StorageContainer: Decodable {
    var id: String
    var names: [String]?
}

/// The part of docker's config.v2.json that names a container (docker's own field names).
struct DockerConfig: Decodable {
    struct Inner: Decodable {
        var image: String?
        var labels: [String: String]?

        enum CodingKeys: String, CodingKey {
            case image = "Image"
            case labels = "Labels"
        }
    }
    var name: String?
    var config: Inner?

    enum CodingKeys: String, CodingKey {
        case name = "Name"
        case config = "Config"
    }
}
