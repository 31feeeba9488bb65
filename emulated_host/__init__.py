"""The emulated host: the stand-in for a server with sNICs on one machine (config, naming, bring-up and
teardown of switches, sNICs, PCIe links, VMs, Redis and the OneSwitch process; where a host's agent is)."""
