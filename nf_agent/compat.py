"""Whether a version of `nf` can take over an NF's state (pure): the live update's refusal rule.

Every version that ran an NF may have left records in the tier (until they expire), so the new version must
read every record layout those versions wrote for the NF's type; an NF keeping its state in the process
(`--store local`) also hands its snapshot over, whose layout must be the new version's.
"""

from __future__ import annotations

from nf_local.versions import NfSchema


def refusal(
    nf_type: str, written: list[int], new: NfSchema, old: NfSchema | None, local_state: bool
) -> str | None:
    """Why `new` cannot take over an NF of `nf_type` whose state holds records of the layouts `written`
    (`old`: the schema of the version running it now, for its snapshot), or None when it can."""
    entry = new.types.get(nf_type)
    if entry is None:
        return f"version {new.version} has no {nf_type} NF"
    _, reads = entry
    unread = sorted(set(written) - set(reads))
    if unread:
        return (
            f"version {new.version} cannot read the {nf_type} state records of layout "
            f"{', '.join(map(str, unread))} the NF's state holds (it reads {', '.join(map(str, reads))}); "
            "it would lose every connection's state"
        )
    if local_state and old is not None and old.snapshot != new.snapshot:
        return (
            f"version {new.version} takes state snapshots of layout {new.snapshot}, the running "
            f"{old.version} gives layout {old.snapshot}"
        )
    return None


def layouts_after(nf_type: str, written: list[int], new: NfSchema) -> list[int]:
    """The layouts the NF's state may hold once `new` runs it: what it held plus what `new` writes."""
    return sorted(set(written) | {new.types[nf_type][0]})


# Added to a record's lifetime before its layout is forgotten: the expiry timer fires on a tick, and the
# agent's clock is not the tier's.
GRACE_S = 60.0

# Retired layouts: {layout (as text, a JSON key): [since, lifetime_s]}: no running version writes the layout
# since `since` (wall clock, s), and a record of it stays at most `lifetime_s` unwritten.
Retired = dict[str, list[float]]


def live_layouts(layouts: list[int], retired: Retired, now: float) -> list[int]:
    """The layouts the NF's state may still hold at `now`: a retired layout is gone once its last record's
    lifetime (plus GRACE_S) has passed since no version writes it."""
    out = []
    for layout in layouts:
        entry = retired.get(str(layout))
        if entry is None or now < entry[0] + entry[1] + GRACE_S:
            out.append(layout)
    return out


def retire_after_roll(
    nf_type: str, layouts: list[int], retired: Retired, new: NfSchema, lifetime_s: float | None, now: float
) -> Retired:
    """The retired layouts once every instance runs `new`: every layout but the one `new` writes is written no
    more (one retired earlier keeps its time; the one `new` writes is live again). `lifetime_s` None (the
    binary cannot say how long its records live): nothing is ever forgotten."""
    if lifetime_s is None:
        return {}
    writes = new.types[nf_type][0]
    out = {k: v for k, v in retired.items() if int(k) in layouts and int(k) != writes}
    for layout in layouts:
        if layout != writes:
            out.setdefault(str(layout), [now, lifetime_s])
    return {k: [float(v[0]), max(float(v[1]), lifetime_s)] for k, v in out.items()}


def stretch(retired: Retired, lifetime_s: float | None) -> Retired:
    """The retired layouts after a config change whose records live `lifetime_s`: an old record's timeout is
    the new config's (its timer re-arms to it), so a longer one keeps it longer; None: kept for ever."""
    if lifetime_s is None:
        return {}
    return {k: [v[0], max(v[1], lifetime_s)] for k, v in retired.items()}
