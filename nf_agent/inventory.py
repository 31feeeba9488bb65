"""VMs and NFs as the orchestrator asks for them: create, update, delete, each complete or rolled back (nothing
half-created remains; the state file is written only once the NF runs and its virtual port is mapped)."""

from __future__ import annotations

import logging
import time

from domain import vports
from domain.errors import (
    Conflict,
    DependencyFailed,
    NotFound,
    OperationFailed,
    PortMapError,
    StartError,
    ValidationError,
)
from domain.model import HOST, Nf, Vm
from nf_agent import graph
from nf_agent.context import AgentContext
from nf_agent.placement_model import PlacementModel
from nf_agent.validation import NfRequest, VmRequest
from placement import parse_problem
from placement.evaluate import evaluate

log = logging.getLogger("uno.agent")


class Inventory:
    def __init__(self, ctx: AgentContext, model: PlacementModel):
        self.ctx = ctx
        self.model = model

    # -- VMs -------------------------------------------------------------------------------------------
    def create_vm(self, req: VmRequest) -> Vm:
        ctx = self.ctx
        with ctx.lock:
            ctx.check_new_id(req.id)
            used = {v.slot for v in ctx.state.vms.values()}
            free = [i for i in range(ctx.cfg.vm_slots) if i not in used]
            if not free:
                raise Conflict(f"all {ctx.cfg.vm_slots} VM slots of this host are in use")
            vm = Vm(id=req.id, slot=free[0], vport=vports.vport_vm(free[0]), tenant=req.tenant)
            ctx.state.vms[vm.id] = vm
            ctx.event("vm-create", vm=vm.id, vport=vm.vport)
            try:
                ctx.save()
            except OSError as exc:
                del ctx.state.vms[vm.id]
                raise OperationFailed(f"cannot persist state: {exc}") from None
            return vm

    def delete_vm(self, vm_id: str) -> None:
        ctx = self.ctx
        with ctx.lock:
            if vm_id not in ctx.state.vms:
                raise NotFound(f"no VM {vm_id!r}")
            users = sorted(n.id for n in ctx.state.nfs.values() if vm_id in (n.src, n.dst))
            if users:
                raise Conflict(f"VM {vm_id!r} is in the chain of NF(s) {', '.join(users)}; delete them first")
            ctx.state.vms.pop(vm_id)
            ctx.event("vm-delete", vm=vm_id)
            ctx.save()

    # -- NFs -------------------------------------------------------------------------------------------
    def create_nf(self, req: NfRequest) -> Nf:
        ctx = self.ctx
        t0 = time.monotonic()
        with ctx.lock:
            nf_id = req.id or ctx.state.new_nf_id()
            ctx.check_new_id(nf_id)
            graph.check_chain(nf_id, req.src, req.dst, ctx.vertices())
            for fld, end in (("expected.src", req.src), ("expected.dst", req.dst)):
                vm = ctx.state.vms.get(end or "")
                if vm is not None and vm.tenant != req.tenant:
                    raise ValidationError(
                        fld, f"VM {vm.id!r} belongs to tenant {vm.tenant!r}, not {req.tenant!r}"
                    )
            nf = Nf(
                id=nf_id, type=req.type, config=req.config, vport=ctx.state.free_vport(vports.VPORT_NF_BASE),
                expected_gbps=req.expected_gbps, src=req.src, dst=req.dst, pin=req.pin, prefer=req.prefer,
                created=ctx.clock(), tenant=req.tenant, store_wait=req.store_wait, latency_us=req.latency_us,
                autoscale=req.autoscale, balance=req.balance,
            )  # fmt: skip
            if nf.pin and nf.pin not in ctx.locations:
                raise ValidationError("pin", f"no location {nf.pin!r} on this host")
            loc = self._place_new(nf)
            inst = ctx.runtime.new_instance(
                nf, loc, ctx.state.new_instance_seq(), ctx.state.used_ofports(loc)
            )
            ctx.start(nf, inst)
            try:
                ctx.mapper.map(nf.vport, inst.switch, inst.ofport, nf.id)
            except PortMapError as exc:
                ctx.stop_quietly(inst)
                raise DependencyFailed(str(exc)) from None
            nf.location, nf.instances = loc, [inst]
            ctx.state.nfs[nf_id] = nf
            ctx.event("nf-create", nf=nf_id, type=nf.type, location=loc, vport=nf.vport)
            try:
                ctx.save()
            except OSError as exc:
                del ctx.state.nfs[nf_id]
                ctx.unmap_quietly(nf.vport)
                ctx.stop_quietly(inst)
                raise OperationFailed(f"cannot persist state: {exc}") from None
            ctx.counters.provisions += 1
            ctx.counters.last_provision_ms = round((time.monotonic() - t0) * 1000, 1)
            return nf

    def _place_new(self, nf: Nf) -> str:
        """Where a new NF goes: solved with every existing NF held where it is (creating never migrates).

        When the existing NFs (or a PCIe link's background traffic) alone already break a budget under the
        measured traffic (re-placement has not caught up yet), the new NF goes to the first location that adds
        no violation of its own.
        """
        ctx = self.ctx
        existing = list(ctx.state.nfs.values())
        problem_json = self.model.problem([*existing, nf], fixed={n.id for n in existing})
        res = ctx.solver(problem_json)
        ctx.counters.solves += 1
        if res.get("status") in ("optimal", "feasible"):
            return res["placement"][nf.id]
        problem = parse_problem(problem_json)
        base = {n.id: n.location or problem.allowed(n)[0] for n in problem.nodes if n.id != nf.id}
        # (with no NF yet, what the links' background alone breaks)
        already = set(evaluate(parse_problem(self.model.problem(existing)), base).violations)
        if already:
            for loc in [nf.pin] if nf.pin else [nf.prefer or HOST, *ctx.locations]:
                if set(evaluate(problem, {**base, nf.id: loc}).violations) <= already:
                    log.warning(
                        "placed on an over-budget host", extra={"fields": {"nf": nf.id, "location": loc}}
                    )
                    return loc
        raise Conflict(f"no placement for {nf.id}: {res.get('reason', res.get('status'))}", "expected.gbps")

    def update_nf(self, nf_id: str, changes: dict) -> Nf:
        """Change an NF's traffic expectation or autoscaling (`validation.parse_nf_update`: expected_gbps, src,
        dst, autoscale; the agent's loop applies a new autoscale policy at its next round): the chain
        vertices must exist and not be the NF itself. Only the model changes (the next solve and monitoring
        sample use it); nothing moves. On a bad vertex or a failed save nothing is changed."""
        ctx = self.ctx
        with ctx.lock:
            nf = ctx.nf(nf_id)
            src, dst = changes.get("src", nf.src), changes.get("dst", nf.dst)
            graph.check_chain(nf_id, src, dst, ctx.vertices())
            before = {k: getattr(nf, k) for k in changes}
            for k, v in changes.items():
                setattr(nf, k, v)
            history = list(ctx.state.history)
            ctx.event(
                "nf-update",
                nf=nf_id,
                expected=nf.public()["expected"],
                autoscale=nf.autoscale,
                balance=nf.balance,
            )
            try:
                ctx.save()
            except OSError as exc:
                for k, v in before.items():
                    setattr(nf, k, v)
                ctx.state.history = history
                raise OperationFailed(f"cannot persist state: {exc}") from None
            return nf

    def _unlink(self, gone: Nf) -> list[dict]:
        """Splice `gone` out of the chains that name it: a neighbour whose dst (src) was `gone` takes `gone`'s
        dst (src), so a -> gone -> b becomes a -> b (None, the default, where that would name the neighbour
        itself). Returns the changed neighbours' new src/dst."""
        out = []
        for n in self.ctx.state.nfs.values():
            if n.id == gone.id or gone.id not in (n.src, n.dst):
                continue
            if n.src == gone.id:
                n.src = gone.src if gone.src != n.id else None
            if n.dst == gone.id:
                n.dst = gone.dst if gone.dst != n.id else None
            out.append({"nf": n.id, "src": n.src, "dst": n.dst})
        return out

    def delete_nf(self, nf_id: str, drop_state: bool = False) -> int | None:
        """Stop every instance, unmap the vport, forget the NF; NFs whose chain named it are spliced
        (`_unlink`). `drop_state`: then delete the NF's keys on the state tier too (every host sharing the
        tier loses them); the number deleted (None: not asked)."""
        ctx = self.ctx
        with ctx.lock:
            nf = ctx.nf(nf_id)
            errors = []
            try:
                ctx.mapper.unmap(nf.vport)
            except PortMapError as exc:
                errors.append(str(exc))
            sb = ctx.standbys.pop(nf_id, None)
            for inst in [*nf.instances, *([sb] if sb else [])]:
                try:
                    ctx.runtime.stop(inst)
                except Exception as exc:  # noqa: BLE001
                    errors.append(str(exc))
            dropped = None
            if drop_state:
                try:
                    dropped = ctx.runtime.drop_state(nf_id, nf.tenant)
                except StartError as exc:
                    errors.append(str(exc))
            del ctx.state.nfs[nf_id]
            ctx.event(
                "nf-delete", nf=nf_id, errors=errors, rechained=self._unlink(nf), state_keys_dropped=dropped
            )
            ctx.save()
            if errors:
                raise OperationFailed(f"NF {nf_id} deleted, with cleanup errors: {'; '.join(errors)}")
            return dropped
