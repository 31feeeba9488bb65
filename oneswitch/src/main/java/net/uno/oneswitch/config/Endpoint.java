package net.uno.oneswitch.config;

/** A TCP endpoint: host and port (port 0 = any free port for listeners). */
public record Endpoint(String host, int port) {
  /** Parses "tcp:HOST:PORT". */
  public static Endpoint parseActive(String field, String s) throws ConfigError {
    String[] p = s == null ? new String[0] : s.split(":");
    if (p.length != 3 || !p[0].equals("tcp") || p[1].isEmpty()) {
      throw new ConfigError(field, "expected tcp:HOST:PORT, got " + s);
    }
    return new Endpoint(p[1], port(field, p[2], false));
  }

  /** Parses "ptcp:PORT[:HOST]" (HOST defaults to 127.0.0.1). */
  public static Endpoint parsePassive(String field, String s) throws ConfigError {
    String[] p = s == null ? new String[0] : s.split(":");
    if (p.length < 2 || p.length > 3 || !p[0].equals("ptcp")) {
      throw new ConfigError(field, "expected ptcp:PORT[:HOST], got " + s);
    }
    String host = p.length == 3 ? p[2] : "127.0.0.1";
    if (host.isEmpty()) {
      throw new ConfigError(field, "empty host in " + s);
    }
    return new Endpoint(host, port(field, p[1], true));
  }

  /** Parses "HOST:PORT" (port 0 allowed). */
  public static Endpoint parseHostPort(String field, String s) throws ConfigError {
    int i = s == null ? -1 : s.lastIndexOf(':');
    if (i <= 0) {
      throw new ConfigError(field, "expected HOST:PORT, got " + s);
    }
    return new Endpoint(s.substring(0, i), port(field, s.substring(i + 1), true));
  }

  private static int port(String field, String s, boolean zeroOk) throws ConfigError {
    int v;
    try {
      v = Integer.parseInt(s);
    } catch (NumberFormatException e) {
      throw new ConfigError(field, "port is not a number: " + s);
    }
    if (v < (zeroOk ? 0 : 1) || v > 65535) {
      throw new ConfigError(field, "port out of range: " + s);
    }
    return v;
  }

  @Override
  public String toString() {
    return host + ":" + port;
  }
}
