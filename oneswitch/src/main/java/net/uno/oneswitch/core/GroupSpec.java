package net.uno.oneswitch.core;

import java.util.List;
import org.projectfloodlight.openflow.protocol.OFBucket;
import org.projectfloodlight.openflow.protocol.OFGroupType;

/** A group as installed on one physical switch. */
public record GroupSpec(OFGroupType type, List<OFBucket> buckets) {}
