// crashport upload: sends reports to Sentry and to Crashpad or Breakpad collectors.

import ArgumentParser
import BoundedBytes

struct Upload: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upload",
        abstract: "Send reports to Sentry, to Crashpad or Breakpad collectors, and to OpenTelemetry collectors.",
        discussion: """
            Destinations: --sentry-dsn (or CRASHPORT_SENTRY_DSN): an envelope with the event in Sentry's shape and \
            the minidump as event.minidump; --url (or CRASHPORT_UPLOAD_URL): a Crashpad/Breakpad collector, sent \
            Crashpad's multipart (the minidump as upload_file_minidump; annotations, prod, ver, guid as fields). \
            --otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_LOGS_ENDPOINT): an OpenTelemetry \
            collector over OTLP/HTTP, sent one log record per report (http/protobuf, or http/json; headers, \
            timeout, compression and the resource from the standard OTEL_* variables). All of them at once if \
            several are given; nothing is sent unless one is. Bodies to Sentry and collectors are gzipped.

            Every report not sent yet goes, oldest first, and keeps its state per destination in upload.json beside \
            it (pending, sent with the server's id, failed), so nothing is sent twice. A transport failure, a 429 or \
            a 5xx is tried again after 15 min, doubling up to 8 h, at most 6 times; a server's Retry-After or \
            X-Sentry-Rate-Limits is kept even by --now; a 413 or another 4xx is not retried; reports older than 7 \
            days are not sent.

            What crashport consent says holds: never sends nothing, ask sends only what crashport send decided. Runs \
            by hand or from a timer (crashport-upload.timer).

            --after-send (or CRASHPORT_AFTER_SEND, or after_send in crashport.toml) is told what came of each \
            attempt, after it is recorded: PROGRAM ID DESTINATION RESULT DETAIL, where RESULT is sent (DETAIL: the \
            server's id), retrying or failed (DETAIL: the reason), and the same as one JSON object on stdin. It is \
            killed after 10 s; its output, stdout and stderr, is shown up to 4 KiB; how it ends changes nothing.

            Exit status: 0 when nothing failed for good in this pass (reports to retry later included); 1 when a \
            report failed for good (a 4xx, a redirect, attempts spent, too old, dropped by --before-send) or its \
            upload.json or event.json could not be read: the summary's failed count is not 0; 64 for a usage error.
            """)

    @OptionGroup var reportsOption: ReportsOption

    @OptionGroup var uploadOptions: UploadOptions

    @Flag(name: .long, help: "Do not wait for crashport's backoff (a server's Retry-After still holds).")
    var now = false

    @Flag(name: .long, help: "Print what would be sent where; send nothing.")
    var dryRun = false

    func run() throws {
        guard var uploader = uploadOptions.uploader(store: reportsOption.store, command: "upload") else {
            usageError(
                "upload: no destination: give --sentry-dsn, --url or --otlp-endpoint, set CRASHPORT_SENTRY_DSN, CRASHPORT_UPLOAD_URL or OTEL_EXPORTER_OTLP_ENDPOINT, or write them in crashport.toml's [upload] table (nothing is sent without one)"
            )
        }
        uploader.now = now
        uploader.dryRun = dryRun
        let outcome = uploader.run()
        if !dryRun { StandardError.write(UploadOptions.summary(outcome)) }
        // A report lost in this pass is the script's to know; one to retry is not lost yet.
        if outcome.failed > 0 { throw ExitCode(ExitStatus.failure) }
    }
}
