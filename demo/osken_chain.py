"""os-ken app: installs the demo chain's steering rules proactively on OneSwitch (the ONE virtual switch).

    UNO_DEMO_CHAIN=/path/chain.json osken-manager --ofp-listen-host 127.0.0.1 --ofp-tcp-listen-port P \\
        demo/osken_chain.py

It polls the chain file (written by `uno run`); on a change, and whenever the switch (re)connects, it replaces
the switch's table with the chain's rules, then writes `<chain>.installed` = {"mtime", "rules", "dpid"} once
the switch has answered a barrier. The file may add an LB path (chain.py: VIP traffic through the LB NF). A malformed file installs nothing and is reported in `<chain>.error`."""

from __future__ import annotations

import json
import os
from pathlib import Path

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from demo.chain import ChainError, parse_demo, steering_rules


class ChainSteering(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.path = Path(os.environ["UNO_DEMO_CHAIN"])
        self.dps: dict[int, object] = {}
        self.mtime: float | None = None
        self.pending: dict[int, tuple[int, float]] = {}  # barrier xid -> (rules, mtime)
        hub.spawn(self._watch)

    def _watch(self) -> None:
        while True:
            try:
                mtime = self.path.stat().st_mtime
            except FileNotFoundError:
                mtime = None
            if mtime is not None and mtime != self.mtime:
                self.mtime = mtime
                for dp in list(self.dps.values()):
                    self._install(dp)
            hub.sleep(0.3)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _features(self, ev) -> None:
        dp = ev.msg.datapath
        self.dps[dp.id] = dp
        if self.path.exists():
            self._install(dp)

    def _install(self, dp) -> None:
        ofp, parser = dp.ofproto, dp.ofproto_parser
        try:
            mtime = self.path.stat().st_mtime
            demo = parse_demo(json.loads(self.path.read_text()))
        except (OSError, ValueError, ChainError) as exc:
            Path(f"{self.path}.error").write_text(f"{exc}\n")
            self.logger.error("chain %s: %s", self.path, exc)
            return
        dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))  # fmt: skip
        rules = steering_rules(demo)
        for r in rules:
            # Untagged frames only (vlan_vid 0 = "no VLAN"; the demo's VMs and outside send no tag): a rule that
            # shows it crosses PCIe faithfully also under OneSwitch's wire_vlans 2 (QinQ may arrive).
            fields = {"in_port": r.in_port, "vlan_vid": 0} | ({"eth_src": r.eth_src} if r.eth_src else {})
            fields |= ({"eth_dst": r.eth_dst} if r.eth_dst else {}) | dict(r.match)
            actions = [parser.OFPActionSetField(eth_dst=r.set_eth_dst)] if r.set_eth_dst else []
            actions.append(parser.OFPActionOutput(r.out_port))
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
            dp.send_msg(parser.OFPFlowMod(dp, priority=r.priority, match=parser.OFPMatch(**fields),
                                          instructions=inst))  # fmt: skip
        barrier = parser.OFPBarrierRequest(dp)
        dp.set_xid(barrier)
        self.pending[barrier.xid] = (len(rules), mtime)
        dp.send_msg(barrier)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier(self, ev) -> None:
        done = self.pending.pop(ev.msg.xid, None)
        if done is not None:
            out = {"mtime": done[1], "rules": done[0], "dpid": ev.msg.datapath.id}
            tmp = Path(f"{self.path}.installed.tmp")
            tmp.write_text(json.dumps(out))
            tmp.replace(f"{self.path}.installed")
            self.logger.info("chain installed: %s", out)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    def _error(self, ev) -> None:
        msg = ev.msg
        Path(f"{self.path}.error").write_text(f"OpenFlow error type {msg.type} code {msg.code}\n")
        self.logger.error("OpenFlow error type %s code %s", msg.type, msg.code)
