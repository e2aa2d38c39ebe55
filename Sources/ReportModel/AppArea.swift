// AppArea: what a crashed program told crashport about itself (crashport_annotate,
// crashport_breadcrumb, crashport_attach_file), decoded from the cp_app_area read out of its
// memory (crashport_protocol.h).
//
// The bytes are the crashed process's memory, so hostile: the header must carry the magic,
// version 2 and a size no smaller than the area before the handled error's own block (a stub
// from before it declares that size; the block is read only when the size covers it); a slot
// is taken only when its sequence is even (a slot some thread was writing when the process
// stopped is skipped, and counted) and marked used; text ends at its first NUL or at the end
// of its array, and invalid UTF-8 is replaced, never trusted. Offsets come from the C header
// through MemoryLayout.

import CCrashPortProtocol

/// A C++ exception that escaped (std::terminate): its demangled type, and what() when it is a
/// std::exception.
public struct UncaughtException: Sendable, Equatable, Codable {
    public var type: String
    public var message: String?
    public var truncated: Bool

    public init(type: String, message: String?, truncated: Bool = false) {
        self.type = type
        self.message = message
        self.truncated = truncated
    }
}

/// One breadcrumb, as the program added it.
public struct Breadcrumb: Sendable, Equatable, Codable {
    /// Nanoseconds since the Unix epoch (CLOCK_REALTIME when it was added).
    public var timeNanoseconds: UInt64
    public var category: String
    public var message: String
    public var truncated: Bool

    public init(timeNanoseconds: UInt64, category: String, message: String, truncated: Bool = false) {
        self.timeNanoseconds = timeNanoseconds
        self.category = category
        self.message = message
        self.truncated = truncated
    }
}

/// A handled error's own properties and files (crashport_report_error_with): the
/// cp_error_details block, for the ERROR record of thread `thread` only.
public struct HandledErrorDetails: Sendable, Equatable {
    /// The thread that reported it (and wrote the block).
    public var thread: ThreadID
    /// Its key/values, in the program's order, each key once; `truncated`: cut to the stub's limit.
    public var properties: [Annotation] = []
    /// Absolute paths of its own files, to copy into its report.
    public var files: [String] = []
    /// Properties and files the program gave past the stub's limits (or with a path too long).
    public var propertiesLeftOut = 0
    public var filesLeftOut = 0

    /// The stub's limits (crashport.h, crashport_report_error_with).
    public static let maximumProperties = Int(CP_ERROR_PROPERTY_MAX)
    public static let maximumFiles = Int(CP_ERROR_FILE_MAX)
    public static let maximumPathBytes = Int(CP_ERROR_PATH_BYTES) - 1

    public init(
        thread: ThreadID, properties: [Annotation] = [], files: [String] = [], propertiesLeftOut: Int = 0,
        filesLeftOut: Int = 0
    ) {
        self.thread = thread
        self.properties = properties
        self.files = files
        self.propertiesLeftOut = propertiesLeftOut
        self.filesLeftOut = filesLeftOut
    }
}

public struct AppArea: Sendable, Equatable {
    public var annotations: [Annotation] = []
    /// Oldest first: the last 100 the program added.
    public var breadcrumbs: [Breadcrumb] = []
    /// Absolute paths of the files to copy into the report.
    public var attachments: [String] = []
    /// Slots skipped because a thread was writing them when the process stopped.
    public var slotsInFlux = 0
    /// The uncaught C++ exception the stub's std::terminate handler saw.
    public var exception: UncaughtException?
    /// The handled error being reported (crashport_report_error), for an ERROR record.
    public var handledError: UncaughtException?
    /// Its own properties and files (crashport_report_error_with), when the area was read with
    /// them (`rangesToRead(header:errorDetails:)`) and the block was complete and in use.
    public var handledErrorDetails: HandledErrorDetails?
    /// Where the stub's cp_error_stack block is (crashport_report_error_stack), 0 when the area
    /// does not say (a stub before it); capture reads it for an ERROR record.
    public var errorStackAddress: UInt64 = 0
    /// The handled error's own stack, as capture read it from there.
    public var handledErrorStack: HandledErrorStack?
    /// The launch window: CLOCK_REALTIME at install (0: not installed), its length (0: until
    /// crashport_launch_completed) and whether the program ended it.
    public var installTimeNanoseconds: UInt64 = 0
    public var launchMilliseconds: UInt32 = 0
    public var launchCompleted = false
    /// CRASHPORT_RELEASE when the program was installed, nil if unset.
    public var release: String?

    /// Whether a crash at `time` (ns since the epoch) fell inside the launch window; nil when the
    /// window is unknown.
    public func crashedDuringLaunch(at time: UInt64) -> Bool? {
        guard installTimeNanoseconds != 0 else { return nil }
        if launchCompleted { return false }
        if launchMilliseconds == 0 { return true }
        return time &- installTimeNanoseconds < UInt64(launchMilliseconds) * 1_000_000 || time < installTimeNanoseconds
    }
    /// Where glibc's `__abort_msg` and the Swift runtime's fatal error message pointer are in
    /// the process (0: not loaded), for capture to follow.
    public var abortMessageAddress: UInt64 = 0
    public var swiftMessageAddress: UInt64 = 0
    /// What capture found there: glibc's last words (a failed assert, malloc's check) and the
    /// Swift runtime's fatal error.
    public var abortMessage: String?
    public var swiftMessage: String?
    /// The program's attachments from memory, read while the process was held.
    public var memoryAttachments: [MemoryAttachment] = []

    public init() {}

    /// The whole area's size in this watcher's layout: what capture reads.
    public static let size = MemoryLayout<cp_app_area>.size
    /// The smallest area read: one from a stub before the handled error's own block
    /// (error_details, appended), which declares this size.
    public static let minimumSize = Int(CP_APP_SIZE_MIN)
    /// An area with the handled error's own block and without the address of its own stack
    /// (error_stack, appended after it), from a stub before the latter.
    public static let detailsSize = Int(CP_APP_SIZE_DETAILS)
    /// An area with the error stack's address and without the memory attachments (a stub
    /// before them), which declares this size.
    public static let stackSize = Int(CP_APP_SIZE_STACK)

    /// The header alone: read first, to skip a process that never used the area.
    public static let headerSize = MemoryLayout<cp_app_area>.offset(of: \cp_app_area.annotations)!

    /// The parts of an area worth reading, given its header (in area offsets): the header, the
    /// annotation, breadcrumb and attachment slots below their high-water marks (clamped: the
    /// header is the process's word), and the tail (runtime messages, launch, error); with
    /// `errorDetails` (an ERROR record's capture), the handled error's own block too, when the
    /// area's declared size covers it; and the memory attachments' table (2.5 KB) when it does.
    /// The rest was never written, so reads as zeros.
    public static func rangesToRead(header bytes: [UInt8], errorDetails: Bool = false) -> [Range<Int>] {
        guard bytes.count >= headerSize else { return [0..<size] }
        let wire = WireBytes(bytes: bytes)
        let details = offset(\.error_details)
        let declared = Int(wire.u32(offset(\.size)))
        let hasDetails = errorDetails && declared >= detailsSize
        let hasStack = errorDetails && declared >= stackSize
        let annotations = min(Int(wire.u32(offset(\.annotations_used))), Int(CP_ANNOTATION_MAX))
        let attachments = min(Int(wire.u32(offset(\.attachments_used))), Int(CP_ATTACHMENT_MAX))
        let crumbs = Int(min(wire.u64(offset(\.breadcrumb_count)), UInt64(CP_BREADCRUMB_MAX)))
        func slots(_ start: Int, _ count: Int, _ stride: Int) -> Range<Int> { start..<start + count * stride }
        return [
            0..<headerSize,
            slots(offset(\.annotations), annotations, MemoryLayout<cp_annotation>.size),
            slots(offset(\.breadcrumbs), crumbs, MemoryLayout<cp_breadcrumb>.size),
            slots(offset(\.attachments), attachments, MemoryLayout<cp_attachment>.size),
            offset(\.abort_message_address)..<details,
            hasDetails ? details..<detailsSize : 0..<0,
            hasStack ? detailsSize..<stackSize : 0..<0,
            declared >= size ? stackSize..<size : 0..<0,
        ].filter { !$0.isEmpty }
    }

    /// The heartbeat in an area's header (crashport_heartbeat), nil when the header is not an
    /// area in use. The values are the process's word: the hang monitor only compares them.
    public struct Heartbeat: Equatable, Sendable {
        public var nanoseconds: UInt64
        public var count: UInt64
        public var thread: ThreadID
    }

    public static func heartbeat(header bytes: [UInt8]) -> Heartbeat? {
        guard inUse(header: bytes) else { return nil }
        let wire = WireBytes(bytes: bytes)
        return Heartbeat(
            nanoseconds: wire.u64(offset(\.heartbeat_ns)), count: wire.u64(offset(\.heartbeat_count)),
            thread: ThreadID(Int32(bitPattern: wire.u32(offset(\.heartbeat_tid)))))
    }

    /// Whether a header says the area is in use (magic and version); then read `size` bytes.
    public static func inUse(header bytes: [UInt8]) -> Bool {
        let wire = WireBytes(bytes: bytes)
        return bytes.count >= headerSize && wire.u32(offset(\.magic)) == CP_APP_MAGIC
            && wire.u32(offset(\.version)) == CP_APP_VERSION
    }

    /// The header fields that move when the program adds content: breadcrumb_count,
    /// annotations_used and attachments_used (a monitor re-reads the area only when they do).
    public static func changeSignature(header bytes: [UInt8]) -> [UInt8] {
        guard bytes.count >= headerSize else { return [] }
        let count = offset(\.breadcrumb_count), used = offset(\.annotations_used)
        return Array(bytes[count..<count + 8] + bytes[used..<used + 8])
    }

    /// Decodes an area, or says why it cannot.
    public init(bytes: [UInt8]) throws {
        guard bytes.count >= Self.minimumSize else {
            throw WireError.badField("app area of \(bytes.count) bytes (expected at least \(Self.minimumSize))")
        }
        let wire = WireBytes(bytes: bytes)
        guard wire.u32(Self.offset(\.magic)) == CP_APP_MAGIC else { throw WireError.badField("app area without its magic") }
        let version = wire.u32(Self.offset(\.version))
        guard version == CP_APP_VERSION else { throw WireError.badField("app area version \(version)") }
        let declared = Int(wire.u32(Self.offset(\.size)))
        guard declared >= Self.minimumSize else { throw WireError.badField("app area declares \(declared) bytes") }

        func text(_ start: Int, _ capacity: Int) -> String {
            let field = bytes[start..<start + capacity]
            return String(decoding: field.prefix { $0 != 0 }, as: UTF8.self)
        }

        let annotationSize = MemoryLayout<cp_annotation>.size
        let key = MemoryLayout<cp_annotation>.offset(of: \cp_annotation.key)!
        let value = MemoryLayout<cp_annotation>.offset(of: \cp_annotation.value)!
        var seen = Set<String>()
        for index in 0..<Int(CP_ANNOTATION_MAX) {
            let start = Self.offset(\.annotations) + index * annotationSize
            guard let flags = slot(wire, sequence32: start, flags: start + 4) else { continue }
            let name = text(start + key, Int(CP_ANNOTATION_KEY_BYTES))
            // A key twice (a hostile area, or a remove and add torn apart) is reported once.
            guard !name.isEmpty, seen.insert(name).inserted else { continue }
            annotations.append(
                Annotation(
                    key: name, value: text(start + value, Int(CP_ANNOTATION_VALUE_BYTES)),
                    truncated: flags & CP_SLOT_TRUNCATED != 0))
        }

        let crumbSize = MemoryLayout<cp_breadcrumb>.size
        let count = wire.u64(Self.offset(\.breadcrumb_count))
        let capacity = UInt64(CP_BREADCRUMB_MAX)
        let oldest = count > capacity ? count - capacity : 0
        var crumbs: [(number: UInt64, crumb: Breadcrumb)] = []
        for index in 0..<Int(CP_BREADCRUMB_MAX) {
            let start = Self.offset(\.breadcrumbs) + index * crumbSize
            let sequence = wire.u64(start + MemoryLayout<cp_breadcrumb>.offset(of: \cp_breadcrumb.sequence)!)
            guard sequence != 0 else { continue }
            guard sequence & 1 == 0 else {
                slotsInFlux += 1
                continue
            }
            // Breadcrumb n lives in slot n % 100 with sequence 2n + 2; anything else is stale or forged.
            let number = sequence / 2 - 1
            guard number >= oldest, number < count, number % capacity == UInt64(index) else { continue }
            let flags = wire.u32(start + MemoryLayout<cp_breadcrumb>.offset(of: \cp_breadcrumb.flags)!)
            crumbs.append(
                (
                    number,
                    Breadcrumb(
                        timeNanoseconds: wire.u64(start + MemoryLayout<cp_breadcrumb>.offset(of: \cp_breadcrumb.time_ns)!),
                        category: text(
                            start + MemoryLayout<cp_breadcrumb>.offset(of: \cp_breadcrumb.category)!,
                            Int(CP_BREADCRUMB_CATEGORY_BYTES)),
                        message: text(
                            start + MemoryLayout<cp_breadcrumb>.offset(of: \cp_breadcrumb.message)!,
                            Int(CP_BREADCRUMB_MESSAGE_BYTES)),
                        truncated: flags & CP_SLOT_TRUNCATED != 0)
                ))
        }
        breadcrumbs = crumbs.sorted { $0.number < $1.number }.map(\.crumb)

        let attachmentSize = MemoryLayout<cp_attachment>.size
        let path = MemoryLayout<cp_attachment>.offset(of: \cp_attachment.path)!
        for index in 0..<Int(CP_ATTACHMENT_MAX) {
            let start = Self.offset(\.attachments) + index * attachmentSize
            guard slot(wire, sequence32: start, flags: start + 4) != nil else { continue }
            let name = text(start + path, Int(CP_ATTACHMENT_PATH_BYTES))
            if name.hasPrefix("/"), !attachments.contains(name) { attachments.append(name) }
        }

        abortMessageAddress = wire.u64(Self.offset(\.abort_message_address))
        swiftMessageAddress = wire.u64(Self.offset(\.swift_message_address))
        installTimeNanoseconds = wire.u64(Self.offset(\.install_time_ns))
        launchMilliseconds = wire.u32(Self.offset(\.launch_ms))
        launchCompleted = wire.u32(Self.offset(\.launch_completed)) != 0
        let releaseText = text(Self.offset(\.release), Int(CP_RELEASE_BYTES))
        release = releaseText.isEmpty ? nil : releaseText
        if let flags = slot(wire, sequence32: Self.offset(\.error_sequence), flags: Self.offset(\.error_flags)) {
            let type = text(Self.offset(\.error_type), Int(CP_ERROR_TYPE_BYTES))
            let message = text(Self.offset(\.error_message), Int(CP_ERROR_MESSAGE_BYTES))
            handledError = UncaughtException(
                type: type.isEmpty ? "error" : type, message: message.isEmpty ? nil : message,
                truncated: flags & CP_SLOT_TRUNCATED != 0)
        }
        if declared >= Self.detailsSize, bytes.count >= Self.detailsSize { handledErrorDetails = errorDetails(wire, text) }
        if declared >= Self.stackSize, bytes.count >= Self.stackSize { errorStackAddress = wire.u64(Self.offset(\.error_stack)) }
        let exceptionStart = Self.offset(\.exception_sequence)
        if let flags = slot(wire, sequence32: exceptionStart, flags: Self.offset(\.exception_flags)) {
            let type = text(Self.offset(\.exception_type), Int(CP_EXCEPTION_TYPE_BYTES))
            let message = text(Self.offset(\.exception_message), Int(CP_EXCEPTION_MESSAGE_BYTES))
            if !type.isEmpty {
                exception = UncaughtException(
                    type: type, message: message.isEmpty ? nil : message, truncated: flags & CP_SLOT_TRUNCATED != 0)
            }
        }
    }

    /// Text the program's memory holds at an address (read by `read`, at most `limit` bytes),
    /// up to its first NUL; nil when unreadable or empty.
    public static func message(at address: UInt64, limit: Int = 4096, read: (UInt64, Int) -> [UInt8]) -> String? {
        guard address != 0 else { return nil }
        let bytes = read(address, limit).prefix { $0 != 0 }
        guard !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Follows the runtimes' pointers named in an area's raw bytes, reading the process with
    /// `read` (while it is held): glibc's `__abort_msg` (a struct abort_msg_s *: u32 size, then
    /// the text) and Swift's (an atomic const char *).
    public static func readMessages(
        area bytes: [UInt8], _ read: (UInt64, Int) -> [UInt8]
    ) -> (
        abort: String?, swift: String?
    ) {
        guard bytes.count >= size else { return (nil, nil) }
        let wire = WireBytes(bytes: bytes)
        func pointer(at address: UInt64) -> UInt64 {
            guard address != 0 else { return 0 }
            let bytes = read(address, 8)
            return bytes.count == 8 ? WireBytes(bytes: bytes).u64(0) : 0
        }
        let glibc = pointer(at: wire.u64(offset(\.abort_message_address)))
        let abort = glibc != 0 && glibc < UInt64.max - 4 ? message(at: glibc + 4, read: read) : nil
        return (abort, message(at: pointer(at: wire.u64(offset(\.swift_message_address))), read: read))
    }

    /// The address of the stub's cp_error_stack that an area's raw bytes name, 0 when none.
    public static func errorStackAddress(area bytes: [UInt8]) -> UInt64 {
        guard bytes.count >= size, Int(WireBytes(bytes: bytes).u32(offset(\.size))) >= size else { return 0 }
        return WireBytes(bytes: bytes).u64(offset(\.error_stack))
    }

    /// The error_details block: nil when free, being written (counted) or naming no thread; a
    /// property is taken when its slot is used, its key is not empty and not seen before; a
    /// file when its slot is used and its path is absolute and not seen before. Counts are
    /// clamped to the arrays.
    private mutating func errorDetails(_ wire: WireBytes, _ text: (Int, Int) -> String) -> HandledErrorDetails? {
        func field<T>(_ path: KeyPath<cp_error_details, T>) -> Int {
            Self.offset(\.error_details) + MemoryLayout<cp_error_details>.offset(of: path)!
        }
        guard slot(wire, sequence32: field(\.sequence), flags: field(\.flags)) != nil else { return nil }
        let tid = Int32(bitPattern: wire.u32(field(\.tid)))
        guard tid > 0 else { return nil }
        var details = HandledErrorDetails(
            thread: ThreadID(tid), propertiesLeftOut: Int(wire.u32(field(\.properties_left_out))),
            filesLeftOut: Int(wire.u32(field(\.files_left_out))))
        let propertySize = MemoryLayout<cp_error_property>.size
        let key = MemoryLayout<cp_error_property>.offset(of: \cp_error_property.key)!
        let value = MemoryLayout<cp_error_property>.offset(of: \cp_error_property.value)!
        var keys = Set<String>()
        for index in 0..<min(Int(wire.u32(field(\.property_count))), Int(CP_ERROR_PROPERTY_MAX)) {
            let start = field(\.properties) + index * propertySize
            let flags = wire.u32(start + MemoryLayout<cp_error_property>.offset(of: \cp_error_property.flags)!)
            guard flags & CP_SLOT_USED != 0 else { continue }
            let name = text(start + key, Int(CP_ERROR_KEY_BYTES))
            guard !name.isEmpty, keys.insert(name).inserted else { continue }
            details.properties.append(
                Annotation(
                    key: name, value: text(start + value, Int(CP_ERROR_VALUE_BYTES)),
                    truncated: flags & CP_SLOT_TRUNCATED != 0))
        }
        let fileSize = MemoryLayout<cp_error_file>.size
        let path = MemoryLayout<cp_error_file>.offset(of: \cp_error_file.path)!
        for index in 0..<min(Int(wire.u32(field(\.file_count))), Int(CP_ERROR_FILE_MAX)) {
            let start = field(\.files) + index * fileSize
            guard wire.u32(start + MemoryLayout<cp_error_file>.offset(of: \cp_error_file.flags)!) & CP_SLOT_USED != 0 else {
                continue
            }
            let name = text(start + path, Int(CP_ERROR_PATH_BYTES))
            if name.hasPrefix("/"), !details.files.contains(name) { details.files.append(name) }
        }
        return details
    }

    /// A used slot's flags, or nil for a free one or one being written (counted).
    private mutating func slot(_ wire: WireBytes, sequence32 sequenceOffset: Int, flags flagsOffset: Int) -> UInt32? {
        let flags = wire.u32(flagsOffset)
        guard flags & CP_SLOT_USED != 0 else { return nil }
        guard wire.u32(sequenceOffset) & 1 == 0 else {
            slotsInFlux += 1
            return nil
        }
        return flags
    }

    private static func offset<T>(_ path: KeyPath<cp_app_area, T>) -> Int { MemoryLayout<cp_app_area>.offset(of: path)! }
}
