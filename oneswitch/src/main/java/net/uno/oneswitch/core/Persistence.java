package net.uno.oneswitch.core;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.model.VirtualRule;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFlowAdd;
import org.projectfloodlight.openflow.protocol.OFGroupAdd;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFMessageReader;

/**
 * The virtual state on disk (state_dir/state.json): port map, and the virtual flows and groups as
 * hex-encoded OpenFlow 1.3 FLOW_ADD / GROUP_ADD messages. Written atomically (write + rename).
 *
 * <p>Between two writes of state.json, every change is appended to {@code state.journal} before it
 * is acknowledged (one line per changed rule, group or port map, in one write per change), and the
 * next state.json write empties it. Loading replays the journal onto state.json: a line only states
 * what an entry is now, so replaying a line state.json already holds changes nothing.
 */
public final class Persistence {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final OFMessageReader<OFMessage> READER = OFFactories.getGenericReader();
  private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(Persistence.class);
  private final Path file;
  private final Path journal;
  private FileChannel journalOut;

  /**
   * Journal line kinds: a flow as it is now, a flow removed, a group, a group removed, the ports.
   */
  static final char FLOW = 'F';

  static final char FLOW_GONE = 'D';
  static final char GROUP = 'G';
  static final char GROUP_GONE = 'X';
  static final char PORTS = 'P';

  /** What was loaded. */
  public record State(List<VPort> ports, List<OFMessage> flows, List<OFMessage> groups) {}

  public Persistence(Path dir) {
    this.file = dir.resolve("state.json");
    this.journal = dir.resolve("state.journal");
  }

  public Path file() {
    return file;
  }

  public Path journalFile() {
    return journal;
  }

  /**
   * Appends {@code lines} (each ending in a newline) to the journal in one write: in the kernel
   * when this returns, so a crash or kill of OneSwitch keeps them (not a power loss: no fsync).
   */
  public void append(String lines) throws IOException {
    ByteBuffer b = ByteBuffer.wrap(lines.getBytes(StandardCharsets.UTF_8));
    FileChannel ch = journal();
    while (b.hasRemaining()) {
      ch.write(b);
    }
  }

  private FileChannel journal() throws IOException {
    if (journalOut == null) {
      Files.createDirectories(journal.getParent());
      journalOut =
          FileChannel.open(
              journal,
              StandardOpenOption.CREATE,
              StandardOpenOption.WRITE,
              StandardOpenOption.APPEND);
    }
    return journalOut;
  }

  /** Closes the journal (a stopped OneSwitch; tests start several in one JVM). */
  public void close() {
    try {
      if (journalOut != null) {
        journalOut.close();
      }
    } catch (IOException e) {
      LOG.warn("closing {}: {}", journal, e.toString());
    }
    journalOut = null;
  }

  /** The journal line of the port map {@code ports}. */
  static String portsLine(List<VPort> ports) {
    try {
      return PORTS + " " + JSON.writeValueAsString(portsJson(ports)) + "\n";
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  public void save(List<VPort> ports, List<OFMessage> flows, List<OFMessage> groups)
      throws IOException {
    List<String> hex = new ArrayList<>();
    flows.forEach(m -> hex.add(hex(m)));
    saveHex(ports, hex, groups);
  }

  /** As {@link #save}, with the flows already hex-encoded. */
  public void saveHex(List<VPort> ports, List<String> flowsHex, List<OFMessage> groups)
      throws IOException {
    ObjectNode root = JSON.createObjectNode();
    root.put("version", 1);
    root.set("ports", portsJson(ports));
    ArrayNode fs = root.putArray("flows");
    flowsHex.forEach(fs::add);
    ArrayNode gs = root.putArray("groups");
    groups.forEach(m -> gs.add(hex(m)));
    Files.createDirectories(file.getParent());
    Path tmp = file.resolveSibling("state.json.tmp");
    Files.write(tmp, JSON.writeValueAsBytes(root));
    Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
    journal().truncate(0); // state.json now holds all it said
  }

  private static ArrayNode portsJson(List<VPort> ports) {
    ArrayNode ps = JSON.createArrayNode();
    for (VPort p : ports) {
      ObjectNode n = ps.addObject();
      n.put("vport", Integer.toUnsignedLong(p.vport()));
      n.put("switch", p.sw());
      n.put("port", Integer.toUnsignedLong(p.port()));
      n.put("name", p.name());
      if (p.k() > 1) {
        ArrayNode is = n.putArray("instances");
        for (VPort.Loc l : p.instances()) {
          is.addObject().put("switch", l.sw()).put("port", Integer.toUnsignedLong(l.port()));
        }
        if (!p.evenWeights()) {
          ArrayNode ws = n.putArray("weights");
          p.weights().forEach(ws::add);
        }
      }
    }
    return ps;
  }

  /**
   * Loads the saved state with the journal replayed onto it, or null when there is neither. Throws
   * on a corrupt file or journal line; a last journal line without its newline (a write cut short
   * by a power loss) is left out: it was never acknowledged.
   */
  public State load() throws IOException {
    boolean hasState = Files.exists(file);
    if (!hasState && !Files.exists(journal)) {
      return null;
    }
    List<VPort> ports = new ArrayList<>();
    LinkedHashMap<VirtualRule.Key, OFMessage> flows = new LinkedHashMap<>();
    LinkedHashMap<Integer, OFMessage> groups = new LinkedHashMap<>();
    if (hasState) {
      JsonNode root = JSON.readTree(file.toFile());
      ports = parsePorts(root.path("ports"));
      for (JsonNode n : root.path("flows")) {
        OFMessage f = unhex(n.asText());
        flows.put(key(f), f);
      }
      for (JsonNode n : root.path("groups")) {
        OFMessage g = unhex(n.asText());
        groups.put(groupId(g), g);
      }
    }
    if (Files.exists(journal)) {
      ports = replay(Files.readString(journal, StandardCharsets.UTF_8), ports, flows, groups);
    }
    return new State(ports, new ArrayList<>(flows.values()), new ArrayList<>(groups.values()));
  }

  /** Applies the journal {@code text} onto the maps; returns the port map it leaves. */
  private List<VPort> replay(
      String text,
      List<VPort> ports,
      LinkedHashMap<VirtualRule.Key, OFMessage> flows,
      LinkedHashMap<Integer, OFMessage> groups)
      throws IOException {
    String[] lines = text.split("\n", -1);
    int complete = lines.length - 1; // the part after the last newline is empty or cut short
    if (!text.isEmpty() && !text.endsWith("\n")) {
      LOG.warn("{}: last line incomplete (a cut write), left out", journal);
    }
    for (int i = 0; i < complete; i++) {
      String line = lines[i];
      if (line.length() < 2 || line.charAt(1) != ' ') {
        throw new IOException("corrupt journal " + journal + " line " + (i + 1));
      }
      try {
        ports = replayLine(line, ports, flows, groups);
      } catch (IOException e) {
        throw new IOException(
            "corrupt journal " + journal + " line " + (i + 1) + ": " + e.getMessage(), e);
      }
    }
    return ports;
  }

  private static List<VPort> replayLine(
      String line,
      List<VPort> ports,
      LinkedHashMap<VirtualRule.Key, OFMessage> flows,
      LinkedHashMap<Integer, OFMessage> groups)
      throws IOException {
    String body = line.substring(2);
    switch (line.charAt(0)) {
      case FLOW -> {
        OFMessage f = unhex(body);
        VirtualRule.Key k = key(f);
        flows.remove(k); // an ADD's entry goes last, as in the virtual switch
        flows.put(k, f);
      }
      case FLOW_GONE -> flows.remove(key(unhex(body)));
      case GROUP -> {
        OFMessage g = unhex(body);
        groups.put(groupId(g), g);
      }
      case GROUP_GONE -> groups.remove(parseGroupId(body));
      case PORTS -> ports = parsePorts(JSON.readTree(body));
      default -> throw new IOException("unknown kind " + line.charAt(0));
    }
    return ports;
  }

  private static int parseGroupId(String body) throws IOException {
    try {
      return Integer.parseUnsignedInt(body);
    } catch (NumberFormatException e) {
      throw new IOException("bad group id " + body, e);
    }
  }

  private static VirtualRule.Key key(OFMessage m) throws IOException {
    if (!(m instanceof OFFlowAdd f)) {
      throw new IOException("corrupt state entry: not a FLOW_ADD: " + m.getType());
    }
    return VirtualRule.of(f, f.getTableId().getValue(), 0).key();
  }

  private static int groupId(OFMessage m) throws IOException {
    if (!(m instanceof OFGroupAdd g)) {
      throw new IOException("corrupt state entry: not a GROUP_ADD: " + m.getType());
    }
    return g.getGroup().getGroupNumber();
  }

  private static List<VPort> parsePorts(JsonNode arr) throws IOException {
    List<VPort> ports = new ArrayList<>();
    for (JsonNode n : arr) {
      List<VPort.Loc> inst = new ArrayList<>();
      for (JsonNode i : n.path("instances")) {
        inst.add(new VPort.Loc(i.get("switch").asText(), (int) i.get("port").asLong()));
      }
      String sw = n.get("switch").asText();
      int port = (int) n.get("port").asLong();
      if (!inst.isEmpty() && !inst.get(0).equals(new VPort.Loc(sw, port))) {
        throw new IOException("corrupt state: vport " + n.get("vport") + " instances[0] != port");
      }
      List<Integer> weights = new ArrayList<>();
      for (JsonNode w : n.path("weights")) {
        weights.add(w.asInt());
      }
      try {
        ports.add(
            new VPort(
                (int) n.get("vport").asLong(), sw, port, n.get("name").asText(), inst, weights));
      } catch (IllegalArgumentException e) {
        throw new IOException("corrupt state: vport " + n.get("vport") + ": " + e.getMessage());
      }
    }
    return ports;
  }

  static String hex(OFMessage m) {
    ByteBuf b = Unpooled.buffer();
    m.writeTo(b);
    String s = ByteBufUtil.hexDump(b);
    b.release();
    return s;
  }

  private static OFMessage unhex(String s) throws IOException {
    OFMessage m;
    try {
      m = READER.readFrom(Unpooled.wrappedBuffer(ByteBufUtil.decodeHexDump(s)));
    } catch (Exception e) {
      throw new IOException("corrupt state entry: " + e.getMessage(), e);
    }
    if (m == null) {
      throw new IOException("corrupt state entry: a message cut short");
    }
    return m;
  }
}
