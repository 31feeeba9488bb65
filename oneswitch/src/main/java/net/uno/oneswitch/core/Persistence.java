package net.uno.oneswitch.core;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufUtil;
import io.netty.buffer.Unpooled;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import net.uno.oneswitch.model.VPort;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFMessageReader;

/**
 * The virtual state on disk (state_dir/state.json): port map, and the virtual flows and groups as
 * hex-encoded OpenFlow 1.3 FLOW_ADD / GROUP_ADD messages. Written atomically (write + rename).
 */
public final class Persistence {
  private static final ObjectMapper JSON = new ObjectMapper();
  private static final OFMessageReader<OFMessage> READER = OFFactories.getGenericReader();
  private final Path file;

  /** What was loaded. */
  public record State(List<VPort> ports, List<OFMessage> flows, List<OFMessage> groups) {}

  public Persistence(Path dir) {
    this.file = dir.resolve("state.json");
  }

  public Path file() {
    return file;
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
    ArrayNode ps = root.putArray("ports");
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
      }
    }
    ArrayNode fs = root.putArray("flows");
    flowsHex.forEach(fs::add);
    ArrayNode gs = root.putArray("groups");
    groups.forEach(m -> gs.add(hex(m)));
    Files.createDirectories(file.getParent());
    Path tmp = file.resolveSibling("state.json.tmp");
    Files.write(tmp, JSON.writeValueAsBytes(root));
    Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
  }

  /** Loads the saved state, or null when there is none. Throws on a corrupt file. */
  public State load() throws IOException {
    if (!Files.exists(file)) {
      return null;
    }
    JsonNode root = JSON.readTree(file.toFile());
    List<VPort> ports = new ArrayList<>();
    for (JsonNode n : root.path("ports")) {
      List<VPort.Loc> inst = new ArrayList<>();
      for (JsonNode i : n.path("instances")) {
        inst.add(new VPort.Loc(i.get("switch").asText(), (int) i.get("port").asLong()));
      }
      String sw = n.get("switch").asText();
      int port = (int) n.get("port").asLong();
      if (!inst.isEmpty() && !inst.get(0).equals(new VPort.Loc(sw, port))) {
        throw new IOException("corrupt state: vport " + n.get("vport") + " instances[0] != port");
      }
      ports.add(new VPort((int) n.get("vport").asLong(), sw, port, n.get("name").asText(), inst));
    }
    List<OFMessage> flows = new ArrayList<>();
    for (JsonNode n : root.path("flows")) {
      flows.add(unhex(n.asText()));
    }
    List<OFMessage> groups = new ArrayList<>();
    for (JsonNode n : root.path("groups")) {
      groups.add(unhex(n.asText()));
    }
    return new State(ports, flows, groups);
  }

  static String hex(OFMessage m) {
    ByteBuf b = Unpooled.buffer();
    m.writeTo(b);
    String s = ByteBufUtil.hexDump(b);
    b.release();
    return s;
  }

  private static OFMessage unhex(String s) throws IOException {
    try {
      return READER.readFrom(Unpooled.wrappedBuffer(ByteBufUtil.decodeHexDump(s)));
    } catch (Exception e) {
      throw new IOException("corrupt state entry: " + e.getMessage(), e);
    }
  }
}
