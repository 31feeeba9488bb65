package net.uno.oneswitch.config;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import net.uno.oneswitch.translate.Carrier;

/** The validated OneSwitch configuration (see oneswitch/README.md for the JSON schema). */
public record Config(
    long dpid,
    Endpoint listen,
    List<Endpoint> controllers,
    Endpoint rest,
    String token,
    Path stateDir,
    List<SwitchCfg> switches,
    List<PcieCfg> pcie,
    List<PortCfg> ports,
    int physicalTables,
    Carrier.Mode carrier,
    int wireVlans,
    long echoIntervalMs,
    long echoTimeoutMs,
    long controllerIdleMs) {
  /** A bearer token: what `uno up` accepts too (emulated_host/config.py). */
  private static final java.util.regex.Pattern TOKEN =
      java.util.regex.Pattern.compile("[A-Za-z0-9._~+/=-]{8,256}");

  /**
   * One physical switch OneSwitch connects to as its controller. {@code shared}: the bridge belongs
   * to an operator (a BlueField DPU's OVS): OneSwitch changes only what it owns there (its marked
   * flows, its groups) and leaves every other flow, group and the switch's fragment handling as
   * they are (oneswitch/README.md "Shared switches").
   */
  public record SwitchCfg(String id, SwitchTarget openflow, boolean shared, Integer maxRules) {
    /** A switch of OneSwitch's own (not shared). */
    public SwitchCfg(String id, SwitchTarget openflow) {
      this(id, openflow, false, null);
    }

    /** A switch without a rule limit. */
    public SwitchCfg(String id, SwitchTarget openflow, boolean shared) {
      this(id, openflow, shared, null);
    }
  }

  /** The PCIe link of one sNIC: port on the host switch and port on the sNIC switch. */
  public record PcieCfg(String snic, int hostPort, int snicPort) {}

  /** An initial port map entry. */
  public record PortCfg(int vport, String sw, int port, String name) {}

  private static final Set<String> KEYS =
      Set.of(
          "dpid",
          "listen",
          "controllers",
          "rest",
          "token",
          "state_dir",
          "switches",
          "pcie",
          "ports",
          "physical_tables",
          "carrier",
          "wire_vlans",
          "echo_interval_ms",
          "echo_timeout_ms",
          "controller_idle_ms");

  /**
   * Default {@code controller_idle_ms}: a controller silent this long is disconnected, unless
   * OneSwitch owes it replies (a barrier or bundle commit still being applied: a waiting controller
   * such as ovs-ofctl answers no echo meanwhile).
   */
  public static final int CONTROLLER_IDLE_MS = 30_000;

  /** Default {@code echo_interval_ms}: an echo after this long without a message from a switch. */
  public static final int ECHO_INTERVAL_MS = 1000;

  /** Default {@code echo_timeout_ms}: a switch silent this long is declared down. */
  public static final int ECHO_TIMEOUT_MS = 3000;

  /** Longest {@code echo_timeout_ms} (the old fixed value was 15 s). */
  public static final int MAX_ECHO_TIMEOUT_MS = 600_000;

  public static Config load(Path file) throws ConfigError {
    String text;
    try {
      text = Files.readString(file);
    } catch (Exception e) {
      throw new ConfigError("config", "cannot read " + file + ": " + e.getMessage());
    }
    return parse(text);
  }

  public static Config parse(String json) throws ConfigError {
    JsonNode root;
    try {
      root = new ObjectMapper().readTree(json);
    } catch (JsonProcessingException e) {
      throw new ConfigError("config", "invalid JSON: " + e.getOriginalMessage().replace('\n', ' '));
    }
    if (root == null || !root.isObject()) {
      throw new ConfigError("config", "must be a JSON object");
    }
    for (Iterator<String> it = root.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!KEYS.contains(k)) {
        throw new ConfigError(k, "unknown key");
      }
    }
    String dpidS = str(root, "dpid", true);
    if (!dpidS.matches("[0-9a-fA-F]{16}")) {
      throw new ConfigError("dpid", "expected 16 hex digits, got " + dpidS);
    }
    long dpid = Long.parseUnsignedLong(dpidS, 16);
    Endpoint listen = Endpoint.parsePassive("listen", str(root, "listen", true));
    List<Endpoint> controllers = new ArrayList<>();
    JsonNode cs = root.get("controllers");
    if (cs != null && !cs.isNull()) {
      if (!cs.isArray()) {
        throw new ConfigError("controllers", "must be a list");
      }
      for (int i = 0; i < cs.size(); i++) {
        String f = "controllers[" + i + "]";
        if (!cs.get(i).isTextual()) {
          throw new ConfigError(f, "must be a string");
        }
        controllers.add(Endpoint.parseActive(f, cs.get(i).asText()));
      }
    }
    String restS = str(root, "rest", false);
    Endpoint rest = Endpoint.parseHostPort("rest", restS == null ? "127.0.0.1:0" : restS);
    String token = str(root, "token", false);
    if (token != null && !TOKEN.matcher(token).matches()) {
      throw new ConfigError(
          "token",
          "must be 8-256 characters [A-Za-z0-9._~+/=-] (a bearer token; null for none), got "
              + token.length()
              + " characters");
    }
    String sd = str(root, "state_dir", true);
    if (sd.isEmpty()) {
      throw new ConfigError("state_dir", "must not be empty");
    }
    int physTables = optInt(root, "physical_tables", 254, 3, 255, "must be an integer 3..255");
    String cm = str(root, "carrier", false);
    Carrier.Mode carrier = Carrier.Mode.AUTO;
    if (cm != null) {
      carrier =
          Carrier.Mode.parse(cm)
              .orElseThrow(() -> new ConfigError("carrier", "must be vlan, mpls or auto"));
    }
    int wireVlans =
        optInt(
            root,
            "wire_vlans",
            1,
            1,
            2,
            "must be 1 or 2 (the most VLAN headers a frame may carry when it comes in), got "
                + root.get("wire_vlans"));
    int echoInterval =
        optInt(
            root,
            "echo_interval_ms",
            ECHO_INTERVAL_MS,
            10,
            MAX_ECHO_TIMEOUT_MS - 1,
            "must be an integer 10.."
                + (MAX_ECHO_TIMEOUT_MS - 1)
                + ", got "
                + root.get("echo_interval_ms"));
    JsonNode et = root.get("echo_timeout_ms");
    int echoTimeout =
        optInt(
            root,
            "echo_timeout_ms",
            Math.max(ECHO_TIMEOUT_MS, 3 * echoInterval),
            20,
            MAX_ECHO_TIMEOUT_MS,
            "must be an integer 20.." + MAX_ECHO_TIMEOUT_MS + ", got " + et);
    if (echoTimeout <= echoInterval) {
      throw new ConfigError(
          "echo_timeout_ms",
          "must be above echo_interval_ms ("
              + echoInterval
              + "): a live switch answers an echo within the timeout, got "
              + echoTimeout);
    }
    int controllerIdle =
        optInt(
            root,
            "controller_idle_ms",
            CONTROLLER_IDLE_MS,
            1000,
            MAX_ECHO_TIMEOUT_MS,
            "must be an integer 1000.."
                + MAX_ECHO_TIMEOUT_MS
                + ", got "
                + root.get("controller_idle_ms"));
    List<SwitchCfg> switches = new ArrayList<>();
    JsonNode sw = root.get("switches");
    if (sw == null || !sw.isArray() || sw.isEmpty()) {
      throw new ConfigError("switches", "must be a non-empty list");
    }
    Set<String> ids = new HashSet<>();
    for (int i = 0; i < sw.size(); i++) {
      String f = "switches[" + i + "]";
      JsonNode n = sw.get(i);
      if (!n.isObject()) {
        throw new ConfigError(f, "must be an object");
      }
      onlyKeys(n, f, Set.of("id", "openflow", "shared", "max_rules"));
      String id = str(n, f + ".id", "id", true);
      if (!id.matches("[A-Za-z0-9_.-]{1,32}")) {
        throw new ConfigError(f + ".id", "must be 1-32 chars [A-Za-z0-9_.-], got " + id);
      }
      if (!ids.add(id)) {
        throw new ConfigError(f + ".id", "duplicate switch id " + id);
      }
      SwitchTarget target =
          SwitchTarget.parse(f + ".openflow", str(n, f + ".openflow", "openflow", true));
      Integer maxRules = null;
      JsonNode mr = n.get("max_rules");
      if (mr != null && !mr.isNull()) {
        if (!mr.isInt() || mr.asInt() < 1) {
          throw new ConfigError(f + ".max_rules", "must be an integer 1..2147483647, got " + mr);
        }
        maxRules = mr.asInt();
      }
      switches.add(new SwitchCfg(id, target, optBool(n, f + ".shared", "shared", false), maxRules));
    }
    List<PcieCfg> pcie = new ArrayList<>();
    JsonNode pc = root.get("pcie");
    Set<String> snics = new HashSet<>();
    if (pc != null && !pc.isNull()) {
      if (!pc.isArray()) {
        throw new ConfigError("pcie", "must be a list");
      }
      for (int i = 0; i < pc.size(); i++) {
        String f = "pcie[" + i + "]";
        JsonNode n = pc.get(i);
        if (!n.isObject()) {
          throw new ConfigError(f, "must be an object");
        }
        onlyKeys(n, f, Set.of("snic", "host_port", "snic_port"));
        String snic = str(n, f + ".snic", "snic", true);
        if (!ids.contains(snic)) {
          throw new ConfigError(f + ".snic", "unknown switch " + snic);
        }
        if (!snics.add(snic)) {
          throw new ConfigError(f + ".snic", "duplicate PCIe link for " + snic);
        }
        pcie.add(
            new PcieCfg(
                snic,
                portNum(n, f + ".host_port", "host_port"),
                portNum(n, f + ".snic_port", "snic_port")));
      }
    }
    if (switches.size() - snics.size() != 1) {
      throw new ConfigError(
          "pcie", "every switch but exactly one (the host switch) must have a PCIe link");
    }
    String hostId =
        switches.stream().map(SwitchCfg::id).filter(s -> !snics.contains(s)).findFirst().get();
    Set<Integer> hostPcie = new HashSet<>();
    for (int i = 0; i < pcie.size(); i++) {
      if (!hostPcie.add(pcie.get(i).hostPort())) {
        throw new ConfigError("pcie[" + i + "].host_port", "host port used twice");
      }
    }
    List<PortCfg> ports = new ArrayList<>();
    JsonNode ps = root.get("ports");
    if (ps != null && !ps.isNull()) {
      if (!ps.isArray()) {
        throw new ConfigError("ports", "must be a list");
      }
      Set<Integer> vports = new HashSet<>();
      Set<String> phys = new HashSet<>();
      for (int i = 0; i < ps.size(); i++) {
        String f = "ports[" + i + "]";
        JsonNode n = ps.get(i);
        if (!n.isObject()) {
          throw new ConfigError(f, "must be an object");
        }
        onlyKeys(n, f, Set.of("vport", "switch", "port", "name"));
        int vport = portNum(n, f + ".vport", "vport");
        String s = str(n, f + ".switch", "switch", true);
        if (!ids.contains(s)) {
          throw new ConfigError(f + ".switch", "unknown switch " + s);
        }
        int port = portNum(n, f + ".port", "port");
        for (PcieCfg p : pcie) {
          if ((s.equals(p.snic()) && port == p.snicPort())
              || (s.equals(hostId) && port == p.hostPort())) {
            throw new ConfigError(f + ".port", "is a PCIe link port");
          }
        }
        if (!vports.add(vport)) {
          throw new ConfigError(f + ".vport", "duplicate vport " + vport);
        }
        if (!phys.add(s + ":" + port)) {
          throw new ConfigError(f + ".port", "physical port mapped twice");
        }
        String name = str(n, f + ".name", "name", false);
        ports.add(new PortCfg(vport, s, port, name == null ? "v" + vport : name));
      }
    }
    return new Config(
        dpid,
        listen,
        List.copyOf(controllers),
        rest,
        token,
        Path.of(sd),
        List.copyOf(switches),
        List.copyOf(pcie),
        List.copyOf(ports),
        physTables,
        carrier,
        wireVlans,
        echoInterval,
        echoTimeout,
        controllerIdle);
  }

  private static void onlyKeys(JsonNode n, String f, Set<String> keys) throws ConfigError {
    for (Iterator<String> it = n.fieldNames(); it.hasNext(); ) {
      String k = it.next();
      if (!keys.contains(k)) {
        throw new ConfigError(f + "." + k, "unknown key");
      }
    }
  }

  /**
   * Optional integer {@code key} of {@code n} in {@code lo..hi}: {@code dflt} if absent or null.
   */
  private static int optInt(JsonNode n, String key, int dflt, int lo, int hi, String error)
      throws ConfigError {
    JsonNode v = n.get(key);
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (!v.isInt() || v.asInt() < lo || v.asInt() > hi) {
      throw new ConfigError(key, error);
    }
    return v.asInt();
  }

  /** Optional boolean {@code key} of {@code n}: {@code dflt} if absent or null. */
  private static boolean optBool(JsonNode n, String field, String key, boolean dflt)
      throws ConfigError {
    JsonNode v = n.get(key);
    if (v == null || v.isNull()) {
      return dflt;
    }
    if (!v.isBoolean()) {
      throw new ConfigError(field, "must be true or false, got " + v);
    }
    return v.booleanValue();
  }

  private static String str(JsonNode n, String key, boolean required) throws ConfigError {
    return str(n, key, key, required);
  }

  private static String str(JsonNode n, String field, String key, boolean required)
      throws ConfigError {
    JsonNode v = n.get(key);
    if (v == null || v.isNull()) {
      if (required) {
        throw new ConfigError(field, "is required");
      }
      return null;
    }
    if (!v.isTextual()) {
      throw new ConfigError(field, "must be a string");
    }
    return v.asText();
  }

  private static int portNum(JsonNode n, String field, String key) throws ConfigError {
    JsonNode v = n.get(key);
    if (v == null || v.isNull()) {
      throw new ConfigError(field, "is required");
    }
    if (!v.isIntegralNumber() || v.asLong() < 1 || v.asLong() > 0xffffff00L) {
      throw new ConfigError(field, "must be an integer 1..4294967040");
    }
    return (int) v.asLong();
  }

  /** The rule limit of each switch that has one (config {@code max_rules}). */
  public Map<String, Integer> maxRules() {
    Map<String, Integer> out = new java.util.LinkedHashMap<>();
    switches.forEach(
        s -> {
          if (s.maxRules() != null) {
            out.put(s.id(), s.maxRules());
          }
        });
    return out;
  }

  /** The ids of the shared switches (config {@code shared: true}). */
  public Set<String> sharedSwitches() {
    Set<String> out = new HashSet<>();
    switches.forEach(
        s -> {
          if (s.shared()) {
            out.add(s.id());
          }
        });
    return out;
  }

  /** The id of the host switch: the one switch without a PCIe link entry. */
  public String hostSwitch() {
    Set<String> snics = new HashSet<>();
    pcie.forEach(p -> snics.add(p.snic()));
    return switches.stream().map(SwitchCfg::id).filter(s -> !snics.contains(s)).findFirst().get();
  }
}
