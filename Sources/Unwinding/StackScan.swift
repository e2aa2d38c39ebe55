// StackScan: when libunwind loses a thread, the stack above sp is searched for a word that is a
// plausible return address: it points into code, right after a call instruction.

enum StackScan {
    /// How many words above sp are searched.
    static let words = 256

    /// True when `bytes`, the bytes immediately before a candidate return address (the last one
    /// is the byte just before it; up to 8 are examined), end with a call instruction.
    static func endsWithCall(_ bytes: some RandomAccessCollection<UInt8>) -> Bool {
        let count = bytes.count
        func byte(_ offset: Int) -> UInt8 { bytes[bytes.index(bytes.startIndex, offsetBy: offset)] }
        if count >= 5, byte(count - 5) == 0xE8 { return true }  // call rel32
        // call r/m64: FF /2, with modrm lengths 2 (register, [reg]), 3 (disp8/SIB), 6-7 (disp32).
        for length in 2...7 where length <= count {
            let opcode = byte(count - length), modrm = byte(count - length + 1)
            if opcode == 0xFF && (modrm >> 3) & 7 == 2 { return true }
        }
        return false
    }
}

extension Unwinder {
    func readWord(_ address: UInt64) -> UInt64? {
        var value: UInt64 = 0
        return withUnsafeMutableBytes(of: &value) { read(address, into: $0) } ? value : nil
    }

    /// True when the bytes before `ret` end with a call instruction.
    func followsCall(_ ret: UInt64) -> Bool {
        guard ret >= 8 else { return false }
        var bytes: UInt64 = 0
        return withUnsafeMutableBytes(of: &bytes) { buffer in
            read(ret - 8, into: buffer) && StackScan.endsWithCall(UnsafeRawBufferPointer(buffer))
        }
    }

    /// Scans upwards from sp for a plausible return address: the slot holding it and its value.
    func scanForReturn(above sp: UInt64) -> (slot: UInt64, value: UInt64)? {
        for index in 0..<UInt64(StackScan.words) {
            let slot = sp &+ index * 8
            guard let value = readWord(slot) else { return nil }
            if isCode(value) && followsCall(value) { return (slot, value) }
        }
        return nil
    }
}
