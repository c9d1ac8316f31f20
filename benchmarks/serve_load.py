"""Load and fault test of `suture serve` (results in docs/performance.md).

Loopback only, bounded in count and time:

1. A real `suture serve` process (all-MiniLM-L6-v2) over RFC 9293 + the GDPR.
2. Load: CLIENTS concurrent readers for SECONDS, each asking questions with a mix of
   policies and retrievers, while one writer adds documents (each tagged with a unique
   marker word) and deletes some of them again, waiting for every job. Reported:
   p50/p95/p99 latency, requests/s, errors, and the server's resident memory over the run.
3. Check: every acknowledged add is stored with its exact text and found by a lexical
   query for its marker; every acknowledged delete is gone (0 lost writes).
4. Faults: the server is killed with SIGKILL during writes (while a large document is
   embedding, during a burst of small adds, during deletes) and restarted on the same
   folder: the index must open and nothing acknowledged may be lost.

Usage: python benchmarks/serve_load.py [--clients 32] [--seconds 60] [--out out/serve-load]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import psutil

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("SUTURE_DATA", ROOT.parent / "shared" / "data"))
READ_KEY, WRITE_KEY = "load-read-key", "load-write-key"

QUESTIONS = [
    "How is a TCP connection established?",
    "What happens when a retransmission timeout expires?",
    "How does TCP avoid the silly window syndrome?",
    "What is the purpose of the TIME-WAIT state?",
    "How are urgent data signalled in TCP?",
    "When may a TCP implementation send a keep-alive probe?",
    "How is the initial sequence number chosen?",
    "What does the receiver do with out-of-order segments?",
    "When must a personal data breach be notified to the supervisory authority?",
    "What are the conditions for valid consent?",
    "When does the right to erasure apply?",
    "What information must be given to the data subject?",
    "When is a data protection impact assessment required?",
    "What are the tasks of the data protection officer?",
    "Which fines can supervisory authorities impose?",
    "How can personal data be transferred to third countries?",
]
#: (label, request fields): the mix every reader draws from, uniformly
MIX: list[tuple[str, dict[str, Any]]] = [
    ("topk", {"policy": "topk"}),
    ("window", {"policy": "window"}),
    ("parent", {"policy": "parent", "budget": 1500}),
    ("scar", {"policy": "scar"}),
    ("scar explain", {"policy": "scar", "explain": True}),
    ("topk hybrid", {"policy": "topk", "retriever": "hybrid"}),
]


@dataclass
class Server:
    url: str
    process: subprocess.Popen[bytes]
    started_s: float


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(index: Path, log: Path, port: int, read_threads: int) -> Server:
    """`suture serve` on loopback; returns once /healthz answers (model loaded)."""
    started = time.perf_counter()
    env = {**os.environ, "SUTURE_API_KEYS": f"{READ_KEY}:read,{WRITE_KEY}:write"}
    with log.open("ab") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "suture", "serve", "--index", str(index), "--host",
             "127.0.0.1", "--port", str(port), "--read-threads", str(read_threads),
             "--log-level", "warning"],
            stdout=output, stderr=subprocess.STDOUT, env=env,
        )
    url = f"http://127.0.0.1:{port}"
    while True:
        if process.poll() is not None:
            raise SystemExit(f"suture serve exited; see {log}")
        try:
            if httpx.get(f"{url}/healthz", timeout=5).status_code == 200:
                return Server(url, process, time.perf_counter() - started)
        except httpx.TransportError:
            pass
        time.sleep(0.2)


def stop(server: Server, hard: bool = False) -> None:
    if hard:
        server.process.send_signal(signal.SIGKILL)
    else:
        server.process.terminate()
    server.process.wait(timeout=60)


@contextmanager
def client(server: Server, key: str = WRITE_KEY) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=120,
                      headers={"Authorization": f"Bearer {key}"}) as http:
        yield http


def writer_documents(count: int, chars: int) -> list[str]:
    """Texts of real contracts (CUAD), cut to `chars`; each becomes several chunks."""
    folder = DATA / "cuad_v1" / "full_contract_txt"
    files = sorted(folder.glob("*.txt"))[:count]
    return [path.read_text(errors="replace")[:chars] for path in files]


def marked(text: str, number: int) -> tuple[str, str]:
    marker = f"suturemarker{number:05d}"
    return marker, f"{marker} {text}"


# -- load -----------------------------------------------------------------------------------
@dataclass
class LoadState:
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    added: dict[str, str] = field(default_factory=dict)  # acknowledged adds: doc id -> text
    deleted: set[str] = field(default_factory=set)  # acknowledged deletes
    write_failures: list[str] = field(default_factory=list)
    rss: list[tuple[float, int]] = field(default_factory=list)
    #: (seconds since the load started, latency) of every request, as they complete
    timeline: list[tuple[float, float]] = field(default_factory=list)
    started: float = field(default_factory=time.monotonic)


async def reader(http: httpx.AsyncClient, deadline: float, rng: random.Random,
                 state: LoadState, k: int) -> None:
    while time.monotonic() < deadline:
        label, fields = rng.choice(MIX)
        body = {"query": rng.choice(QUESTIONS), "k": k, **fields}
        started = time.perf_counter()
        try:
            answer = await http.post("/v1/retrieve", json=body)
            ok = answer.status_code == 200 and answer.json()["policy"] == fields["policy"]
            problem = "" if ok else f"{label}: HTTP {answer.status_code} {answer.text[:200]}"
        except httpx.HTTPError as error:
            problem = f"{label}: {type(error).__name__} {error}"
        latency = time.perf_counter() - started
        state.latencies.setdefault(label, []).append(latency)
        state.timeline.append((time.monotonic() - state.started, latency))
        if problem:
            state.errors.append(problem)


async def wait_job(http: httpx.AsyncClient, job: dict[str, Any]) -> dict[str, Any]:
    while True:
        state: dict[str, Any] = (await http.get(f"/v1/jobs/{job['job_id']}")).json()
        if state["state"] in ("succeeded", "failed"):
            return state
        await asyncio.sleep(0.05)


async def writer(http: httpx.AsyncClient, deadline: float, texts: list[str],
                 state: LoadState) -> None:
    """Add documents one after another; after every third add, delete an earlier one."""
    number = 0
    while time.monotonic() < deadline:
        doc_id = f"load/{number:05d}"
        _, text = marked(texts[number % len(texts)], number)
        job = await wait_job(http, (await http.post("/v1/documents", json={
            "doc_id": doc_id, "text": text, "title": f"Load test document {number}"})).json())
        if job["state"] == "succeeded":
            state.added[doc_id] = text
        else:
            state.write_failures.append(f"add {doc_id}: {job['error']}")
        number += 1
        if number % 3 == 0:
            victim = sorted(set(state.added) - state.deleted)[0]
            answer = await http.delete(f"/v1/documents/{quote(victim, safe='')}")
            job = await wait_job(http, answer.json())
            if job["state"] == "succeeded":
                state.deleted.add(victim)
            else:
                state.write_failures.append(f"delete {victim}: {job['error']}")


async def sample_memory(pid: int, deadline: float, state: LoadState) -> None:
    process = psutil.Process(pid)
    while time.monotonic() < deadline:
        state.rss.append((time.monotonic() - state.started, process.memory_info().rss))
        await asyncio.sleep(1.0)


async def run_load(server: Server, clients: int, seconds: float, k: int) -> LoadState:
    state = LoadState()
    texts = writer_documents(40, 3000)
    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    headers = {"Authorization": f"Bearer {WRITE_KEY}"}
    async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits,
                                 headers=headers) as http:
        state.started = time.monotonic()
        deadline = state.started + seconds
        rngs = [random.Random(seed) for seed in range(clients)]
        await asyncio.gather(
            *(reader(http, deadline, rng, state, k) for rng in rngs),
            writer(http, deadline, texts, state),
            sample_memory(server.process.pid, deadline, state),
        )
    return state


# -- checks -------------------------------------------------------------------------------
def lost_writes(server: Server, added: dict[str, str], deleted: set[str]) -> list[str]:
    """Acknowledged adds missing or changed, acknowledged deletes still there."""
    lost = []
    with client(server, READ_KEY) as http:
        for doc_id, text in sorted(added.items()):
            if doc_id in deleted:
                continue
            stored = http.get(f"/v1/documents/{quote(doc_id, safe='')}")
            if stored.status_code != 200 or stored.json()["text"] != text:
                lost.append(f"{doc_id}: not stored as acknowledged ({stored.status_code})")
                continue
            marker = text.split(" ", 1)[0]
            found = http.post("/v1/retrieve", json={"query": marker, "k": 1,
                                                    "retriever": "lexical"}).json()
            if not found["spans"] or found["spans"][0]["doc_id"] != doc_id:
                lost.append(f"{doc_id}: stored but not found by its marker {marker}")
        for doc_id in sorted(deleted):
            if http.get(f"/v1/documents/{quote(doc_id, safe='')}").status_code != 404:
                lost.append(f"{doc_id}: deleted (acknowledged) but still stored")
    return lost


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


# -- faults -------------------------------------------------------------------------------
def fault_round(moment: str, index: Path, log: Path, port: int, read_threads: int,
                added: dict[str, str], deleted: set[str], number: int) -> dict[str, Any]:
    """Start the server, write, SIGKILL it at `moment`, restart and check."""
    server = start_server(index, log, port, read_threads)
    in_flight: dict[str, str] = {}  # adds not acknowledged when the server died
    deleting: set[str] = set()  # deletes not acknowledged when the server died
    with client(server) as http:

        def submit(doc_id: str, text: str) -> dict[str, Any]:
            in_flight[doc_id] = text
            job: dict[str, Any] = http.post("/v1/documents",
                                            json={"doc_id": doc_id, "text": text}).json()
            return job

        def state(job: dict[str, Any]) -> dict[str, Any]:
            found: dict[str, Any] = http.get(f"/v1/jobs/{job['job_id']}").json()
            return found

        if moment == "while a large document is embedding":
            text = "\n\n".join(writer_documents(12, 8000))
            job = submit(f"fault/{number}", marked(text, number)[1])
            while True:  # about 170 chunks: kill once some, not all, are embedded
                progress = state(job)["progress"]
                if 0 < progress["done"] < progress["total"]:
                    break
                time.sleep(0.02)
        elif moment == "during a burst of small adds":
            texts = writer_documents(10, 1500)
            jobs = [submit(f"fault/{number}-{i}", marked(t, number * 100 + i)[1])
                    for i, t in enumerate(texts)]
            while True:  # kill once three are acknowledged, the rest still queued/running
                done = [j for j in jobs if state(j)["state"] == "succeeded"]
                if len(done) >= 3:
                    break
                time.sleep(0.02)
            for job in done:
                added[job["doc_ids"][0]] = in_flight.pop(job["doc_ids"][0])
        elif moment == "during deletes":
            victims = sorted(set(added) - deleted)[:6]
            jobs = [http.delete(f"/v1/documents/{quote(v, safe='')}").json() for v in victims]
            deleting.update(victims)
            while not any(state(j)["state"] == "succeeded" for j in jobs):
                time.sleep(0.02)
            for job in jobs:
                if state(job)["state"] == "succeeded":
                    deleted.add(job["doc_ids"][0])
                    deleting.discard(job["doc_ids"][0])
        else:
            raise ValueError(moment)
    stop(server, hard=True)
    restarted = start_server(index, log, port, read_threads)
    try:
        with client(restarted, READ_KEY) as http:
            opens = (http.get("/v1/info").status_code == 200
                     and http.post("/v1/retrieve", json={"query": QUESTIONS[0]}).status_code
                     == 200)
            partial = []
            for doc_id, text in in_flight.items():  # unacknowledged adds: all or nothing
                stored = http.get(f"/v1/documents/{quote(doc_id, safe='')}")
                if stored.status_code == 200 and stored.json()["text"] != text:
                    partial.append(doc_id)
                if stored.status_code == 200:
                    added[doc_id] = text
            for doc_id in deleting:  # unacknowledged deletes: done or not
                if http.get(f"/v1/documents/{quote(doc_id, safe='')}").status_code == 404:
                    deleted.add(doc_id)
        lost = lost_writes(restarted, added, deleted)
    finally:
        stop(restarted)
    return {"moment": moment, "acknowledged_adds": len(set(added) - deleted),
            "acknowledged_deletes": len(deleted), "lost": lost, "partial": partial,
            "index_opens": opens, "restart_s": round(restarted.started_s, 1)}


# -- main ---------------------------------------------------------------------------------
def base_index(folder: Path, embedder: str) -> Path:
    """RFC 9293 and the GDPR indexed once (reused across runs)."""
    if not (folder / "manifest.json").exists():
        from suture.index import Index

        corpora = DATA / "corpora"
        Index.build([corpora / "rfc9293", corpora / "gdpr" / "gdpr_en.md"], folder,
                    embedder=embedder, show_progress=True)
    return folder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--read-threads", type=int, default=4)
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "serve-load")
    parser.add_argument("--embedder", default="minilm",
                        help="minilm (the real model) or hashing (no model: the server alone)")
    parser.add_argument("--faults", action=argparse.BooleanOptionalAction, default=True,
                        help="Kill and restart the server during writes after the load.")
    args = parser.parse_args()
    if not 1 <= args.clients <= 256 or not 1 <= args.seconds <= 600:
        raise SystemExit("bounded: 1-256 clients, 1-600 seconds")
    args.out.mkdir(parents=True, exist_ok=True)
    base = base_index(ROOT / "out" / f"serve-load-base-{args.embedder}", args.embedder)
    index = args.out / "index"
    shutil.rmtree(index, ignore_errors=True)
    shutil.copytree(base, index)
    log = args.out / "server.log"
    log.unlink(missing_ok=True)
    port = free_port()

    server = start_server(index, log, port, args.read_threads)
    print(f"server up in {server.started_s:.1f}s; {args.clients} clients for {args.seconds}s")
    cpu_before = psutil.Process(server.process.pid).cpu_times()
    state = asyncio.run(run_load(server, args.clients, args.seconds, args.k))
    cpu_after = psutil.Process(server.process.pid).cpu_times()
    server_cpu_s = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    lost = lost_writes(server, state.added, state.deleted)
    stop(server)

    all_latencies = [x for values in state.latencies.values() for x in values]
    rss_mb = [r / 2**20 for _, r in state.rss]
    quarter = max(1, len(rss_mb) // 4)
    load = {
        "clients": args.clients, "seconds": args.seconds, "k": args.k,
        "read_threads": args.read_threads, "requests": len(all_latencies),
        "requests_per_s": len(all_latencies) / args.seconds,
        "p50_ms": 1000 * percentile(all_latencies, 50),
        "p95_ms": 1000 * percentile(all_latencies, 95),
        "p99_ms": 1000 * percentile(all_latencies, 99),
        "errors": len(state.errors), "error_examples": state.errors[:5],
        "adds_acknowledged": len(state.added), "deletes_acknowledged": len(state.deleted),
        "write_failures": state.write_failures, "lost_writes": lost,
        "server_cpu_s": server_cpu_s,
        "server_cpu_ms_per_request": 1000 * server_cpu_s / max(1, len(all_latencies)),
        "load_average_during": os.getloadavg()[0],
        "rss_mb_first_quarter": statistics.median(rss_mb[:quarter]),
        "rss_mb_last_quarter": statistics.median(rss_mb[-quarter:]),
        "rss_mb_max": max(rss_mb),
        "rss_mb": [[round(t, 1), round(r / 2**20, 1)] for t, r in state.rss],
        "by_policy": {label: {"requests": len(v), "p50_ms": 1000 * percentile(v, 50),
                              "p95_ms": 1000 * percentile(v, 95),
                              "p99_ms": 1000 * percentile(v, 99)}
                      for label, v in sorted(state.latencies.items())},
    }
    results: dict[str, Any] = {"load": load, "cpus": os.cpu_count(),
                               "load_average_after_load": os.getloadavg()}
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    print(json.dumps({k: v for k, v in load.items() if k != "by_policy"}, indent=1))
    plot(state, args.out / "serve_load.png")
    faults = []
    moments = ["while a large document is embedding", "during a burst of small adds",
               "during deletes"] if args.faults else []
    for number, moment in enumerate(moments, start=90000):
        print(f"fault: SIGKILL {moment}")
        faults.append(fault_round(moment, index, log, port, args.read_threads, state.added,
                                  state.deleted, number))
    results["faults"] = faults
    (args.out / "results.json").write_text(json.dumps(results, indent=2))
    print(render(results))


def plot(state: LoadState, path: Path) -> None:
    """Latency of every request and the server's memory over the run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6), sharex=True)
    times, latencies = zip(*state.timeline, strict=True)
    top.scatter(times, [1000 * x for x in latencies], s=4, alpha=0.5)
    top.set_ylabel("latency (ms)")
    top.set_title(f"suture serve: {len(latencies)} requests from concurrent clients, "
                  f"{len(state.added)} adds and {len(state.deleted)} deletes meanwhile")
    rss_times, rss = zip(*state.rss, strict=True)
    bottom.plot(rss_times, [r / 2**20 for r in rss])
    bottom.set_ylabel("server RSS (MB)")
    bottom.set_xlabel("seconds into the run")
    bottom.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def render(results: dict[str, Any]) -> str:
    load = results["load"]
    lines = [
        "| clients | seconds | requests | req/s | p50 | p95 | p99 | errors | adds / deletes "
        "acknowledged | lost writes | server CPU / request | server RSS "
        "(first → last quarter, max) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
        f"| {load['clients']} | {load['seconds']:.0f} | {load['requests']} | "
        f"{load['requests_per_s']:.1f} | {load['p50_ms']:.0f} ms | {load['p95_ms']:.0f} ms | "
        f"{load['p99_ms']:.0f} ms | {load['errors']} | {load['adds_acknowledged']} / "
        f"{load['deletes_acknowledged']} | {len(load['lost_writes'])} | "
        f"{load['server_cpu_ms_per_request']:.0f} ms | "
        f"{load['rss_mb_first_quarter']:.0f} → {load['rss_mb_last_quarter']:.0f} MB "
        f"(max {load['rss_mb_max']:.0f}) |",
        "",
        "| request mix | requests | p50 | p95 | p99 |",
        "|---|---:|---:|---:|---:|",
    ]
    for label, row in load["by_policy"].items():
        lines.append(f"| {label} | {row['requests']} | {row['p50_ms']:.0f} ms | "
                     f"{row['p95_ms']:.0f} ms | {row['p99_ms']:.0f} ms |")
    lines += ["", "| SIGKILL | acknowledged adds / deletes before | lost after restart | "
              "half-written documents | index opens | restart |",
              "|---|---:|---:|---:|---|---:|"]
    for fault in results["faults"]:
        lines.append(f"| {fault['moment']} | {fault['acknowledged_adds']} / "
                     f"{fault['acknowledged_deletes']} | {len(fault['lost'])} | "
                     f"{len(fault['partial'])} | {'yes' if fault['index_opens'] else 'NO'} | "
                     f"{fault['restart_s']} s |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
