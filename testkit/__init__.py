"""Harnesses shared by tests/ and bench/: emulated hosts for tests, an agent process with its host, testbeds
for moves and scaling, the NF veth testbed, fakes of the agent's I/O edges, and OneSwitch's equivalence
machinery (raw OpenFlow client, reference switch, rule and frame generators). Not part of the product: no
package of the product imports it."""
