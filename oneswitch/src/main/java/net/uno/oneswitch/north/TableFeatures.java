package net.uno.oneswitch.north;

import java.util.ArrayList;
import java.util.List;
import net.uno.oneswitch.core.OneSwitchCore;
import org.projectfloodlight.openflow.protocol.OFFactory;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFTableFeatureProp;
import org.projectfloodlight.openflow.protocol.OFTableFeatures;
import org.projectfloodlight.openflow.protocol.actionid.OFActionId;
import org.projectfloodlight.openflow.protocol.instructionid.OFInstructionId;
import org.projectfloodlight.openflow.types.TableId;
import org.projectfloodlight.openflow.types.U32;
import org.projectfloodlight.openflow.types.U64;
import org.projectfloodlight.openflow.types.U8;

/**
 * The TABLE_FEATURES reply of the virtual switch: every OF1.3 property, each with its table-miss
 * twin (controllers such as Floodlight install their table-miss flow only if APPLY_ACTIONS_MISS
 * lists OUTPUT). A table-miss flow is an ordinary rule here, so the miss properties equal the
 * others.
 */
public final class TableFeatures {
  private static final OFFactory F = OneSwitchCore.F;

  /** Tables per reply message: keeps each part well below the 64 KiB OpenFlow message limit. */
  static final int TABLES_PER_PART = 8;

  private TableFeatures() {}

  /** The reply parts (without the REPLY_MORE flags) describing {@code tables} virtual tables. */
  public static List<OFMessage> reply(long xid, int tables) {
    List<OFTableFeatures> tfs = new ArrayList<>();
    for (int t = 0; t < tables; t++) {
      tfs.add(
          F.buildTableFeatures()
              .setTableId(TableId.of(t))
              .setName("table" + t)
              .setMetadataMatch(U64.NO_MASK)
              .setMetadataWrite(U64.NO_MASK)
              .setConfig(0)
              .setMaxEntries(1_000_000)
              .setProperties(properties(t, tables))
              .build());
    }
    List<OFMessage> out = new ArrayList<>();
    for (int i = 0; i < tfs.size(); i += TABLES_PER_PART) {
      out.add(
          F.buildTableFeaturesStatsReply()
              .setXid(xid)
              .setEntries(tfs.subList(i, Math.min(tfs.size(), i + TABLES_PER_PART)))
              .build());
    }
    return out;
  }

  private static List<OFTableFeatureProp> properties(int table, int tables) {
    List<U8> next = new ArrayList<>();
    for (int u = table + 1; u < tables; u++) {
      next.add(U8.of((short) u));
    }
    List<OFInstructionId> insts = new ArrayList<>(INSTRUCTIONS);
    if (next.isEmpty()) {
      insts.remove(F.instructionIds().gotoTable()); // the last table has nowhere to go
    }
    return List.of(
        F.tableFeaturePropInstructions(insts),
        F.tableFeaturePropInstructionsMiss(insts),
        F.tableFeaturePropNextTables(next),
        F.tableFeaturePropNextTablesMiss(next),
        F.tableFeaturePropWriteActions(ACTIONS),
        F.tableFeaturePropWriteActionsMiss(ACTIONS),
        F.tableFeaturePropApplyActions(ACTIONS),
        F.tableFeaturePropApplyActionsMiss(ACTIONS),
        F.tableFeaturePropMatch(OXM_HEADERS),
        F.tableFeaturePropWildcards(OXM_HEADERS),
        F.tableFeaturePropWriteSetfield(SETFIELD_HEADERS),
        F.tableFeaturePropWriteSetfieldMiss(SETFIELD_HEADERS),
        F.tableFeaturePropApplySetfield(SETFIELD_HEADERS),
        F.tableFeaturePropApplySetfieldMiss(SETFIELD_HEADERS));
  }

  private static final List<OFInstructionId> INSTRUCTIONS =
      List.of(
          F.instructionIds().applyActions(),
          F.instructionIds().writeActions(),
          F.instructionIds().clearActions(),
          F.instructionIds().writeMetadata(),
          F.instructionIds().gotoTable());

  private static final List<OFActionId> ACTIONS =
      List.of(
          F.actionIds().output(),
          F.actionIds().group(),
          F.actionIds().setField(),
          F.actionIds().pushVlan(),
          F.actionIds().popVlan(),
          F.actionIds().pushMpls(),
          F.actionIds().popMpls(),
          F.actionIds().decNwTtl(),
          F.actionIds().copyTtlIn(),
          F.actionIds().copyTtlOut(),
          F.actionIds().setMplsTtl(),
          F.actionIds().decMplsTtl(),
          F.actionIds().setNwTtl());

  /** OF1.3 OXM field numbers (basic class) with their value lengths; in_phy_port excluded. */
  private static final int[][] OXM_FIELDS = {
    {0, 4}, {2, 8}, {3, 6}, {4, 6}, {5, 2}, {6, 2}, {7, 1}, {8, 1}, {9, 1}, {10, 1}, {11, 4},
    {12, 4}, {13, 2}, {14, 2}, {15, 2}, {16, 2}, {17, 2}, {18, 2}, {19, 1}, {20, 1}, {21, 2},
    {22, 4}, {23, 4}, {24, 6}, {25, 6}, {26, 16}, {27, 16}, {28, 4}, {29, 1}, {30, 1}, {31, 16},
    {32, 6}, {33, 6}, {34, 4}, {35, 1}, {36, 1}, {37, 3}, {38, 8}, {39, 2}
  };

  private static final List<U32> OXM_HEADERS = headers(false);
  private static final List<U32> SETFIELD_HEADERS = headers(true);

  private static List<U32> headers(boolean settable) {
    List<U32> out = new ArrayList<>();
    for (int[] f : OXM_FIELDS) {
      if (settable && (f[0] == 0 || f[0] == 2)) {
        continue; // in_port and metadata are not set-field targets
      }
      out.add(U32.of(0x80000000L | (f[0] << 9) | f[1]));
    }
    return out;
  }
}
