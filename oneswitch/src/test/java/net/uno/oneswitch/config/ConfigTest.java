package net.uno.oneswitch.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import net.uno.oneswitch.translate.Carrier;
import org.junit.jupiter.api.Test;

class ConfigTest {
  private static final String OK =
      """
      {"dpid": "0000000000000001", "listen": "ptcp:6654:127.0.0.1",
       "controllers": ["tcp:127.0.0.1:6653"], "rest": "127.0.0.1:0", "token": null,
       "state_dir": "/tmp/x",
       "switches": [{"id": "host", "openflow": "tcp:127.0.0.1:41234"},
                    {"id": "snic0", "openflow": "tcp:127.0.0.1:41235"}],
       "pcie": [{"snic": "snic0", "host_port": 1, "snic_port": 100}],
       "ports": [{"vport": 1, "switch": "snic0", "port": 1, "name": "eth0"}]}
      """;

  @Test
  void parsesTheContractExample() throws ConfigError {
    Config c = Config.parse(OK);
    assertEquals(1, c.dpid());
    assertEquals(6654, c.listen().port());
    assertEquals("host", c.hostSwitch());
    assertEquals(1, c.ports().size());
    assertEquals(254, c.physicalTables());
    assertEquals(Carrier.Mode.AUTO, c.carrier());
    for (String m : new String[] {"vlan", "mpls", "auto"}) {
      String json = OK.replace("\"token\": null", "\"token\": null, \"carrier\": \"" + m + "\"");
      assertEquals(m.toUpperCase(java.util.Locale.ROOT), Config.parse(json).carrier().name());
    }
    assertEquals(1, c.wireVlans());
    for (int w : new int[] {1, 2}) {
      String json = OK.replace("\"token\": null", "\"token\": null, \"wire_vlans\": " + w);
      assertEquals(w, Config.parse(json).wireVlans());
    }
  }

  @Test
  void switchesAreReachedOverTcpOrUnixSockets() throws ConfigError {
    Config c = Config.parse(OK.replace("tcp:127.0.0.1:41235", "unix:/run/uno/h/snic0/br.ctl"));
    assertEquals(
        new SwitchTarget.Tcp(new Endpoint("127.0.0.1", 41234)), c.switches().get(0).openflow());
    assertEquals(
        new SwitchTarget.Unix(java.nio.file.Path.of("/run/uno/h/snic0/br.ctl")),
        c.switches().get(1).openflow());
    assertEquals("unix:/run/uno/h/snic0/br.ctl", c.switches().get(1).openflow().toString());
    String longest = "/" + "x".repeat(SwitchTarget.MAX_UNIX_PATH_BYTES - 1);
    Config.parse(OK.replace("tcp:127.0.0.1:41235", "unix:" + longest));
    for (String bad :
        new String[] {
          "unix:",
          "unix:relative/br.ctl",
          "unix:" + longest + "y",
          "unix:/run/a\\u0000b",
          "punix:/run/br.ctl",
          "udp:127.0.0.1:1",
          "127.0.0.1:41235",
          "tcp:127.0.0.1:0"
        }) {
      bad("switches[1].openflow", "tcp:127.0.0.1:41235", bad);
    }
  }

  @Test
  void echoKeysSetHowFastASilentSwitchIsDeclaredDown() throws ConfigError {
    Config c = Config.parse(OK);
    assertEquals(1000, c.echoIntervalMs());
    assertEquals(3000, c.echoTimeoutMs());
    String both = "\"token\": null, \"echo_interval_ms\": 50, \"echo_timeout_ms\": 200";
    c = Config.parse(OK.replace("\"token\": null", both));
    assertEquals(50, c.echoIntervalMs());
    assertEquals(200, c.echoTimeoutMs());
    // Only the interval: the timeout is 3 s, or three intervals if that is more.
    String iv = "\"token\": null, \"echo_interval_ms\": 2000";
    assertEquals(6000, Config.parse(OK.replace("\"token\": null", iv)).echoTimeoutMs());
    String to = "\"token\": null, \"echo_timeout_ms\": 1500";
    assertEquals(1000, Config.parse(OK.replace("\"token\": null", to)).echoIntervalMs());
    for (String v : new String[] {"0", "9", "1.5", "\"100\"", "true", "-1", "600000"}) {
      bad("echo_interval_ms", "\"token\": null", "\"echo_interval_ms\": " + v);
    }
    for (String v : new String[] {"0", "19", "2.5", "\"3000\"", "600001"}) {
      bad("echo_timeout_ms", "\"token\": null", "\"echo_timeout_ms\": " + v);
    }
    // Not above the interval: a live switch could not answer in time.
    bad(
        "echo_timeout_ms",
        "\"token\": null",
        "\"echo_interval_ms\": 500, \"echo_timeout_ms\": 500");
    bad("echo_timeout_ms", "\"token\": null", "\"echo_timeout_ms\": 800");
  }

  @Test
  void sharedMarksAnOperatorsSwitchAndIsABoolean() throws ConfigError {
    Config c = Config.parse(OK);
    assertEquals(
        java.util.List.of(false, false), c.switches().stream().map(s -> s.shared()).toList());
    assertEquals(java.util.Set.of(), c.sharedSwitches());
    String dpu = "\"tcp:127.0.0.1:41235\"";
    for (String v : new String[] {"false", "null"}) {
      assertEquals(
          false,
          Config.parse(OK.replace(dpu, dpu + ", \"shared\": " + v)).switches().get(1).shared());
    }
    c = Config.parse(OK.replace(dpu, dpu + ", \"shared\": true"));
    assertEquals(true, c.switches().get(1).shared());
    assertEquals(false, c.switches().get(0).shared());
    assertEquals(java.util.Set.of("snic0"), c.sharedSwitches());
    for (String v : new String[] {"\"true\"", "1", "0", "\"yes\"", "[]", "{}"}) {
      ConfigError e =
          assertThrows(
              ConfigError.class, () -> Config.parse(OK.replace(dpu, dpu + ", \"shared\": " + v)));
      assertEquals("switches[1].shared", e.field(), e.getMessage());
      assertEquals(
          "switches[1].shared: must be true or false, got " + v, e.getMessage(), e.getMessage());
    }
  }

  @Test
  void maxRulesIsAnOptionalPositiveIntegerPerSwitch() throws ConfigError {
    assertEquals(java.util.Map.of(), Config.parse(OK).maxRules());
    String dpu = "\"tcp:127.0.0.1:41235\"";
    Config c = Config.parse(OK.replace(dpu, dpu + ", \"max_rules\": 70000"));
    assertEquals(java.util.Map.of("snic0", 70000), c.maxRules());
    for (String v : new String[] {"0", "-1", "1.5", "\"10\"", "true", "[]", "3000000000"}) {
      ConfigError e =
          assertThrows(
              ConfigError.class,
              () -> Config.parse(OK.replace(dpu, dpu + ", \"max_rules\": " + v)));
      assertEquals("switches[1].max_rules", e.field(), e.getMessage());
    }
  }

  private static void bad(String field, String from, String to) {
    ConfigError e = assertThrows(ConfigError.class, () -> Config.parse(OK.replace(from, to)));
    assertEquals(field, e.field(), e.getMessage());
  }

  @Test
  void badFieldsAreNamed() throws ConfigError {
    bad("dpid", "0000000000000001", "12");
    bad("listen", "ptcp:6654:127.0.0.1", "tcp:1:2");
    bad("controllers[0]", "tcp:127.0.0.1:6653", "tcp:127.0.0.1:x");
    bad("rest", "127.0.0.1:0", "nope");
    bad("switches[1].id", "\"snic0\", \"openflow\"", "\"host\", \"openflow\"");
    bad("pcie[0].snic", "\"snic\": \"snic0\"", "\"snic\": \"snic9\"");
    bad("ports[0].switch", "\"switch\": \"snic0\"", "\"switch\": \"x\"");
    bad("ports[0].port", "\"port\": 1, \"name\"", "\"port\": 100, \"name\"");
    bad("ports[0].vport", "\"vport\": 1", "\"vport\": -3");
    bad("bogus", "\"token\": null", "\"bogus\": 1");
    bad("carrier", "\"token\": null", "\"carrier\": \"MPLS\"");
    bad("carrier", "\"token\": null", "\"carrier\": 1");
    for (String t : new String[] {"2", "256", "100.5", "\"254\""}) {
      bad("physical_tables", "\"token\": null", "\"physical_tables\": " + t);
    }
    assertEquals(
        100,
        Config.parse(OK.replace("\"token\": null", "\"token\": null, \"physical_tables\": 100"))
            .physicalTables());
    for (String w : new String[] {"0", "3", "1.5", "\"2\"", "true", "-1"}) {
      bad("wire_vlans", "\"token\": null", "\"wire_vlans\": " + w);
    }
    bad("config", "{\"dpid\"", "[{\"dpid\"");
    bad("token", "\"token\": null", "\"token\": \"x\"");
    bad("token", "\"token\": null", "\"token\": \"\"");
    bad("token", "\"token\": null", "\"token\": \"has space in it\"");
    bad(
        "pcie",
        "\"pcie\": [{\"snic\": \"snic0\", \"host_port\": 1, \"snic_port\": 100}]",
        "\"pcie\": []");
  }
}
