// HTTPClient: one POST, through libcurl loaded by CShims at the first request (http.c says why
// it is loaded, not linked). What a collector answered, or why it did not.

import BoundedBytes
import CShims
import FoundationEssentials
import Glibc

public struct HTTPResponse: Sendable {
    public var status: Int
    public var body: String
    /// The body as it came (a collector's protobuf answer is not text).
    public var bytes: [UInt8] = []
    /// Header names lowercased; a repeated header keeps its last value.
    public var headers: [String: String]

    /// Reads the header block libcurl handed over (every response's, if it followed none: the
    /// last status line starts the block that counts).
    static func parseHeaders(_ text: String) -> [String: String] {
        var headers: [String: String] = [:]
        for line in text.split(whereSeparator: \.isNewline) {  // "\r\n" is one Character
            if line.hasPrefix("HTTP/") {
                headers = [:]
                continue
            }
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].trimmed.lowercased()
            headers[name] = line[line.index(after: colon)...].trimmed
        }
        return headers
    }
}

public enum HTTPClient {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// POSTs `body` to `url`; the response, or a Failure when no server answered in time.
    public static func post(
        _ url: String, headers: [String], body: [UInt8], timeoutMilliseconds: Int, caFile: String?
    ) -> Result<HTTPResponse, Failure> {
        var status = 0
        var response: UnsafeMutablePointer<CChar>?
        var responseHeaders: UnsafeMutablePointer<CChar>?
        var responseSize = 0
        var headersSize = 0
        var error = [CChar](repeating: 0, count: 512)
        let result = withArrayOfCStrings(headers) { pointers in
            body.withUnsafeBytes { bytes in
                cp_http_post(
                    url, pointers, Int32(headers.count), bytes.baseAddress, bytes.count, timeoutMilliseconds, caFile,
                    &status, &response, &responseSize, &responseHeaders, &headersSize, &error, error.count)
            }
        }
        defer {
            cp_http_free(response)
            cp_http_free(responseHeaders)
        }
        guard result == 0 else {
            return .failure(
                Failure(description: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))
        }
        func bytes(_ pointer: UnsafeMutablePointer<CChar>?, _ size: Int) -> [UInt8] {
            guard let pointer else { return [] }
            return Array(UnsafeRawBufferPointer(start: pointer, count: size))
        }
        let body = bytes(response, responseSize)
        return .success(
            HTTPResponse(
                status: status, body: String(decoding: body, as: UTF8.self), bytes: body,
                headers: HTTPResponse.parseHeaders(String(decoding: bytes(responseHeaders, headersSize), as: UTF8.self))))
    }

    /// gzip of `bytes` (request bodies, as Crashpad and Sentry send them); nil if zlib failed.
    public static func gzip(_ bytes: [UInt8]) -> [UInt8]? {
        var output: UnsafeMutableRawPointer?
        var size = 0
        let result = bytes.withUnsafeBytes { cp_gzip($0.baseAddress, $0.count, &output, &size) }
        guard result == 0, let output else { return nil }
        defer { cp_http_free(output) }
        return Array(UnsafeRawBufferPointer(start: output, count: size))
    }

    private static func withArrayOfCStrings<R>(
        _ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R
    ) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        var pointers = copies.map { UnsafePointer($0) }
        pointers.append(nil)
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }
}
