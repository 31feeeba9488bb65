package net.uno.oneswitch.model;

import java.util.List;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;

/** A group of the virtual switch, as the controller wrote it. */
public record VirtualGroup(int groupId, OFGroupType type, List<OFBucket> buckets) {}
