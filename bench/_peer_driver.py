"""Drives the Python mcpstate 0.2 store for the benches, through its public API.

The benches start it with ``python3 bench/_peer_driver.py`` and ``PYTHONPATH``
set to the store's source (``PEER_SRC``). It reads one JSON request a line on
stdin and answers one JSON line on stdout:

- ``{"open": path, "handles": n, "template": state}``: opens
  ``sqlite:///path`` and mints ``n`` handles (``template`` with ``n`` set);
- ``{"block": op, "from": i, "count": c}``: ``c`` writes of ``op`` (``mint``,
  ``save``, ``patch``, ``steady``) one at a time; answers the milliseconds;
- ``{"sql": text}``: runs ``text`` on this thread's connection (the one
  that writes), e.g. ``PRAGMA wal_autocheckpoint = 0``;
- ``{"threads": t, "saves": s}``: ``t`` threads, each with its own
  connection (the store's SQLite backend keeps one per thread), each saving
  a handle of its own ``s`` times; answers the milliseconds.
"""
import json
import sys
import threading
import time

from mcpstate import Append, HandleStore

USER = "bench-user"
HOT = 50
STEADY = 20


def main() -> None:
    store = None
    template: dict = {}
    handles: list[str] = []
    versions: list[int] = []

    def state(i: int) -> dict:
        s = json.loads(json.dumps(template))
        s["n"] = i
        return s

    def write(op: str, i: int) -> None:
        if op == "mint":
            store.mint("bench", state(i), user=USER)
            return
        if op == "patch":
            k = HOT + (i % HOT)
            snap = store.patch(handles[k], [Append("sources", f"https://x.test/{i}")], user=USER)
        else:
            k = i % HOT if op == "save" else 2 * HOT + (i % STEADY)
            snap = store.save(handles[k], state(i), user=USER, expect_version=versions[k])
        versions[k] = snap.version

    def saver(n: int) -> None:
        h = store.mint("bench", state(0), user=USER)
        for v in range(1, n + 1):
            store.save(h, state(v), user=USER, expect_version=v)

    for line in sys.stdin:
        m = json.loads(line)
        out = None
        if "open" in m:
            store = HandleStore.from_url("sqlite:///" + m["open"])
            template = m["template"]
            for i in range(m["handles"]):
                handles.append(store.mint("bench", state(i), user=USER))
                versions.append(1)
        elif "block" in m:
            t0 = time.perf_counter()
            for i in range(1, m["count"] + 1):
                write(m["block"], m["from"] + i)
            out = (time.perf_counter() - t0) * 1000
        elif "sql" in m:
            store._backend._conn.execute(m["sql"]).fetchall()
        elif "threads" in m:
            threads = [
                threading.Thread(target=saver, args=(m["saves"],)) for _ in range(m["threads"])
            ]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            out = (time.perf_counter() - t0) * 1000
        sys.stdout.write(json.dumps({"ok": out}) + "\n")
        sys.stdout.flush()
    if store is not None:
        store.close()


if __name__ == "__main__":
    main()
