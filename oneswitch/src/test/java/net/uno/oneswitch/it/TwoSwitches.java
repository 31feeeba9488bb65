package net.uno.oneswitch.it;

import static net.uno.oneswitch.it.Wait.waitFor;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import net.uno.oneswitch.Main;
import net.uno.oneswitch.config.Config;
import org.projectfloodlight.openflow.protocol.OFType;

/**
 * The integration tests' shared set-up: OneSwitch on two fake switches, {@code host} (dpid 0xa) and
 * {@code snic0} (0xb) joined by PCIe host:1 / snic0:100, with a state dir of its own; the wire port
 * is vport 1 = snic0:1 and the VMs are vports 2, 3, ... on host ports 100, 101, .... Created with
 * the switches up and OneSwitch not started, so a test can put flows on them first; {@link #close}
 * stops OneSwitch, closes the switches and removes the state dir.
 */
final class TwoSwitches implements AutoCloseable {
  private static final ObjectMapper JSON = new ObjectMapper();

  final FakeSwitch host;
  final FakeSwitch snic;
  final Path dir;
  private final String config;
  private final String configWithoutPorts;
  private final String token;
  private final HttpClient http = HttpClient.newHttpClient();
  private Main.Running os;

  /** What differs between the tests' set-ups; the defaults are the common one. */
  static final class Options {
    private List<Integer> hostPorts = List.of(1, 100, 101);
    private List<Integer> snicPorts = List.of(1, 100, 200);
    private int vms = 1;
    private String wireName = "eth0";
    private String token;
    private String snicExtra = "";
    private String top = "";

    /** The fake switches' ports. */
    Options ports(List<Integer> host, List<Integer> snic) {
      hostPorts = host;
      snicPorts = snic;
      return this;
    }

    /** How many VM vports (2, 3, ... on host ports 100, 101, ...). */
    Options vms(int n) {
      vms = n;
      return this;
    }

    Options wireName(String name) {
      wireName = name;
      return this;
    }

    /** A REST bearer token: OneSwitch asks for it, {@link #call} sends it. */
    Options token(String t) {
      token = t;
      return this;
    }

    /**
     * Top-level JSON members, each followed by a comma, e.g. {@code "controller_idle_ms": 1200, }.
     */
    Options top(String json) {
      top = json;
      return this;
    }

    /** JSON members added to snic0's switch entry, e.g. {@code , "shared": true}. */
    Options snicExtra(String json) {
      snicExtra = json;
      return this;
    }

    TwoSwitches create() throws Exception {
      return new TwoSwitches(this);
    }
  }

  static Options options() {
    return new Options();
  }

  private TwoSwitches(Options o) throws Exception {
    host = new FakeSwitch(0xa, o.hostPorts);
    snic = new FakeSwitch(0xb, o.snicPorts);
    dir = Files.createTempDirectory("oneswitch-it");
    token = o.token;
    String vms =
        IntStream.range(0, o.vms)
            .mapToObj(
                i ->
                    ",\n {\"vport\": %d, \"switch\": \"host\", \"port\": %d, \"name\": \"vm%d\"}"
                        .formatted(2 + i, 100 + i, i))
            .collect(Collectors.joining());
    String head =
            """
        {"dpid": "00000000000000ee", "listen": "ptcp:0:127.0.0.1", "rest": "127.0.0.1:0",
         %s%s"state_dir": "%s",
         "switches": [{"id": "host", "openflow": "tcp:127.0.0.1:%d"},
                      {"id": "snic0", "openflow": "tcp:127.0.0.1:%d"%s}],
         "pcie": [{"snic": "snic0", "host_port": 1, "snic_port": 100}]"""
            .formatted(
                token == null ? "" : "\"token\": \"" + token + "\", ",
                o.top,
                dir,
                host.port(),
                snic.port(),
                o.snicExtra);
    config =
        head
            + ",\n \"ports\": [{\"vport\": 1, \"switch\": \"snic0\", \"port\": 1, \"name\": \"%s\"}%s]}"
                .formatted(o.wireName, vms);
    configWithoutPorts = head + "}";
  }

  /** Starts OneSwitch (again, after a {@code stop}) and waits until every switch is ready. */
  Main.Running start() throws Exception {
    return run(config);
  }

  /** As {@link #start}, with no ports in the config: the port map is what the state dir holds. */
  Main.Running startWithoutPorts() throws Exception {
    return run(configWithoutPorts);
  }

  private Main.Running run(String cfg) throws Exception {
    os = Main.run(Config.parse(cfg));
    waitFor(() -> onCore(() -> os.core().south().values().stream().allMatch(s -> s.isReady())));
    return os;
  }

  Main.Running os() {
    return os;
  }

  /** {@code c} run on OneSwitch's core thread. */
  <T> T onCore(Callable<T> c) {
    try {
      return os.core().exec().submit(c).get(10, TimeUnit.SECONDS);
    } catch (Exception e) {
      throw new RuntimeException(e);
    }
  }

  /** A REST call with the token, if there is one ({@code body} null: none). */
  HttpResponse<String> call(String method, String path, String body) throws Exception {
    return call(method, path, body, true);
  }

  HttpResponse<String> call(String method, String path, String body, boolean auth)
      throws Exception {
    HttpRequest.Builder b =
        HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + os.restPort() + path))
            .method(
                method,
                body == null
                    ? HttpRequest.BodyPublishers.noBody()
                    : HttpRequest.BodyPublishers.ofString(body));
    if (auth && token != null) {
      b.header("Authorization", "Bearer " + token);
    }
    return http.send(b.build(), HttpResponse.BodyHandlers.ofString());
  }

  static JsonNode json(HttpResponse<String> r) throws Exception {
    return JSON.readTree(r.body());
  }

  /** A controller connection that has exchanged HELLOs. */
  OfClient client() throws Exception {
    OfClient c = new OfClient(os.ofPort());
    c.send(FakeSwitch.F.buildHello().setXid(1).build());
    assertNotNull(c.expect(OFType.HELLO, -1, 5000));
    return c;
  }

  @Override
  public void close() throws Exception {
    try {
      if (os != null) {
        os.stop();
      }
    } finally {
      host.close();
      snic.close();
      try (var s = Files.walk(dir)) {
        s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
      }
    }
  }
}
