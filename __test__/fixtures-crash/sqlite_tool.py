"""A plain SQLite client for the store tests (Python's sqlite3 module).

Reads one JSON command on stdin and prints one JSON result:
  {"op": "schema"}                          create the documented schema, user_version 4
  {"op": "import", "id": ID, "jsonl": PATH} store a JSONL log as rows (unreadable lines
                                            become rows whose data is the raw line)
  {"op": "dump", "id": ID}                  the sessions row and event rows of ID
  {"op": "exec", "sql": SQL, "params": [...]}  run one statement, print its rows
"""

import json
import sqlite3
import sys

SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, version INTEGER NOT NULL,
  created_at INTEGER NOT NULL, cwd TEXT, parent_session TEXT, seed_length INTEGER) STRICT;
CREATE TABLE events (session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL, type TEXT NOT NULL, time INTEGER NOT NULL, data TEXT NOT NULL,
  source_event_seqs TEXT, surface_op TEXT, PRIMARY KEY (session_id, seq)) STRICT;
PRAGMA user_version = 4;
"""


def compact(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def import_jsonl(db, sid, path):
    with open(path, "rb") as f:
        raw = f.read()
    lines = raw.split(b"\n")
    header = json.loads(lines[0])
    db.execute(
        "INSERT INTO sessions (id, version, created_at, cwd, parent_session, seed_length) VALUES (?, ?, ?, ?, ?, ?)",
        (sid, header["version"], header["createdAt"], header.get("cwd"), header.get("parentSession"), header.get("seedLength")),
    )
    body = lines[1:]
    torn = body[-1] != b""
    if not torn:
        body = body[:-1]
    for index, line in enumerate(body):
        event = None
        if not (torn and index == len(body) - 1):
            try:
                event = json.loads(line)
            except ValueError:
                event = None
        if isinstance(event, dict):
            row = (
                sid, event["seq"], event["type"], event["time"], compact(event["data"]),
                compact(event["sourceEventSeqs"]) if "sourceEventSeqs" in event else None,
                compact(event["surfaceOp"]) if "surfaceOp" in event else None,
            )
        else:
            row = (sid, index, "?", 0, line.decode("utf-8", "replace"), None, None)
        db.execute("INSERT OR IGNORE INTO events VALUES (?, ?, ?, ?, ?, ?, ?)", row)


def main():
    path = sys.argv[1]
    cmd = json.load(sys.stdin)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA foreign_keys = ON")
    out = None
    op = cmd["op"]
    if op == "schema":
        db.executescript(SCHEMA)
    elif op == "import":
        db.execute("BEGIN")
        import_jsonl(db, cmd["id"], cmd["jsonl"])
        db.execute("COMMIT")
    elif op == "dump":
        session = db.execute(
            "SELECT id, version, created_at, cwd, parent_session, seed_length FROM sessions WHERE id = ?", (cmd["id"],)
        ).fetchone()
        rows = db.execute(
            "SELECT seq, type, time, data, source_event_seqs, surface_op FROM events WHERE session_id = ? ORDER BY seq",
            (cmd["id"],),
        ).fetchall()
        out = {
            "session": list(session) if session else None,
            "rows": [list(r) for r in rows],
            "userVersion": db.execute("PRAGMA user_version").fetchone()[0],
        }
    elif op == "exec":
        out = [list(r) for r in db.execute(cmd["sql"], cmd.get("params", [])).fetchall()]
    else:
        raise SystemExit("unknown op " + op)
    db.close()
    json.dump(out, sys.stdout, ensure_ascii=False)


main()
