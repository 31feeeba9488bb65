"""Where an NF instance's traces are, wherever it ran: on the host its own namespace; on an sNIC (a separate
machine) what its agent knows and the ports of its bridge, asked through the agent's API."""

from __future__ import annotations

from domain.model import HOST, Instance
from host_datapath.snic_agent_client import SnicAgentClient
from host_datapath.sysutil import netns_list


def leaves_nothing(runtime, inst: Instance) -> bool:
    """Nothing of `inst` remains: on the host its namespace is gone; on an sNIC its agent does not know it
    and its bridge has no port of that name."""
    if inst.location == HOST:
        return inst.netns not in netns_list()
    remote = runtime.remote[inst.location]
    if remote.plugged(inst):
        return False
    return all(p["name"] != inst.port_if for p in remote.client.ports())


def gone(host, inst: dict) -> bool:
    """Nothing of the instance `inst` (as the agent's state file has it) remains on `host` (an EmulatedHost):
    on the host its namespace; on an sNIC what its agent knows and the port of its bridge, asked through the
    agent's API."""
    if inst["location"] == HOST:
        return inst["netns"] not in netns_list()
    a = host.snic_agents()[inst["location"]]
    client = SnicAgentClient(inst["location"], a.agent, a.token)
    try:
        return all(i["id"] != inst["id"] for i in client.instances()) and all(
            p["name"] != inst["port_if"] for p in client.ports()
        )
    finally:
        client.close()
