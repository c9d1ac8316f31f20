"""Prometheus metrics of one app: requests, latencies, index size, write jobs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from suture.server.service import IndexService

Scope = dict[str, Any]
Receive = Any
Send = Any

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class _IndexCollector(Collector):
    """Index size and job counts, read when Prometheus scrapes."""

    def __init__(self, service: IndexService) -> None:
        self._service = service

    def collect(self) -> Iterator[Metric]:
        info = self._service.info()
        for name, key, text in (
            ("suture_index_documents", "documents", "Documents in the index."),
            ("suture_index_chunks", "chunks", "Chunks in the index."),
            ("suture_index_size_bytes", "size_on_disk_bytes", "Index size on disk."),
        ):
            yield GaugeMetricFamily(name, text, value=info[key])
        yield GaugeMetricFamily("suture_index_generation", "Writes committed to the index.",
                                value=self._service.generation())
        jobs = GaugeMetricFamily("suture_write_jobs", "Write jobs remembered, by state.",
                                 labels=["state"])
        for state, count in self._service.jobs.counts().items():
            jobs.add_metric([state], count)
        yield jobs


class Metrics:
    """The registry of one app and the ASGI middleware that fills it."""

    def __init__(self, service: IndexService) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("suture_http_requests", "HTTP requests answered.",
                                ["method", "route", "status"], registry=self.registry)
        self.latency = Histogram("suture_http_request_duration_seconds",
                                 "Time to answer, by route.", ["method", "route"],
                                 buckets=LATENCY_BUCKETS, registry=self.registry)
        self.in_flight = Gauge("suture_http_requests_in_flight", "Requests being answered.",
                               registry=self.registry)
        self.registry.register(_IndexCollector(service))


class MetricsMiddleware:
    """ASGI middleware counting and timing every answer (added outermost)."""

    def __init__(self, app: Any, metrics: Metrics) -> None:
        self._app = app
        self._metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        status = [500]

        async def send_status(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        metrics = self._metrics
        started = time.perf_counter()
        metrics.in_flight.inc()
        try:
            await self._app(scope, receive, send_status)
        finally:
            metrics.in_flight.dec()
            route = _route_of(scope)
            metrics.requests.labels(scope["method"], route, str(status[0])).inc()
            metrics.latency.labels(scope["method"], route).observe(time.perf_counter() - started)


def _route_of(scope: Scope) -> str:
    """The matched route's template (never the raw path: ids would explode the labels)."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return path if isinstance(path, str) else "unmatched"


__all__ = ["Metrics", "MetricsMiddleware"]
