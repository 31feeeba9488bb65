package net.uno.oneswitch.south;

import org.projectfloodlight.openflow.protocol.OFErrorMsg;
import org.projectfloodlight.openflow.protocol.OFFlowRemoved;
import org.projectfloodlight.openflow.protocol.OFPacketIn;
import org.projectfloodlight.openflow.protocol.OFPortStatus;

/** Events of a physical switch connection (called on Netty I/O threads). */
public interface SouthListener {
  void connected(SouthSwitch sw);

  void disconnected(SouthSwitch sw);

  void packetIn(SouthSwitch sw, OFPacketIn pin);

  void flowRemoved(SouthSwitch sw, OFFlowRemoved fr);

  void portStatus(SouthSwitch sw, OFPortStatus ps);

  /** An error the switch sent for a message without a waiting request. */
  void error(SouthSwitch sw, OFErrorMsg err);
}
