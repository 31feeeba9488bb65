"""The agent's NF runtime for one host: instances on the host itself run as local processes
(`nf_local.LocalNfs`); instances on an sNIC run under that sNIC's agent, reached only through its REST API
(`snic_client.RemoteNfs`). Every call is routed by the instance's location.

On the host the NFs reach Redis through its own unix socket; only a Redis without one is reached through
one relay in the root namespace (the agent's unix socket -> TCP to Redis). NFs on an sNIC reach it over TCP
at the host's management address on that sNIC's link.

With a TCP tier (`redis.mode` cluster or external) the host's NFs run in one namespace linked to the root
namespace (emulated_host.tier_link) and every NF gets the tier's URL, its tenant and the tenant's ACL user
(nf_runtime.tenants)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

from domain.errors import StartError
from domain.model import HOST, Instance, Nf
from host_datapath.snic_agent_client import SnicAgentClient
from host_datapath.sysutil import MAX_UNIX_PATH, DatapathError, kill_and_wait, pid_alive, read_pidfile
from nf_local.processes import NF_BINARY, LocalNfs
from nf_local.tier_access import TierAccess
from nf_runtime.snic_client import RemoteNfs, SnicWatch
from nf_runtime.tenants import TenantUsers
from state_tier.access import ping as tier_ping
from state_tier.access import tier_client
from state_tier.keys import DEFAULT_TENANT, nf_key, nf_pattern


class HostRuntime:
    """Starts, supervises and stops NF instances on the running emulated host `host` and its sNICs."""

    def __init__(
        self,
        host,
        agent_dir: Path,
        redis_port: int,
        nf_binary: Path = NF_BINARY,
        store: str = "redis",
        warm_slots: int = 0,
        redis_socket: str | Path | None = None,
        cpu_latency_us: int | None = None,
        tier=None,
    ):
        """`store`: "redis" (the stateless mode, state in the host's Redis) or "local" (in-process state:
        the baseline that shows what a failover loses). `warm_slots`: free pre-created slots kept on the
        host (an sNIC agent keeps its own). `redis_socket`: Redis's own unix socket (the host status's
        `redis.unix_socket`); None: host NFs reach Redis by TCP on `redis_port` through the agent's relay.
        `cpu_latency_us`: see `nf_local.command.run_config`. `tier`: the host's state tier
        (`EmulatedHost.tier()`); None or mode local: the host's own Redis as above."""
        if store not in ("redis", "local"):
            raise ValueError(f"store must be 'redis' or 'local', not {store!r}")
        self.store = store
        self.host = host  # EmulatedHost
        self.name = host.name
        self.dir = agent_dir
        self.redis_port = redis_port
        self.nf_binary = nf_binary
        self.redis_socket = Path(redis_socket) if redis_socket else None
        self.redis_sock = self.dir / "redis.sock"  # the relay's socket (no `redis_socket`)
        self.redis_relay: int | None = None
        self.tier = tier if tier is not None and tier.mode != "local" and store == "redis" else None
        self.users: TenantUsers | None = None
        shared_netns = None
        if self.tier is not None:
            topo = self.tier.component.topology()
            if topo is None:
                raise StartError("the state tier does not answer (redis.nodes / the host's cluster)")
            tier_url = "redis-cluster://" + ",".join(n.address for n in topo.nodes) if topo.kind == "cluster" \
                else topo.url()  # fmt: skip
            local_store = tier_url
            shared_netns = self.tier.nf_netns
            self.users = TenantUsers(self.tier.component.topology, self.tier.admin)
        else:
            local_store = f"unix://{self.store_socket()}" if store == "redis" else "local"
        self.local = LocalNfs(self.name, {HOST: host.host_switch()}, agent_dir, local_store, nf_binary,
                              warm_slots, cpu_latency_us, shared_netns=shared_netns)  # fmt: skip
        self.remote: dict[str, RemoteNfs] = {}
        self.access = host.snic_agents()
        for sid, a in self.access.items():
            url = f"redis://{a.state_addr}:{redis_port}" if store == "redis" else "local"
            self.remote[sid] = RemoteNfs(
                SnicAgentClient(sid, a.agent, a.token), local_store if self.tier else url, cpu_latency_us
            )
        self.watches: list[SnicWatch] = []

    def _at(self, location: str) -> LocalNfs | RemoteNfs:
        if location == HOST:
            return self.local
        try:
            return self.remote[location]
        except KeyError:
            raise StartError(f"no sNIC agent for {location!r} on this host") from None

    # -- host-wide ------------------------------------------------------------------------------------
    def open(self) -> None:
        """Check Redis's unix socket, or (a Redis without one) start the Redis relay, or adopt the one a
        previous agent left running; open the host's local runtime (warm slots).

        A relay outlives the agent on purpose: running NFs keep their state tier while the agent restarts.
        `uno down` removes it with the host (its command line names the host's rundir)."""
        if self.tier is not None:
            self.local.open()
            return
        sock = self.store_socket()
        if len(str(sock)) > MAX_UNIX_PATH:
            raise StartError(f"Redis socket path {sock} is longer than {MAX_UNIX_PATH} bytes")
        if self.redis_socket is None:
            self._open_redis_relay()
        elif not self.redis_socket.exists():
            raise StartError(f"Redis's unix socket {self.redis_socket} does not exist (is the host up?)")
        self.local.open()

    def _open_redis_relay(self) -> None:
        pidfile = self.dir / "redis-relay.pid"
        pid = read_pidfile(pidfile)
        if pid and self.redis_sock.exists():
            self.redis_relay = pid
            return
        if pid:
            kill_and_wait(pid)
        self.redis_sock.unlink(missing_ok=True)
        log = self.dir / "logs" / "redis-relay.log"
        self.redis_relay = self.local.spawn(
            ["socat", f"UNIX-LISTEN:{self.redis_sock},fork,mode=600", f"TCP:127.0.0.1:{self.redis_port}"], log
        )
        pidfile.write_text(str(self.redis_relay))
        deadline = time.monotonic() + 10
        while not self.redis_sock.exists():
            if time.monotonic() > deadline or not pid_alive(self.redis_relay):
                raise StartError(f"redis relay did not start: {log.read_text(errors='replace')[-300:]}")
            time.sleep(0.02)

    def store_socket(self) -> Path:
        """The unix socket host NFs reach Redis on: its own, else the agent's relay."""
        return self.redis_socket if self.redis_socket is not None else self.redis_sock

    def watch_snics(
        self, on_dead, on_back, on_exit, interval_ms: int = 10, timeout_ms: int = 40, confirm_ms: int = 300
    ) -> None:
        """Watch every sNIC's heartbeat (snic_client.SnicWatch): `on_dead(snic)` when the whole sNIC died,
        `on_back(snic, boot_id)` when it answers again, `on_exit(snic, instance)` when an NF exited there. While
        an sNIC is dead its instances answer at once (not alive, no stats) instead of waiting out timeouts."""

        def dead(sid: str) -> None:
            self.remote[sid].down = True
            on_dead(sid)

        def back(sid: str, boot_id: str) -> None:
            self.remote[sid].down = False
            on_back(sid, boot_id)

        for sid, r in self.remote.items():
            w = SnicWatch(r, self.access[sid].openflow, dead, back, on_exit, interval_ms, timeout_ms,
                          confirm_ms=confirm_ms)  # fmt: skip
            self.watches.append(w.start())

    def close(self) -> list[str]:
        """Destroy the host's free warm slots, stop watching the sNICs, drop connections; NF processes and the
        Redis relay (if any) keep running (see `open`). Returns the slot cleanup errors."""
        for w in self.watches:
            w.stop()
        errors = self.local.close()
        for r in self.remote.values():
            with contextlib.suppress(Exception):
                r.close()
        return errors

    def locations(self) -> list[str]:
        return [HOST, *sorted(self.remote)]

    def answers(self, location: str) -> bool:
        """Whether what runs at `location` can be asked now: the host always; an sNIC while its agent's
        heartbeat flows (a silent sNIC is the heartbeat watch's to judge, not each instance's probe)."""
        return location == HOST or (location in self.remote and self.remote[location].answers)

    @property
    def pool(self):
        """The host's warm slot pool."""
        return self.local.pool

    @property
    def last_start(self) -> dict:
        return self.local.last_start

    def store_reachable(self, timeout: float = 0.5) -> bool | None:
        """Whether the state tier answers a PING where the host's NFs reach it (None: NFs keep local state).
        A TCP tier: every master answers the admin's PING."""
        if self.tier is not None:
            topo = self.tier.component.topology()
            return topo is not None and tier_ping(topo, self.tier.admin, timeout)
        return self.local.store_reachable(timeout)

    def tier_client(self):
        """A redis-py client of the whole tier with the admin's credentials (RedisCluster for a cluster)."""
        if self.tier is None:
            import redis

            return redis.Redis(
                host="127.0.0.1", port=self.redis_port, socket_timeout=2, socket_connect_timeout=2
            )
        topo = self.tier.component.topology()
        if topo is None:
            raise StartError("the state tier does not answer")
        return tier_client(topo, self.tier.admin)

    def bump_epoch(self, nf_id: str, tenant: str = DEFAULT_TENANT) -> int:
        """INCR the NF's owner-cache epoch (`tn:<tenant>:nf:<id>:{epoch}`) in the tier: instances running with
        `owner_cache` drop their cache at their next timer tick. Returns the new epoch."""
        r = self.tier_client()
        try:
            return int(r.incr(nf_key(tenant, nf_id, "epoch")))
        finally:
            r.close()

    def drop_state(self, nf_id: str, tenant: str = DEFAULT_TENANT, batch: int = 500) -> int:
        """Delete every key of `tenant`'s NF `nf_id` on the state tier (`tn:<tenant>:nf:<id>:*`, SCAN on every
        master); the number deleted (0 with local state). Stop the NF's instances first: a running one writes
        again. StartError: the tier does not answer."""
        if self.store != "redis":
            return 0
        import redis

        r = self.tier_client()
        gone = 0
        try:
            keys: list[bytes] = []
            for key in r.scan_iter(match=nf_pattern(tenant, nf_id), count=batch):
                keys.append(key)
                if len(keys) >= batch:
                    gone += int(r.unlink(*keys))
                    keys.clear()
            if keys:
                gone += int(r.unlink(*keys))
        except redis.RedisError as exc:
            raise StartError(f"dropping the state of {nf_id!r} (tenant {tenant}): {exc}") from None
        finally:
            r.close()
        return gone

    def tier_access(self, nf: Nf, location: str) -> TierAccess:
        """What an instance of `nf` at `location` gets: the tier's URL as it reaches it, its tenant, with
        access control the tenant's user."""
        url = self.local.store if location == HOST else self._at(location).store
        if url == "local":
            return TierAccess("local")
        if self.users is None:
            return TierAccess(url, nf.tenant, wait=nf.store_wait)
        user, password = self.users.credentials(nf.tenant)
        return TierAccess(url, nf.tenant, user, password, nf.store_wait)

    # -- one instance, where it runs --------------------------------------------------------------------------
    def new_instance(self, nf: Nf, location: str, seq: int, used_ofports: set[int]) -> Instance:
        return self._at(location).new_instance(nf, location, seq, used_ofports)

    def free_ofport(self, location: str, used_ofports: set[int]) -> int:
        return self._at(location).free_ofport(location, used_ofports)

    def start(self, nf: Nf, inst: Instance, buffer: int = 0) -> None:
        self._at(inst.location).start(nf, inst, buffer, store=self.tier_access(nf, inst.location))

    def ship_binary(self, location: str, binary: Path) -> None:
        """Make `binary` startable at `location` (an sNIC holds it, shipped through its agent's API);
        StartError why not. The host runs any binary of its own."""
        if location != HOST:
            self._at(location).shipper.ship(binary)

    def start_processes(self, nf: Nf, inst: Instance, buffer: int = 0) -> None:
        self._at(inst.location).start_processes(nf, inst, buffer)

    def stop_processes(self, inst: Instance) -> None:
        self._at(inst.location).stop_processes(inst)

    def stop(self, inst: Instance) -> None:
        self._at(inst.location).stop(inst)

    def reconfigure(self, nf: Nf, inst: Instance) -> None:
        """Apply `nf.config` in place where the instance runs (`LocalNfs.reconfigure`, an sNIC's through its
        agent: `RemoteNfs.reconfigure`); RestartNeeded only when the NF says it takes a restart."""
        self._at(inst.location).reconfigure(nf, inst)

    def plugged(self, inst: Instance) -> bool:
        return self._at(inst.location).plugged(inst)

    def alive(self, inst: Instance) -> bool:
        return self._at(inst.location).alive(inst)

    def healthy(self, inst: Instance, timeout: float = 1.0) -> bool:
        return self._at(inst.location).healthy(inst, timeout)

    def stats(self, inst: Instance) -> dict | None:
        return self._at(inst.location).stats(inst)

    def cpu_seconds(self, inst: Instance) -> float:
        return self._at(inst.location).cpu_seconds(inst)

    def get_state(self, inst: Instance, timeout: float = 60.0) -> bytes:
        return self._at(inst.location).get_state(inst, timeout)

    def put_state(self, inst: Instance, data: bytes, timeout: float = 60.0) -> dict:
        return self._at(inst.location).put_state(inst, data, timeout)

    def release(self, inst: Instance, timeout: float = 60.0) -> dict:
        return self._at(inst.location).release(inst, timeout)

    def hold(self, inst: Instance, buffer: int, timeout: float = 10.0) -> dict:
        return self._at(inst.location).hold(inst, buffer, timeout)

    def drain(self, inst: Instance, quiet_ms: int, timeout_s: float, flush: bool = False) -> dict | None:
        return self._at(inst.location).drain(inst, quiet_ms, timeout_s, flush)

    # -- monitoring inputs ---------------------------------------------------------------------------------
    def port_counters_timed(
        self, clock: Callable[[], float]
    ) -> tuple[dict[str, dict[str, dict[str, int]]], dict[str, float]]:
        """Per location: port name -> counters (the host's switch read here, each sNIC's from its agent), and
        when that location's counters were read: the host's on `clock`, an sNIC's on its own clock as its agent
        reports it (only differences of one location's times are used). The round trip to an sNIC's agent
        varies under load; timed here, its middle would skew that sNIC's rates by the variation. An agent that
        does not report it: the middle of the round trip on `clock`."""
        out: dict[str, dict[str, dict[str, int]]] = {}
        at: dict[str, float] = {}
        t0 = clock()
        try:
            out[HOST] = self.local.switches[HOST].driver.port_stats()
        except DatapathError:
            out[HOST] = {}
        t1 = clock()
        at[HOST] = (t0 + t1) / 2
        for sid, r in self.remote.items():
            out[sid], read_at = r.port_counters()
            t0, t1 = t1, clock()
            at[sid] = (t0 + t1) / 2 if read_at is None else read_at
        return out, at

    def pcie_ports(self) -> dict[str, str]:
        """Per sNIC whose PCIe link ends on the host switch: that port (its counters give the link's load)."""
        return {sid: a.pcie_host_port for sid, a in self.access.items() if a.pcie_host_port}

    def pcie_snic_ports(self) -> dict[str, str]:
        """Per sNIC whose link is hardware (a BlueField): the host-facing port on its own bridge (its host
        representor), as its agent reports it; its counters give the link's load."""
        out = {}
        for sid, a in self.access.items():
            if a.pcie_host_port is None and not self.remote[sid].down:
                with contextlib.suppress(Exception):
                    out[sid] = next(p["name"] for p in self.remote[sid].client.ports() if p["kind"] == "pcie")
        return out
