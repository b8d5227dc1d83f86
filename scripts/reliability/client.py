"""One load-client process: threads that push, pop, claim, ack and release over the REST API.

Started by ``load.py`` with a JSON config file. Each thread writes a journal, one JSON line per
request, flushed as it goes (``journal-p<process>-t<thread>.jsonl``): what it was about to do
(``push?``, ``batch?``, ``ack?``, ``release?``) before the request, and what came back after. The journal outlives a
SIGKILL of this process, which is how the driver accounts for every item a killed consumer
touched: an intent without its answer is an operation in doubt, not a lost item.

Every pushed value carries a unique ``uid``; with ``dedup_key`` the uid is the key, so retrying
a push whose answer was lost cannot store it twice. In ``safe`` mode (fault and kill runs) every
push has a key and items are consumed only with claim and ack, because a plain pop whose commit
or answer is lost loses its item (at-most-once, as docs/explanation/guarantees.md documents).
"""

from __future__ import annotations

import datetime
import json
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any, TextIO

import httpx

# A single request's limits: connecting must be quick on loopback; a response may wait behind
# a busy store, but never forever.
TIMEOUT = httpx.Timeout(30.0, connect=5.0)
# Retries of a request whose answer was lost (a killed server worker): pushes with a dedup key
# and acks are safe to repeat.
RETRIES = 4
ABANDON_LEASE = 1.5


def lease_end(lease_body: dict[str, Any]) -> float | None:
    """The lease's end as the server set it (Unix seconds), from a claim's answer; None if absent.

    The server computes it from the same machine's clock as the journal's timestamps, so the
    driver can tell exactly whether a later claim came before it.
    """
    text = lease_body.get("lease_expires_at") or lease_body.get("expires_at")
    if not isinstance(text, str):
        return None
    try:
        moment = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return round(moment.timestamp(), 6)


class Journal:
    """One thread's journal: a line per event, flushed at once so a SIGKILL loses nothing said."""

    def __init__(self, path: Path) -> None:
        self._file: TextIO = open(path, "a", buffering=1, encoding="utf-8")

    def write(self, **event: Any) -> None:
        event["t"] = round(time.time(), 4)
        self._file.write(json.dumps(event, separators=(",", ":")) + "\n")

    def close(self) -> None:
        self._file.close()


class LoadThread:
    """One client: an HTTP connection of its own and a random mix of operations until the end."""

    def __init__(self, config: dict[str, Any], process: int, thread: int) -> None:
        self.config = config
        self.safe: bool = config["safe"]
        self.queues: list[dict[str, Any]] = config["queues"]
        self.lease: float = config["lease"]
        # Seconds of "work" between a claim and its ack: the process a kill run SIGKILLs works,
        # so that the kill finds it holding leases, which must then come back.
        self.work: tuple[float, float] = tuple(config.get("work", (0.0, 0.0)))  # type: ignore[assignment]
        self.tag = f"p{process}t{thread}"
        self.random = random.Random(f"{config['seed']}-{self.tag}")
        token = config["tokens"][(config["first_token"] + thread) % len(config["tokens"])]
        self.http = httpx.Client(
            base_url=config["base_url"],
            headers={"Authorization": f"{config['auth_prefix']} {token}"},
            timeout=TIMEOUT,
        )
        self.journal = Journal(Path(config["journal_dir"]) / f"journal-{self.tag}.jsonl")
        self.counter = 0

    # -- one request -------------------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> tuple[Any, Any]:
        """(status, or "err" when no answer came; and the parsed body, the latency and the start).

        ``sent`` is the wall clock just before the request: the server acted after it. The
        journal's ``t`` comes later than the answer (parsing, the GIL, a busy machine), so
        ``t - ms`` is no bound on when the server acted, and the driver's checks use ``sent``.
        """
        sent = time.time()
        started = time.perf_counter()
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as error:
            ms = (time.perf_counter() - started) * 1000
            return "err", {"error": type(error).__name__, "ms": ms, "sent": sent}
        ms = (time.perf_counter() - started) * 1000
        body = None
        if response.content:
            try:
                body = response.json()
            except ValueError:
                body = {"raw": response.text[:200]}
        retry_after = response.headers.get("retry-after")
        return response.status_code, {"body": body, "ms": ms, "sent": sent, "retry_after": retry_after}

    def record(self, op: str, status: Any, info: dict[str, Any], **fields: Any) -> None:
        extra: dict[str, Any] = {}
        if status == "err":
            extra["err"] = info["error"]
        elif isinstance(status, int) and status >= 500:
            extra["body"] = info["body"]
            extra["retry_after"] = info["retry_after"]
        self.journal.write(op=op, st=status, ms=round(info["ms"], 3), t0=round(info["sent"], 4), **fields, **extra)

    # -- the operations ----------------------------------------------------------------------

    def pick_queue(self) -> dict[str, Any]:
        return self.random.choice(self.queues)

    def end_for(self, queue: dict[str, Any]) -> str:
        return "min" if queue["kind"] == "fifo" else self.random.choice(("min", "max"))

    def next_uid(self) -> str:
        self.counter += 1
        return f"{self.tag}-{self.counter}"

    def push(self) -> None:
        queue = self.pick_queue()
        uid = self.next_uid()
        body: dict[str, Any] = {"value": {"uid": uid, "pad": "x" * self.random.randint(0, 200)}}
        if queue["kind"] == "priority":
            body["priority"] = self.random.randint(-5, 5)
        dedup = self.safe or self.random.random() < 0.5
        if dedup:
            body["dedup_key"] = uid
        if self.random.random() < 0.1:
            body["delay"] = 1.0
        self.journal.write(op="push?", uid=uid, q=queue["name"], dedup=dedup)
        for attempt in range(RETRIES if dedup else 1):
            status, info = self.request("POST", f"/api/queues/{queue['name']}/push/", json=body)
            fields: dict[str, Any] = {"uid": uid, "q": queue["name"], "try": attempt}
            if status in (200, 201):
                fields.update(id=info["body"]["id"], dup=info["body"].get("duplicate", False))
            self.record("push", status, info, **fields)
            if status != "err":
                return
            time.sleep(0.2 * (attempt + 1))

    def push_batch(self) -> None:
        queue = self.pick_queue()
        uids = [self.next_uid() for _ in range(3)]
        items = [{"value": {"uid": uid}} for uid in uids]
        self.journal.write(op="batch?", uids=uids, q=queue["name"])
        status, info = self.request("POST", f"/api/queues/{queue['name']}/push/", json={"items": items})
        fields: dict[str, Any] = {"uids": uids, "q": queue["name"]}
        if status == 201:
            fields["ids"] = [item["id"] for item in info["body"]["items"]]
        self.record("batch", status, info, **fields)

    def pop(self) -> None:
        queue = self.pick_queue()
        status, info = self.request("POST", f"/api/queues/{queue['name']}/pop/?end={self.end_for(queue)}")
        fields: dict[str, Any] = {"q": queue["name"]}
        if status == 200:
            fields.update(uid=info["body"]["value"]["uid"], id=info["body"]["id"])
        self.record("pop", status, info, **fields)

    def claim(self) -> None:
        queue = self.pick_queue()
        abandon = self.random.random() < 0.04
        lease = ABANDON_LEASE if abandon else self.lease
        body = {"lease": lease, "end": self.end_for(queue)}
        status, info = self.request("POST", f"/api/queues/{queue['name']}/claim/", json=body)
        fields: dict[str, Any] = {"q": queue["name"], "lease": lease}
        if status != 200:
            self.record("claim", status, info, **fields)
            return
        lease_body = info["body"]
        item = lease_body["item"]
        uid = item["value"]["uid"]
        self.record(
            "claim",
            status,
            info,
            uid=uid,
            id=item["id"],
            att=item["attempts"],
            abandon=abandon,
            until=lease_end(lease_body),
            **fields,
        )
        if abandon:
            return  # never acked: the lease runs out and the item comes back
        receipt = lease_body["receipt"]
        if self.work[1] > 0:
            time.sleep(self.random.uniform(*self.work))
        if self.random.random() < 0.1:
            delay = self.random.choice((0, 0, 0.5))
            # Said before it is sent: a kill may come before the answer, and the item is then free.
            self.journal.write(op="release?", uid=uid, q=queue["name"])
            status, info = self.request(
                "POST", f"/api/queues/{queue['name']}/release/", json={"receipt": receipt, "delay": delay}
            )
            state = info["body"]["state"] if status == 200 else None
            self.record("release", status, info, uid=uid, q=queue["name"], state=state)
            return
        self.journal.write(op="ack?", uid=uid, id=item["id"], q=queue["name"])
        lost_answer = False
        for attempt in range(RETRIES):
            status, info = self.request("POST", f"/api/queues/{queue['name']}/ack/", json={"receipt": receipt})
            code = info["body"].get("code") if status == 409 and info.get("body") else None
            # A 409 after a lost answer may be this very ack, committed the first time.
            self.record(
                "ack",
                status,
                info,
                uid=uid,
                id=item["id"],
                q=queue["name"],
                code=code,
                try_=attempt,
                doubt=lost_answer and status == 409,
            )
            if status != "err":
                return
            lost_answer = True
            time.sleep(0.2 * (attempt + 1))

    def read(self) -> None:
        queue = self.pick_queue()
        if self.random.random() < 0.5:
            status, info = self.request("GET", f"/api/queues/{queue['name']}/")
            self.record("stats", status, info, q=queue["name"])
        else:
            status, info = self.request("GET", f"/api/queues/{queue['name']}/peek/?end={self.end_for(queue)}")
            self.record("peek", status, info, q=queue["name"])

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> None:
        if self.safe:
            mix = [(self.push, 36), (self.claim, 52), (self.read, 12)]
        else:
            mix = [(self.push, 28), (self.push_batch, 4), (self.pop, 14), (self.claim, 42), (self.read, 12)]
        operations = [operation for operation, _ in mix]
        weights = [weight for _, weight in mix]
        end_at = self.config["end_at"]
        # Every client starts at the same moment, so the run's rates cover a full load.
        time.sleep(max(0.0, min(self.config.get("start_at", 0) - time.time(), 10.0)))
        try:
            while time.time() < end_at:
                self.random.choices(operations, weights)[0]()
        finally:
            self.http.close()
            self.journal.close()


def main() -> int:
    config = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    process = int(sys.argv[2])
    failures: list[BaseException] = []

    def run_thread(thread: int) -> None:
        try:
            LoadThread(config, process, thread).run()
        except BaseException as error:  # noqa: BLE001 - reported below, the process exits non-zero
            failures.append(error)
            import traceback

            traceback.print_exc()

    threads = [threading.Thread(target=run_thread, args=(index,), daemon=True) for index in range(config["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        # Bounded: a thread ends at end_at plus at most a few requests' timeouts.
        thread.join(max(0.0, config["end_at"] - time.time()) + 4 * TIMEOUT.read + 10)
    if any(thread.is_alive() for thread in threads):
        print("client threads still running at their deadline", file=sys.stderr)
        return 3
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
