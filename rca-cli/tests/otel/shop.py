#!/usr/bin/env python3
"""A small shop of services calling each other, instrumented with the OpenTelemetry Python SDK
and exported over OTLP/HTTP (protobuf; traces gzip-compressed) to ENDPOINT.

    shop.py ENDPOINT FAULTY MODE REQUESTS [SEED]

frontend -> checkout -> pricing -> currency, and checkout -> stock. REQUESTS requests are spread
over the last 20 minutes (span and log times are set explicitly, so the run takes seconds); from
70 % of the way on, FAULTY is broken: MODE `error` makes most of its calls fail (its callers
fail with it, as callers do), MODE `slow` adds about half a second to each. Each service is its
own resource (`service.name`) with its own tracer, logger and meter provider, as separate
processes would be. Logs are written through Python's `logging` with the SDK's handler, inside
the span, so they carry its trace and span ids. Metrics (a request counter and a duration
histogram) are exported once at the end.

Prints one JSON line: how many spans, log records and metric points it produced.
"""

import json
import logging
import random
import sys
import time

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode

CALLS = {
    "frontend": ["checkout"],
    "checkout": ["pricing", "stock"],
    "pricing": ["currency"],
    "stock": [],
    "currency": [],
}
# Own work of each service, in milliseconds.
BASE_MS = {"frontend": 4, "checkout": 12, "pricing": 8, "stock": 15, "currency": 3}
WINDOW_S = 20 * 60
FAULT_FROM = 0.7


def main():
    endpoint, faulty, mode, requests = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    seed = int(sys.argv[5]) if len(sys.argv) > 5 else 7
    if faulty not in CALLS or mode not in ("error", "slow"):
        sys.exit(f"usage: shop.py ENDPOINT {{{','.join(CALLS)}}} error|slow REQUESTS [SEED]")
    rng = random.Random(seed)
    tracers, loggers, durations, counters, providers = {}, {}, {}, {}, []
    for svc in CALLS:
        resource = Resource.create({"service.name": svc, "service.namespace": "shop"})
        tp = TracerProvider(resource=resource)
        tp.add_span_processor(
            BatchSpanProcessor(
                OTLPSpanExporter(
                    endpoint=f"{endpoint}/v1/traces", compression=Compression.Gzip, timeout=30
                ),
                max_queue_size=100_000,
            )
        )
        lp = LoggerProvider(resource=resource)
        lp.add_log_record_processor(
            BatchLogRecordProcessor(
                OTLPLogExporter(endpoint=f"{endpoint}/v1/logs", timeout=30),
                max_queue_size=100_000,
            )
        )
        mp = MeterProvider(
            resource=resource,
            metric_readers=[
                PeriodicExportingMetricReader(
                    OTLPMetricExporter(endpoint=f"{endpoint}/v1/metrics", timeout=30),
                    export_interval_millis=3_600_000,
                )
            ],
        )
        providers.append((tp, lp, mp))
        tracers[svc] = tp.get_tracer("shop")
        logger = logging.getLogger(f"shop.{svc}")
        logger.handlers = [LoggingHandler(logger_provider=lp)]
        logger.setLevel(logging.INFO)
        logger.propagate = False
        loggers[svc] = logger
        meter = mp.get_meter("shop")
        durations[svc] = meter.create_histogram("rpc.server.duration", unit="ms")
        counters[svc] = meter.create_counter("rpc.server.requests")

    counts = {"spans": 0, "logs": 0}

    def log(svc, level, message, at_ns):
        record = loggers[svc].makeRecord(loggers[svc].name, level, __file__, 0, message, None, None)
        record.created = at_ns / 1e9
        record.msecs = 0
        loggers[svc].handle(record)
        counts["logs"] += 1

    def call(svc, parent_ctx, start_ns, broken):
        span = tracers[svc].start_span(
            f"{svc} /handle", context=parent_ctx, kind=SpanKind.SERVER, start_time=start_ns
        )
        ctx = trace.set_span_in_context(span)
        t = start_ns + int(rng.uniform(0.5, 1.5) * 1e6)
        failed = False
        for child in CALLS[svc]:
            t, child_failed = call(child, ctx, t, broken)
            failed = failed or child_failed
            t += int(rng.uniform(0.2, 0.8) * 1e6)
        own_ms = BASE_MS[svc] * rng.uniform(0.8, 1.25)
        own_failure = False
        if broken and svc == faulty:
            if mode == "slow":
                own_ms += rng.uniform(450, 650)
            else:
                own_failure = rng.random() < 0.8
        t += int(own_ms * 1e6)
        with trace.use_span(span, end_on_exit=False):
            if own_failure:
                log(svc, logging.ERROR, f"{svc}: request failed: internal error in handler", t)
            elif failed:
                log(svc, logging.WARNING, f"{svc}: a downstream call failed", t)
            elif rng.random() < 0.05:
                log(svc, logging.INFO, f"{svc}: handled request", t)
        if own_failure or failed:
            span.set_status(Status(StatusCode.ERROR, "internal error"))
            span.set_attribute("http.response.status_code", 500)
        else:
            span.set_attribute("http.response.status_code", 200)
        span.end(end_time=t)
        counts["spans"] += 1
        durations[svc].record((t - start_ns) / 1e6, {"outcome": "error" if own_failure or failed else "ok"})
        counters[svc].add(1)
        return t, own_failure or failed

    now_ns = time.time_ns()
    start_ns = now_ns - WINDOW_S * 10**9
    for i in range(requests):
        at = start_ns + int(i * WINDOW_S * 1e9 / requests)
        call("frontend", None, at, i >= FAULT_FROM * requests)

    for tp, lp, mp in providers:
        tp.force_flush(30_000)
        lp.force_flush(30_000)
        mp.force_flush(30_000)
    for tp, lp, mp in providers:
        tp.shutdown()
        lp.shutdown()
        mp.shutdown()
    print(json.dumps(counts))


if __name__ == "__main__":
    main()
