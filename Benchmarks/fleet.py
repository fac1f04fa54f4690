#!/usr/bin/env python3
"""Benchmarks/fleet.sh's driver: the runs, their measures and the table.

  fleet.py --salvo SALVO --work DIR --rows N --workers "1 2 4" --tokens FILE --payload FILE
           --control URL --control-token T --simulator-pid PID --pg-url URL --pg-password-file FILE
           --postmaster-pid PID --psql PSQL [--statements] -- CREDENTIALS...

In this order, against the one simulator: a warm-up `send` (the simulator's ledger grows its table on a first run),
`salvo send --journal` of the rows, the campaign on the embedded store (one `salvo serve`, `--store DIR`), then for
each worker count N a fleet of N `salvo serve` workers on a fresh database of the PostgreSQL cluster and the same
campaign uploaded to worker 0. Each run is timed from its start (the upload's, for a campaign) to its end (the first
`GET /v1/campaigns/{id}` that says `finished`, polled every POLL_MS); over the same span it takes the CPU seconds
(user + system, /proc/PID/stat) of the serve processes, of PostgreSQL (the postmaster with its reaped children and
every live child) and of the simulator, and the machine's idle share (/proc/stat), also split at the upload's answer
into the upload and the sending. For a fleet run it also reads the partitions' jobs (their reports' seconds and their
release times: how long a job, the time between a worker's jobs, the jobs running at once) and takes
PostgreSQL's own counters over the run (pg_stat_database of the run's database, pg_stat_wal, pg_stat_bgwriter, and
pg_stat_statements when loaded), read once the workers have stopped (a backend reports its counters when it ends).
Checks: the report or the campaign's counts hold every row delivered; the simulator's ledger holds each token once;
every partition of a fleet's campaign is done. Exits 1 when one fails; every wait is bounded.
"""
import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from urllib.parse import urlsplit, urlunsplit

TICK = os.sysconf("SC_CLK_TCK")
PARTITION_ROWS = 10_000
failures = []


def fail(message):
    print("  FAIL  " + message, flush=True)
    failures.append(message)


def http(method, url, token, timeout=10):
    request = urllib.request.Request(url, method=method, headers={"Authorization": "Bearer " + token})
    with urllib.request.urlopen(request, timeout=timeout) as answer:
        body = answer.read()
    return json.loads(body) if body else None


# CPU seconds (user + system) of a process; with `reaped`, also of its children it has waited for.
def cpu(pid, reaped=False):
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    # After the command's ")": state is fields[0], utime fields[11], stime fields[12], cutime 13, cstime 14.
    ticks = int(fields[11]) + int(fields[12])
    if reaped:
        ticks += int(fields[13]) + int(fields[14])
    return ticks / TICK


# PostgreSQL's CPU: the postmaster and the children it reaped, and every live child (backends, checkpointer, WAL
# writer, autovacuum...). A child that ends between two readings moves from the second sum into the first.
def postgres_cpu(postmaster):
    total = cpu(postmaster, reaped=True)
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as file:
                fields = file.read().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / TICK
    return total


# The machine's CPU time so far: (idle + iowait, steal, all), in ticks summed over the cores.
def machine():
    with open("/proc/stat") as file:
        values = [int(v) for v in file.readline().split()[1:]]
    idle = values[3] + values[4]
    steal = values[7] if len(values) > 7 else 0
    return idle, steal, sum(values[:8])


class Span:
    """The CPU seconds of some processes and the machine's idle share between start() and stop()."""

    def __init__(self, options, serve_pids):
        self.options, self.serve_pids = options, serve_pids

    def read(self):
        own = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "at": time.monotonic(),
            "serve": sum(cpu(pid) for pid in self.serve_pids),
            "postgres": postgres_cpu(self.options.postmaster_pid),
            "simulator": cpu(self.options.simulator_pid),
            "client": own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime,
            "machine": machine(),
        }

    def start(self):
        self.before = self.read()

    def mark(self):
        self.middle = self.read()

    @staticmethod
    def between(before, after):
        result = {k: after[k] - before[k] for k in ("serve", "postgres", "simulator", "client")}
        idle = after["machine"][0] - before["machine"][0]
        steal = after["machine"][1] - before["machine"][1]
        total = after["machine"][2] - before["machine"][2]
        result["idle"] = idle / total if total else 0.0
        result["steal"] = steal / total if total else 0.0
        # The CPU the machine spent beyond the processes measured: other work on the same cores.
        busy = (total - idle - steal) / TICK
        result["others"] = max(0.0, busy - sum(result[k] for k in ("serve", "postgres", "simulator", "client")))
        result["wall"] = result["seconds"] = after["at"] - before["at"]
        return result

    # The whole span; with a mark, also its two phases ("first", "then").
    def stop(self):
        after = self.read()
        result = self.between(self.before, after)
        if getattr(self, "middle", None):
            result["first"] = self.between(self.before, self.middle)
            result["then"] = self.between(self.middle, after)
        return result


class Postgres:
    def __init__(self, options):
        self.options = options
        with open(options.pg_password_file) as file:
            self.environment = dict(os.environ, PGPASSWORD=file.readline().strip())

    def url(self, database):
        parts = urlsplit(self.options.pg_url)
        return urlunsplit(parts._replace(path="/" + database))

    def query(self, sql, database="postgres"):
        answer = subprocess.run([self.options.psql, "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                                 "-d", self.url(database), "-c", sql],
                                env=self.environment, capture_output=True, text=True, timeout=120)
        if answer.returncode != 0:
            sys.exit(f"psql: {sql[:200]}: {answer.stderr.strip()}")
        return [line.split("\t") for line in answer.stdout.splitlines() if line]

    COUNTERS = ["xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted", "tup_returned",
                "tup_fetched", "blks_read", "blks_hit", "wal_records", "wal_fpi", "wal_bytes", "wal_write",
                "wal_sync", "buffers_written"]

    # The counters of DATABASE (and the cluster's WAL and buffer writes), read from the database postgres: the
    # readings are no transactions of the run's database.
    def counters(self, database):
        row = self.query(f"""
            SELECT d.xact_commit, d.xact_rollback, d.tup_inserted, d.tup_updated, d.tup_deleted, d.tup_returned,
                d.tup_fetched, d.blks_read, d.blks_hit, w.wal_records, w.wal_fpi, w.wal_bytes, w.wal_write,
                w.wal_sync, b.buffers_checkpoint + b.buffers_clean + b.buffers_backend
            FROM pg_stat_database d, pg_stat_wal w, pg_stat_bgwriter b WHERE d.datname = '{database}'""")[0]
        values = dict(zip(self.COUNTERS, (float(v) for v in row)))
        if self.options.statements:
            calls = self.query(f"""
                SELECT coalesce(sum(calls), 0) FROM pg_stat_statements
                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '{database}')""")[0][0]
            values["statements"] = float(calls)
            # The WAL of storing the audience: the partitions' rows, inserted by the upload.
            audience = self.query(f"""
                SELECT coalesce(sum(wal_bytes), 0) FROM pg_stat_statements
                WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '{database}')
                    AND query LIKE 'INSERT INTO salvo.campaign_partitions %'""")[0][0]
            values["audience_wal_bytes"] = float(audience)
        return values

    def top_statements(self, database, limit=12):
        if not self.options.statements:
            return []
        return self.query(f"""
            SELECT calls, rows, round(total_exec_time)::bigint, wal_bytes,
                left(regexp_replace(query, '\\s+', ' ', 'g'), 100)
            FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = '{database}')
            ORDER BY calls DESC LIMIT {limit}""")


def wait_line(path, pattern, process, seconds=30):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(path) as file:
                match = re.search(pattern, file.read())
            if match:
                return match
        except FileNotFoundError:
            pass
        if process.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit(f"no '{pattern}' in {path} within {seconds} s:\n" + open(path).read()[-2000:])


def stop(process, what, seconds=20):
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            print(f"{what} did not stop within {seconds} s of SIGTERM", file=sys.stderr)
            process.kill()
            process.wait()


class Bench:
    def __init__(self, options):
        self.options = options
        self.salvo = options.salvo
        self.credentials = options.credentials
        self.postgres = Postgres(options)
        self.processes = []
        with open(options.payload) as file:
            self.settings = json.dumps({"name": "bench", "push_type": "alert", "payload": json.load(file)},
                                       separators=(",", ":"))

    def reset_ledger(self):
        http("POST", self.options.control + "/reset", self.options.control_token)

    # The ledger holds each of the ROWS tokens once: accepted ROWS, as many distinct tokens, none twice.
    def check_ledger(self, what):
        ledger = http("GET", self.options.control + "/ledger", self.options.control_token)
        rows = self.options.rows
        held = (ledger.get("accepted"), ledger.get("distinctTokens"), ledger.get("tokensAcceptedMoreThanOnce"))
        if held != (rows, rows, 0):
            fail(f"{what}: the ledger holds {held[0]} notifications, {held[1]} tokens, {held[2]} twice; "
                 f"not {rows} once")

    def send(self, what="send --journal"):
        self.reset_ledger()
        journal = os.path.join(self.options.work, "journal")
        subprocess.run(["rm", "-rf", journal], check=True)
        report = os.path.join(self.options.work, "report.json")
        span = Span(self.options, [])
        span.start()
        process = subprocess.Popen(
            [self.salvo, "send", self.options.tokens, "--payload", self.options.payload, "--protocol", "h2",
             "--push-type", "alert", *self.credentials, "--no-proxy", "--connections", "2", "--journal", journal,
             "--report", report, "--quiet"], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = status = os.waitstatus_to_exitcode(status)
        measured = span.stop()
        measured["serve"] = usage.ru_utime + usage.ru_stime  # the sending process itself
        measured["client"] = 0.0
        measured["seconds"] = measured["wall"]
        if status != 0:
            fail(f"{what}: exit status {status}")
        with open(report) as file:
            summary = json.load(file)
        delivered = summary.get("confirmed", 0) + summary.get("presumed", 0)
        if delivered != self.options.rows:
            fail(f"{what}: delivered {delivered} of {self.options.rows}")
        self.check_ledger(what)
        subprocess.run(["rm", "-rf", journal], check=True)
        return measured

    def start_serve(self, name, store, extra):
        folder = os.path.join(self.options.work, name)
        os.makedirs(folder, exist_ok=True)
        out = open(os.path.join(folder, "serve.txt"), "w")
        log = open(os.path.join(folder, "serve.log"), "w")
        process = subprocess.Popen(
            [self.salvo, "serve", "--listen", "127.0.0.1:0", "--store", store, *extra, *self.credentials,
             "--no-proxy", "--connections", "2"], stdout=out, stderr=log)
        self.processes.append(process)
        match = wait_line(os.path.join(folder, "serve.txt"), r"listening on (http:\S+)", process)
        return process, match.group(1).rstrip(",")

    def wait_ready(self, url, seconds=30):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=5) as answer:
                    if answer.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        sys.exit(f"{url} was not ready within {seconds} s")

    # One campaign uploaded to URL, timed from the upload's start to the first poll that says finished.
    def campaign(self, url, key, serve_pids, what, before=None):
        self.reset_ledger()
        if before:
            before()
        span = Span(self.options, serve_pids)
        span.start()
        start = time.monotonic()
        answer = subprocess.run(
            ["curl", "-s", "--max-time", "300", "-X", "POST", url + "/v1/campaigns", "-H", "Authorization: Bearer " + key,
             "-H", "Content-Type: text/csv", "-H", "Salvo-Campaign: " + self.settings,
             "--data-binary", "@" + self.options.tokens], capture_output=True, check=True).stdout
        span.mark()
        uploaded = time.monotonic() - start
        uploaded_at = time.time()
        campaign = json.loads(answer)
        if "id" not in campaign:
            sys.exit(f"{what}: campaign refused: {answer[:500]!r}")
        poll = self.options.poll_ms / 1000
        while True:
            status = http("GET", url + "/v1/campaigns/" + campaign["id"], key)
            if status["state"] in ("finished", "failed", "cancelled"):
                break
            if time.monotonic() - start > self.options.timeout:
                sys.exit(f"{what}: the campaign did not finish within {self.options.timeout} s")
            time.sleep(poll)
        seconds = time.monotonic() - start
        finished_at = time.time()
        measured = span.stop()
        measured["seconds"], measured["upload"], measured["id"] = seconds, uploaded, campaign["id"]
        measured["uploaded_at"], measured["finished_at"] = uploaded_at, finished_at
        delivered = status.get("counts", {}).get("delivered", 0)
        if status["state"] != "finished" or delivered != self.options.rows:
            fail(f"{what}: campaign {status['state']}: delivered {delivered} of {self.options.rows}: "
                 f"{json.dumps(status)[:300]}")
        return measured

    def embedded(self):
        store = os.path.join(self.options.work, "embedded-store")
        key = self.make_key(["--store", store])
        process, url = self.start_serve("embedded", store, [])
        self.wait_ready(url)
        measured = self.campaign(url, key, [process.pid], "embedded campaign")
        stop(process, "salvo serve")
        self.check_ledger("embedded campaign")
        subprocess.run(["rm", "-rf", store, os.path.join(self.options.work, "embedded")], check=True)
        return measured

    def make_key(self, store):
        answer = subprocess.run([self.salvo, "serve", "keys", "create", *store, "--name", "bench"],
                                capture_output=True, text=True, timeout=60)
        match = re.search(r"^key:\s*(\S+)", answer.stdout, re.M)
        if answer.returncode != 0 or not match:
            sys.exit(f"keys create: {answer.stdout}{answer.stderr}")
        return match.group(1)

    def fleet(self, workers):
        database = f"fleet_{workers}"
        self.postgres.query(f"DROP DATABASE IF EXISTS {database}")
        self.postgres.query(f"CREATE DATABASE {database}")
        store = self.postgres.url(database)
        password = ["--postgres-password-file", self.options.pg_password_file]
        migrated = subprocess.run([self.salvo, "serve", "migrate", "--store", store, *password],
                                  capture_output=True, text=True, timeout=120)
        if migrated.returncode != 0:
            sys.exit(f"migrate: {migrated.stdout}{migrated.stderr}")
        key = self.make_key(["--store", store, *password])
        started = []
        for i in range(workers):
            local = os.path.join(self.options.work, f"fleet-{workers}", f"w{i}")
            started.append(self.start_serve(f"fleet-{workers}/serve-w{i}", store,
                                            [*password, "--worker-id", f"w{i}", "--local-folder", local]))
        for _, url in started:
            self.wait_ready(url)
        pids = [process.pid for process, _ in started]

        def reset_counters():
            self.before = self.postgres.counters(database)
            if self.options.statements:
                self.postgres.query("SELECT pg_stat_statements_reset()")
                self.before["statements"] = self.before["audience_wal_bytes"] = 0.0

        measured = self.campaign(started[0][1], key, pids, f"fleet of {workers}", before=reset_counters)
        for process, _ in started:
            stop(process, "salvo serve")
        after = self.postgres.counters(database)
        measured["pg"] = {k: after[k] - self.before[k] for k in after}
        measured["top"] = self.postgres.top_statements(database)
        parts = self.postgres.query(
            f"SELECT worker, count(*), count(*) FILTER (WHERE state = 2) FROM salvo.campaign_partitions "
            f"WHERE campaign = '{measured['id']}' GROUP BY worker ORDER BY worker", database)
        measured["partitions"] = {worker: int(count) for worker, count, _ in parts}
        jobs = self.postgres.query(
            f"SELECT worker, checkpoint_at, encode(report, 'hex') FROM salvo.campaign_partitions "
            f"WHERE campaign = '{measured['id']}' AND report IS NOT NULL", database)
        measured["jobs"] = [(worker, int(at) / 1000, json.loads(bytes.fromhex(report)))
                            for worker, at, report in jobs]
        expected = -(-self.options.rows // PARTITION_ROWS)
        held = sum(int(count) for _, count, _ in parts)
        done = sum(int(d) for _, _, d in parts)
        if (held, done) != (expected, expected):
            fail(f"fleet of {workers}: {held} partitions, {done} done; not {expected}")
        self.check_ledger(f"fleet of {workers}")
        self.postgres.query(f"DROP DATABASE {database} WITH (FORCE)")
        subprocess.run(["rm", "-rf", os.path.join(self.options.work, f"fleet-{workers}")], check=True)
        return measured

    def stop_all(self):
        for process in self.processes:
            stop(process, "salvo serve", seconds=5)


def timeline(run):
    """The partitions' jobs over the run, from their reports (`seconds`, `firstRowSeconds`) and release times."""
    jobs = run.get("jobs") or []
    if not jobs:
        return None
    spans = [(worker, end - report["seconds"], end, report) for worker, end, report in jobs]
    first = min(start for _, start, _, _ in spans)
    last = max(end for _, _, end, _ in spans)
    busy = sum(report["seconds"] for *_, report in spans)
    gaps = []
    for worker in {w for w, *_ in spans}:
        mine = sorted((start, end) for w, start, end, _ in spans if w == worker)
        gaps += [b[0] - a[1] for a, b in zip(mine, mine[1:])]
    first_rows = [r["firstRowSeconds"] for *_, r in spans if r.get("firstRowSeconds") is not None]
    return {
        "jobs": len(spans),
        "job": busy / len(spans),
        "first_row": sum(first_rows) / len(first_rows) if first_rows else float("nan"),
        "gap": sum(gaps) / len(gaps) if gaps else 0.0,
        "concurrency": busy / (last - first) if last > first else 0.0,
        "to_first": first - run["uploaded_at"],
        "sending": last - first,
        "after_last": run["finished_at"] - last,
        "connections": sum(r.get("connections", 0) for *_, r in spans) / len(spans),
    }


def bound(run):
    """What bounds a run or a phase, read from its CPU figures (cores busy = CPU seconds / its seconds)."""
    seconds = run["seconds"]
    names = {"serve": "serve", "postgres": "database", "simulator": "simulator", "others": "other work"}
    cores = {name: run[name] / seconds for name in names}
    busiest = max(cores, key=cores.get)
    if run["idle"] + run["steal"] < 0.10:
        return f"CPU: both cores busy (most: {names[busiest]}, {cores[busiest]:.2f} core)"
    if cores[busiest] >= 0.7:
        return f"{names[busiest]}: {cores[busiest]:.2f} core"
    return f"waits: {run['idle']:.0%} idle, no process near a core"


def main():
    parser = argparse.ArgumentParser()
    for name in ("salvo", "work", "tokens", "payload", "control", "control-token", "pg-url", "pg-password-file",
                 "psql"):
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--workers", required=True)
    parser.add_argument("--simulator-pid", type=int, required=True)
    parser.add_argument("--postmaster-pid", type=int, required=True)
    parser.add_argument("--statements", action="store_true")
    parser.add_argument("--poll-ms", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument("credentials", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    if options.credentials[:1] == ["--"]:
        options.credentials = options.credentials[1:]
    rows = options.rows
    bench = Bench(options)
    runs = []
    try:
        bench.send("warm-up send")
        print(f"{rows} rows, workers {options.workers}, 2 connections each, one simulator", flush=True)
        send = bench.send()
        send["name"] = "send --journal"
        print(f"send --journal          {send['seconds']:7.2f} s", flush=True)
        runs.append(send)
        embedded = bench.embedded()
        embedded["name"] = "campaign, embedded store"
        print(f"campaign, embedded      {embedded['seconds']:7.2f} s (upload {embedded['upload']:.2f} s)", flush=True)
        runs.append(embedded)
        for workers in (int(w) for w in options.workers.split()):
            run = bench.fleet(workers)
            run["name"] = f"fleet, {workers} worker" + ("s" if workers > 1 else "")
            shares = " ".join(f"{w}:{n}" for w, n in run["partitions"].items())
            print(f"{run['name']:<23} {run['seconds']:7.2f} s (upload {run['upload']:.2f} s)  partitions {shares}",
                  flush=True)
            runs.append(run)
    finally:
        bench.stop_all()

    print()
    print("| run | seconds | upload s | rows/s | after the upload, rows/s | × send | × embedded | serve CPU s | PostgreSQL CPU s | simulator CPU s "
          "| client CPU s | other CPU s | idle | what bounds it |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        seconds = run["seconds"]
        upload = run.get("upload", 0.0)
        print(f"| {run['name']} | {seconds:.2f} | " + (f"{upload:.2f}" if "upload" in run else "—")
              + f" | {rows / seconds:,.0f} | {rows / (seconds - upload):,.0f} | {seconds / send['seconds']:.3f} "
              f"| {seconds / embedded['seconds']:.3f} | {run['serve']:.2f} | {run['postgres']:.2f} "
              f"| {run['simulator']:.2f} | {run['client']:.2f} | {run['others']:.2f} | {run['idle']:.0%} | {bound(run)} |")
    print("\n(send's 'serve CPU' is the send process; 'other CPU' is the cores' time spent by no process measured; "
          "steal "
          + ", ".join(f"{r['steal']:.0%}" for r in runs) + ")")

    print()
    print("The campaigns' two phases: the upload (to its answer; a fleet's worker stores the audience's partitions in "
          "the database), then the sending (to `finished`). Cores busy = CPU seconds / the phase's seconds:")
    print("| run | phase | seconds | rows/s | serve cores | PostgreSQL cores | simulator cores | other cores | idle "
          "| what bounds it |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        for phase, part in (("upload", run.get("first")), ("sending", run.get("then"))):
            if not part:
                continue
            t = part["seconds"]
            rate = f"{rows / t:,.0f}" if phase == "sending" else "—"
            print(f"| {run['name']} | {phase} | {t:.2f} | {rate} | {part['serve'] / t:.2f} | {part['postgres'] / t:.2f} "
                  f"| {part['simulator'] / t:.2f} | {part['others'] / t:.2f} | {part['idle']:.0%} | {bound(part)} |")

    fleets = [r for r in runs if "pg" in r]
    if fleets:
        print()
        print("PostgreSQL per notification (fleet runs; the upload's partitions included):")
        print("| run | statements | transactions | tuples inserted / updated / deleted | WAL bytes (the audience's) "
              "| WAL records | WAL syncs | buffers written | PostgreSQL CPU µs |")
        print("|---|---|---|---|---|---|---|---|---|")
        for run in fleets:
            pg = run["pg"]
            statements = f"{pg['statements'] / rows:.5f}" if "statements" in pg else "n/a"
            audience = f" ({pg['audience_wal_bytes'] / rows:.1f})" if "audience_wal_bytes" in pg else ""
            print(f"| {run['name']} | {statements} | {(pg['xact_commit'] + pg['xact_rollback']) / rows:.5f} "
                  f"| {pg['tup_inserted'] / rows:.5f} / {pg['tup_updated'] / rows:.5f} / {pg['tup_deleted'] / rows:.5f} "
                  f"| {pg['wal_bytes'] / rows:.1f}{audience} | {pg['wal_records'] / rows:.4f} | {pg['wal_sync'] / rows:.5f} "
                  f"| {pg['buffers_written'] / rows:.4f} | {run['postgres'] / rows * 1e6:.2f} |")
        print()
        print("The partitions' jobs (from their reports and release times):")
        print("| run | jobs | a job's seconds (mean) | its first row | between a worker's jobs | jobs at once (mean) "
              "| upload's end to the first job | first job to the last's end | last end to `finished` seen |")
        print("|---|---|---|---|---|---|---|---|---|")
        for run in fleets:
            t = timeline(run)
            if t:
                print(f"| {run['name']} | {t['jobs']} | {t['job']:.3f} | {t['first_row']:.3f} | {t['gap']:.3f} "
                      f"| {t['concurrency']:.2f} | {t['to_first']:.2f} | {t['sending']:.2f} | {t['after_last']:.2f} |")
        print()
        print("PostgreSQL totals over each fleet run:")
        for run in fleets:
            pg = run["pg"]
            print(f"  {run['name']}: " + ", ".join(f"{k} {v:,.0f}" for k, v in pg.items()))
        for run in fleets:
            if run["top"]:
                print(f"\n  {run['name']}, statements by calls (calls, rows, ms, WAL bytes, statement):")
                for calls, affected, ms, wal, query in run["top"]:
                    print(f"    {int(calls):>7} {int(affected):>9} {int(ms):>6} {int(wal):>11,}  {query}")
    if failures:
        print(f"\n{len(failures)} check(s) failed:\n  " + "\n  ".join(failures))
        sys.exit(1)
    print("\nevery check passed: each run delivered every row, the ledger held each token once, "
          "every partition done")


if __name__ == "__main__":
    main()
