#!/usr/bin/env python3
"""The embedded store's write cycle in SQLite alone, through Python's sqlite3 (Debian's SQLite, as the service's), for
comparing layouts: each cycle stores 1,600 notifications (16 requests of 100, the load of Benchmarks/service.sh),
records the outcomes of the last cycle's 1,600 and commits with a sync (WAL, synchronous=FULL, the log copied into the
database every 10 cycles, outside the clock). Prints the microseconds a notification of each part, over cycles 11-70.

    Benchmarks/store-cycle.py LAYOUT [FOLDER]

LAYOUT:
  rows                 the service's table (a row a notification, its indexes), the outcome an UPDATE of the row
  rows-nobatch         without the (batch, seq) index            rows-noid       without the index of ids
  rows-nosending       without the partial index of rows being sent
  rows-noapns          apns_id not stored when it is the id
  rows-outcomes        outcomes appended to a table of their own rather than updating the row
  (options combine: rows-nobatch-noapns-outcomes)
  requests             a row a request (its notifications packed in one blob), outcomes appended
The driver's own cost (about a microsecond a row through executemany) is in every figure.
"""
import os
import sqlite3
import sys
import time
import uuid
import random

layout = sys.argv[1] if len(sys.argv) > 1 else "rows"
folder = sys.argv[2] if len(sys.argv) > 2 else "/tmp"
path = os.path.join(folder, f"store-cycle-{layout}.sqlite")
for suffix in ("", "-wal", "-shm"):
    try:
        os.remove(path + suffix)
    except FileNotFoundError:
        pass
db = sqlite3.connect(path, isolation_level=None)
for pragma in ("journal_mode=WAL", "synchronous=FULL", "temp_store=MEMORY", "wal_autocheckpoint=0"):
    db.execute(f"PRAGMA {pragma}")
options = set(layout.split("-"))
payload = b'{"aps":{"alert":{"title":"Salvo","body":"A benchmark notification of one hundred bytes, padded...."}}}'[:100]
cycles, per, requests = 70, 1600, 16
now = int(time.time() * 1000)

if "requests" in options:
    db.execute("CREATE TABLE requests (first_seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, count INTEGER NOT NULL, "
               "accepted_at INTEGER NOT NULL, body BLOB NOT NULL)")
    db.execute("CREATE TABLE outcomes (seq INTEGER PRIMARY KEY, state INTEGER, status INTEGER, reason TEXT, "
               "apns_unique_id TEXT, unregistered_at INTEGER, answered_at INTEGER)")
    store = "INSERT INTO requests VALUES (?, ?, ?, ?, ?)"
    answer = "INSERT OR IGNORE INTO outcomes VALUES (?, ?, ?, ?, ?, ?, ?)"
else:
    db.execute("""CREATE TABLE notifications (
        seq INTEGER PRIMARY KEY, id TEXT NOT NULL, batch TEXT NOT NULL, token BLOB NOT NULL,
        payload BLOB NOT NULL, push_type TEXT, apns_id TEXT, expiration INTEGER, priority INTEGER,
        topic TEXT, collapse_id TEXT, state INTEGER NOT NULL, status INTEGER, reason TEXT,
        apns_unique_id TEXT, unregistered_at INTEGER, accepted_at INTEGER NOT NULL, sent_at INTEGER,
        answered_at INTEGER, uncertain_resends INTEGER NOT NULL DEFAULT 0, webhook INTEGER)""")
    if "noid" not in options:
        db.execute("CREATE UNIQUE INDEX notifications_id ON notifications (id)")
    if "nobatch" not in options:
        db.execute("CREATE INDEX notifications_batch ON notifications (batch, seq)")
    db.execute("CREATE INDEX notifications_queued ON notifications (seq) WHERE state = 0")
    if "nosending" not in options:
        db.execute("CREATE INDEX notifications_sending ON notifications (seq) WHERE state = 1")
    store = ("INSERT INTO notifications (seq, id, batch, token, payload, push_type, apns_id, expiration, priority, "
             "topic, collapse_id, state, accepted_at, sent_at, answered_at, uncertain_resends) "
             "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    if "outcomes" in options:
        db.execute("CREATE TABLE outcomes (seq INTEGER PRIMARY KEY, state INTEGER, status INTEGER, reason TEXT, "
                   "apns_id TEXT, apns_unique_id TEXT, unregistered_at INTEGER, answered_at INTEGER, "
                   "uncertain_resends INTEGER)")
        answer = ("INSERT OR IGNORE INTO outcomes (state, status, reason, apns_id, apns_unique_id, unregistered_at, "
                  "answered_at, uncertain_resends, seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
    else:
        answer = ("UPDATE notifications SET state = ?, status = ?, reason = ?, apns_id = coalesce(?, apns_id), "
                  "apns_unique_id = ?, unregistered_at = ?, answered_at = ?, "
                  "uncertain_resends = uncertain_resends + ? WHERE seq = ? AND state < 2")


def version7(milliseconds, low):
    return str(uuid.UUID(int=(milliseconds << 80) | (low << 30) | random.getrandbits(30)))


seq = 0
last = []
spent = [0.0, 0.0, 0.0]
for cycle in range(cycles):
    if "requests" in options:
        rows = []
        for _ in range(requests):
            first = seq + 1
            body = bytearray()
            for _ in range(per // requests):
                seq += 1
                body += os.urandom(32) + payload + b"alert\x00com.example.bench\x00" + os.urandom(16)
            rows.append((first, version7(now + cycle, first), per // requests, now, bytes(body)))
        outcomes = [(s, 2, 200, None, str(uuid.uuid4()), None, now) for s in last]
        stored = list(range(seq - per + 1, seq + 1))
    else:
        batches = [version7(now + cycle, r) for r in range(requests)]
        rows = []
        for i in range(per):
            seq += 1
            id = version7(now + cycle, seq)
            rows.append((seq, id, batches[i // (per // requests)], os.urandom(32), payload, "alert",
                         None if "noapns" in options else id, None, None, "com.example.bench", None, 1, now, now,
                         None, 0))
        outcomes = [(2, 200, None, None if "noapns" in options else str(uuid.uuid4()), str(uuid.uuid4()), None, now,
                     0, s) for s in last]
        stored = [row[0] for row in rows]
    db.execute("BEGIN")
    a = time.perf_counter()
    db.executemany(store, rows)
    b = time.perf_counter()
    db.executemany(answer, outcomes)
    c = time.perf_counter()
    db.execute("COMMIT")
    d = time.perf_counter()
    if cycle % 10 == 9:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if cycle >= 10:
        spent[0] += b - a
        spent[1] += c - b
        spent[2] += d - c
    last = stored
n = (cycles - 10) * per
print(f"{layout:30s} store {spent[0] / n * 1e6:5.2f}  outcome {spent[1] / n * 1e6:5.2f}  "
      f"commit {spent[2] / n * 1e6:5.2f}  total {sum(spent) / n * 1e6:5.2f} us a notification")
for suffix in ("", "-wal", "-shm"):
    try:
        os.remove(path + suffix)
    except FileNotFoundError:
        pass
