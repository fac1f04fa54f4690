#!/usr/bin/env python3
"""Benchmarks/service.sh's client: the load through wrk (throughput) and its own paced client (latency).

  service-client.py reset CONTROL TOKEN
  service-client.py throughput --url URL --key KEY --control CONTROL --control-token TOKEN --batch B
                    --notifications N --payload FILE --lua FILE [--threads 2] [--connections 16] [--phase P]
                    [--timeline FILE]
  service-client.py warm --url URL --key KEY
  service-client.py latency --url URL --key KEY --payload FILE [--rate 1000] [--seconds 20] [--connections 64]

throughput: empties the simulator's ledger, starts wrk (the Lua script posts N notifications in requests of B, each
to a token of its own), and times from wrk's start to the moment the ledger holds every accepted notification
(polled every 10 ms), and to the moment every request was answered 202 (wrk's threads say so). Prints one line:
`delivered SECONDS answered SECONDS accepted N refused N repeated N requests-p50 MS requests-p99 MS`.

latency: posts one notification a request at a fixed schedule (request i at start + i / rate, whether or not
earlier answers came back), then reads each notification's outcome (GET /v1/notifications/{id}?wait=30) and
prints the time from each request's scheduled moment to the push service's answer (`answered_at`), p50 and p99,
with the client's own lag behind its schedule (a client too slow to keep the schedule shows here).
Loopback only; every wait is bounded.
"""
import argparse
import asyncio
import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from datetime import datetime
from urllib.parse import urlsplit


def control(base, token, method, path):
    request = urllib.request.Request(base + path, method=method, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(request, timeout=10) as answer:
        body = answer.read()
    return json.loads(body) if body else None


def percentile(values, p):
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(p / 100 * len(ordered)) - 1))]


def throughput(args):
    threads = args.threads
    requests = args.notifications // args.batch
    if requests * args.batch != args.notifications or requests % threads:
        sys.exit(f"{args.notifications} notifications are not whole requests of {args.batch} per thread")
    control(args.control, args.control_token, "POST", "/reset")
    payload = json.dumps(json.load(open(args.payload)), separators=(",", ":"))
    environment = dict(os.environ, BENCH_BATCH=str(args.batch), BENCH_QUOTA=str(requests // threads),
                       BENCH_KEY=args.key, BENCH_PHASE=str(args.phase), BENCH_PAYLOAD=payload)
    # Opened before wrk starts: a folder that is not there must not leave wrk running.
    timeline = open(args.timeline, "w") if args.timeline else None
    start = time.monotonic()
    wrk = subprocess.Popen(
        ["wrk", f"-t{threads}", f"-c{args.connections}", f"-d{args.timeout}s", "--timeout", "60s",
         "-s", args.lua, args.url],
        env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines, done = [], {}
    lock = threading.Lock()

    def read():
        for line in wrk.stdout:
            with lock:
                lines.append(line.rstrip("\n"))
                if line.startswith("done "):
                    _, thread, accepted, refused = line.split()
                    done[thread] = (time.monotonic(), int(accepted), int(refused))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    delivered_at = None
    ledger = {}
    deadline = start + args.timeout
    next_mark = start
    try:
        while time.monotonic() < deadline:
            with lock:
                finished = len(done) == threads
                accepted = sum(d[1] for d in done.values())
            ledger = control(args.control, args.control_token, "GET", "/ledger")
            if timeline is not None and time.monotonic() >= next_mark:
                timeline.write(f"{time.monotonic() - start:.2f} {ledger.get('accepted', 0)}\n")
                timeline.flush()
                next_mark += 1
            if finished and ledger.get("accepted", 0) >= accepted:
                delivered_at = time.monotonic()
                break
            if wrk.poll() is not None and not finished:
                break
            if args.serve_pid and not os.path.exists(f"/proc/{args.serve_pid}"):
                print(f"the service (process {args.serve_pid}) is gone", file=sys.stderr)
                break
            # Each look at the ledger is a request the simulator answers on the cores measured: every 50 ms while
            # requests are still being answered, every 5 ms once all are (the end is timed to within 5 ms).
            time.sleep(0.005 if finished else 0.05)
    finally:
        if wrk.poll() is None:
            wrk.send_signal(signal.SIGINT)
        try:
            wrk.wait(timeout=20)
        except subprocess.TimeoutExpired:
            wrk.kill()
            wrk.wait()
        reader.join(timeout=5)
    total = next((l for l in lines if l.startswith("total ")), "")
    if delivered_at is None:
        print("\n".join(lines), file=sys.stderr)
        sys.exit(f"not every notification delivered within {args.timeout} s: threads done {len(done)} of "
                 f"{threads}, ledger {ledger.get('accepted')}")
    answered_at = max(d[0] for d in done.values())
    accepted = sum(d[1] for d in done.values())
    refused = sum(d[2] for d in done.values())
    if refused or accepted != args.notifications:
        print("\n".join(l for l in lines if l.startswith("refused")), file=sys.stderr)
    p50 = p99 = "nan"
    if "p50" in total:
        words = total.replace(";", "").split()
        p50, p99 = words[words.index("p50") + 1], words[words.index("p99") + 1]
    print(f"delivered {delivered_at - start:.3f} answered {answered_at - start:.3f} accepted {accepted} "
          f"refused {refused} repeated {ledger.get('tokensAcceptedMoreThanOnce', 0)} ledger {ledger.get('accepted', 0)} "
          f"requests-p50 {p50} requests-p99 {p99}")


class Connection:
    """One keep-alive HTTP/1.1 connection: a request, then its whole answer."""

    def __init__(self, reader, writer):
        self.reader, self.writer = reader, writer

    async def exchange(self, data):
        self.writer.write(data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        length = 0
        for line in lines[1:]:
            if line.lower().startswith("content-length:"):
                length = int(line.split(":", 1)[1])
        body = await self.reader.readexactly(length) if length else b""
        return status, body


async def connect_pool(host, port, count):
    pool = asyncio.Queue()
    for _ in range(count):
        reader, writer = await asyncio.open_connection(host, port)
        pool.put_nowait(Connection(reader, writer))
    return pool


def milliseconds(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000


async def latency(args):
    url = urlsplit(args.url)
    host, port = url.hostname, url.port
    payload = json.dumps(json.load(open(args.payload)), separators=(",", ":"))
    head = (f"Host: {host}:{port}\r\nAuthorization: Bearer {args.key}\r\n"
            "Content-Type: application/json\r\n")
    pool = await connect_pool(host, port, args.connections)
    count = int(args.rate * args.seconds)
    records = [None] * count
    failures = []

    async def post(index, scheduled):
        connection = await pool.get()
        try:
            token = f"1a7e{args.phase:036x}{index:024x}"
            body = f'{{"notifications":[{{"token":"{token}","payload":{payload}}}]}}'.encode()
            written = time.time()
            status, answer = await asyncio.wait_for(
                connection.exchange(f"POST /v1/notifications HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n"
                                    .encode() + body), 60)
            answered = time.time()
            if status != 202:
                failures.append((status, answer[:200]))
                return
            records[index] = (scheduled, written, answered, json.loads(answer)["notifications"][0]["id"])
        finally:
            pool.put_nowait(connection)

    tasks = []
    wall = time.time() + 0.05
    monotonic = time.monotonic() + 0.05
    for index in range(count):
        due = monotonic + index / args.rate
        pause = due - time.monotonic()
        if pause > 0:
            await asyncio.sleep(pause)
        tasks.append(asyncio.create_task(post(index, wall + index / args.rate)))
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    sent_seconds = time.time() - wall

    outcomes = {}

    async def outcome(identifier):
        connection = await pool.get()
        try:
            status, answer = await asyncio.wait_for(connection.exchange(
                f"GET /v1/notifications/{identifier}?wait=30 HTTP/1.1\r\n{head}\r\n".encode()), 60)
            outcomes[identifier] = json.loads(answer) if status == 200 else {"state": f"HTTP {status}"}
        finally:
            pool.put_nowait(connection)

    done = [r for r in records if r]
    await asyncio.wait_for(asyncio.gather(*(outcome(r[3]) for r in done)), 300)
    from_schedule, from_write, in_service, posts, lags, states = [], [], [], [], [], {}
    for scheduled, written, answered, identifier in done:
        result = outcomes.get(identifier, {})
        states[result.get("state")] = states.get(result.get("state"), 0) + 1
        lags.append((written - scheduled) * 1000)
        posts.append((answered - written) * 1000)
        if result.get("state") == "delivered" and "answered_at" in result:
            answer = milliseconds(result["answered_at"])
            from_schedule.append(answer - scheduled * 1000)
            from_write.append(answer - written * 1000)
            in_service.append(answer - milliseconds(result["accepted_at"]))
    line = (f"notifications {count} in {sent_seconds:.1f} s ({count / sent_seconds:.0f}/s) states "
            + ",".join(f"{k}={v}" for k, v in sorted(states.items(), key=str)))
    if failures:
        line += f" refused {len(failures)} (first: {failures[0]})"
    print(line)
    print(f"request to answer p50 {percentile(from_schedule, 50):.1f} ms p99 {percentile(from_schedule, 99):.1f} ms "
          f"max {max(from_schedule or [float('nan')]):.1f} ms "
          f"(from the write: p50 {percentile(from_write, 50):.1f} p99 {percentile(from_write, 99):.1f}; "
          f"accepted_at to answered_at: p50 {percentile(in_service, 50):.1f} p99 {percentile(in_service, 99):.1f}; "
          f"the 202: p50 {percentile(posts, 50):.1f} p99 {percentile(posts, 99):.1f}; "
          f"client lag p99 {percentile(lags, 99):.1f} max {max(lags or [float('nan')]):.1f})")


async def warm(args):
    """One notification, waited for: the service's connections to the gateway are open before the measurement."""
    url = urlsplit(args.url)
    pool = await connect_pool(url.hostname, url.port, 1)
    connection = await pool.get()
    head = f"Host: {url.hostname}:{url.port}\r\nAuthorization: Bearer {args.key}\r\nContent-Type: application/json\r\n"
    body = b'{"notifications":[{"token":"' + b"f" * 64 + b'","payload":{"aps":{"alert":"warm"}}}]}'
    status, answer = await asyncio.wait_for(connection.exchange(
        f"POST /v1/notifications HTTP/1.1\r\n{head}Content-Length: {len(body)}\r\n\r\n".encode() + body), 30)
    if status != 202:
        sys.exit(f"the warm-up POST: HTTP {status} {answer[:300]!r}")
    identifier = json.loads(answer)["notifications"][0]["id"]
    status, answer = await asyncio.wait_for(connection.exchange(
        f"GET /v1/notifications/{identifier}?wait=30 HTTP/1.1\r\n{head}\r\n".encode()), 40)
    if status != 200 or json.loads(answer).get("state") != "delivered":
        sys.exit(f"the warm-up notification: HTTP {status} {answer[:300]!r}")


def main():
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    reset = commands.add_parser("reset")
    reset.add_argument("control")
    reset.add_argument("token")
    load = commands.add_parser("throughput")
    for name in ("url", "key", "control", "control-token", "payload", "lua"):
        load.add_argument("--" + name, required=True)
    load.add_argument("--batch", type=int, required=True)
    load.add_argument("--notifications", type=int, required=True)
    load.add_argument("--threads", type=int, default=2)
    load.add_argument("--connections", type=int, default=16)
    load.add_argument("--phase", type=int, default=0)
    load.add_argument("--timeout", type=int, default=600)
    load.add_argument("--serve-pid", type=int, help="stop waiting when this process is gone")
    load.add_argument("--timeline", help="write the ledger's count once a second here (seconds, notifications)")
    first = commands.add_parser("warm")
    for name in ("url", "key"):
        first.add_argument("--" + name, required=True)
    paced = commands.add_parser("latency")
    for name in ("url", "key", "payload"):
        paced.add_argument("--" + name, required=True)
    paced.add_argument("--rate", type=float, default=1000)
    paced.add_argument("--seconds", type=float, default=20)
    paced.add_argument("--connections", type=int, default=256)
    paced.add_argument("--phase", type=int, default=0)
    args = parser.parse_args()
    if args.command == "reset":
        control(args.control, args.token, "POST", "/reset")
    elif args.command == "warm":
        asyncio.run(warm(args))
    elif args.command == "throughput":
        throughput(args)
    else:
        asyncio.run(latency(args))


if __name__ == "__main__":
    main()
