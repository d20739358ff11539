#!/usr/bin/env python3
"""A local OTLP/HTTP trace receiver and webhook endpoint for passkeyd's tracing tests.

Usage: otlp_receiver.py PORT OUTPUT

Listens on 127.0.0.1:PORT (0: a port the system picks) and, once listening, writes the port it
got to OUTPUT.port. A POST to /v1/traces is parsed as an OTLP ExportTraceServiceRequest
(protobuf, gzip or not, as an OpenTelemetry Collector would) and each span becomes one JSON line
in OUTPUT:
  {"kind": "span", "service": ..., "trace_id": hex, "span_id": hex, "parent_span_id": hex or "",
   "trace_state": text, "name": ..., "span_kind": int, "status": int, "attributes": {...}}
and each export request one line with its headers:
  {"kind": "export", "headers": {lower-case name: value}}
Any other POST is taken as a webhook delivery and recorded with its headers:
  {"kind": "webhook", "path": ..., "headers": {lower-case name: value}, "body": text}
Needs opentelemetry-proto (pip).
"""

import gzip
import json
import os
import signal
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

lock = threading.Lock()


def attribute_value(value):
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value", "kvlist_value"):
        return str(getattr(value, kind))
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        lines = []
        if self.path == "/v1/traces":
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            lines.append({"kind": "export", "headers": {name.lower(): value for name, value in self.headers.items()}})
            for resource_spans in request.resource_spans:
                resource = {a.key: attribute_value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        lines.append({
                            "kind": "span",
                            "service": resource.get("service.name"),
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent_span_id": span.parent_span_id.hex(),
                            "trace_state": span.trace_state,
                            "name": span.name,
                            "span_kind": span.kind,
                            "status": span.status.code,
                            "attributes": {a.key: attribute_value(a.value) for a in span.attributes},
                        })
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            content_type = "application/x-protobuf"
        else:
            lines.append({
                "kind": "webhook",
                "path": self.path,
                "headers": {name.lower(): value for name, value in self.headers.items()},
                "body": body.decode("utf-8", "replace"),
            })
            answer = b"{}"
            content_type = "application/json"
        with lock, open(sys.argv[2], "a") as output:
            for line in lines:
                output.write(json.dumps(line) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    # A test process may start it with SIGTERM blocked (the mask is inherited): stop must work.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM, signal.SIGINT])
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    # Written whole, then renamed: a reader never sees half a number.
    with open(sys.argv[2] + ".port.part", "w") as port_file:
        port_file.write(str(server.server_address[1]))
    os.rename(sys.argv[2] + ".port.part", sys.argv[2] + ".port")
    print("listening", flush=True)
    server.serve_forever()
