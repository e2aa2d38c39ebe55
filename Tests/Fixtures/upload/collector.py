#!/usr/bin/env python3
"""collector.py RESPONSES LOG: a crash collector on 127.0.0.1 for UploadTests, answering as
Socorro's Antenna and Crashpad's servers do. It prints its port, then serves. RESPONSES is a JSON
list of answers ({"status", "body", "headers"}), given in order, the last one repeated. Every
request is parsed as a collector would (gunzipped when Content-Encoding says gzip, the multipart
form split into text fields and file parts) and appended to LOG as one JSON line."""
import email.parser
import email.policy
import gzip
import json
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

answers = json.load(open(sys.argv[1]))
log_path = sys.argv[2]
served = [0]


class Collector(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        raw = self.rfile.read(length)
        record = {"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "size": len(raw)}
        try:
            body = gzip.decompress(raw) if self.headers.get("Content-Encoding") == "gzip" else raw
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
                    record["files"][name] = {"filename": part.get_filename(), "size": len(data),
                                             "magic": data[:4].decode("latin-1"), "content_type": part.get_content_type()}
                else:
                    record["fields"][name] = data.decode("utf-8", "replace")
        except Exception as error:  # the test reads what went wrong
            record["error"] = repr(error)
        with open(log_path, "a") as log:
            log.write(json.dumps(record) + "\n")
        answer = answers[min(served[0], len(answers) - 1)]
        served[0] += 1
        payload = answer.get("body", "").encode()
        self.send_response(answer.get("status", 200))
        for name, value in answer.get("headers", {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *arguments):
        pass


server = HTTPServer(("127.0.0.1", 0), Collector)
print(server.server_address[1], flush=True)
server.serve_forever()
