"""OneSwitch's equivalence machinery: a raw OpenFlow client, the reference OVS bridge, rule and frame
generators, packet I/O in namespaces, and the per-rule check used by tests and the bench."""
