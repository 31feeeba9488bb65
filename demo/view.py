"""The demo's live status: what runs where, host CPU saved vs all-on-host, PCIe use, traffic per NF (pure)."""

from __future__ import annotations


def format_view(view: dict, nfs: dict[str, dict], profiles: dict[str, dict]) -> list[str]:
    """Lines for one refresh, from the agent's GET /v1/placement (`view`), GET /v1/nfs (by id), the profiles.

    Predicted host CPU = profile b_host (cores per running instance) x instances + r_host (cores per Gbit/s
    of load) x measured load, summed over the NFs on the host; all-on-host sums it over every NF. Measured = CPU of the NFs' processes per location (agent
    monitoring): what the NFs on sNICs use there is what all-on-host would have added to the host."""
    m = view.get("measured") or {}
    loads, pps, cpu = m.get("nf_load_gbps", {}), m.get("nf_pps", {}), m.get("cpu_cores", {})
    where = view.get("locations", {})
    lines = [f"  {'NF':<8}{'type':<10}{'runs on':<9}{'load Mbit/s':>12}{'pkt/s':>9}"]
    pred_all = pred_host = 0.0
    meas_host = float(cpu.get("host", 0.0))
    meas_snic = sum(float(v) for k, v in cpu.items() if k != "host")
    for nf_id in sorted(nfs):
        typ, loc = nfs[nf_id].get("type", "?"), where.get(nf_id, "?")
        load = float(loads.get(nf_id, 0.0))
        prof = profiles.get(typ, {})
        instances = max(1, len(nfs[nf_id].get("instances") or []))  # GET /v1/nfs lists them
        cost = float(prof.get("b_host", 0.0)) * instances + float(prof.get("r_host", 0.0)) * load
        pred_all += cost
        if loc == "host":
            pred_host += cost
        lines.append(f"  {nf_id:<8}{typ:<10}{loc:<9}{load * 1000:>12.3f}{pps.get(nf_id, 0.0):>9.0f}")
    lines.append(
        f"  host CPU for NFs, predicted: {pred_host:.5f} cores vs all-on-host {pred_all:.5f} "
        f"-> saved {pred_all - pred_host:.5f}"
    )
    lines.append(
        f"  host CPU for NFs, measured: {meas_host:.4f} cores on the host, {meas_snic:.4f} on sNICs "
        f"(saved vs all-on-host ~ {meas_snic:.4f})"
    )
    pred = (view.get("predicted") or {}).get("pcie_gbps", {})
    for snic, dirs in sorted(m.get("pcie_gbps", {}).items()):
        p = pred.get(snic, {})
        lines.append(
            f"  PCIe {snic}: measured down {dirs.get('down', 0) * 1000:.3f} up {dirs.get('up', 0) * 1000:.3f} "
            f"Mbit/s; predicted down {p.get('down', 0) * 1000:.3f} up {p.get('up', 0) * 1000:.3f} Mbit/s"
        )
    for v in (view.get("predicted") or {}).get("violations", []):
        lines.append(f"  model: {v}")
    return lines


def format_move(move: dict) -> str:
    """One line for a move of the agent's re-placement (POST /v1/placement/run's `moves[i]`): where from and
    to, then each step of the migration with its time (ms) and detail, e.g. the drain's outcome or the
    packets the target held and replayed."""
    head = f"  {move.get('id', '?')} {move.get('from', '?')} -> {move.get('to', '?')}"
    mig = move.get("migration") or {}
    steps = []
    for s in mig.get("steps", []):
        detail = f" ({s['detail']})" if s.get("detail") and s["step"] in ("drain", "resume") else ""
        steps.append(f"{s['step']} {float(s.get('ms', 0)):.0f}{detail}")
    if not steps:
        return head
    return f"{head}: {float(mig.get('duration_ms', 0)):.0f} ms; " + ", ".join(steps)
