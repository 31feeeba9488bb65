package net.uno.oneswitch.core;

/** A refused port-map operation: HTTP status, message and the offending field. */
public final class PortOpError extends Exception {
  private static final long serialVersionUID = 1L;
  private final int status;
  private final String field;

  public PortOpError(int status, String field, String message) {
    super(message);
    this.status = status;
    this.field = field;
  }

  public int status() {
    return status;
  }

  public String field() {
    return field;
  }
}
