package net.uno.oneswitch.translate;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFMatchV3;
import org.projectfloodlight.openflow.protocol.OFOxmList;
import org.projectfloodlight.openflow.protocol.OFVersion;
import org.projectfloodlight.openflow.protocol.match.Match;
import org.projectfloodlight.openflow.protocol.match.MatchField;
import org.projectfloodlight.openflow.protocol.oxm.OFOxm;
import org.projectfloodlight.openflow.types.OFPort;
import org.projectfloodlight.openflow.types.OFValueType;

/** Match helpers: canonical keys, in_port rewriting, subset and overlap tests on OXM values. */
public final class MatchUtil {
  static final OFFactory F = OFFactories.getFactory(OFVersion.OF_13);

  private MatchUtil() {}

  public static List<OFOxm<?>> oxms(Match m) {
    List<OFOxm<?>> out = new ArrayList<>();
    each(m).forEach(out::add);
    return out;
  }

  /** The match's OXMs, read in place (no copy: lookups run several times per flow-mod). */
  private static Iterable<OFOxm<?>> each(Match m) {
    return m instanceof OFMatchV3 v3 ? v3.getOxmList() : List.of();
  }

  public static Match of(List<OFOxm<?>> oxms) {
    return F.buildMatchV3().setOxmList(OFOxmList.ofList(oxms)).build();
  }

  /**
   * A canonical text key of a match (order-independent). Computed each time: callers that key the
   * same rules again and again go through {@link net.uno.oneswitch.model.MatchKeys#of}.
   */
  public static String key(Match m) {
    List<String> parts = new ArrayList<>();
    for (OFOxm<?> o : each(m)) {
      parts.add(
          o.getMatchField().getName()
              + "="
              + o.getValue()
              + (o.isMasked() ? "/" + o.getMask() : ""));
    }
    parts.sort(null);
    return String.join(",", parts);
  }

  public static Optional<OFOxm<?>> find(Match m, MatchField<?> f) {
    for (OFOxm<?> o : each(m)) {
      if (o.getMatchField().id == f.id) {
        return Optional.of(o);
      }
    }
    return Optional.empty();
  }

  /** The exact in_port of the match, if it has one. */
  public static Optional<OFPort> inPort(Match m) {
    return find(m, MatchField.IN_PORT).map(o -> (OFPort) o.getValue());
  }

  /** The match with in_port replaced (or removed when port is null); in_phy_port dropped. */
  public static Match withInPort(Match m, OFPort port) {
    List<OFOxm<?>> out = new ArrayList<>();
    boolean done = false;
    for (OFOxm<?> o : each(m)) {
      if (o.getMatchField().id == MatchField.IN_PHY_PORT.id) {
        continue;
      }
      if (o.getMatchField().id == MatchField.IN_PORT.id) {
        if (port != null) {
          out.add(F.oxms().inPort(port));
        }
        done = true;
      } else {
        out.add(o);
      }
    }
    if (!done && port != null) {
      out.add(0, F.oxms().inPort(port));
    }
    return of(out);
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static OFValueType and(OFValueType a, OFValueType b) {
    return a.applyMask(b);
  }

  /**
   * True if every packet matching {@code rule} also matches {@code filter} (OpenFlow non-strict
   * "match" semantics for modify/delete/stats).
   */
  @SuppressWarnings({"rawtypes", "unchecked"})
  public static boolean isSubset(Match rule, Match filter) {
    for (OFOxm<?> fo : each(filter)) {
      Optional<OFOxm<?>> ro = find(rule, fo.getMatchField());
      if (ro.isEmpty()) {
        return false;
      }
      OFOxm<?> r = ro.get();
      OFValueType fv = fo.getValue();
      OFValueType rv = r.getValue();
      if (!fo.isMasked()) {
        if (r.isMasked() || !fv.equals(rv)) {
          return false;
        }
        continue;
      }
      OFValueType fm = fo.getMask();
      if (r.isMasked()) {
        OFValueType rm = r.getMask();
        if (!and(fm, rm).equals(fm)) {
          return false; // the rule wildcards bits the filter fixes
        }
      }
      if (!and(rv, fm).equals(and(fv, fm))) {
        return false;
      }
    }
    return true;
  }

  /** True if some packet can match both {@code a} and {@code b}. */
  @SuppressWarnings({"rawtypes"})
  public static boolean overlaps(Match a, Match b) {
    for (OFOxm<?> ao : each(a)) {
      Optional<OFOxm<?>> bo = find(b, ao.getMatchField());
      if (bo.isEmpty()) {
        continue;
      }
      OFOxm<?> bx = bo.get();
      OFValueType av = ao.getValue();
      OFValueType bv = bx.getValue();
      if (!ao.isMasked() && !bx.isMasked()) {
        if (!av.equals(bv)) {
          return false;
        }
      } else if (!ao.isMasked()) {
        if (!and(av, bx.getMask()).equals(and(bv, bx.getMask()))) {
          return false;
        }
      } else if (!bx.isMasked()) {
        if (!and(bv, ao.getMask()).equals(and(av, ao.getMask()))) {
          return false;
        }
      } else {
        OFValueType m = and(ao.getMask(), bx.getMask());
        if (!and(av, m).equals(and(bv, m))) {
          return false;
        }
      }
    }
    return true;
  }

  /** True if {@code m} only matches packets with a VLAN header (vlan_vid with the present bit). */
  public static boolean vlanPresent(Match m) {
    if (m.isExact(MatchField.VLAN_VID)) {
      return (m.get(MatchField.VLAN_VID).getRawVid() & 0x1000) != 0;
    }
    if (m.isPartiallyMasked(MatchField.VLAN_VID)) {
      var mv = m.getMasked(MatchField.VLAN_VID);
      return (mv.getMask().getRawVid() & mv.getValue().getRawVid() & 0x1000) != 0;
    }
    return false;
  }

  /** True if {@code m} only matches packets without a VLAN header (vlan_vid NONE, or 0/0x1000). */
  public static boolean vlanAbsent(Match m) {
    if (m.isExact(MatchField.VLAN_VID)) {
      return m.get(MatchField.VLAN_VID).getRawVid() == 0;
    }
    if (m.isPartiallyMasked(MatchField.VLAN_VID)) {
      var mv = m.getMasked(MatchField.VLAN_VID);
      return (mv.getMask().getRawVid() & 0x1000) != 0 && (mv.getValue().getRawVid() & 0x1000) == 0;
    }
    return false;
  }
}
