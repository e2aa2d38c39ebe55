// RuntimeLogRecord: a crash log the process's runtime wrote before it died (the JVM's hs_err
// file, Node's diagnostic report), as the event names it: what kind, where it was, what it says
// the fault was and the runtime's own frames. Its bytes are in the report's attachments/ (an
// AttachmentRecord with scope `runtime` and the same path).

public struct RuntimeLogRecord: Codable, Sendable, Equatable {
    /// `hs_err` or `node-report`.
    public var kind: String?
    /// Where the runtime wrote it, as the process named it.
    public var path: String?
    /// The fault in the runtime's words: the JVM's problematic frame (`J 9 c2
    /// UnsafeCrash.writeThrough(JI)V`), Node's error message.
    public var problematicFrame: String?
    /// The crashed thread's frames as the runtime saw them, innermost first (the JVM's Java
    /// frames, Node's JavaScript stack).
    public var frames: [String]?
    /// Only the first part of the file was kept.
    public var truncated: Bool?

    public init(
        kind: String? = nil, path: String? = nil, problematicFrame: String? = nil, frames: [String]? = nil,
        truncated: Bool? = nil
    ) {
        self.kind = kind
        self.path = path
        self.problematicFrame = problematicFrame
        self.frames = frames
        self.truncated = truncated
    }

    enum CodingKeys: String, CodingKey {
        case kind, path
        case problematicFrame = "problematic_frame"
        case frames, truncated
    }
}

extension AttachmentRecord {
    /// The scope of a runtime's crash log the watcher found and attached (RuntimeLogRecord).
    public static let runtimeScope = "runtime"
    /// The scope of the system's log around the crash (attachments/system.log: the kernel's
    /// records about the process, its unit's journal lines).
    public static let systemScope = "system"
}
