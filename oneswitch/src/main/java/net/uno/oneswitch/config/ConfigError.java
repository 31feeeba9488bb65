package net.uno.oneswitch.config;

/** A configuration problem, naming the offending field. */
public final class ConfigError extends Exception {
  private static final long serialVersionUID = 1L;
  private final String field;

  public ConfigError(String field, String message) {
    super(field + ": " + message);
    this.field = field;
  }

  public String field() {
    return field;
  }
}
