# SPDX-License-Identifier: Apache-2.0
"""What a latency model (crates/bdev/src/model) predicts a closed-loop client sees.

The model draws each command's service time from a log-normal with the configured mean and
99th percentile (`sampler.rs`), gives the command the unit free soonest, and completes it when
that unit has served it. A client at queue depth QD resubmits at once on each completion. So:

- at QD1 nothing queues: latency is the service time (p50 exp(mu), p99 the configured p99);
- once QD exceeds the units, IOPS level off at units / mean service time and latency grows
  with the queue (Little's law: QD / IOPS);
- in between, this module simulates the same queue (FCFS over `units` servers) with the same
  distribution, which is what the model does, minus the host's own time per command.
"""

import heapq
import math
import random

Z99 = 2.326347874040841


def lognormal_params(avg_us, p99_us):
    """(mu, sigma) of the log-normal with mean avg_us and 99th percentile p99_us, as
    sampler.rs solves it (the smaller root; sigma capped at Z99)."""
    if p99_us <= avg_us:
        return math.log(avg_us), 0.0
    r = math.log(p99_us / avg_us)
    disc = Z99 * Z99 - 2.0 * r
    sigma = Z99 - math.sqrt(disc) if disc > 0 else Z99
    return math.log(avg_us) - sigma * sigma / 2.0, sigma


def percentile(sorted_values, p):
    """The p-th percentile (0-100) of an ascending list, nearest rank."""
    i = min(len(sorted_values) - 1, max(0, math.ceil(p / 100.0 * len(sorted_values)) - 1))
    return sorted_values[i]


def simulate(avg_us, p99_us, units, qd, commands=40000, seed=1, tail="lognormal"):
    """Closed loop: `qd` commands always outstanding on `units` servers (0: unlimited), service
    times drawn as `tail` says (`lognormal`, or `spdk`: one in 100 takes p99, the rest avg).
    Returns dict(iops, p50_us, p99_us) over the commands after a 10 % warm-up."""
    mu, sigma = lognormal_params(avg_us, p99_us)
    rng = random.Random(seed)
    free = [0.0] * units
    done = []

    def draw():
        if tail == "spdk":
            return p99_us if rng.randrange(100) == 0 else avg_us
        return rng.lognormvariate(mu, sigma) if sigma > 0 else avg_us

    def submit(now):
        service = draw()
        if units:
            start = max(heapq.heappop(free), now)
            end = start + service
            heapq.heappush(free, end)
        else:
            end = now + service
        heapq.heappush(done, (end, now))

    for _ in range(qd):
        submit(0.0)
    warm = commands // 10
    lat, t0, t = [], 0.0, 0.0
    for i in range(commands):
        t, issued = heapq.heappop(done)
        if i == warm:
            t0 = t
        if i >= warm:
            lat.append(t - issued)
        submit(t)
    lat.sort()
    return dict(iops=len(lat) / max(t - t0, 1e-9) * 1e6, p50_us=percentile(lat, 50),
                p99_us=percentile(lat, 99))


def ceiling(avg_us, units):
    """The IOPS ceiling: units / mean service time (None with unlimited units)."""
    return units / avg_us * 1e6 if units else None


def within(measured, predicted, rel, abs_us=0.0):
    """Whether measured lies within rel (a fraction) of predicted, plus abs_us above it
    for the host's own time per command."""
    return predicted * (1 - rel) <= measured <= predicted * (1 + rel) + abs_us
