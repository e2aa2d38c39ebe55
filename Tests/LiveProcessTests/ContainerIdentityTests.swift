// ContainerIdentity from the cgroup paths each runtime makes (systemd and cgroupfs drivers, cgroup
// v1 and v2, a reader in another cgroup namespace), the paths that lie (a user's own cgroup
// named like a container, ids and pod uids of the wrong form, ".."), and ContainerNames reading a
// node laid out in a temporary directory: root's files believed, a user's refused with a note,
// a huge file, a FIFO, a symbolic link, JSON that is not.

import Foundation
import LiveProcess
import ReportModel
import XCTest

final class ContainerIdentityTests: XCTestCase {
    let id = "4f3e2d1c0b9a8f7e6d5c4b3a29180716f5e4d3c2b1a09f8e7d6c5b4a39281706"
    let uid = "0b4f1c3e-8a2d-4c61-9f7e-2d5b3a1c0e9f"
    var slicedUID: String { uid.replacingOccurrences(of: "-", with: "_") }

    func parse(_ path: String) -> ContainerIdentity { ContainerIdentity.parse(cgroup: path) }

    // MARK: - Paths

    func testEachRuntimesLayout() {
        let docker = parse("/system.slice/docker-\(id).scope")
        XCTAssertEqual(docker.runtime, .docker)
        XCTAssertEqual(docker.id, id)
        XCTAssertNil(docker.unit)
        XCTAssertNil(docker.podUID)
        XCTAssertEqual(parse("/docker/\(id)").runtime, .docker, "cgroupfs driver")
        XCTAssertEqual(parse("/system.slice/docker-\(id).scope/init").id, id, "a cgroup inside the container's")

        let containerd = parse(
            "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod\(slicedUID).slice/cri-containerd-\(id).scope")
        XCTAssertEqual(containerd.runtime, .containerd)
        XCTAssertEqual(containerd.id, id)
        XCTAssertEqual(containerd.podUID, uid, "the slice's _ are the uid's -")
        let guaranteed = parse("/kubepods.slice/kubepods-pod\(slicedUID).slice/crio-\(id).scope")
        XCTAssertEqual(guaranteed.runtime, .crio)
        XCTAssertEqual(guaranteed.podUID, uid)
        XCTAssertEqual(
            parse("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod\(slicedUID).slice/docker-\(id).scope")
                .runtime, .docker, "dockershim")
        let cgroupfs = parse("/kubepods/burstable/pod\(uid)/\(id)")
        XCTAssertEqual(cgroupfs.id, id)
        XCTAssertEqual(cgroupfs.podUID, uid)
        XCTAssertNil(cgroupfs.runtime, "the cgroupfs driver's path does not say; the node's files do")
        XCTAssertEqual(parse("/kubepods/pod\(uid)/\(id)").podUID, uid)
        let staticPod = String(repeating: "9c", count: 16)
        XCTAssertEqual(
            parse("/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod\(staticPod).slice/cri-containerd-\(id).scope")
                .podUID, staticPod, "a static pod's uid is its manifest's hash")

        XCTAssertEqual(parse("/machine.slice/libpod-\(id).scope").runtime, .podman)
        XCTAssertEqual(parse("/machine.slice/libpod-conmon-\(id).scope").id, id)
        XCTAssertFalse(parse("/machine.slice/libpod-\(id).scope").rootless)
        let rootless = parse("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-\(id).scope")
        XCTAssertEqual(rootless.runtime, .podman)
        XCTAssertTrue(rootless.rootless, "labelled, not trusted")

        let machine = parse("/machine.slice/machine-build\\x2dbox.scope")
        XCTAssertEqual(machine.runtime, .systemdNspawn)
        XCTAssertEqual(machine.name, "build-box")
        XCTAssertNil(machine.id)
        XCTAssertEqual(parse("/machine.slice/systemd-nspawn@web.service").name, "web")

        // A reader in a pod's cgroup namespace sees another pod's path under its hidden ancestors.
        let namespaced = parse(
            "/../../kubepods-burstable.slice/kubepods-burstable-pod\(slicedUID).slice/cri-containerd-\(id).scope")
        XCTAssertEqual(namespaced.runtime, .containerd)
        XCTAssertEqual(namespaced.podUID, uid)
    }

    func testUnitsOutsideContainers() {
        XCTAssertEqual(parse("/system.slice/nginx.service").unit, "nginx.service")
        XCTAssertEqual(parse("/user.slice/user-1000.slice/user@1000.service/app.slice/run-r1.scope").unit, "run-r1.scope")
        XCTAssertEqual(parse("/init.scope").unit, "init.scope")
        XCTAssertNil(parse("/").unit)
        XCTAssertFalse(parse("/system.slice/nginx.service").isContainer)
    }

    func testTheProcFileLinesInOrder() throws {
        // A v1/v2 hybrid with docker's cgroupfs driver: the unified line is systemd's, the
        // memory controller's names the container.
        let hybrid =
            "9:name=systemd:/system.slice/containerd.service\n4:memory:/docker/\(id)\n0::/system.slice/containerd.service\n"
        let identity = try XCTUnwrap(ContainerIdentity.parse(procCgroup: hybrid))
        XCTAssertEqual(identity.runtime, .docker)
        XCTAssertEqual(identity.cgroup, "/docker/\(id)")
        let plain = try XCTUnwrap(ContainerIdentity.parse(procCgroup: "4:memory:/user.slice\n0::/system.slice/cron.service\n"))
        XCTAssertEqual(plain.cgroup, "/system.slice/cron.service", "the unified path when none names a container")
        XCTAssertEqual(plain.unit, "cron.service")
        XCTAssertEqual(
            ContainerIdentity.parse(procCgroup: "2:cpu:/docker/\(id)\n0::/\n")?.id, id, "any v1 controller's line")
        XCTAssertNil(ContainerIdentity.parse(procCgroup: "garbage\n::\n"))
    }

    func testPathsThatLie() {
        // A user's delegated tree: any name they like.
        for path in [
            "/user.slice/user-1000.slice/user@1000.service/app.slice/docker-\(id).scope",
            "/user.slice/user-1000.slice/user@1000.service/kubepods.slice/kubepods-pod\(slicedUID).slice/cri-containerd-\(id).scope",
            "/user.slice/user-1000.slice/user@1000.service/docker/\(id)",
            "/user.slice/user-1000.slice/user@1000.service/machine.slice/machine-x.scope",
            // A service with Delegate=yes, whose user may make cgroups under it.
            "/system.slice/build.service/docker-\(id).scope",
            "/system.slice/build.service/kubepods.slice/kubepods-pod\(slicedUID).slice/crio-\(id).scope",
            "/system.slice/build.service/machine.slice/libpod-\(id).scope",
            // Ids and pod uids of the wrong form.
            "/system.slice/docker-\(id.prefix(12)).scope",
            "/system.slice/docker-\(id.uppercased()).scope",
            "/system.slice/docker-\(id)0.scope",
            "/docker/\(id.prefix(63))g",
            "/kubepods.slice/kubepods-podnot_a_uuid.slice/cri-containerd-\(id).scope",
            "/kubepods.slice/kubepods-pod\(slicedUID.uppercased()).slice/cri-containerd-\(id).scope",
            "/kubepods/burstable/pod1/\(id)",
            "/kubepods/burstable/pod../\(id)",
            "/kubepods.slice/kubepods-guaranteed.slice/kubepods-guaranteed-pod\(slicedUID).slice/cri-containerd-\(id).scope",
            // A pod slice out of its place, a runtime out of its.
            "/kubepods.slice/kubepods-burstable-pod\(slicedUID).slice/cri-containerd-\(id).scope",
            "/system.slice/crio-\(id).scope",
            "/system.slice/libpod-\(id).scope",
            "/machine.slice/docker-\(id).scope",
            "/nested/docker/\(id)",
            // ".." and "." inside a path.
            "/docker/\(id)/../../etc",
            "/system.slice/../docker/\(id)",
            "/system.slice/./docker-\(id).scope",
        ] {
            let identity = parse(path)
            XCTAssertFalse(identity.isContainer, path)
            XCTAssertNil(identity.id, path)
            XCTAssertNil(identity.podUID, path)
        }
        XCTAssertEqual(
            parse("/user.slice/user-1000.slice/user@1000.service/app.slice/docker-\(id).scope").unit, "docker-\(id).scope",
            "a user's scope is a unit like any other")
        XCTAssertNil(parse("/machine.slice/machine-bad\\x2fname.scope").name, "an escaped slash is no machine name")
    }

    // MARK: - The node's files

    var node = ""

    override func setUpWithError() throws {
        node = NSTemporaryDirectory() + "crashport-node-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: node, withIntermediateDirectories: false)
        chmod(node, 0o755)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: node)
    }

    /// Writes `text` at the node's `path`, its directories made as they are on a node (root's, 0755).
    func lay(_ path: String, _ text: String, owner: uid_t = 0, mode: mode_t = 0o644) throws {
        let full = node + path
        try FileManager.default.createDirectory(
            atPath: (full as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
            attributes: [.posixPermissions: 0o755])
        try text.write(toFile: full, atomically: false, encoding: .utf8)
        chmod(full, mode)
        if owner != 0 { XCTAssertEqual(chown(full, owner, owner), 0) }
    }

    func containerdConfig(name: String = "web") -> String {
        """
        {"ociVersion":"1.1.0","process":{"args":["/app"]},"annotations":{
          "io.kubernetes.cri.container-type":"container","io.kubernetes.cri.container-name":"\(name)",
          "io.kubernetes.cri.sandbox-name":"web-7d4f9","io.kubernetes.cri.sandbox-namespace":"shop",
          "io.kubernetes.cri.sandbox-uid":"\(uid)","io.kubernetes.cri.image-name":"registry.example/web:1.4"}}
        """
    }

    var containerdPath: String { "/run/containerd/io.containerd.runtime.v2.task/k8s.io/\(id)/config.json" }

    func named(_ path: String, hostname: String? = nil) -> (ContainerIdentity, [String]) {
        var identity = parse(path)
        var notes: [String] = []
        ContainerNames(node: NodeRoot(node)).name(&identity, hostname: hostname, notes: &notes)
        return (identity, notes)
    }

    var podPath: String {
        "/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod\(slicedUID).slice/cri-containerd-\(id).scope"
    }

    func testContainerdAndTheKubeletName() throws {
        try requireRoot()
        try lay(containerdPath, containerdConfig())
        let (identity, notes) = named(podPath, hostname: "from-inside")
        XCTAssertEqual(identity.name, "web")
        XCTAssertEqual(identity.image, "registry.example/web:1.4")
        XCTAssertEqual(identity.podName, "web-7d4f9")
        XCTAssertEqual(identity.podNamespace, "shop")
        XCTAssertEqual(identity.podUID, uid)
        XCTAssertEqual(notes, [], "the container's own hostname does not override the node's files")

        // The kubelet's pod directory alone: the pod's hostname and its one container.
        try FileManager.default.removeItem(atPath: node + "/run")
        try lay(
            "/var/lib/kubelet/pods/\(uid)/etc-hosts",
            "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost\n10.244.1.7\tweb-7d4f9\n")
        try lay("/var/lib/kubelet/pods/\(uid)/containers/web/5c1e9a2b", "")
        let (kubelet, _) = named(podPath)
        XCTAssertEqual(kubelet.podName, "web-7d4f9")
        XCTAssertEqual(kubelet.name, "web")
        XCTAssertNil(kubelet.podNamespace)
        try lay("/var/lib/kubelet/pods/\(uid)/containers/sidecar/0a1b", "")
        XCTAssertNil(named(podPath).0.name, "two containers: which one is not known")

        // The cgroupfs driver's path: the runtime is the one whose files name the container.
        try lay(containerdPath, containerdConfig())
        let (cgroupfs, _) = named("/kubepods/besteffort/pod\(uid)/\(id)")
        XCTAssertEqual(cgroupfs.runtime, .containerd)
        XCTAssertEqual(cgroupfs.name, "web")
    }

    func testDockerCRIOAndPodmanName() throws {
        try requireRoot()
        try lay(
            "/var/lib/docker/containers/\(id)/config.v2.json",
            #"{"ID":"\#(id)","Name":"/shop-web-1","Config":{"Image":"nginx:1.27","Labels":{"com.example":"x"}}}"#)
        let (docker, _) = named("/system.slice/docker-\(id).scope")
        XCTAssertEqual(docker.name, "shop-web-1", "docker's name without its leading /")
        XCTAssertEqual(docker.image, "nginx:1.27")
        XCTAssertNil(docker.podName)

        try lay(
            "/run/containers/storage/overlay-containers/\(id)/userdata/config.json",
            #"{"annotations":{"io.kubernetes.container.name":"api","io.kubernetes.pod.name":"api-0","io.kubernetes.pod.namespace":"prod","io.kubernetes.pod.uid":"\#(uid)","io.kubernetes.cri-o.ImageName":"quay.io/x/api:2"}}"#
        )
        let (crio, _) = named("/kubepods.slice/kubepods-pod\(slicedUID).slice/crio-\(id).scope")
        XCTAssertEqual([crio.name, crio.image, crio.podName, crio.podNamespace], ["api", "quay.io/x/api:2", "api-0", "prod"])

        try FileManager.default.removeItem(atPath: node + "/run")
        try lay(
            "/var/lib/containers/storage/overlay-containers/containers.json",
            #"[{"id":"\#(String(repeating: "1", count: 64))","names":["other"]},{"id":"\#(id)","names":["db"],"image":"abc"}]"#)
        XCTAssertEqual(named("/machine.slice/libpod-\(id).scope").0.name, "db")
        XCTAssertNil(
            named("/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-\(id).scope").0.name,
            "a rootless container's names are not looked for among root's")
    }

    func testFilesAUserCouldWriteAreIgnored() throws {
        try requireRoot()
        try lay(containerdPath, containerdConfig(), owner: 65534)
        var (identity, notes) = named(podPath)
        XCTAssertNil(identity.name)
        XCTAssertNil(identity.podName)
        XCTAssertTrue(notes.contains { $0.contains("config.json") && $0.contains("owner 65534") }, "\(notes)")

        try lay(containerdPath, containerdConfig(), mode: 0o666)
        (identity, notes) = named(podPath)
        XCTAssertNil(identity.name, "others may write it")
        XCTAssertTrue(notes.contains { $0.contains("mode 666") }, "\(notes)")

        try lay(containerdPath, containerdConfig())
        chmod(node + "/run/containerd/io.containerd.runtime.v2.task/k8s.io", 0o777)
        (identity, notes) = named(podPath)
        XCTAssertNil(identity.name, "a directory others may write: the file could be anyone's")
        XCTAssertTrue(notes.contains { $0.contains("k8s.io: not a directory only root may write") }, "\(notes)")
        chmod(node + "/run/containerd/io.containerd.runtime.v2.task/k8s.io", 0o755)

        // The container's own word, as a last resort, said to be its own.
        try FileManager.default.removeItem(atPath: node + containerdPath)
        try lay(containerdPath, containerdConfig(), owner: 65534)
        (identity, notes) = named(podPath, hostname: "web-7d4f9")
        XCTAssertEqual(identity.name, "web-7d4f9")
        XCTAssertTrue(notes.contains { $0.contains("/etc/hostname") }, "\(notes)")
    }

    func testHostileNodeFiles() throws {
        try requireRoot()
        // Larger than a config.json may be: refused by its size, not read.
        try lay(containerdPath, "")
        XCTAssertEqual(truncate(node + containerdPath, 3 << 30), 0)
        var (identity, notes) = named(podPath)
        XCTAssertNil(identity.name)
        XCTAssertTrue(notes.contains { $0.contains("more than") }, "\(notes)")

        // A FIFO: opened without blocking and refused.
        try FileManager.default.removeItem(atPath: node + containerdPath)
        XCTAssertEqual(mkfifo(node + containerdPath, 0o644), 0)
        let started = Date()
        (identity, notes) = named(podPath)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        XCTAssertTrue(notes.contains { $0.contains("not a regular file") }, "\(notes)")

        // A symbolic link to a file root wrote elsewhere: not followed.
        try FileManager.default.removeItem(atPath: node + containerdPath)
        try lay("/elsewhere.json", containerdConfig())
        try FileManager.default.createSymbolicLink(atPath: node + containerdPath, withDestinationPath: node + "/elsewhere.json")
        (identity, notes) = named(podPath)
        XCTAssertNil(identity.name)
        XCTAssertTrue(notes.contains { $0.contains("symbolic link") }, "\(notes)")

        // JSON that is not, and values that are not names.
        try FileManager.default.removeItem(atPath: node + containerdPath)
        try lay(containerdPath, "{\"annotations\": [1, 2")
        (identity, notes) = named(podPath)
        XCTAssertNil(identity.name)
        XCTAssertTrue(notes.contains { $0.contains("not the JSON") }, "\(notes)")
        try lay(containerdPath, containerdConfig(name: "web\\u001b[31m"))
        XCTAssertNil(named(podPath).0.name, "a control character")
    }

    func requireRoot() throws {
        guard geteuid() == 0 else { throw XCTSkip("the node's files are root's: this test lays them out as root") }
    }
}
