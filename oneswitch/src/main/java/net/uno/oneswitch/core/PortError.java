package net.uno.oneswitch.core;

/**
 * A refused port-map request (map, unmap, remap, prepare, set-instances): what kind of refusal, the
 * request field it concerns and why. The REST API maps the kind to its status code.
 */
public final class PortError extends Exception {
  private static final long serialVersionUID = 1L;

  /** Why a port request is refused. */
  public enum Kind {
    /** The request itself is wrong: a value out of range, an unknown switch, a PCIe port. */
    INVALID,
    /** The vport it names is not mapped. */
    NOT_FOUND,
    /** It conflicts with the current state: a port mapped elsewhere, a rule it cannot carry. */
    CONFLICT
  }

  private final Kind kind;
  private final String field;

  public PortError(Kind kind, String field, String message) {
    super(message);
    this.kind = kind;
    this.field = field;
  }

  static PortError invalid(String field, String message) {
    return new PortError(Kind.INVALID, field, message);
  }

  static PortError notFound(String field, String message) {
    return new PortError(Kind.NOT_FOUND, field, message);
  }

  static PortError conflict(String field, String message) {
    return new PortError(Kind.CONFLICT, field, message);
  }

  public Kind kind() {
    return kind;
  }

  public String field() {
    return field;
  }

  /** The same refusal, its field under {@code prefix} (an element of a list in the request). */
  PortError under(String prefix) {
    return new PortError(kind, prefix + "." + field, getMessage());
  }
}
