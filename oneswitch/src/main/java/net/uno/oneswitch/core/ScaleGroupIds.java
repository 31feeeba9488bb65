package net.uno.oneswitch.core;

import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import net.uno.oneswitch.model.PortMap;
import net.uno.oneswitch.model.VPort;
import net.uno.oneswitch.translate.OfError;
import net.uno.oneswitch.translate.TagAllocator;
import net.uno.oneswitch.translate.Translator;
import org.projectfloodlight.openflow.protocol.OFGroupModFailedCode;

/**
 * The ids of OneSwitch's own SELECT groups, one per scaled-out vport (a vport with several
 * instances), from the reserved range at {@link Translator#SCALE_GROUP_BASE}. Core thread only.
 */
final class ScaleGroupIds {
  private final TagAllocator ids = new TagAllocator(0, Translator.SCALE_GROUP_COUNT - 1);
  private final Map<Integer, Integer> byVport = new HashMap<>();
  private final Map<Integer, Integer> view = Collections.unmodifiableMap(byVport);

  /** vport -> group id (a live read-only view: translators read it). */
  Map<Integer, Integer> byVport() {
    return view;
  }

  /**
   * Gives every scaled-out vport of {@code pm} a group id; returns the vports newly given one. All
   * or nothing: OUT_OF_GROUPS, with none of them given, when the range runs out.
   */
  List<Integer> ensure(PortMap pm) throws OfError {
    List<Integer> added = new ArrayList<>();
    for (VPort v : pm.all()) {
      if (v.k() > 1 && !byVport.containsKey(v.vport())) {
        try {
          byVport.put(v.vport(), Translator.SCALE_GROUP_BASE + ids.acquire(v.vport()));
          added.add(v.vport());
        } catch (OfError e) {
          added.forEach(this::release);
          throw new OfError(OFGroupModFailedCode.OUT_OF_GROUPS, "scale group ids exhausted");
        }
      }
    }
    return added;
  }

  /** Frees the group id of {@code vport} (if it has one). */
  void release(int vport) {
    if (byVport.remove(vport) != null) {
      ids.release(vport);
    }
  }

  /** Frees the group ids of the vports that no longer have several instances in {@code pm}. */
  void releaseUnused(PortMap pm) {
    for (Integer v : List.copyOf(byVport.keySet())) {
      if (pm.get(v).map(p -> p.k() < 2).orElse(true)) {
        release(v);
      }
    }
  }
}
