package net.uno.oneswitch.core;

import java.util.EnumSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArraySet;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.south.SouthSwitch;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFPortDesc;
import org.projectfloodlight.openflow.protocol.OFPortReason;
import org.projectfloodlight.openflow.protocol.OFPortState;
import org.projectfloodlight.openflow.types.MacAddress;
import org.projectfloodlight.openflow.types.OFPort;

/**
 * The controller connections as the core sees them, and what they are told unasked: asynchronous
 * messages (to each connection whose role and SET_ASYNC admit them) and the virtual ports'
 * descriptions, taken from their physical ports.
 */
public final class Controllers {
  private final OFFactory f;
  private final Map<String, SouthSwitch> south;
  private final Set<Session> sessions = new CopyOnWriteArraySet<>();
  private int missSendLen = 128;

  /** {@code south}: the physical switches by id (the core's map, read live). */
  Controllers(OFFactory f, Map<String, SouthSwitch> south) {
    this.f = f;
    this.south = south;
  }

  public void add(Session s) {
    sessions.add(s);
  }

  public void remove(Session s) {
    sessions.remove(s);
  }

  public Set<Session> sessions() {
    return sessions;
  }

  public int missSendLen() {
    return missSendLen;
  }

  public void setMissSendLen(int v) {
    missSendLen = v;
  }

  /** Sends asynchronous message {@code m} to every connection that wants it. */
  void broadcast(OFMessage m) {
    for (Session s : sessions) {
      if (s.wants(m)) {
        s.send(m);
      }
    }
  }

  /**
   * The virtual port description of v, from a physical port serving it: the first instance whose
   * switch is connected and reports the port (a scaled-out vport stays up while any instance's
   * switch is). Without one the vport is link down: the first instance's last known description
   * (address, name, speeds kept, as a switch reports a port whose link went down) with state
   * LINK_DOWN, or an empty one if its switch never reported the port.
   */
  public OFPortDesc portDesc(VPort v) {
    OFPortDesc p = null;
    for (VPort.Loc l : v.instances()) {
      SouthSwitch s = south.get(l.sw());
      p = s == null || !s.isReady() ? null : s.ports().get(l.port());
      if (p != null) {
        break;
      }
    }
    boolean down = p == null;
    if (down) {
      SouthSwitch s = south.get(v.sw());
      p = s == null ? null : s.ports().get(v.port()); // its last known description
    }
    String name = v.name().length() > 15 ? v.name().substring(0, 15) : v.name();
    var b = f.buildPortDesc().setPortNo(OFPort.of(v.vport())).setName(name);
    if (p == null) {
      return b.setHwAddr(MacAddress.NONE)
          .setConfig(Set.of())
          .setState(EnumSet.of(OFPortState.LINK_DOWN))
          .build();
    }
    return b.setHwAddr(p.getHwAddr())
        .setConfig(p.getConfig())
        .setState(down ? EnumSet.of(OFPortState.LINK_DOWN) : p.getState())
        .setCurr(p.getCurr())
        .setAdvertised(p.getAdvertised())
        .setSupported(p.getSupported())
        .setPeer(p.getPeer())
        .setCurrSpeed(p.getCurrSpeed())
        .setMaxSpeed(p.getMaxSpeed())
        .build();
  }

  /** PORT_STATUS of vport {@code v} to the controllers. */
  void portStatus(VPort v, OFPortReason reason) {
    broadcast(f.buildPortStatus().setReason(reason).setDesc(portDesc(v)).build());
  }
}
