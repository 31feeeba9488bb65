package net.uno.oneswitch.config;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

/** Where OneSwitch reaches a physical switch's OpenFlow listener (config {@code openflow}). */
public sealed interface SwitchTarget {
  /** Longest socket path Linux takes (sun_path is 108 bytes with its terminating NUL). */
  int MAX_UNIX_PATH_BYTES = 107;

  /** {@code tcp:HOST:PORT}: a switch elsewhere, e.g. a BlueField's OVS. */
  record Tcp(Endpoint endpoint) implements SwitchTarget {
    @Override
    public String toString() {
      return "tcp:" + endpoint;
    }
  }

  /**
   * {@code unix:PATH}: a local bridge's passive listener (a filesystem path, reachable from any
   * network namespace): no TCP stack and no relay process between OneSwitch and the switch.
   */
  record Unix(Path path) implements SwitchTarget {
    @Override
    public String toString() {
      return "unix:" + path;
    }
  }

  /** Parses {@code tcp:HOST:PORT} or {@code unix:/ABSOLUTE/PATH}; errors name {@code field}. */
  static SwitchTarget parse(String field, String s) throws ConfigError {
    if (s == null || !s.startsWith("unix:")) {
      if (s != null && s.startsWith("tcp:")) {
        return new Tcp(Endpoint.parseActive(field, s));
      }
      throw new ConfigError(field, "expected tcp:HOST:PORT or unix:/ABSOLUTE/PATH, got " + s);
    }
    String p = s.substring("unix:".length());
    if (!p.startsWith("/")) {
      throw new ConfigError(field, "unix: needs an absolute path, got " + s);
    }
    if (p.indexOf('\0') >= 0) {
      throw new ConfigError(field, "unix: path contains a NUL character");
    }
    if (p.getBytes(StandardCharsets.UTF_8).length > MAX_UNIX_PATH_BYTES) {
      throw new ConfigError(
          field, "unix: path longer than " + MAX_UNIX_PATH_BYTES + " bytes (a socket's limit)");
    }
    return new Unix(Path.of(p));
  }
}
