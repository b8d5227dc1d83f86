"""The high-contention group: contenders and claimers, with their feeder and tender, all on ``hc``.

Several high-contention pops meet on one end of ``hc`` each tick, so that their rounds overlap,
and some stop or freeze at a step of the protocol: what they leave behind (requests, results,
lead keys) is for later rounds to find. High-contention claimers meet there too, on a desk of
their own: each claim is acked, released, extended or walked away from, and some stop or freeze
midway, leaving a lease granted to nobody, which must come back when it ends. The feeder pushes
bursts just before they meet; the tender runs fulfil rounds (of pops and of claims) beside theirs.
"""

from __future__ import annotations

import random
from functools import partial
from typing import Any

from django_fdbqueue import service
from django_fdbqueue.exceptions import LeaseGone
from django_fdbqueue.fdbapi import FDBError
from django_fdbqueue.service._internals import contention, hcclaims

from .actors_base import CONTENDED, TICK_SECONDS, ActorsBase


class Contention(ActorsBase):
    """The contenders, the feeder and the tender (see the module's docstring); ``Actors`` sets
    their state."""

    contended_end: str
    stops: bool
    freezes: bool

    def feeder(self, name: str, rng: random.Random, operations: int) -> None:
        """Pushes bursts to ``hc`` (``push_many``) just before the contenders meet over them."""
        pushed = 0
        for _ in range(max(1, operations // 2)):
            if self.stopping.is_set():
                return
            self._meet(TICK_SECONDS)
            values = [f"{name}:{pushed + k}" for k in range(rng.randint(3, 10))]
            pushed += len(values)
            self._push_many(name, CONTENDED, [(value, rng.randint(0, 3)) for value in values])

    def contender(self, name: str, rng: random.Random, operations: int) -> None:
        """High-contention pops of one end of ``hc``, several at once, so that rounds overlap.

        Each pop runs as an actor of its own (a worker thread of this process) that may be
        stopped or frozen at any step of the protocol: requests, results and lead keys are left
        behind for later rounds (and the pop itself, late) to find. Some pops wait (``wait=``):
        items that come back by recovery must wake them.
        """
        for n in range(max(1, operations // 2)):
            if self.stopping.is_set():
                return
            self._meet(TICK_SECONDS)
            # Mid-tick: most find the queue empty and wait, to be woken together by the next burst.
            self.scheduler.sleep(TICK_SECONDS / 2)
            pops = [self._contended(name, f"{name}.{n}{'abcd'[k]}", rng) for k in range(rng.choice([3, 4]))]
            if not self.exact:
                self.scheduler.block("its pops", condition=partial(_all_done, pops))

    def _contended(self, owner: str, name: str, rng: random.Random) -> Any:
        """Start one pop of ``hc`` as an actor (run it, in a swarm), maybe to be stopped or frozen midway."""
        timeout = rng.choice([None, 1.0, 1.0, 2.0])
        wait = rng.choice([None, 1.0, 2.0, 2.0])  # woken together by a burst: a thundering herd
        what = f"pop {CONTENDED} {self.contended_end} high-contention" + (f" timeout {timeout}" if timeout else "")
        what += f" wait {wait}" if wait else ""
        if self.exact:  # a swarm: real threads, nothing stopped
            return self._contended_pop(owner, what, timeout, wait)
        pop = self.scheduler.spawn(name, partial(self._contended_pop, name, what, timeout, wait))
        self.doubts[name] = self.doubts[owner]  # its commits in doubt are its owner's
        self._plan_stop(pop, rng, waits=wait is not None)
        return pop

    def tender(self, name: str, rng: random.Random, operations: int) -> None:
        """A maintenance task running fulfil rounds on ``hc`` now and then, beside the pops' own
        rounds: they serve requests and put back the results of pops that gave up or died."""
        end = self.contended_end
        for _ in range(operations):
            if self.stopping.is_set():
                return
            self._meet(TICK_SECONDS)
            self.scheduler.sleep(TICK_SECONDS / 2)  # when the contenders meet
            for _ in range(rng.randint(1, 4)):
                self.scheduler.sleep(rng.uniform(0.0, 0.03))
                if rng.random() < 0.5:
                    self._call(name, f"fulfil {CONTENDED} {end}", partial(contention.fulfil, self.db, CONTENDED, end))
                else:
                    self._call(
                        name, f"fulfil claims {CONTENDED} {end}", partial(hcclaims.fulfil, self.db, CONTENDED, end)
                    )

    def hc_claimer(self, name: str, rng: random.Random, operations: int) -> None:
        """High-contention claims of ``hc``'s contended end, several at once (among the contenders'
        pops), each run as an actor of its own that may be stopped or frozen midway, as a
        contender's pop may: a lease a round granted to a claimer that died ends by itself."""
        for n in range(max(1, operations // 2)):
            if self.stopping.is_set():
                return
            self._meet(TICK_SECONDS)
            self.scheduler.sleep(TICK_SECONDS / 2)
            claims = [self._contended_claim(name, f"{name}.{n}{'abc'[k]}", rng) for k in range(rng.choice([2, 3]))]
            if not self.exact:
                self.scheduler.block("its claims", condition=partial(_all_done, claims))

    def _contended_claim(self, owner: str, name: str, rng: random.Random) -> Any:
        """Start one high-contention claim of ``hc`` as an actor, maybe to be stopped or frozen midway."""
        timeout = rng.choice([None, 1.0, 2.0])
        wait = rng.choice([None, 1.0, 2.0])
        seconds = rng.choice([0.5, 2.0, 30.0])
        what = f"claim {CONTENDED} {self.contended_end} high-contention lease {seconds}"
        what += (f" timeout {timeout}" if timeout else "") + (f" wait {wait}" if wait else "")
        call = partial(
            service.claim,
            self.db,
            CONTENDED,
            end=self.contended_end,
            lease=seconds,
            mode="high-contention",
            timeout=timeout,
            wait=wait,
        )
        settle = random.Random(rng.random())
        if self.exact:
            return self._hc_claim(owner, what, call, settle)
        claim = self.scheduler.spawn(name, partial(self._hc_claim, name, what, call, settle))
        self.doubts[name] = self.doubts[owner]
        self._plan_stop(claim, rng, waits=wait is not None)
        return claim

    def _hc_claim(self, name: str, what: str, call: Any, rng: random.Random) -> None:
        """One claim, then settled as a claimer settles; or first acked by a second claim's commit
        (``ack=``), as a steady claimer acks its last item and asks for the next at once."""
        lease, _doubt, _error = self._call(name, what, call)
        if lease is not None and rng.random() < 0.3:
            first, value = lease, lease.item.value
            self.history.leased(value)
            lease, _doubt, error = self._call(name, f"{what} ack {value}", partial(call, ack=first.receipt), acks=value)
            self._gone_early(name, first, error)
            if error is None:
                self.history.deliver(value)
            elif not isinstance(error, (LeaseGone, FDBError)):
                raise error
        if lease is not None:
            self.history.leased(lease.item.value)
            self._settle(name, rng, lease)

    def _plan_stop(self, pop: Any, rng: random.Random, *, waits: bool) -> None:
        """Maybe stop or freeze ``pop`` at a step of the protocol.

        From its 5th point on: a pop that got that far was staged (points 1 to 4 are its races on
        the fast path), so it stops with a request, a lead or a result in the store. A pop that
        does not wait for items watches only its bells: woken, it was answered or handed the
        lead, and it stops there or freezes (often long enough for its deadline and the grace to
        pass: its result is put back by a round, or it collects it late, among the others' rounds).
        """
        plan = rng.random()
        if plan >= 0.5:
            return
        if waits:  # it may also be woken by an item pushed: some plans at its points instead
            plan = rng.random() * 0.5
        stop, freeze = plan < 0.1 or 0.3 <= plan < 0.4, not (plan < 0.1 or 0.3 <= plan < 0.4)
        if (stop and not self.stops) or (freeze and not self.freezes):
            return
        if plan < 0.1:
            pop.kill_on_wake = True
        elif plan < 0.3:
            pop.pause_on_wake = partial(self._till_meeting, rng.uniform(4.0, 12.0) + rng.uniform(0.0, 0.05))
        elif plan < 0.4:
            pop.kill_at_point = rng.randint(5, 10)
        else:
            pop.pause_at_point = (rng.randint(5, 10), rng.uniform(4.0, 12.0))

    @staticmethod
    def _till_meeting(at_least: float, now: float) -> float:
        """Seconds from ``now`` until the contenders meet (mid-tick), ``at_least`` from now (and the
        fraction of a tick it asks for): a frozen pop comes back among the others' rounds."""
        later = now + at_least
        return later - later % TICK_SECONDS + TICK_SECONDS / 2 + at_least % 0.05 - now

    def _meet(self, tick: float) -> None:
        """Sleep until the clock's next multiple of ``tick``: the contenders that do pop together."""
        now = self.scheduler.clock.now
        self.scheduler.sleep(tick - now % tick)

    def _contended_pop(self, name: str, what: str, timeout: float | None, wait: float | None) -> None:
        started = self.scheduler.clock.now
        got, _doubt, error = self._call(
            name,
            what,
            partial(
                service.pop, self.db, CONTENDED, self.contended_end, mode="high-contention", timeout=timeout, wait=wait
            ),
            pops=CONTENDED,
            receipts=True,
        )
        if got is not None:
            self.history.deliver(got.value)
        elif wait is not None and error is None:
            self.history.gave_up_on(name, CONTENDED, started, self.scheduler.clock.now)


def _all_done(actors: list[Any]) -> bool:
    return all(actor.state == "done" for actor in actors)
