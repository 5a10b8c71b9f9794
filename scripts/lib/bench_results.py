# SPDX-License-Identifier: Apache-2.0
"""The runs of scripts/bench.py and what they measured: reading `nvmemu bench` output
(fio-shaped JSON reports, the ceiling probe's figures whatever shape the probe prints them
in), and the medians, spreads and bounds over repetitions."""

import json
import re
import statistics


def parse_json(text):
    """The report; a second JSON object after it (--lat-breakdown's) is merged in."""
    dec = json.JSONDecoder()
    i = text.find("{")
    doc = None
    while i >= 0:
        try:
            obj, end = dec.raw_decode(text, i)
        except ValueError:
            return doc
        if doc is None:
            doc = obj
        elif isinstance(doc, dict) and isinstance(obj, dict):
            doc.update(obj)
        i = text.find("{", end)
    return doc


def walk_numbers(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from walk_numbers(v, path + (str(k),))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from walk_numbers(v, path + (str(i),))
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        yield path, float(obj)


def fio_summary(doc):
    """IOPS, mean latency and clat percentiles summed/merged over jobs, fio shape."""
    jobs = doc.get("jobs") if isinstance(doc, dict) else None
    if not jobs:
        return None
    iops = 0.0
    lat_w = 0.0
    n_w = 0.0
    pct = {}
    cpu = []
    for j in jobs:
        for d in ("read", "write"):
            s = j.get(d) or {}
            if not s.get("total_ios"):
                continue
            iops += float(s.get("iops", 0.0))
            lat = (s.get("lat_ns") or {}).get("mean")
            n = float(s.get("total_ios"))
            if lat is not None:
                lat_w += float(lat) * n
                n_w += n
            for p, v in ((s.get("clat_ns") or {}).get("percentile") or {}).items():
                pct[p] = max(pct.get(p, 0), v)
        cpu.append(float(j.get("usr_cpu", 0.0)) + float(j.get("sys_cpu", 0.0)))
    out = dict(iops=iops, lat_ns=(lat_w / n_w) if n_w else None, pct=pct,
               job_cpu_pct=max(cpu) if cpu else None)
    t = doc.get("target") or {}
    if isinstance(t, dict):
        out["busy"] = t.get("poller_busy_pct")
        out["ns_per_io"] = t.get("target_ns_per_io")
    return out


def find_key(doc, patterns):
    for pat in patterns:
        for path, v in walk_numbers(doc):
            if re.search(pat, path[-1], re.I) and v > 0:
                return v
    return None


def probe_summary(stdout):
    """The ceiling probe's ops/s and average round trip, whatever shape it prints."""
    doc = parse_json(stdout)
    if doc is not None:
        section = doc.get("ceiling", doc) if isinstance(doc, dict) else doc
        iops = find_key(section, [r"^ops_per_s", r"ops_s$", r"^iops$", r"ops.*sec"])
        rtt = find_key(section, [r"round_trip.*ns", r"rtt.*ns", r"round_trip", r"rtt"])
        fio = fio_summary(doc)
        if iops is None and fio:
            iops = fio["iops"]
        if rtt is None and fio:
            rtt = fio["lat_ns"]
        if iops is None:
            return None
        return dict(iops=iops, lat_ns=rtt)
    m = re.search(r"([\d.,]+)\s*([kM]?)\s*(?:ops/s|IOPS)", stdout)
    if not m:
        return None
    mult = {"": 1, "k": 1e3, "M": 1e6}[m.group(2)]
    iops = float(m.group(1).replace(",", "")) * mult
    r = re.search(r"(?:round[- ]trip|rtt)[^\d]*([\d.]+)\s*(ns|us)", stdout, re.I)
    rtt = None
    if r:
        rtt = float(r.group(1)) * (1000 if r.group(2) == "us" else 1)
    return dict(iops=iops, lat_ns=rtt)


class Runs:
    """Every run of the matrix: dicts of id (the case), kind ("bench", "probe", "fill"), rep,
    s (the summary, or None), error and busy (the machine's busy share before it started)."""

    def __init__(self):
        self.all = []

    def add(self, **run):
        self.all.append(run)

    def of(self, cid, kind):
        return [r for r in self.all if r["id"] == cid and r["kind"] == kind]

    def values(self, cid, kind, key):
        return [r["s"][key] for r in self.of(cid, kind) if r["s"] and r["s"].get(key) is not None]

    def med(self, cid, kind, key):
        v = self.values(cid, kind, key)
        return statistics.median(v) if v else None

    def first_error(self, cid, kind):
        return next((r["error"] for r in self.of(cid, kind) if r["error"]), None)

    def spread(self, cid, kind, key):
        v = self.values(cid, kind, key)
        if len(v) < 2:
            return "–"
        m = statistics.median(v)
        return f"±{(max(v) - min(v)) / 2 / m * 100:.1f}%" if m else "–"

    def pct_of(self, cid, p):
        """The median over the bench runs of one clat percentile (fio's key, "99.000000")."""
        v = [r["s"]["pct"].get(p) for r in self.of(cid, "bench") if r["s"] and r["s"].get("pct")]
        v = [x for x in v if x is not None]
        return statistics.median(v) if v else None

    def paired_ratio(self, cid, key):
        """The median of the per-repetition bench / probe ratios."""
        pairs = []
        for r in self.of(cid, "bench"):
            q = [x for x in self.of(cid, "probe") if x["rep"] == r["rep"] and x["s"]
                 and x["s"].get(key)]
            if r["s"] and q and r["s"].get(key) is not None:
                pairs.append(r["s"][key] / q[0]["s"][key])
        return statistics.median(pairs) if pairs else None

    def bound(self, cid):
        """What limited a case, from its own counters."""
        busy = self.med(cid, "bench", "busy")
        job = self.med(cid, "bench", "job_cpu_pct")
        nsio = self.med(cid, "bench", "ns_per_io")
        parts = []
        if busy is not None:
            parts.append(f"poller busy {busy:.0f}%")
        if nsio:
            parts.append(f"{nsio:.0f} target ns/IO")
        if job is not None:
            parts.append(f"job thread CPU {job:.0f}%")
        if busy is not None and busy >= 90:
            who = "the target poller"
        elif job is not None and job >= 90:
            who = "the job (driver) thread"
        else:
            who = "round trip or CPU taken by other processes (neither thread saturated)"
        return f"{who} ({', '.join(parts)})" if parts else "unknown (no target counters)"
