"""PCIe traffic the placement model does not know about: measured link load minus predicted crossings (pure).

The placement graph's edges come from NF port counters, so traffic that passes no NF (a VM talking to the
wire directly) is in no edge, yet it crosses the PCIe link. The monitor measures the link itself (the host
end's counters), so per sNIC and direction:

    background = measured - crossings the model predicts for the CURRENT placement, clamped at 0

and the placement then gives the vertices only the link minus that background (placement/model.py,
`background_gbps`). Everything else the model gets wrong lands there too; the largest known part is the
one-arm NF counters' direction error: an NF port counts both directions of a stream, the model puts them
all on the declared chain's side of the link, so the stream's ACKs (~1-3 % of it, README "Placement graph")
show up as unexplained traffic in the OTHER direction. A floor keeps such model noise out: an excess at
or below `max(ABS_FLOOR_GBPS, REL_FLOOR x the link's predicted crossings, both directions)` counts as 0, so
noise does not shrink the link. Cost of the floor: a real background below it is not seen (the link is
over-estimated by at most that much).

The background is not attributed to any vertex: moving an NF cannot change it in the model, even when the
traffic is really the NF's (e.g. its chain declared elsewhere than where its packets go).
"""

from __future__ import annotations

from nf_agent.graph import GBPS_DECIMALS
from placement.model import PCIE_DIRECTIONS

REL_FLOOR = 0.05  # of the link's predicted crossings: above the ACK share of a TCP stream (~1-3 %)
ABS_FLOOR_GBPS = 0.001  # 1 Mbit/s: counter jitter between two switches' reads at an idle link


def pcie_background(
    measured: dict[str, dict[str, float]],
    predicted: dict[str, dict[str, float]],
    rel_floor: float = REL_FLOOR,
    abs_floor: float = ABS_FLOOR_GBPS,
) -> dict[str, dict[str, float]]:
    """Per sNIC of `predicted` (the model's crossings for the current placement, sNIC -> {"up", "down"}
    Gbit/s): the measured link rate (`measured`, same shape; a missing sNIC or direction is 0) beyond the
    prediction, 0 when at or below the floor."""
    out: dict[str, dict[str, float]] = {}
    for snic, pred in predicted.items():
        floor = max(abs_floor, rel_floor * sum(float(pred.get(d, 0.0)) for d in PCIE_DIRECTIONS))
        meas = measured.get(snic, {})
        out[snic] = {}
        for d in PCIE_DIRECTIONS:
            excess = float(meas.get(d, 0.0)) - float(pred.get(d, 0.0))
            out[snic][d] = round(excess, GBPS_DECIMALS) if excess > floor else 0.0
    return out
