#!/usr/bin/env python3
"""Benchmarks/campaign-done.sh's driver: the campaigns themselves, through the API alone.

  campaign-done.py --salvo SALVO --work DIR --rows N --rate R --control URL --control-token T
                   --tokens FILE --audience FILE --postgres-url URL --postgres-password-file FILE --query SQL
                   --payload FILE -- CREDENTIALS...

For each audience — the CSV uploaded as the body, then the PostgreSQL query — on a fresh store:
1. `salvo serve` (with `--campaign-postgres`), `POST /v1/campaigns` at RATE a second;
2. once the simulator's ledger holds a quarter of the rows, `kill -9` of the service, which is started again on the
   same store (the campaign resumes by itself);
3. once it holds half, `POST …/pause` (answered `paused` once the job stopped; the ledger must not move for a second),
   the report read (its `resumed.inheritedUncertain`: the rows the kill left written and unanswered), `POST …/resume`;
4. once `finished`: the ledger's verdict for the valid tokens (every one delivered, the refused ones never, none
   unexpected, twice at most the rows the kill left uncertain), then the campaign's report beside the report of
   `salvo send --journal` of the same rows (the same CSV, or `--from-postgres` with the same query) on an emptied
   ledger, whose verdict must be every row once.
The fields compared: inputRows, invalidInput, validRows, suppressed, confirmed, presumed, rejected (by reason),
expired, uncertain, notSent. Exits 1 when a check fails. Every wait is bounded.
"""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request

COMPARED = ["inputRows", "invalidInput", "validRows", "suppressed", "confirmed", "presumed", "rejected", "expired",
            "uncertain", "notSent"]
failures = []


def check(condition, message):
    print(("  ok    " if condition else "  FAIL  ") + message, flush=True)
    if not condition:
        failures.append(message)


def http(method, url, token, body=None, content_type=None, headers=None, timeout=60):
    request = urllib.request.Request(url, data=body, method=method, headers={"Authorization": "Bearer " + token})
    if content_type:
        request.add_header("Content-Type", content_type)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def wait_for(what, condition, seconds, every=0.05):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(every)
    sys.exit(f"gave up after {seconds} s waiting for {what}")


class Simulator:
    def __init__(self, control, token):
        self.control, self.token = control, token

    def reset(self):
        http("POST", self.control + "/reset", self.token)

    def accepted(self):
        return json.loads(http("GET", self.control + "/ledger", self.token)[1]).get("accepted", 0)

    def verdict(self, tokens_file):
        with open(tokens_file, "rb") as file:
            status, body = http("POST", self.control + "/verdict", self.token, body=file.read(), timeout=120)
        if status != 200:
            sys.exit(f"the simulator's verdict: {status} {body[:300]!r}")
        return json.loads(body)


class Serve:
    """`salvo serve` on one store, started again after a kill."""

    def __init__(self, args, store):
        self.args, self.store, self.process, self.url, self.starts = args, store, None, None, 0
        self.key = subprocess.run([args.salvo, "serve", "keys", "create", "--store", store, "--name", "done"],
                                  capture_output=True, text=True, check=True).stdout
        self.key = re.search(r"^key: (\S+)", self.key, re.M).group(1)

    def start(self):
        self.starts += 1
        out = open(f"{self.store}.out.{self.starts}", "w")
        log = open(f"{self.store}.log.{self.starts}", "w")
        self.process = subprocess.Popen(
            [self.args.salvo, "serve", "--listen", "127.0.0.1:0", "--store", self.store, "--no-proxy",
             "--connections", "2", "--log-level", "notice",
             "--campaign-postgres", self.args.postgres_url,
             "--campaign-postgres-password-file", self.args.postgres_password_file] + self.args.credentials,
            stdout=out, stderr=log)

        def listening():
            if self.process.poll() is not None:
                sys.exit(f"salvo serve exited {self.process.returncode}: {open(log.name).read()[-2000:]}")
            found = re.search(r"listening on (http://\S+)", open(out.name).read())
            return found and found.group(1)
        self.url = wait_for("salvo serve to listen", listening, 60).rstrip("/")

    def kill9(self):
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            failures.append("salvo serve did not stop within 30 s of SIGTERM")

    def call(self, method, path, **options):
        status, body = http(method, self.url + path, self.key, **options)
        return status, (json.loads(body) if body[:1] in (b"{", b"[") else body)

    def logs(self):
        text = ""
        for n in range(1, self.starts + 1):
            text += open(f"{self.store}.out.{n}").read() + open(f"{self.store}.log.{n}").read()
        return text


def campaign(args, simulator, kind):
    print(f"{kind}: {args.rows} rows (+{args.invalid} invalid) at {args.rate}/s", flush=True)
    simulator.reset()
    store = f"{args.work}/store-{kind}"
    serve = Serve(args, store)
    serve.start()
    payload = json.load(open(args.payload))
    settings = {"name": f"done-{kind}", "rate": args.rate, "payload": payload}
    started = time.monotonic()
    if kind == "csv":
        with open(args.audience, "rb") as file:
            status, made = serve.call("POST", "/v1/campaigns", body=file.read(), content_type="text/csv",
                                      headers={"Salvo-Campaign": json.dumps(settings)}, timeout=300)
    else:
        settings["audience"] = {"postgres": {"query": args.query}}
        status, made = serve.call("POST", "/v1/campaigns", body=json.dumps(settings).encode(),
                                  content_type="application/json")
    if status != 201:
        sys.exit(f"{kind}: the campaign was refused: {status} {made}")
    campaign_id = made["id"]
    path = "/v1/campaigns/" + campaign_id

    wait_for("a quarter of the rows", lambda: simulator.accepted() >= args.rows // 4, 600)
    serve.kill9()
    at_kill = simulator.accepted()
    print(f"  kill -9 of salvo serve at {at_kill} accepted ({time.monotonic() - started:.1f} s)", flush=True)
    serve.start()
    wait_for("the campaign running again", lambda: serve.call("GET", path)[1].get("state") == "running", 60)
    wait_for("half the rows", lambda: simulator.accepted() >= args.rows // 2, 600)
    status, paused = serve.call("POST", path + "/pause")
    check(status == 200 and paused.get("state") == "paused", f"paused: {status} {paused.get('state')}")
    at_pause = simulator.accepted()
    time.sleep(1)
    check(simulator.accepted() == at_pause, f"nothing sent while paused ({at_pause} accepted at the pause)")
    _, after_kill = serve.call("GET", path + "/report")
    resumed = after_kill.get("resumed") or {}
    inherited = resumed.get("inheritedUncertain", 0)
    check(resumed.get("run") == 2, f"the run after the kill is the journal's second (run {resumed.get('run')}), "
          f"{inherited} rows left uncertain by the kill")
    status, answer = serve.call("POST", path + "/resume")
    check(status == 200, f"resumed: {status}")
    status_of = lambda: serve.call("GET", path)[1]
    final_state = wait_for("the campaign to end",
                           lambda: status_of().get("state") in ("finished", "failed", "cancelled") and status_of(),
                           1800, every=0.2)
    seconds = time.monotonic() - started
    check(final_state["state"] == "finished", f"finished in {seconds:.1f} s: {final_state.get('message', '')}")
    _, report = serve.call("GET", path + "/report")
    logs = serve.logs()
    serve.stop()
    check(args.postgres_password not in logs, "the database's password appears in none of the service's output")

    verdict = simulator.verdict(args.tokens)
    twice = verdict["deliveredMoreThanOnce"]
    check(verdict["neverDelivered"] == 0 and verdict["unexpected"] == 0 and verdict["invalidButDelivered"] == 0,
          f"ledger: {verdict['deliveredOnce']} once, {twice} twice, {verdict['invalidNeverDelivered']} refused by "
          f"the gateway and never delivered, {verdict['neverDelivered']} never, {verdict['unexpected']} unexpected")
    check(twice <= inherited, f"delivered twice only among the rows the kill left uncertain: {twice} <= {inherited}")

    # `salvo send --journal` of the same rows, on an emptied ledger.
    simulator.reset()
    journal = f"{args.work}/send-{kind}"
    source = [args.audience] if kind == "csv" else [
        "--from-postgres", args.postgres_url, "--postgres-password-file", args.postgres_password_file,
        "--query", args.query]
    send_started = time.monotonic()
    sent = subprocess.run([args.salvo, "send"] + source + [
        "--payload", args.payload, "--protocol", "h2", "--push-type", "alert", "--no-proxy", "--connections", "2",
        "--journal", journal + "-journal", "--report", journal + "-report.json", "--quiet"] + args.credentials,
        capture_output=True, text=True)
    send_seconds = time.monotonic() - send_started
    check(sent.returncode in (0, 1), f"salvo send --journal exit {sent.returncode} in {send_seconds:.1f} s "
          f"{sent.stderr[-500:]}")
    send_report = json.load(open(journal + "-report.json"))
    send_verdict = simulator.verdict(args.tokens)
    check(send_verdict["neverDelivered"] == 0 and send_verdict["deliveredMoreThanOnce"] == 0,
          f"send's ledger: {send_verdict['deliveredOnce']} once, {send_verdict['deliveredMoreThanOnce']} twice")
    ours = {field: report.get(field) for field in COMPARED}
    theirs = {field: send_report.get(field) for field in COMPARED}
    check(ours == theirs, f"the campaign's report equals send --journal's: {json.dumps(ours, sort_keys=True)}"
          + ("" if ours == theirs else f" != {json.dumps(theirs, sort_keys=True)}"))
    print(f"  campaign {seconds:.1f} s (paced at {args.rate}/s, a kill and a pause included); send --journal "
          f"{send_seconds:.1f} s unpaced", flush=True)


def main():
    parser = argparse.ArgumentParser()
    for name in ["salvo", "work", "control", "control-token", "tokens", "audience", "postgres-url",
                 "postgres-password-file", "query", "payload"]:
        parser.add_argument("--" + name, required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--invalid", type=int, required=True)
    parser.add_argument("--rate", type=int, required=True)
    parser.add_argument("credentials", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    args.credentials = [c for c in args.credentials if c != "--"]
    args.postgres_password = open(args.postgres_password_file).readline().rstrip("\n")
    simulator = Simulator(args.control, args.control_token)
    for kind in ("csv", "postgres"):
        campaign(args, simulator, kind)
    if failures:
        print(f"{len(failures)} check(s) failed", flush=True)
        sys.exit(1)
    print("every check passed", flush=True)


if __name__ == "__main__":
    main()
