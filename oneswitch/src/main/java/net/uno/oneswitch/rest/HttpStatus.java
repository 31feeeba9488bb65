package net.uno.oneswitch.rest;

import net.uno.oneswitch.core.PortChange;
import net.uno.oneswitch.core.PortError;

/**
 * The REST API's status codes for the core's port-map results (docs/rest.md): a refusal's kind (400
 * invalid, 404 not mapped, 409 conflict) and a change's outcome (201 a vport mapped anew, 200
 * anything else).
 */
public final class HttpStatus {
  private HttpStatus() {}

  public static int of(PortError.Kind kind) {
    return switch (kind) {
      case INVALID -> 400;
      case NOT_FOUND -> 404;
      case CONFLICT -> 409;
    };
  }

  public static int of(PortError e) {
    return of(e.kind());
  }

  public static int of(PortChange pc) {
    return pc.created() ? 201 : 200;
  }
}
