// ContainerIdentity from a cgroup path: which runtime put the process there, the container's
// id, the Kubernetes pod's uid, or else the systemd unit.
//
// A path is believed only where it is where its runtime puts it. A user may make cgroups of any
// name in a subtree delegated to them (their user@UID.service, a service with Delegate=yes), so
// `docker-<id>.scope` under user.slice is not docker's: each runtime's cgroup must sit at its
// runtime's place (system.slice, machine.slice, the kubepods tree, /docker), whose parents are
// root's own. The one exception, rootless podman in a user's own tree, is labelled `rootless`,
// and nothing of the node's is read for it. Ids are 64 lowercase hex digits and pod uids a
// UUID (or a static pod's 32 hex digits): nothing else from a path ever names a file.
//
// The layouts (systemd and cgroupfs drivers, cgroup v1 and v2):
//   /system.slice/docker-<id>.scope                                     docker, systemd driver
//   /docker/<id>                                                        docker, cgroupfs driver
//   /kubepods.slice/kubepods-<qos>.slice/kubepods-<qos>-pod<uid_>.slice/cri-containerd-<id>.scope
//   /kubepods.slice/kubepods-pod<uid_>.slice/crio-<id>.scope           (Guaranteed: no qos slice)
//   /kubepods/<qos>/pod<uid>/<id>                                       cgroupfs driver (runtime from the node's files)
//   /machine.slice/libpod-<id>.scope, /machine.slice/libpod-conmon-<id>.scope      podman
//   /user.slice/user-1000.slice/user@1000.service/user.slice/libpod-<id>.scope     podman, rootless
//   /machine.slice/machine-<name>.scope, /machine.slice/systemd-nspawn@<name>.service
// A reader in another cgroup namespace (a pod's) sees another pod's path as /../../kubepods-…:
// the hidden part is an ancestor of the reader's own cgroup, not the user's, so it counts as the
// place the visible part needs.

import ReportModel

extension ContainerIdentity {
    /// The identity /proc/PID/cgroup's text names: the first of its paths (the unified line,
    /// the v1 memory controller's, any other v1 line) that names a container, else the unified
    /// (or memory) path with its unit. Nil when no line parses.
    public static func parse(procCgroup text: String) -> ContainerIdentity? {
        let (unified, memory, others) = OOMCounters.cgroupPaths(text)
        let paths = [unified, memory].compactMap { $0 } + others
        guard let first = paths.first else { return nil }
        for path in paths {
            let identity = parse(cgroup: path)
            if identity.isContainer { return identity }
        }
        return parse(cgroup: first)
    }

    /// What one cgroup path names.
    public static func parse(cgroup path: String) -> ContainerIdentity {
        var identity = ContainerIdentity(cgroup: path)
        var components = path.split(separator: "/").map(String.init)
        // Another cgroup namespace's view: the hidden ancestors are the reader's own.
        var hidden = false
        while components.first == ".." {
            components.removeFirst()
            hidden = true
        }
        // A ".." past the start, or an empty path, names nothing.
        guard !components.contains(".."), !components.contains(".") else { return identity }
        let place = Place(components: components, hidden: hidden)
        for index in components.indices.reversed() {
            if place.container(at: index, into: &identity) { return identity }
        }
        let suffixes = [".service", ".scope", ".socket", ".mount", ".swap", ".timer"]
        identity.unit = components.last { component in suffixes.contains { component.hasSuffix($0) } }
        return identity
    }

    /// A 64-hex-digit container id, lowercase (as every runtime writes it).
    public static func isContainerID(_ text: Substring) -> Bool {
        text.utf8.count == 64 && text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
    }

    /// A pod uid as the kubelet names pods: a UUID (8-4-4-4-12 lowercase hex), or a static pod's
    /// 32 hex digits (the hash of its manifest).
    public static func isPodUID(_ text: Substring) -> Bool {
        let hex: (UInt8) -> Bool = { ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x66) }
        let bytes = Array(text.utf8)
        if bytes.count == 32 { return bytes.allSatisfy(hex) }
        guard bytes.count == 36 else { return false }
        for (index, byte) in bytes.enumerated() {
            if [8, 13, 18, 23].contains(index) {
                guard byte == UInt8(ascii: "-") else { return false }
            } else if !hex(byte) {
                return false
            }
        }
        return true
    }

    /// The components of a path, and whether ancestors are hidden above them.
    struct Place {
        let components: [String]
        let hidden: Bool

        /// Whether the components right above `index` are `names` (outermost first), the
        /// outermost at the top of the hierarchy (or right under the hidden part, or hidden).
        func rooted(_ names: [String], above index: Int) -> Bool {
            var position = index - 1
            for name in names.reversed() {
                if position < 0 { return hidden }
                if components[position] != name { return false }
                position -= 1
            }
            return position < 0
        }

        /// Whether anything above `index` is a user's own tree (user.slice, user@UID.service).
        func underUser(_ index: Int) -> Bool {
            components[..<index].contains { $0 == "user.slice" || ($0.hasPrefix("user@") && $0.hasSuffix(".service")) }
        }

        /// The pod of a container whose cgroup is at `index`: its uid, when the component
        /// above is a pod's at the kubepods tree's place. Nil: not under a pod.
        func pod(above index: Int) -> String? {
            guard index > 0 else { return nil }
            let podIndex = index - 1
            let component = components[podIndex]
            // systemd driver: kubepods[-qos]-pod<uid with _>.slice under kubepods[-qos].slice.
            if component.hasPrefix("kubepods-"), component.hasSuffix(".slice"),
                let range = component.dropFirst("kubepods".count).firstRange(of: "pod")
            {
                let qos = component[component.index(component.startIndex, offsetBy: "kubepods".count)..<range.lowerBound]
                guard qos == "-" || qos == "-burstable-" || qos == "-besteffort-" else { return nil }
                let uid = String(
                    component[range.upperBound..<component.index(component.endIndex, offsetBy: -".slice".count)]
                        .map { $0 == "_" ? "-" : $0 })
                guard ContainerIdentity.isPodUID(Substring(uid)) else { return nil }
                let slices = qos == "-" ? ["kubepods.slice"] : ["kubepods.slice", "kubepods\(qos.dropLast()).slice"]
                return rooted(slices, above: podIndex) ? uid : nil
            }
            // cgroupfs driver: /kubepods[/qos]/pod<uid>.
            if component.hasPrefix("pod") {
                let uid = component.dropFirst(3)
                guard ContainerIdentity.isPodUID(uid) else { return nil }
                if rooted(["kubepods"], above: podIndex) || rooted(["kubepods", "burstable"], above: podIndex)
                    || rooted(["kubepods", "besteffort"], above: podIndex)
                {
                    return String(uid)
                }
            }
            return nil
        }

        /// Whether the component at `index` is a container's cgroup at its runtime's place; if
        /// so, `identity` is filled.
        func container(at index: Int, into identity: inout ContainerIdentity) -> Bool {
            let component = components[index]
            // Scopes: <prefix><id>.scope.
            let scopes: [(String, Runtime)] = [
                ("docker-", .docker), ("cri-containerd-", .containerd), ("crio-conmon-", .crio), ("crio-", .crio),
                ("libpod-conmon-", .podman), ("libpod-", .podman),
            ]
            if component.hasSuffix(".scope") {
                for (prefix, runtime) in scopes where component.hasPrefix(prefix) {
                    let id = component.dropFirst(prefix.count).dropLast(".scope".count)
                    guard ContainerIdentity.isContainerID(id) else { return false }
                    return scope(runtime, id: String(id), at: index, into: &identity)
                }
                // A systemd-nspawn machine: machine-<escaped name>.scope in machine.slice.
                if component.hasPrefix("machine-"), rooted(["machine.slice"], above: index) {
                    let name = Self.unescape(component.dropFirst("machine-".count).dropLast(".scope".count))
                    guard !name.isEmpty else { return false }
                    identity.runtime = .systemdNspawn
                    identity.name = name
                    return true
                }
            }
            if component.hasPrefix("systemd-nspawn@"), component.hasSuffix(".service"),
                rooted(["machine.slice"], above: index)
            {
                let name = Self.unescape(component.dropFirst("systemd-nspawn@".count).dropLast(".service".count))
                guard !name.isEmpty else { return false }
                identity.runtime = .systemdNspawn
                identity.name = name
                identity.unit = component
                return true
            }
            // cgroupfs: /docker/<id>, /kubepods/…/pod<uid>/<id>, /libpod_parent/libpod-<id>.
            if ContainerIdentity.isContainerID(Substring(component)) {
                if rooted(["docker"], above: index) {
                    identity.runtime = .docker
                    identity.id = component
                    return true
                }
                if let uid = pod(above: index) {
                    // The runtime is the node's files' to say (ContainerNodeFiles).
                    identity.id = component
                    identity.podUID = uid
                    return true
                }
                return false
            }
            if component.hasPrefix("libpod-"), rooted(["libpod_parent"], above: index) {
                let id = component.dropFirst("libpod-".count)
                guard ContainerIdentity.isContainerID(id) else { return false }
                identity.runtime = .podman
                identity.id = String(id)
                return true
            }
            return false
        }

        /// A runtime's scope at `index`: believed where that runtime puts it.
        func scope(_ runtime: Runtime, id: String, at index: Int, into identity: inout ContainerIdentity) -> Bool {
            if underUser(index) {
                // Only rootless podman lives in a user's tree; labelled, not trusted.
                guard runtime == .podman else { return false }
                identity.runtime = .podman
                identity.id = id
                identity.rootless = true
                return true
            }
            if let uid = pod(above: index) {
                guard runtime != .podman else { return false }
                identity.runtime = runtime
                identity.id = id
                identity.podUID = uid
                return true
            }
            let place: String? =
                switch runtime {
                case .docker, .containerd: "system.slice"
                case .podman: "machine.slice"
                case .crio, .systemdNspawn: nil
                }
            guard let place, rooted([place], above: index) else { return false }
            identity.runtime = runtime
            identity.id = id
            return true
        }

        /// systemd's unit-name escaping undone: `\x2d` is `-`. A name that unescapes to a
        /// control character or a slash is refused (empty).
        static func unescape(_ text: Substring) -> String {
            var bytes: [UInt8] = []
            var rest = Array(text.utf8)[...]
            while let byte = rest.first {
                if byte == UInt8(ascii: "\\"), rest.count >= 4, rest[rest.startIndex + 1] == UInt8(ascii: "x"),
                    let value = UInt8(
                        String(decoding: rest[(rest.startIndex + 2)..<(rest.startIndex + 4)], as: UTF8.self), radix: 16)
                {
                    bytes.append(value)
                    rest = rest.dropFirst(4)
                } else {
                    bytes.append(byte)
                    rest = rest.dropFirst()
                }
            }
            guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x20 && $0 != 0x7f && $0 != UInt8(ascii: "/") }) else { return "" }
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}
