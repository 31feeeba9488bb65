package net.uno.oneswitch.it;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.io.DataInputStream;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.List;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFType;

/** A blocking OpenFlow test client (a controller) for OneSwitch's passive listener. */
final class OfClient implements AutoCloseable {
  private final Socket s;
  private final DataInputStream in;
  final List<OFMessage> seen = new ArrayList<>();

  OfClient(int port) throws IOException {
    s = new Socket(InetAddress.getLoopbackAddress(), port);
    s.setSoTimeout(10000);
    in = new DataInputStream(s.getInputStream());
  }

  void send(OFMessage m) throws IOException {
    ByteBuf b = Unpooled.buffer();
    m.writeTo(b);
    byte[] out = new byte[b.readableBytes()];
    b.readBytes(out);
    raw(out);
  }

  void raw(byte[] bytes) throws IOException {
    s.getOutputStream().write(bytes);
    s.getOutputStream().flush();
  }

  /** Next frame's bytes, undecoded (e.g. an ONF bundle reply), or null on timeout. */
  byte[] readRaw(int timeoutMs) throws IOException {
    s.setSoTimeout(timeoutMs);
    try {
      byte[] hdr = new byte[8];
      in.readFully(hdr);
      int len = ((hdr[2] & 0xff) << 8) | (hdr[3] & 0xff);
      byte[] all = new byte[len];
      System.arraycopy(hdr, 0, all, 0, 8);
      in.readFully(all, 8, len - 8);
      return all;
    } catch (SocketTimeoutException e) {
      return null;
    }
  }

  /** Next message, or null on timeout. */
  OFMessage read(int timeoutMs) throws IOException {
    s.setSoTimeout(timeoutMs);
    try {
      byte[] hdr = new byte[8];
      in.readFully(hdr);
      int len = ((hdr[2] & 0xff) << 8) | (hdr[3] & 0xff);
      byte[] all = new byte[len];
      System.arraycopy(hdr, 0, all, 0, 8);
      in.readFully(all, 8, len - 8);
      OFMessage m = OFFactories.getGenericReader().readFrom(Unpooled.wrappedBuffer(all));
      seen.add(m);
      return m;
    } catch (SocketTimeoutException e) {
      return null;
    } catch (Exception e) {
      if (e instanceof IOException io) {
        throw io;
      }
      throw new IOException(e);
    }
  }

  /** Reads until a message of {@code type} with {@code xid} (any xid if < 0) arrives. */
  OFMessage expect(OFType type, long xid, int timeoutMs) throws IOException {
    long end = System.currentTimeMillis() + timeoutMs;
    while (System.currentTimeMillis() < end) {
      OFMessage m = read((int) Math.max(1, end - System.currentTimeMillis()));
      if (m != null && m.getType() == type && (xid < 0 || m.getXid() == xid)) {
        return m;
      }
    }
    return null;
  }

  boolean isClosed() {
    try {
      s.setSoTimeout(3000);
      return in.read() < 0;
    } catch (IOException e) {
      return true;
    }
  }

  @Override
  public void close() throws IOException {
    s.close();
  }
}
