"""After an agent restart: adopt the instances that still run, restart the dead ones, map what OneSwitch lost.

Running NFs and mappings that match the saved state are left untouched (no traffic disturbed)."""

from __future__ import annotations

from domain.errors import DependencyFailed, PortMapError
from domain.model import Instance, Nf
from nf_agent.context import AgentContext


def reconcile(ctx: AgentContext) -> list[str]:
    """Bring the host in line with the saved state; returns what was done, one line per action."""
    done: list[str] = []
    with ctx.lock:
        try:
            mapped = ctx.mapper.mapped()
        except PortMapError as exc:
            raise DependencyFailed(f"cannot read OneSwitch's port map: {exc}") from None
        for nf in ctx.state.nfs.values():
            for inst in nf.instances:
                _revive(ctx, nf, inst, done)
            if len(nf.instances) > 1:
                _set_instances(ctx, nf, done)
            elif nf.instances:
                _map_one(ctx, nf, mapped, done)
        ctx.event("reconcile", actions=done)
        ctx.save()
    return done


def _revive(ctx: AgentContext, nf: Nf, inst: Instance, done: list[str]) -> None:
    if ctx.runtime.alive(inst):
        inst.state = "running"
        return
    try:
        if ctx.runtime.plugged(inst):  # only the process died: restart it in place
            ctx.runtime.stop_processes(inst)
            ctx.runtime.start_processes(nf, inst)
        else:
            # Its port is gone: plug it in again on a port nothing else has. Not its old one: a warm slot
            # made meanwhile may hold that (OVS then gives another number).
            ctx.runtime.stop(inst)
            inst.ofport = ctx.runtime.free_ofport(inst.switch, ctx.used_ofports(inst.switch))
            ctx.runtime.start(nf, inst)
        done.append(f"restarted {inst.id}")
    except Exception as exc:  # noqa: BLE001 - the supervisor retries
        inst.state = "starting"
        done.append(f"could not restart {inst.id}: {exc}")


def _set_instances(ctx: AgentContext, nf: Nf, done: list[str]) -> None:
    want_all = [(i.switch, i.ofport) for i in nf.instances]
    try:
        have_all = ctx.mapper.instances().get(nf.vport)
        if have_all is None:
            ctx.mapper.map(nf.vport, *want_all[0], nf.id)
        if have_all != want_all:
            ctx.mapper.set_instances(nf.vport, want_all)
            done.append(f"set {len(want_all)} instances of vport {nf.vport}")
    except PortMapError as exc:
        done.append(f"could not set the instances of vport {nf.vport}: {exc}")


def _map_one(ctx: AgentContext, nf: Nf, mapped: dict[int, tuple[str, int]], done: list[str]) -> None:
    want = (nf.instances[0].switch, nf.instances[0].ofport)
    have = mapped.get(nf.vport)
    try:
        if have is None:
            ctx.mapper.map(nf.vport, *want, nf.id)
            done.append(f"mapped vport {nf.vport}")
        elif have != want:
            ctx.mapper.remap(nf.vport, *want)
            done.append(f"remapped vport {nf.vport}")
    except PortMapError as exc:
        done.append(f"could not map vport {nf.vport}: {exc}")
