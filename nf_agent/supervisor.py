"""Keeping NFs alive: restarts under a budget, standbys, failover to a replacement (migration.failover), manual
restarts, and the health of every NF and of the state tier."""

from __future__ import annotations

import logging
import threading
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
        seen = {i.id: (ctx.runtime.alive(i), ctx.runtime.healthy(i, health_timeout)) for i in insts}
        # an sNIC that stopped answering meanwhile: its instances' silence is its watch's to judge
        return {i.id: seen[i.id] for i in insts if ctx.runtime.answers(i.location)}

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
        replaced on the host, each NF on its own thread (its replacements started, then its vport remapped
        to them: one NF's traffic flows again without waiting for the others' starts); the dead instances are
        released once the sNIC is back (`snic_back`). An NF pinned to that sNIC cannot go elsewhere: it is
        marked failed. Returns what was done."""
        ctx = self.ctx
        t0 = time.monotonic()
        with ctx.lock:
            if sid in ctx.down:
                return {}
            ctx.down.add(sid)
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
            by_nf: dict[str, list[tuple[Instance, Instance]]] = {}
            for nf, failed, new in moves:
                by_nf.setdefault(nf.id, []).append((failed, new))
                ctx.orphans.setdefault(sid, []).append(failed)
            jobs = [(ctx.state.nfs[k], rows) for k, rows in by_nf.items()]
            with ThreadPoolExecutor(max_workers=max(1, min(8, len(jobs)))) as ex:
                results = list(ex.map(lambda j: self._replace_dead(*j), jobs))
            done, errors = [], []
            for (nf, _), (event, rows, error) in zip(jobs, results, strict=True):
                if event is not None:
                    ctx.counters.failovers += len(rows)
                    ctx.event("nf-failover", **event)
                    done += rows
                else:
                    errors.append(f"{nf.id}: {error}")
            ms = round((time.monotonic() - t0) * 1000, 2)
            ctx.cfg.dampener.forced(ctx.clock())  # moving back waits for the dampening window from now
            ctx.event("snic-dead", snic=sid, failed_over=done, errors=errors, total_ms=ms)
            ctx.save()
            return {"snic": sid, "failed_over": done, "errors": errors, "total_ms": ms}

    def _replace_dead(
        self, nf: Nf, rows: list[tuple[Instance, Instance]]
    ) -> tuple[dict | None, list[dict], str | None]:
        """One NF's instances in `rows` (failed, replacement) died with their sNIC: start the replacements and
        remap (one instance: migration.failover; several: one change of its set, a failed instance replaced
        by its started replacement or left out). On a worker thread of `snic_dead`, which holds the lock and
        records the outcome: (its nf-failover event or None, rows of what was done, the error or None)."""
        ctx = self.ctx
        if len(nf.instances) == 1:
            failed, new = rows[0]

            def switched() -> None:
                nf.instances, nf.location = [new], new.location

            try:
                res = run_failover(nf, failed, new, ctx.runtime, ctx.mapper, "snic-dead", on_switched=switched,
                                   release=False)  # fmt: skip
            except FailoverError as exc:
                failed.state = "failed"
                return None, [], str(exc)
            return res.to_json(), [{"nf": nf.id, "failed": failed.id, "replacement": new.id}], None
        started = {f.id: (n if self._try_start(nf, n) else None) for f, n in rows}
        want = [i for i in (started.get(i.id, i) for i in nf.instances) if i is not None]
        if not want:
            for f, _ in rows:
                f.state = "failed"
            return None, [], f"no replacement of {nf.id} started"
        try:
            ms = ctx.mapper.set_instances(nf.vport, [(i.switch, i.ofport) for i in want])
        except PortMapError as exc:
            for n in started.values():
                if n is not None:
                    ctx.stop_quietly(n)
            return None, [], f"failover of {nf.id}'s instances: {exc}"
        nf.instances, nf.location = want, want[0].location
        reps = [started[f.id] for f, _ in rows]
        event = {"nf": nf.id, "failed": [f.id for f, _ in rows], "reason": "snic-dead", "set_ms": ms,
                 "replacements": [n.id for n in reps if n is not None], "instances": len(want)}  # fmt: skip
        done = [
            {"nf": nf.id, "failed": f.id, "replacement": n.id if n else None}
            for (f, _), n in zip(rows, reps, strict=True)
        ]
        return event, done, None

    def snic_back(self, sid: str, boot_id: str = "", poll_s: float = 0.05) -> dict:
        """The sNIC answers again (rebooted): release what its agent still holds of the instances that
        failed over from it. It is a place for NFs again (the re-placement loop moves NFs back there once
        worth it and the dampening window allows) once OneSwitch has its switch back as well (reconnected and
        reconciled; a move there is refused until then): at once if it has, else when a thread polling
        OneSwitch every `poll_s` s sees it (given up if the sNIC stops answering again meanwhile)."""
        ctx = self.ctx
        with ctx.lock:
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
        placeable = self._placeable_again(sid)
        if not placeable:
            threading.Thread(
                target=self._await_switch, args=(sid, poll_s), name=f"uno-snic-return-{sid}", daemon=True
            ).start()
        return {"snic": sid, "released": [i.id for i in orphans], "errors": errors, "placeable": placeable}

    def _placeable_again(self, sid: str) -> bool:
        """If OneSwitch holds `sid`'s switch again: the sNIC is a location again (event snic-placeable)."""
        ctx = self.ctx
        if not ctx.mapper.connected(sid):
            return False
        with ctx.lock:
            if sid in ctx.down:
                ctx.down.discard(sid)
                ctx.event("snic-placeable", snic=sid)
                ctx.save()
        return True

    def _await_switch(self, sid: str, poll_s: float) -> None:
        while self.ctx.runtime.answers(sid):
            if self._placeable_again(sid):
                return
            time.sleep(poll_s)

    def failover(self, nf_id: str, inst_id: str, reason: str) -> dict:
        """Replace instance `inst_id` of `nf_id` (dead or stuck) by its running standby if it has one, else by a
        new instance at the same location, and remap the vport to it (migration.failover). Unknown ids
        (already replaced) and instances on an sNIC that is silent or dead (its watch's to judge) are a no-op."""
        ctx = self.ctx
        with ctx.lock:
            nf = ctx.state.nfs.get(nf_id)
            failed = next((i for i in nf.instances if i.id == inst_id), None) if nf else None
            if nf is None or failed is None:
                return {}
            if failed.location in ctx.down or not ctx.runtime.answers(failed.location):
                return {}  # its sNIC is silent: the sNIC's watch judges it (and fails it over whole if dead)
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

    def _switch_to(self, nf: Nf, failed: Instance, new: Instance, reason: str, standby: bool) -> dict:
        """migration.failover from `failed` to `new` (running already when `standby`)."""
        ctx = self.ctx

        def switched() -> None:  # traffic is on the replacement: record it before the old one is released
            nf.instances = [new if i.id == failed.id else i for i in nf.instances]
            nf.location = new.location

        try:
            res = run_failover(nf, failed, new, ctx.runtime, ctx.mapper, reason, standby=standby,
                               on_switched=switched)  # fmt: skip
        except FailoverError as exc:
            if standby:
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
