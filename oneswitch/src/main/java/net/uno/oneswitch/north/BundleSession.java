package net.uno.oneswitch.north;

import io.netty.buffer.Unpooled;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import net.uno.oneswitch.codec.OnfBundle;
import net.uno.oneswitch.codec.OnfBundle.CtrlType;
import net.uno.oneswitch.codec.OnfBundle.Failed;
import net.uno.oneswitch.core.Bundles;
import net.uno.oneswitch.core.OneSwitchCore;
import net.uno.oneswitch.core.Origin;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One controller connection's bundles (the ONF bundle extension of OpenFlow 1.3, {@link
 * OnfBundle}): open, add, close, commit, discard. Messages are checked for form when added and
 * applied all or nothing at commit ({@link Bundles}); the commit is answered once every switch
 * confirmed the changes (as a barrier). A bundle lives until its commit or discard, or the
 * connection's end. Core thread only.
 */
final class BundleSession {
  private static final Logger LOG = LoggerFactory.getLogger(BundleSession.class);

  /** Open bundles per connection, and messages per bundle, at most. */
  static final int MAX_BUNDLES = 64;

  static final int MAX_MESSAGES = 1 << 20;

  private static final int KNOWN_FLAGS = OnfBundle.ATOMIC | OnfBundle.ORDERED;

  private static final class Open {
    final int flags;
    final List<OFMessage> msgs = new ArrayList<>();
    final List<byte[]> heads = new ArrayList<>();
    boolean closed;

    Open(int flags) {
      this.flags = flags;
    }
  }

  private final OneSwitchCore core;
  private final NorthHandler conn;
  private final Map<Long, Open> open = new HashMap<>();

  BundleSession(OneSwitchCore core, NorthHandler conn) {
    this.core = core;
    this.conn = conn;
  }

  /** Handles bundle message {@code m} whose first bytes are {@code head}. */
  void handle(OnfBundle.Msg m, byte[] head) {
    try {
      if (m instanceof OnfBundle.Add a) {
        add(a);
      } else {
        control((OnfBundle.Control) m, head);
      }
    } catch (BundleError e) {
      LOG.info(
          "controller {}: bundle {} refused: {} ({})", conn.name(), m.bundleId(), e.code, e.why);
      core.metrics().translationErrors.incrementAndGet();
      conn.sendOrdered(OnfBundle.error(m.xid(), e.code, head));
    }
  }

  private static final class BundleError extends Exception {
    private static final long serialVersionUID = 1L;
    final transient Failed code;
    final String why;

    BundleError(Failed code, String why) {
      super(why, null, false, false);
      this.code = code;
      this.why = why;
    }
  }

  private Open existing(long id) throws BundleError {
    Open b = open.get(id);
    if (b == null) {
      throw new BundleError(Failed.BAD_ID, "no open bundle " + id);
    }
    return b;
  }

  private static void checkFlags(int flags) throws BundleError {
    if ((flags & ~KNOWN_FLAGS) != 0) {
      throw new BundleError(Failed.BAD_FLAGS, "unknown flags 0x" + Integer.toHexString(flags));
    }
  }

  private Open create(long id, int flags) throws BundleError {
    checkFlags(flags);
    if (open.size() >= MAX_BUNDLES) {
      throw new BundleError(Failed.OUT_OF_BUNDLES, MAX_BUNDLES + " bundles open");
    }
    Open b = new Open(flags);
    open.put(id, b);
    return b;
  }

  private void add(OnfBundle.Add a) throws BundleError {
    OFMessage inner;
    try {
      inner = OFFactories.getGenericReader().readFrom(Unpooled.wrappedBuffer(a.inner()));
    } catch (Exception e) {
      throw new BundleError(Failed.MSG_BAD_LEN, "embedded message does not decode: " + e);
    }
    if (inner == null || a.inner()[0] != 4) {
      throw new BundleError(Failed.MSG_BAD_LEN, "embedded message is not OpenFlow 1.3");
    }
    if (inner.getXid() != a.xid()) {
      throw new BundleError(
          Failed.MSG_BAD_XID, "embedded xid " + inner.getXid() + " != " + a.xid());
    }
    if (!Bundles.supported(inner)) {
      throw new BundleError(
          Failed.MSG_UNSUP, inner.getType() + " in a bundle (flow-mods and group add/modify only)");
    }
    Open b = open.get(a.bundleId());
    if (b == null) {
      b = create(a.bundleId(), a.flags()); // an add opens the bundle implicitly (OF1.4 7.3.9.4)
    }
    if (b.closed) {
      throw new BundleError(Failed.BUNDLE_CLOSED, "bundle " + a.bundleId() + " is closed");
    }
    if (a.flags() != b.flags) {
      throw new BundleError(Failed.BAD_FLAGS, "flags differ from the bundle's");
    }
    if (b.msgs.size() >= MAX_MESSAGES) {
      throw new BundleError(Failed.MSG_TOO_MANY, MAX_MESSAGES + " messages");
    }
    b.msgs.add(inner);
    b.heads.add(java.util.Arrays.copyOf(a.inner(), Math.min(64, a.inner().length)));
  }

  private void control(OnfBundle.Control c, byte[] head) throws BundleError {
    long id = c.bundleId();
    switch (c.type()) {
      case OPEN_REQUEST -> {
        if (open.containsKey(id)) {
          throw new BundleError(Failed.BUNDLE_EXIST, "bundle " + id + " is open");
        }
        create(id, c.flags());
        reply(c, CtrlType.OPEN_REPLY);
      }
      case CLOSE_REQUEST -> {
        Open b = existing(id);
        if (b.closed) {
          throw new BundleError(Failed.BUNDLE_CLOSED, "bundle " + id + " is closed");
        }
        if (c.flags() != b.flags) {
          throw new BundleError(Failed.BAD_FLAGS, "flags differ from the bundle's");
        }
        b.closed = true;
        reply(c, CtrlType.CLOSE_REPLY);
      }
      case DISCARD_REQUEST -> {
        existing(id);
        open.remove(id);
        reply(c, CtrlType.DISCARD_REPLY);
      }
      case COMMIT_REQUEST -> commit(c, head);
      default -> throw new BundleError(Failed.BAD_TYPE, "control type " + c.type());
    }
  }

  private void reply(OnfBundle.Control c, CtrlType type) {
    conn.sendOrdered(OnfBundle.controlReply(c.xid(), c.bundleId(), type, c.flags()));
  }

  private void commit(OnfBundle.Control c, byte[] head) throws BundleError {
    Open b = existing(c.bundleId());
    open.remove(c.bundleId()); // committed or failed, the bundle is gone (as on OVS)
    if (c.flags() != b.flags) {
      throw new BundleError(Failed.BAD_FLAGS, "flags differ from the bundle's");
    }
    if (conn.isSlave()) {
      core.metrics().translationErrors.incrementAndGet();
      conn.send(
          net.uno.oneswitch.translate.OfError.build(
              OneSwitchCore.F, OFBadRequestCode.IS_SLAVE, c.xid(), head));
      return;
    }
    CompletableFuture<Void> sent;
    try {
      sent = core.bundles().commit(b.msgs, new Origin(conn, c.xid(), head));
    } catch (Bundles.Refused r) {
      OFMessage m = b.msgs.get(r.index());
      LOG.info(
          "controller {}: bundle {} message {} refused: {} ({}); nothing applied",
          conn.name(),
          c.bundleId(),
          r.index(),
          r.error().typeAndCode(),
          r.getMessage());
      conn.send(r.error().toMessage(OneSwitchCore.F, m.getXid(), b.heads.get(r.index())));
      throw new BundleError(Failed.MSG_FAILED, "message " + r.index() + ": " + r.getMessage());
    }
    byte[] ok = OnfBundle.controlReply(c.xid(), c.bundleId(), CtrlType.COMMIT_REPLY, c.flags());
    conn.sendOrdered(sent.thenCompose(x -> core.barrierAll()).thenApply(x -> ok));
  }
}
