// The package-note target: whoever built a module chose its `.note.package` bytes (FuzzTarget.swift
// says what a target is).

import BoundedBytes
import ObjectFile

extension FuzzTarget {
    static func packageNote(_ input: UnsafeRawBufferPointer) {
        let parsed = PackageNote.parse(input)
        if case .success(let metadata) = parsed {
            for value in [
                metadata.type, metadata.name, metadata.version, metadata.architecture, metadata.os, metadata.osVersion,
                metadata.debugInfoURL,
            ] {
                guard let value else { continue }
                if value.utf8.count > PackageNote.maximumValueBytes { fatalError("a value past its bound: \(value.utf8.count)") }
                if value.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
                    fatalError("a control character kept")
                }
            }
        }
        // The same bytes as one note's descriptor in a note area (a PT_NOTE read from memory).
        guard input.count <= PackageNote.maximumBytes + 16 else { return }
        var area: [UInt8] = []
        for word in [UInt32(4), UInt32(input.count), PackageNote.type] { withUnsafeBytes(of: word.littleEndian) { area += $0 } }
        area += Array("FDO\0".utf8) + Array(input) + [UInt8](repeating: 0, count: (4 - input.count % 4) % 4)
        let again = area.withUnsafeBytes { ELFFile.packageNote(inNotes: ByteView($0)) }
        if again != parsed { fatalError("the note area's reading differs from the descriptor's") }
    }
}
