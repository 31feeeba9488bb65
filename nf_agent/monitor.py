"""Traffic matrix and loads from counter samples (pure; the sampling clock is passed in with each sample).

A sample holds cumulative counters: the physical switches' port counters, the NF processes' own stats and
CPU seconds per location. Two consecutive samples give rates. For an NF port, the switch's `tx_bytes` is
traffic INTO the NF (edge src -> nf) and its `rx_bytes` traffic OUT of it (edge nf -> dst); an NF's edges
sum its instances' ports, and `nf_split` keeps them per location (the switch an instance's port is on is its
location), which divides a scaled-out NF's edges among its locations in the model. For a PCIe link,
the host end's `tx_bytes` is host -> sNIC ("down") and `rx_bytes` sNIC -> host ("up").
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Sample:
    t: float  # seconds, from the injected clock
    ports: dict[str, dict[str, dict[str, int]]]  # switch -> port name -> counters (rx_bytes, tx_bytes, ...)
    cpu_seconds: dict[str, float] = field(default_factory=dict)  # location -> CPU s used by its NFs
    nf_stats: dict[str, dict] = field(default_factory=dict)  # nf id -> summed NF counters (rx, tx, ...)
    # switch -> when its counters were read, on that switch's own clock (an sNIC's agent reports its read
    # time; only differences of one switch's times are used; absent: t). An sNIC's come over its agent's API,
    # a round trip that varies under load: rates over the sample's interval would skew them by the variation.
    port_t: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Wiring:
    """Which counters mean what: NF ports, PCIe host ends, and each NF's chain edges."""

    nf_ports: dict[tuple[str, str], str]  # (switch, port name) -> nf id
    pcie_ports: dict[str, str]  # sNIC id -> its PCIe port name on the host switch
    chains: dict[str, tuple[str | None, str | None]]  # nf id -> (src vertex, dst vertex)
    # sNIC id -> its host-facing port on its own bridge (a BlueField's host representor: tx is up)
    pcie_snic_ports: dict[str, str] = field(default_factory=dict)


@dataclass
class Measurement:
    t: float
    interval: float
    edges: dict[tuple[str, str], float]  # Gbit/s
    nf_load: dict[str, float]  # Gbit/s in + out
    pcie: dict[str, dict[str, float]]  # sNIC -> {"up", "down"} Gbit/s
    cpu_cores: dict[str, float]  # location -> cores used by NFs there
    nf_pps: dict[str, float]  # nf id -> packets/s received by the NF process (its own counters)
    # nf id -> location -> {"in", "out"} Gbit/s of its instances' ports there (the edges, per location)
    nf_split: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "t": self.t,
            "interval": round(self.interval, 3),
            "edges": [{"src": s, "dst": d, "gbps": round(g, 6)} for (s, d), g in sorted(self.edges.items())],
            "nf_load_gbps": {k: round(v, 6) for k, v in sorted(self.nf_load.items())},
            "pcie_gbps": {k: {d: round(x, 6) for d, x in v.items()} for k, v in sorted(self.pcie.items())},
            "cpu_cores": {k: round(v, 4) for k, v in sorted(self.cpu_cores.items())},
            "nf_pps": {k: round(v, 1) for k, v in sorted(self.nf_pps.items())},
            # only NFs running at several locations: the others' edges say it all
            "nf_split_gbps": {
                nf: {loc: {d: round(x, 6) for d, x in r.items()} for loc, r in sorted(locs.items())}
                for nf, locs in sorted(self.nf_split.items())
                if len(locs) > 1
            },
        }


def _delta(new: float, old: float) -> float:
    """Counter delta; a counter that went backwards (port re-created, process restarted) restarts at 0."""
    return new - old if new >= old else new


def _gbps(nbytes: float, dt: float) -> float:
    return nbytes * 8 / dt / 1e9


class Monitor:
    """Feed samples in time order; `measurement` is the latest rates (EWMA over intervals with `alpha`)."""

    def __init__(self, alpha: float = 1.0):
        if not 0 < alpha <= 1:
            raise ValueError("alpha must be in (0, 1]")
        self.alpha = alpha
        self.prev: Sample | None = None
        self.measurement: Measurement | None = None

    def update(self, sample: Sample, wiring: Wiring) -> Measurement | None:
        prev = self.prev
        if prev is not None and sample.t <= prev.t:
            return self.measurement  # not newer than what we have: ignored
        self.prev = sample
        if prev is None:
            return self.measurement
        dt = sample.t - prev.t
        new = rates(prev, sample, wiring, dt)
        old = self.measurement
        if old is not None and self.alpha < 1:
            new.edges = _ewma(old.edges, new.edges, self.alpha)
            new.nf_load = _ewma(old.nf_load, new.nf_load, self.alpha)
            new.cpu_cores = _ewma(old.cpu_cores, new.cpu_cores, self.alpha)
            # PCIe is smoothed like the edges the model predicts it from, so the two compare at one moment
            new.pcie = {s: _ewma(old.pcie.get(s, {}), d, self.alpha) for s, d in new.pcie.items()}
            new.nf_split = {
                nf: {
                    loc: _ewma(old.nf_split.get(nf, {}).get(loc, {}), r, self.alpha)
                    for loc, r in locs.items()
                }
                for nf, locs in new.nf_split.items()
            }
        self.measurement = new
        return new


def _ewma(old: dict, new: dict, a: float) -> dict:
    return {k: a * v + (1 - a) * old.get(k, v) for k, v in new.items()}


def _port_dt(prev: Sample, cur: Sample, switch: str, dt: float) -> float:
    """The interval between two reads of one switch's counters; the sample's when their times are unknown or
    when the switch's clock stepped (an sNIC rebooted, its agent began or stopped reporting read times): its
    interval differs from the sample's by the round-trip variation only, never by half of it or more."""
    d = cur.port_t.get(switch, cur.t) - prev.port_t.get(switch, prev.t)
    return d if dt / 2 < d < dt * 2 else dt


def rates(prev: Sample, cur: Sample, wiring: Wiring, dt: float) -> Measurement:
    split: dict[str, dict[str, dict[str, float]]] = {}  # nf -> switch (= location) -> in/out
    for (sw, port), nf in wiring.nf_ports.items():
        c, p = cur.ports.get(sw, {}).get(port), prev.ports.get(sw, {}).get(port, {})
        if c is None:
            continue
        at = split.setdefault(nf, {}).setdefault(sw, {"in": 0.0, "out": 0.0})
        sw_dt = _port_dt(prev, cur, sw, dt)
        at["in"] += _gbps(_delta(c["tx_bytes"], p.get("tx_bytes", 0)), sw_dt)
        at["out"] += _gbps(_delta(c["rx_bytes"], p.get("rx_bytes", 0)), sw_dt)
    into = {nf: sum(r["in"] for r in locs.values()) for nf, locs in split.items()}
    out = {nf: sum(r["out"] for r in locs.values()) for nf, locs in split.items()}
    # An edge between two NFs is seen twice (out of one, into the other): same traffic, keep the larger.
    edges: dict[tuple[str, str], float] = {}
    for nf, (src, dst) in wiring.chains.items():
        if src is not None and nf in into:
            edges[(src, nf)] = max(edges.get((src, nf), 0.0), into[nf])
        if dst is not None and nf in out:
            edges[(nf, dst)] = max(edges.get((nf, dst), 0.0), out[nf])
    pcie = {}
    ends = [(snic, "host", port, "rx_bytes", "tx_bytes") for snic, port in wiring.pcie_ports.items()]
    ends += [(snic, snic, port, "tx_bytes", "rx_bytes") for snic, port in wiring.pcie_snic_ports.items()]
    for snic, switch, port, up, down in ends:
        c, p = cur.ports.get(switch, {}).get(port), prev.ports.get(switch, {}).get(port, {})
        if c is None:
            continue
        sw_dt = _port_dt(prev, cur, switch, dt)
        pcie[snic] = {
            "up": _gbps(_delta(c[up], p.get(up, 0)), sw_dt),
            "down": _gbps(_delta(c[down], p.get(down, 0)), sw_dt),
        }
    cpu = {
        loc: _delta(s, prev.cpu_seconds.get(loc, 0.0)) / dt
        for loc, s in cur.cpu_seconds.items()
        if loc in prev.cpu_seconds
    }
    pps = {
        nf: _delta(st.get("rx", 0), prev.nf_stats.get(nf, {}).get("rx", 0)) / dt
        for nf, st in cur.nf_stats.items()
        if nf in prev.nf_stats
    }
    load = {nf: into.get(nf, 0.0) + out.get(nf, 0.0) for nf in set(into) | set(out)}
    return Measurement(cur.t, dt, edges, load, pcie, cpu, pps, split)
