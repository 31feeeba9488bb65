"""Keeping NFs alive: restarts under a budget, standbys, failover to a replacement (migration.failover), manual
restarts, and the health of every NF and of the state tier."""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from domain.errors import Conflict, DependencyFailed, NotFound, OperationFailed, PortMapError
from domain.model import HOST, Instance, Nf
from migration.failover import FailoverError
from migration.failover import failover as run_failover
from nf_agent.context import AgentContext

log = logging.getLogger("uno.agent")


class Supervisor:
    def __init__(self, ctx: AgentContext):
        self.ctx = ctx
        self.restart_times: dict[str, list[float]] = {}  # instance -> its restarts within the policy window
        self.store_state = "unknown"  # the state tier as the last health check saw it (events on a change)

    def supervise(self) -> None:
        """Restart dead NF processes under the restart policy; mark them failed when it is exhausted.

        With `cfg.failover`, a dead instance is instead replaced by a new one and the vport remapped
        (`failover`), which also covers an instance whose namespace or port is gone.
        """
        ctx = self.ctx
        with ctx.lock:
            for nf in list(ctx.state.nfs.values()):
                for inst in list(nf.instances):
                    if (
                        inst.state == "failed"
                        or inst.location in ctx.down
                        or not ctx.runtime.answers(inst.location)
                    ):
                        continue
                    if ctx.runtime.alive(inst):
                        continue
                    if ctx.cfg.failover:
                        try:
                            self.failover(nf.id, inst.id, "dead")
                            continue
                        except OperationFailed as exc:
                            log.error(
                                "failover failed, restarting in place", extra={"fields": {"error": str(exc)}}
                            )
                    now = ctx.clock()
                    times = [
                        t for t in self.restart_times.get(inst.id, []) if now - t < ctx.cfg.restart.window
                    ]
                    if len(times) >= ctx.cfg.restart.max_restarts:
                        inst.state = "failed"
                        ctx.event("nf-failed", nf=nf.id, instance=inst.id)
                        ctx.save()
                        continue
                    times.append(now)
                    self.restart_times[inst.id] = times
                    try:
                        self._restart_in_place(nf, inst)
                        ctx.event("nf-restart", nf=nf.id, instance=inst.id, restarts=inst.restarts)
                    except Exception as exc:  # noqa: BLE001 - retried on the next round
                        inst.state = "starting"
                        log.error(
                            "restart failed", extra={"fields": {"instance": inst.id, "error": str(exc)}}
                        )
                    ctx.save()

    def probe(self, health_timeout: float = 0.1) -> dict[str, tuple[bool, bool]]:
        """Every instance's (alive, healthy), for the failover watchdog (migration.failover.Watchdog); a
        /health answer slower than `health_timeout` s counts as a miss."""
        ctx = self.ctx
        with ctx.lock:
            insts = [
                i for n in ctx.state.nfs.values() for i in n.instances
                if i.state != "failed" and i.location not in ctx.down and ctx.runtime.answers(i.location)
            ]  # fmt: skip
        return {i.id: (ctx.runtime.alive(i), ctx.runtime.healthy(i, health_timeout)) for i in insts}

    def instance_pids(self) -> dict[str, int]:
        """{instance: pid} of the NF processes the failover watchdog watches for an exit."""
        with self.ctx.lock:
            return {
                i.id: i.pid
                for n in self.ctx.state.nfs.values()
                for i in n.instances
                if i.state != "failed" and i.pid and i.location == HOST  # an sNIC's pids are its own
            }

    def start_standby(self, nf_id: str, location: str | None = None) -> Instance:
        """Pre-start a standby instance of `nf_id` (not mapped, no traffic) for a faster failover."""
        ctx = self.ctx
        with ctx.lock:
            nf = ctx.nf(nf_id)
            if nf_id in ctx.standbys:
                raise Conflict(f"NF {nf_id} already has a standby", "standby")
            loc = location or nf.location
            inst = ctx.new_instance(nf, loc)
            ctx.start(nf, inst)
            ctx.standbys[nf_id] = inst
            ctx.event("nf-standby", nf=nf_id, instance=inst.id, location=loc)
            return inst

    def stop_standby(self, nf_id: str) -> None:
        """Stop and release `nf_id`'s standby (NotFound when it has none)."""
        ctx = self.ctx
        with ctx.lock:
            ctx.nf(nf_id)
            inst = ctx.standbys.pop(nf_id, None)
            if inst is None:
                raise NotFound(f"NF {nf_id!r} has no standby")
            ctx.stop_quietly(inst)
            ctx.event("nf-standby-stopped", nf=nf_id, instance=inst.id)

    def restart_nf(self, nf_id: str) -> dict:
        """Restart every instance of `nf_id` in place (its namespace and port), its restart budget reset: how
        an operator revives a `failed` NF once its cause is fixed, or restarts a misbehaving one. An instance
        that does not come up is marked failed and the call fails with DependencyFailed naming it (the others
        stay restarted)."""
        ctx = self.ctx
        with ctx.lock:
            nf = ctx.nf(nf_id)
            done, errors = [], []
            for inst in nf.instances:
                self.restart_times.pop(inst.id, None)
                try:
                    self._restart_in_place(nf, inst)
                except Exception as exc:  # noqa: BLE001 - reported in the answer and the event
                    inst.state = "failed"
                    errors.append(f"{inst.id}: {exc}")
                    continue
                done.append(inst.id)
            ctx.event("nf-restart", nf=nf.id, instances=done, errors=errors, manual=True)
            ctx.save()
        if errors:
            raise DependencyFailed(f"restart of {nf_id}: {'; '.join(errors)}")
        return {"id": nf_id, "restarted": done}

    def _restart_in_place(self, nf: Nf, inst: Instance) -> None:
        """Stop the instance's processes and start them again in its namespace, on its port; counted as a
        restart once it answers /health (raises what `start_processes` raises)."""
        self.ctx.runtime.stop_processes(inst)
        self.ctx.runtime.start_processes(nf, inst)
        inst.restarts += 1
        self.ctx.counters.restarts += 1

    def instance_failed(self, inst_id: str, reason: str) -> dict:
        """An instance died or stopped answering (the watchdog, or its sNIC agent's heartbeat, saw it): replaced
        at once with failover on, else restarted in place now (the supervisor's policy). Unknown: a no-op."""
        ctx = self.ctx
        if not ctx.cfg.failover:
            self.supervise()
            return {}
        with ctx.lock:
            nf_id = next((n.id for n in ctx.state.nfs.values() for i in n.instances if i.id == inst_id), None)
        if nf_id is None:
            return {}
        try:
            return self.failover(nf_id, inst_id, reason)
        except OperationFailed as exc:  # recorded (nf-failover-failed); the next probe retries
            log.error("failover failed", extra={"fields": {"instance": inst_id, "error": str(exc)}})
            return {}

    def snic_dead(self, sid: str) -> dict:
        """A whole sNIC died (its agent, its switch and its NFs at once): every instance that ran there is
        replaced on the host, the replacements started together, each NF's vport remapped to its own; the
        dead instances are released once the sNIC is back (`snic_back`). An NF pinned to that sNIC cannot go
        elsewhere: it is marked failed. Returns what was done."""
        ctx = self.ctx
        t0 = time.monotonic()
        with ctx.lock:
            if sid in ctx.down:
                return {}
            ctx.down.add(sid)
            before = {k: n.location for k, n in ctx.state.nfs.items() if n.location}
            victims = [(nf, i) for nf in ctx.state.nfs.values() for i in nf.instances if i.location == sid]
            for nf_id in [k for k, sb in ctx.standbys.items() if sb.location == sid]:
                ctx.orphans.setdefault(sid, []).append(ctx.standbys.pop(nf_id))
            used = ctx.used_ofports(HOST)
            moves = []
            for nf, inst in victims:
                if nf.pin != sid:
                    new = ctx.new_instance(nf, HOST, used)
                    used.add(new.ofport)
                    moves.append((nf, inst, new))
            for nf, inst in victims:
                if nf.pin == sid:
                    inst.state = "failed"
            started = self._start_all([(nf, new) for nf, _, new in moves])
            by_nf: dict[str, list[tuple[Instance, Instance, bool]]] = {}
            for (nf, failed, new), ok in zip(moves, started, strict=True):
                by_nf.setdefault(nf.id, []).append((failed, new, ok))
                ctx.orphans.setdefault(sid, []).append(failed)
            done, errors = [], []
            for nf_id, rows in by_nf.items():
                nf = ctx.state.nfs[nf_id]
                try:
                    if len(nf.instances) > 1:  # its set changes in one step (OneSwitch refuses a dead member)
                        self._replace_in_set(nf, rows)
                    elif not rows[0][2]:
                        rows[0][0].state = "failed"
                        errors.append(f"{nf.id}: its replacement did not start")
                        continue
                    else:
                        self._switch_to(nf, rows[0][0], rows[0][1], "snic-dead", True, release=False)
                    done += [
                        {"nf": nf.id, "failed": f.id, "replacement": n.id if ok else None}
                        for f, n, ok in rows
                    ]
                except OperationFailed as exc:
                    errors.append(f"{nf.id}: {exc}")
            ms = round((time.monotonic() - t0) * 1000, 2)
            ctx.cfg.dampener.record(ctx.clock(), before)  # moving back counts from now (dampening window)
            ctx.event("snic-dead", snic=sid, failed_over=done, errors=errors, total_ms=ms)
            ctx.save()
            return {"snic": sid, "failed_over": done, "errors": errors, "total_ms": ms}

    def _replace_in_set(self, nf: Nf, rows: list[tuple[Instance, Instance, bool]]) -> None:
        """A scaled-out NF whose instances in `rows` (failed, replacement, started) died with their sNIC: one
        change of its set, each failed instance replaced by its started replacement or left out."""
        ctx = self.ctx
        new_for = {f.id: (n if ok else None) for f, n, ok in rows}
        want = [new_for.get(i.id, i) for i in nf.instances]
        want = [i for i in want if i is not None]
        if not want:
            for f, _, _ in rows:
                f.state = "failed"
            raise OperationFailed(f"no replacement of {nf.id} started")
        try:
            ms = ctx.mapper.set_instances(nf.vport, [(i.switch, i.ofport) for i in want])
        except PortMapError as exc:
            for _, n, ok in rows:
                if ok:
                    ctx.stop_quietly(n)
            raise DependencyFailed(f"failover of {nf.id}'s instances: {exc}") from None
        nf.instances, nf.location = want, want[0].location
        ctx.counters.failovers += len(rows)
        ctx.event("nf-failover", nf=nf.id, failed=[f.id for f, _, _ in rows], reason="snic-dead",
                  replacements=[n.id for _, n, ok in rows if ok], set_ms=ms, instances=len(want))  # fmt: skip

    def _start_all(self, starts: list[tuple[Nf, Instance]]) -> list[bool]:
        """Start these instances side by side; which started."""
        if not starts:
            return []
        with ThreadPoolExecutor(max_workers=min(8, len(starts))) as ex:
            return list(ex.map(lambda s: self._try_start(*s), starts))

    def snic_back(self, sid: str, boot_id: str = "") -> dict:
        """The sNIC answers again (rebooted): release what its agent still holds of the instances that
        failed over from it; it is a place for NFs again (the re-placement loop moves NFs back there once
        worth it and the dampening window allows)."""
        ctx = self.ctx
        with ctx.lock:
            ctx.down.discard(sid)
            orphans = ctx.orphans.pop(sid, [])
        errors = []
        for inst in orphans:
            try:
                ctx.runtime.stop(inst)
            except Exception as exc:  # noqa: BLE001 - reported; the sNIC's own restart cleans the rest
                errors.append(f"{inst.id}: {exc}")
        with ctx.lock:
            ctx.event("snic-back", snic=sid, boot_id=boot_id, released=[i.id for i in orphans], errors=errors)
            ctx.save()
        return {"snic": sid, "released": [i.id for i in orphans], "errors": errors}

    def failover(self, nf_id: str, inst_id: str, reason: str) -> dict:
        """Replace instance `inst_id` of `nf_id` (dead or stuck) by its running standby if it has one, else by a
        new instance at the same location, and remap the vport to it (migration.failover). Unknown ids
        (already replaced) are a no-op."""
        ctx = self.ctx
        with ctx.lock:
            nf = ctx.state.nfs.get(nf_id)
            failed = next((i for i in nf.instances if i.id == inst_id), None) if nf else None
            if nf is None or failed is None:
                return {}
            new = ctx.standbys.pop(nf_id, None)
            if new is not None and not ctx.runtime.alive(new):
                ctx.stop_quietly(new)
                new = None
            standby = new is not None
            if new is None:
                new = ctx.new_instance(nf, failed.location)
            if len(nf.instances) > 1:
                return self._failover_in_set(nf, failed, new, reason, standby)
            return self._switch_to(nf, failed, new, reason, standby)

    def _switch_to(
        self, nf: Nf, failed: Instance, new: Instance, reason: str, standby: bool, release: bool = True
    ) -> dict:
        """migration.failover from `failed` to `new` (running already when `standby`)."""
        ctx = self.ctx

        def switched() -> None:  # traffic is on the replacement: record it before the old one is released
            nf.instances = [new if i.id == failed.id else i for i in nf.instances]
            nf.location = new.location

        try:
            res = run_failover(nf, failed, new, ctx.runtime, ctx.mapper, reason, standby=standby,
                               on_switched=switched, release=release)  # fmt: skip
        except FailoverError as exc:
            if standby and reason != "snic-dead":
                ctx.standbys[nf.id] = new
            ctx.event("nf-failover-failed", nf=nf.id, instance=failed.id, reason=reason, error=str(exc))
            raise DependencyFailed(str(exc)) from None
        ctx.counters.failovers += 1
        ctx.event("nf-failover", **res.to_json())
        ctx.save()
        return res.to_json()

    def _failover_in_set(self, nf: Nf, failed: Instance, new: Instance, reason: str, standby: bool) -> dict:
        """One of several instances failed: the replacement takes its place in the vport's set; when no
        replacement starts, the failed one is only removed from the set (the others carry its flows)."""
        ctx = self.ctx
        t0 = time.monotonic()
        others = [i for i in nf.instances if i.id != failed.id]
        replaced = None
        if standby or self._try_start(nf, new):
            replaced = new
        want = [replaced if i.id == failed.id else i for i in nf.instances] if replaced else others
        try:
            ms = ctx.mapper.set_instances(nf.vport, [(i.switch, i.ofport) for i in want])
        except PortMapError as exc:
            if replaced is not None and not standby:
                ctx.stop_quietly(replaced)
            elif standby:
                ctx.standbys[nf.id] = new
            ctx.event("nf-failover-failed", nf=nf.id, instance=failed.id, reason=reason, error=str(exc))
            raise DependencyFailed(f"failover of {failed.id}: {exc}") from None
        errors = []
        try:
            ctx.runtime.stop(failed)
        except Exception as exc:  # noqa: BLE001 - traffic already moved; reported
            errors.append(f"stopping {failed.id}: {exc}")
        nf.instances = want
        nf.location = nf.instances[0].location
        ctx.counters.failovers += 1
        out = {
            "nf": nf.id, "failed": failed.id, "replacement": replaced.id if replaced else None,
            "reason": reason, "used_standby": standby, "set_ms": ms, "instances": len(nf.instances),
            "total_ms": round((time.monotonic() - t0) * 1000, 2), "cleanup_errors": errors,
        }  # fmt: skip
        ctx.event("nf-failover", **out)
        ctx.save()
        return out

    def _try_start(self, nf: Nf, inst: Instance) -> bool:
        try:
            self.ctx.runtime.start(nf, inst)
            return True
        except Exception as exc:  # noqa: BLE001 - runtime.start cleaned up; the set shrinks instead
            log.error("replacement did not start", extra={"fields": {"instance": inst.id, "error": str(exc)}})
            return False

    def health(self) -> dict:
        """Each NF's process health, and the state tier's: while Redis does not answer, every stateless NF
        fails closed (drops what needs state), so it is `degraded` and the agent not ok, although its
        process is alive (the failover watchdog, which looks at processes, rightly does nothing)."""
        ctx = self.ctx
        reachable = ctx.runtime.store_reachable()  # outside the lock: a hung Redis costs its timeout
        store = {None: "local", True: "ok", False: "unreachable"}[reachable]
        with ctx.lock:
            if store != self.store_state:
                if store == "unreachable" or self.store_state == "unreachable":
                    ctx.event("store-" + ("down" if store == "unreachable" else "up"), store=store)
                self.store_state = store
            nfs = {
                n.id: (
                    "healthy"
                    if n.instances and all(ctx.runtime.healthy(i) for i in n.instances)
                    else "unhealthy"
                )
                for n in ctx.state.nfs.values()
            }
        if store == "unreachable":
            nfs = {k: "degraded: state tier unreachable" if v == "healthy" else v for k, v in nfs.items()}
        return {"ok": store != "unreachable" and all(v == "healthy" for v in nfs.values()), "nfs": nfs,
                "store": store}  # fmt: skip
