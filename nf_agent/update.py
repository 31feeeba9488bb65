"""Operating a running NF without disruption: a live update to another `nf` version (and rollback, the same
call with the previous version) and a config change in place.

A live update rolls every instance to the new binary with the existing move machinery: one instance is moved
to a new instance of the new version at its own location (`Moves.migrate`: start beside, make-before-break
remap, drain, stop; a local-state NF moves its state); several are replaced one at a time (migration.scale:
the new instance joins the vport's set, then the old one leaves it, drains and stops). An instance on an sNIC
is replaced there: the binary is shipped to the sNIC through its agent's API first (nf_runtime.nf_shipping).
It is refused (409) before anything starts when the new version cannot read the state the NF's versions wrote
(nf_agent.compat) or an sNIC cannot take the binary. A config change is checked by the NF's own binary first (400 naming the field), then
applied by each instance in place (`PUT /config` on the NF) where the NF can, else by a rolling update with
the new config.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from domain.errors import (
    ConfigRejected,
    Conflict,
    NotSupported,
    OperationFailed,
    RestartNeeded,
    StartError,
    StateError,
    ValidationError,
)
from domain.model import HOST, Instance, Nf
from migration.protocol import MigrationConfig
from migration.scale import ScaleError, scale_in, scale_out
from nf_agent import compat
from nf_agent.context import AgentContext
from nf_agent.moves import Moves
from nf_local.versions import NfSchema, NfVersions, config_error

log = logging.getLogger("uno.agent")


@dataclass(frozen=True)
class UpdateRequest:
    """POST /v1/nfs/ID/update: the version (or binary) to roll to, and optionally a new config with it."""

    version: str | None
    binary: str | None
    config: dict | None


class Updates:
    def __init__(self, ctx: AgentContext, moves: Moves, versions: NfVersions):
        self.ctx = ctx
        self.moves = moves
        self.versions = versions

    # -- what runs now ----------------------------------------------------------------------------------------
    def _binary(self, nf: Nf) -> Path:
        return Path(nf.binary) if nf.binary else self.versions.default

    def _current_schema(self, nf: Nf) -> NfSchema | None:
        try:
            return self.versions.schema(self._binary(nf))
        except (OSError, ValueError) as exc:  # an nf before live updates: it cannot say
            log.warning(
                "nf binary cannot tell its schema", extra={"fields": {"nf": nf.id, "error": str(exc)}}
            )
            return None

    def _written(self, nf: Nf, cur: NfSchema | None) -> list[int]:
        """The layouts the NF's state may hold: recorded by earlier updates (those no version writes any more
        forgotten once their records must have expired), else what the running binary writes (an NF never
        updated has run only it)."""
        if nf.state_layouts:
            live = compat.live_layouts(nf.state_layouts, nf.layouts_retired, self.ctx.clock())
            if live != nf.state_layouts:
                log.info(
                    "state layouts expired",
                    extra={"fields": {"nf": nf.id, "was": nf.state_layouts, "now": live}},
                )
                nf.state_layouts = live
                nf.layouts_retired = {k: v for k, v in nf.layouts_retired.items() if int(k) in live}
            return list(nf.state_layouts)
        if cur is not None and nf.type in cur.types:
            return [cur.types[nf.type][0]]
        return []

    # -- live update ----------------------------------------------------------------------------------------------
    def update(self, nf_id: str, req: UpdateRequest) -> dict:
        """Roll every instance of `nf_id` to the requested version (with `req.config` if given).

        400 (ValidationError): unknown version, a config the new binary refuses. 409 (Conflict): the new
        version cannot read the NF's state (the reason named); an sNIC running an instance cannot take the
        binary (its agent refused it, or its CPU needs an `nf-ARCH` build beside it). On a failure of the roll the instances not yet replaced keep serving with the old version,
        those replaced run the new one (the NF's record says which: `version` is the new one only once all are).
        """
        ctx = self.ctx
        binary, new = self.versions.resolve(req.version, req.binary)
        with ctx.lock:
            nf = ctx.nf(nf_id)
            config = nf.config if req.config is None else req.config
            if (
                req.config is not None
            ):  # also as a change: what the state in the tier cannot take, PATCH neither
                self.versions.check_config(binary, nf.type, config, running=nf.config)
            cur = self._current_schema(nf)
            written = self._written(nf, cur)
            local = getattr(ctx.runtime, "store", "redis") == "local"
            why = compat.refusal(nf.type, written, new, cur, local)
            if why:
                ctx.event("nf-live-update-refused", nf=nf.id, to=new.version, reason=why)
                raise Conflict(f"update of {nf.id} to {new.version} refused: {why}", "version")
            if binary != self.versions.default:
                # Shipped before anything starts: a sNIC that cannot take it refuses the whole update.
                for loc in sorted({i.location for i in nf.instances if i.location != HOST}):
                    try:
                        ctx.runtime.ship_binary(loc, binary)
                    except StartError as exc:
                        raise Conflict(
                            f"update of {nf.id} to {new.version} refused: {exc}", "version"
                        ) from None
            return self._roll(nf, binary, new, config, written, cur.version if cur else nf.version)

    def _roll(self, nf: Nf, binary: Path, new: NfSchema, config: dict, written: list[int],
              was: str | None) -> dict:  # fmt: skip
        ctx = self.ctx
        before = (nf.binary, nf.config, nf.version, nf.previous_version, nf.state_layouts, nf.layouts_retired)
        nf.binary = None if binary == self.versions.default else str(binary)
        nf.config = config
        nf.state_layouts = compat.layouts_after(nf.type, written, new)
        replaced: list[dict] = []
        try:
            for old in list(nf.instances):
                replaced.append(self._replace(nf, old))
        except (OperationFailed, Conflict, NotSupported) as exc:
            if not replaced:  # nothing runs the new version: the NF is as it was
                (
                    nf.binary,
                    nf.config,
                    nf.version,
                    nf.previous_version,
                    nf.state_layouts,
                    nf.layouts_retired,
                ) = before
            ctx.event("nf-live-update-failed", nf=nf.id, to=new.version, replaced=replaced, error=str(exc))
            ctx.save()
            refused = exc.__cause__
            if not replaced and isinstance(refused, ConfigRejected):
                # The new instance refused its config at start: the state in the tier cannot take it (e.g.
                # a NAT pair retired earlier); nothing changed, so the caller's error, named as PATCH names it.
                fld = config_error(str(refused)).field
                raise ValidationError(fld, f"the {nf.type} NF refused it: {refused}") from None
            raise
        if was != new.version:  # a config roll keeps the version: the rollback target stays
            nf.previous_version = was
        # Every instance runs `new` now: the layouts it does not write are written no more. Their records were
        # timed by the config before the roll, and are now by this one: the longer of the two.
        lifetimes = [self._lifetime(binary, nf.type, c) for c in (before[1], nf.config)]
        lifetime = None if None in lifetimes else max(lifetimes)
        nf.layouts_retired = compat.retire_after_roll(
            nf.type, nf.state_layouts, nf.layouts_retired, new, lifetime, ctx.clock()
        )
        nf.version = new.version
        ctx.event("nf-live-update", nf=nf.id, version=new.version, previous=was, replaced=replaced)
        ctx.save()
        return {"id": nf.id, "version": new.version, "previous_version": was, "replaced": replaced}

    def _replace(self, nf: Nf, old: Instance) -> dict:
        """One instance replaced by one of the NF's (new) binary and config at its location."""
        ctx = self.ctx
        if len(nf.instances) == 1:
            ms = self.moves.migrate(nf, old.location)
            return {"old": old.id, "new": nf.instances[0].id, "remap_ms": ms}
        new = ctx.new_instance(nf, old.location)
        cfg = MigrationConfig(drain_timeout_s=ctx.drain_s)
        try:
            res = scale_out(nf, list(nf.instances), [new], ctx.runtime, ctx.mapper)
            nf.instances = [*nf.instances, new]
            staying = [i for i in nf.instances if i.id != old.id]
            res_in = scale_in(nf, staying, [old], ctx.runtime, ctx.mapper, cfg)
        except ScaleError as exc:
            raise OperationFailed(f"replacing {old.id}: {exc}") from exc.cause
        nf.instances = staying
        nf.location = nf.instances[0].location
        return {"old": old.id, "new": new.id, "set_ms": res.set_ms, "drained": res_in.drained}

    def _lifetime(self, binary: Path, nf_type: str, config: dict) -> float | None:
        """How long a record of `config` lives unwritten (s), as `binary` says; None when it cannot."""
        try:
            return self.versions.check_config(binary, nf_type, config)
        except ValidationError:
            return None

    # -- config in place ----------------------------------------------------------------------------------------
    def check_config(self, nf_id: str, config: dict) -> None:
        """400 (ValidationError naming the field) when the NF's binary refuses `config`, alone or as a change
        of the running config the state it keeps in the tier cannot take (so a change that would go by a
        roll, e.g. with a runtime option, is refused as the change in place is)."""
        with self.ctx.lock:
            nf = self.ctx.nf(nf_id)
            binary, running = self._binary(nf), nf.config
        self.versions.check_config(binary, nf.type, config, running=running)

    def configure(self, nf_id: str, config: dict) -> dict:
        """Give `nf_id` the (checked) `config`: in place on every instance where the NF can (`applied`:
        "in-place", no restart), else by a rolling update with the same binary (`applied`: "rolling").
        An instance failing half-way puts the ones already changed back to the old config."""
        ctx = self.ctx
        self.check_config(nf_id, config)
        with ctx.lock:
            nf = ctx.nf(nf_id)
            old_config = nf.config
            nf.config = config
            done: list[Instance] = []
            try:
                for inst in nf.instances:
                    ctx.runtime.reconfigure(nf, inst)
                    done.append(inst)
            except (RestartNeeded, ConfigRejected, StateError) as exc:
                nf.config = old_config
                errors = self._put_back(nf, done)
                if isinstance(exc, ConfigRejected):
                    fld = config_error(str(exc)).field  # the NF's message names its field
                    raise ValidationError(fld, f"the {nf.type} NF refused it: {exc}") from None
                if isinstance(exc, StateError):
                    raise OperationFailed(f"config of {nf.id}: {exc}; {'; '.join(errors)}") from None
                if done:  # one instance changed in place, another cannot: not one NF type's behaviour
                    raise OperationFailed(f"config of {nf.id}: {exc}; {'; '.join(errors)}") from None
                return self._config_by_roll(nf, config, str(exc))
            # Retired layouts' records now time out by this config's timeouts.
            lifetime = self._lifetime(self._binary(nf), nf.type, config)
            nf.layouts_retired = compat.stretch(nf.layouts_retired, lifetime)
            ctx.event("nf-config", nf=nf.id, applied="in-place", instances=[i.id for i in done])
            ctx.save()
            return {"id": nf.id, "applied": "in-place", "instances": [i.id for i in done]}

    def _put_back(self, nf: Nf, done: list[Instance]) -> list[str]:
        errors = []
        for inst in done:
            try:
                self.ctx.runtime.reconfigure(nf, inst)
            except Exception as exc:  # noqa: BLE001 - reported; the instance keeps the new config
                errors.append(f"{inst.id} not put back: {exc}")
        return errors

    def _config_by_roll(self, nf: Nf, config: dict, why: str) -> dict:
        ctx = self.ctx
        cur = self._current_schema(nf)
        written = self._written(nf, cur)
        if cur is None:
            raise NotSupported(
                f"{nf.id}: its nf binary cannot tell its schema; recreate it to change the config"
            )
        out = self._roll(nf, self._binary(nf), cur, config, written, nf.version or cur.version)
        ctx.event("nf-config", nf=nf.id, applied="rolling", reason=why)
        ctx.save()
        return {"id": nf.id, "applied": "rolling", "reason": why, "replaced": out["replaced"]}
