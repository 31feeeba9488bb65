"""A Redis Cluster this host runs itself (`redis.mode: cluster`): masters x (1 + replicas) redis-server
processes with cluster mode on, joined by `redis-cli --cluster create`, announcing an address every NF of
the host and its sNICs reaches. Access control from the start: the `default` user has a generated password
(the admin's, 0600 in the tier's directory); tenants' users are added by the agent (state_tier.acl)."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

import redis

from host_datapath.sysutil import (
    DatapathError,
    kill_and_wait,
    read_pidfile,
    tcp_open,
    wait_for,
    write_private,
)
from state_tier.access import Credentials, Topology, live_topology, node_client

BUS_OFFSET = 10000  # Redis Cluster's bus port: the client port + 10000
NODE_TIMEOUT_MS = 1000  # a master unanswered this long is failed over (the measured failover follows it)


def free_cluster_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` ports whose client and bus ports (+10000) are both free now (the caller binds them later)."""
    out: list[int] = []
    while len(out) < n:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port + BUS_OFFSET > 65535 or port in out or tcp_open(port + BUS_OFFSET):
            continue
        out.append(port)
    return out


def node_config(port: int, directory: Path, bind: tuple[str, ...], announce: str, password: str) -> str:
    """One node's redis.conf (0600: it names the admin password for replication)."""
    return "\n".join([
        f"port {port}", f"bind {' '.join(bind)}", "protected-mode no",
        "cluster-enabled yes", "cluster-config-file nodes.conf", f"cluster-node-timeout {NODE_TIMEOUT_MS}",
        f"cluster-announce-ip {announce}",
        # the masters left keep serving their slots while one is failed over
        "cluster-require-full-coverage no",
        # a replica is promoted however long it was cut off: no state is better than none
        "cluster-replica-validity-factor 0",
        'save ""', "appendonly no", f"dir {directory}", f"pidfile {directory / 'redis.pid'}",
        f"logfile {directory / 'redis.log'}", "daemonize yes",
        f"aclfile {directory / 'users.acl'}", "masteruser default", f"masterauth {password}",
    ]) + "\n"  # fmt: skip


@dataclass
class LocalCluster:
    """The host's own Redis Cluster; `ports`: one per node, masters first as `redis-cli` assigns them."""

    rundir: Path  # the host's RUNDIR/NAME
    ports: tuple[int, ...]
    replicas: int
    announce: str  # the address nodes announce (and clients are redirected to)
    key: str = "redis"

    @property
    def dir(self) -> Path:
        return self.rundir / "tier"

    @property
    def password_file(self) -> Path:
        return self.dir / "admin.pass"

    def node_dir(self, port: int) -> Path:
        return self.dir / str(port)

    def address(self, port: int) -> str:
        return f"{self.announce}:{port}"

    def credentials(self) -> Credentials:
        return Credentials(None, self.password_file.read_text().strip())

    def seeds(self) -> list[str]:
        return [self.address(p) for p in self.ports]

    def pids(self) -> dict[int, int | None]:
        return {p: read_pidfile(self.node_dir(p) / "redis.pid") for p in self.ports}

    def running(self) -> bool:
        return all(self.pids().values())

    def up(self) -> None:
        """Start the nodes; a cluster made before (its nodes' `nodes.conf` kept) gets only its dead nodes
        started again, which rejoin it (a former master as a replica of its promoted one)."""
        pids = self.pids()
        if all(pids.values()):
            return
        created = all((self.node_dir(p) / "nodes.conf").exists() for p in self.ports)
        if not created:
            self._prepare()
        for port, pid in pids.items():
            if pid is None:
                self._start(port)
        if not created:
            self._create()

    def _prepare(self) -> None:
        for port in self.ports:
            if tcp_open(port) or tcp_open(port + BUS_OFFSET):
                raise DatapathError(
                    f"redis: port {port} or its cluster bus port {port + BUS_OFFSET} is in use"
                )
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        password = secrets.token_urlsafe(24)
        write_private(self.password_file, password + "\n")
        for port in self.ports:
            d = self.node_dir(port)
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir(mode=0o700)
            write_private(
                d / "redis.conf", node_config(port, d, ("127.0.0.1", self.announce), self.announce, password)
            )
            write_private(d / "users.acl", f"user default on >{password} ~* &* +@all\n")

    def _start(self, port: int) -> None:
        d = self.node_dir(port)
        proc = subprocess.run(["redis-server", str(d / "redis.conf")], capture_output=True, text=True, cwd=d)
        if proc.returncode != 0:
            raise DatapathError(
                f"redis: node {port} did not start: {proc.stderr.strip() or proc.stdout.strip()}"
            )
        try:
            wait_for(
                lambda: read_pidfile(d / "redis.pid") and tcp_open(port, self.announce),
                10,
                f"redis node {port}",
            )
        except DatapathError as exc:  # it daemonized, then failed (a port taken meanwhile, ...): say why
            try:
                tail = (d / "redis.log").read_text(errors="replace").strip().splitlines()[-2:]
            except OSError:
                tail = []
            raise DatapathError(f"{exc}; its log: {' | '.join(tail) or 'none'}") from None

    def _create(self) -> None:
        env = {**os.environ, "REDISCLI_AUTH": self.password_file.read_text().strip()}
        cmd = ["redis-cli", "--cluster", "create", *self.seeds(), "--cluster-replicas", str(self.replicas),
               "--cluster-yes"]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        if proc.returncode != 0 or "[OK] All 16384 slots covered" not in proc.stdout:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-3:]
            raise DatapathError("redis: redis-cli --cluster create failed: " + " | ".join(tail))
        wait_for(self._formed, 30, "the Redis Cluster to report cluster_state:ok on every node", interval=0.1)

    def _formed(self) -> bool:
        creds = self.credentials()
        for address in self.seeds():
            c = node_client(address, creds, 1.0)
            try:
                info = c.execute_command("CLUSTER", "INFO")
                text = info.decode() if isinstance(info, bytes) else str(info)
                if "cluster_state:ok" not in text or f"cluster_known_nodes:{len(self.ports)}" not in text:
                    return False
            except (redis.RedisError, OSError):
                return False
            finally:
                c.close()
        return True

    def down(self) -> None:
        for pid in self.pids().values():
            if pid:
                kill_and_wait(pid)
        shutil.rmtree(self.dir, ignore_errors=True)

    def topology(self) -> Topology | None:
        if not self.password_file.exists():
            return None
        return live_topology(self.seeds(), self.credentials())

    def status(self) -> dict:
        pids = self.pids()
        topo = self.topology()
        if topo is not None:
            nodes = topo.public()
            url = topo.url()
        else:
            nodes = [{"address": self.address(p), "role": "unknown", "failed": True} for p in self.ports]
            url = "redis-cluster://" + ",".join(self.seeds())
        by_port = {p: pid for p, pid in pids.items()}
        for n in nodes:
            n["pid"] = by_port.get(int(n["address"].rsplit(":", 1)[1]))
        return {
            "mode": "cluster", "url": url, "nodes": nodes, "running": all(pids.values()),
            "port": self.ports[0], "unix_socket": None, "pid": pids[self.ports[0]],
            "password_file": str(self.password_file),
        }  # fmt: skip
