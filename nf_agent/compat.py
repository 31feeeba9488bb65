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
