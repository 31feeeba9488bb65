package net.uno.oneswitch.translate;

import org.projectfloodlight.openflow.protocol.OFBadActionCode;
import org.projectfloodlight.openflow.protocol.OFBadInstructionCode;
import org.projectfloodlight.openflow.protocol.OFBadMatchCode;
import org.projectfloodlight.openflow.protocol.OFBadRequestCode;
import org.projectfloodlight.openflow.protocol.OFErrorMsg;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFFlowModFailedCode;
import org.projectfloodlight.openflow.protocol.OFGroupModFailedCode;
import org.projectfloodlight.openflow.protocol.OFHelloFailedCode;
import org.projectfloodlight.openflow.protocol.OFPortModFailedCode;
import org.projectfloodlight.openflow.protocol.errormsg.OFBadActionErrorMsg;
import org.projectfloodlight.openflow.protocol.errormsg.OFBadInstructionErrorMsg;
import org.projectfloodlight.openflow.protocol.errormsg.OFBadMatchErrorMsg;
import org.projectfloodlight.openflow.protocol.errormsg.OFBadRequestErrorMsg;
import org.projectfloodlight.openflow.protocol.errormsg.OFFlowModFailedErrorMsg;
import org.projectfloodlight.openflow.protocol.errormsg.OFGroupModFailedErrorMsg;
import org.projectfloodlight.openflow.types.OFErrorCauseData;

/** An OpenFlow error (type + code) with a human-readable reason, raised by translation/core. */
public final class OfError extends Exception {
  private static final long serialVersionUID = 1L;
  private final transient Enum<?> code;

  public OfError(Enum<?> code, String reason) {
    super(reason);
    this.code = code;
  }

  public Enum<?> code() {
    return code;
  }

  /** "BAD_ACTION/BAD_OUT_PORT" style name, for logs and tests. */
  public String typeAndCode() {
    String t = code.getClass().getSimpleName().replace("OF", "").replace("Code", "");
    return t + "/" + code.name();
  }

  /** Builds the OFPT_ERROR for request bytes {@code data} with request xid. */
  public OFErrorMsg toMessage(OFFactory f, long xid, byte[] data) {
    return build(f, code, xid, data);
  }

  /**
   * The type/code of a physical switch's error, to pass on to the controller whose message caused
   * it; BAD_REQUEST/EPERM for an error type a flow-mod or group-mod cannot cause.
   */
  public static Enum<?> codeOf(OFErrorMsg e) {
    if (e instanceof OFBadActionErrorMsg m) {
      return m.getCode();
    } else if (e instanceof OFBadInstructionErrorMsg m) {
      return m.getCode();
    } else if (e instanceof OFBadMatchErrorMsg m) {
      return m.getCode();
    } else if (e instanceof OFBadRequestErrorMsg m) {
      return m.getCode();
    } else if (e instanceof OFFlowModFailedErrorMsg m) {
      return m.getCode();
    } else if (e instanceof OFGroupModFailedErrorMsg m) {
      return m.getCode();
    }
    return OFBadRequestCode.EPERM;
  }

  public static OFErrorMsg build(OFFactory f, Enum<?> code, long xid, byte[] data) {
    byte[] d = data == null ? new byte[0] : data;
    if (d.length > 64) {
      d = java.util.Arrays.copyOf(d, 64);
    }
    OFErrorCauseData cause = OFErrorCauseData.of(d, f.getVersion());
    if (code instanceof OFBadActionCode c) {
      return f.errorMsgs().buildBadActionErrorMsg().setXid(xid).setCode(c).setData(cause).build();
    } else if (code instanceof OFBadInstructionCode c) {
      return f.errorMsgs()
          .buildBadInstructionErrorMsg()
          .setXid(xid)
          .setCode(c)
          .setData(cause)
          .build();
    } else if (code instanceof OFBadMatchCode c) {
      return f.errorMsgs().buildBadMatchErrorMsg().setXid(xid).setCode(c).setData(cause).build();
    } else if (code instanceof OFBadRequestCode c) {
      return f.errorMsgs().buildBadRequestErrorMsg().setXid(xid).setCode(c).setData(cause).build();
    } else if (code instanceof OFFlowModFailedCode c) {
      return f.errorMsgs()
          .buildFlowModFailedErrorMsg()
          .setXid(xid)
          .setCode(c)
          .setData(cause)
          .build();
    } else if (code instanceof OFGroupModFailedCode c) {
      return f.errorMsgs()
          .buildGroupModFailedErrorMsg()
          .setXid(xid)
          .setCode(c)
          .setData(cause)
          .build();
    } else if (code instanceof OFHelloFailedCode c) {
      return f.errorMsgs().buildHelloFailedErrorMsg().setXid(xid).setCode(c).setData(cause).build();
    } else if (code instanceof OFPortModFailedCode c) {
      return f.errorMsgs()
          .buildPortModFailedErrorMsg()
          .setXid(xid)
          .setCode(c)
          .setData(cause)
          .build();
    }
    throw new IllegalArgumentException("no error builder for " + code);
  }
}
