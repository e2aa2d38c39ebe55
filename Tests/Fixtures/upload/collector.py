#!/usr/bin/env python3
"""collector.py RESPONSES LOG: a crash collector on 127.0.0.1 for UploadTests, answering as
Socorro's Antenna, Crashpad's servers and Sentry do. It prints its port, then serves. RESPONSES
is a JSON list of answers ({"status", "body", "headers"}), given in order, the last one
repeated; "$EVENT_ID" in a body is the envelope's event id. Every request is parsed as a
collector would (gunzipped when Content-Encoding says gzip; a multipart form split into text
fields and file parts; a Sentry envelope split into its items by their lengths, strictly, and its
event passed through Sentry Relay's own normalizer when sentry_relay can be imported, its
`errors` recorded; a request for an absolute URI, as a client sends it to a proxy, keeps that
URI as its path) and appended to LOG as one JSON line; each file part and envelope item is
saved beside LOG, named in the line, for the test to read."""
import email.parser
import email.policy
import gzip
import json
import os
import socket
import time
import ssl
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

answers = json.load(open(sys.argv[1]))
log_path = sys.argv[2]
served = [0]


class Done(Exception):
    pass


def envelope(body):
    """The envelope's header and items, read by the grammar: each item's header names its length,
    and the payload is followed by a newline or the end."""
    header_end = body.index(b"\n")
    header = json.loads(body[:header_end])
    position = header_end + 1
    items = []
    while position < len(body):
        end = body.index(b"\n", position)
        item = json.loads(body[position:end])
        payload = body[end + 1:end + 1 + item["length"]]
        if len(payload) != item["length"]:
            raise ValueError("item shorter than its length")
        position = end + 1 + item["length"]
        if position < len(body):
            if body[position:position + 1] != b"\n":
                raise ValueError("payload not followed by a newline")
            position += 1
        item["magic"] = payload[:4].decode("latin-1")
        item["saved"] = f"{log_path}.{served[0]}.{len(items)}.{item['type']}"
        with open(item["saved"], "wb") as copy:
            copy.write(payload)
        if item["type"] == "session":
            item["session"] = json.loads(payload)
        if item["type"] == "event":
            event = json.loads(payload)
            item["exception_type"] = event.get("exception", {}).get("values", [{}])[-1].get("type")
            try:
                from sentry_relay.processing import StoreNormalizer
                normalized = StoreNormalizer(project_id=1).normalize_event(raw_event=payload.decode())
                item["relay_errors"] = normalized.get("errors", [])
            except ImportError:
                item["relay_errors"] = None
        items.append(item)
    return {"event_id": header.get("event_id", ""), "envelope_header": header, "items": items}


class Collector(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        record = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "size": len(raw)}
        try:
            body = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
            if self.headers["Content-Type"] == "application/x-sentry-envelope":
                record.update(envelope(body))
                raise Done()
            head = b"Content-Type: " + self.headers["Content-Type"].encode() + b"\r\n\r\n"
            message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
            if not message.is_multipart():
                raise ValueError("not a multipart body")
            record["fields"] = {}
            record["files"] = {}
            for part in message.iter_parts():
                name = part.get_param("name", header="content-disposition")
                data = part.get_payload(decode=True) or b""
                if part.get_filename() is not None:
                    saved = f"{log_path}.{served[0]}.{name}"
                    with open(saved, "wb") as copy:
                        copy.write(data)
                    record["files"][name] = {"filename": part.get_filename(), "size": len(data), "saved": saved,
                                             "magic": data[:4].decode("latin-1"), "content_type": part.get_content_type()}
                else:
                    record["fields"][name] = data.decode("utf-8", "replace")
        except Done:
            pass
        except Exception as error:  # the test reads what went wrong
            record["error"] = repr(error)
        with open(log_path, "a") as log:
            log.write(json.dumps(record) + "\n")
        answer = answers[min(served[0], len(answers) - 1)]
        served[0] += 1
        # "delay": seconds before answering (a slow server); "close": no answer at all, the
        # connection dropped (a reset mid-request).
        time.sleep(answer.get("delay", 0))
        if answer.get("close"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        payload = answer.get("body", "").replace("$EVENT_ID", record.get("event_id", "")).encode()
        self.send_response(answer.get("status", 200))
        for name, value in answer.get("headers", {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *arguments):
        pass


server = HTTPServer(("127.0.0.1", 0), Collector)
# COLLECTOR_TLS=CERT:KEY: HTTPS with that certificate (a private CA's, made by the test).
if os.environ.get("COLLECTOR_TLS"):
    certificate, key = os.environ["COLLECTOR_TLS"].split(":")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certificate, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
