#!/usr/bin/env python3
"""receiver.py ANSWERS LOG: an OpenTelemetry collector's OTLP/HTTP logs receiver on 127.0.0.1
for OTLPUploadTests. It prints its port, then serves. Every request is decoded as a collector
would, with the official protobuf definitions (PyPI's opentelemetry-proto, which
tools/fetch-validators installs into tools/.cache/otlp): gunzipped when Content-Encoding says
gzip, then `application/x-protobuf` parsed as an ExportLogsServiceRequest, `application/json`
parsed by protobuf's own JSON parser into the same message (so OTLP's JSON mapping is checked
too: an unknown or misnamed field is an error). The request, as protobuf's JSON form of the
decoded message, is appended to LOG as one JSON line with its path and headers, and whether the
protobuf bytes were exactly what the official encoder makes of the message (no field it does not
know, nothing out of order).

ANSWERS is a JSON list of answers, given in order, the last one repeated: {"status", "headers",
"rejected", "message", "delay", "close"}. A 2xx answers an ExportLogsServiceResponse (with a
partial success when "rejected" or "message" is given), anything else a google.rpc.Status with
"message", each in the request's encoding, as the OTLP specification says; "delay" waits that
many seconds first (a stalled collector); "close" drops the connection without an answer."""
import gzip
import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse

answers = json.load(open(sys.argv[1]))
log_path = sys.argv[2]
served = [0]


def varint(number):
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    out.append(number)
    return bytes(out)


def status(code, message, as_json):
    """google.rpc.Status {code = 1, message = 2} (googleapis' rpc/status.proto)."""
    if as_json:
        return json.dumps({"code": code, "message": message}).encode()
    text = message.encode()
    return b"\x08" + varint(code) + b"\x12" + varint(len(text)) + text


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        content_type = self.headers.get("Content-Type", "")
        as_json = content_type == "application/json"
        record = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "size": len(raw)}
        try:
            body = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
            request = ExportLogsServiceRequest()
            if as_json:
                json_format.Parse(body, request)
            elif content_type == "application/x-protobuf":
                request.ParseFromString(body)
                record["canonical"] = request.SerializeToString(deterministic=True) == body
            else:
                raise ValueError("Content-Type " + content_type)
            record["request"] = json_format.MessageToDict(request)
        except Exception as error:  # the test reads what went wrong
            record["error"] = repr(error)
        with open(log_path, "a") as log:
            log.write(json.dumps(record) + "\n")
        answer = answers[min(served[0], len(answers) - 1)]
        served[0] += 1
        time.sleep(answer.get("delay", 0))
        if answer.get("close"):
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        code = answer.get("status", 200)
        if 200 <= code < 300:
            response = ExportLogsServiceResponse()
            if "rejected" in answer or "message" in answer:
                response.partial_success.rejected_log_records = answer.get("rejected", 0)
                response.partial_success.error_message = answer.get("message", "")
            payload = json_format.MessageToJson(response).encode() if as_json else response.SerializeToString()
        else:
            # google.rpc.Code for the HTTP status, roughly as the collector maps it.
            payload = status({400: 3, 429: 8, 503: 14}.get(code, 13), answer.get("message", ""), as_json)
        self.send_response(code)
        for name, value in answer.get("headers", {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json" if as_json else "application/x-protobuf")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *arguments):
        pass


server = HTTPServer(("127.0.0.1", 0), Receiver)
print(server.server_address[1], flush=True)
server.serve_forever()
