package net.uno.oneswitch.north;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.netty.buffer.ByteBuf;
import io.netty.buffer.Unpooled;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;
import org.projectfloodlight.openflow.protocol.OFActionType;
import org.projectfloodlight.openflow.protocol.OFFactories;
import org.projectfloodlight.openflow.protocol.OFMessage;
import org.projectfloodlight.openflow.protocol.OFTableFeatureProp;
import org.projectfloodlight.openflow.protocol.OFTableFeaturePropApplyActionsMiss;
import org.projectfloodlight.openflow.protocol.OFTableFeaturePropInstructionsMiss;
import org.projectfloodlight.openflow.protocol.OFTableFeaturePropNextTablesMiss;
import org.projectfloodlight.openflow.protocol.OFTableFeatures;
import org.projectfloodlight.openflow.protocol.OFTableFeaturesStatsReply;

/** The TABLE_FEATURES reply decoded from its bytes, as a controller reads it. */
class TableFeaturesTest {
  /**
   * OF1.3 table feature property types (ofp_table_feature_prop_type), experimenter ones excluded.
   */
  private static final Set<Integer> OF13_PROPS =
      Set.of(0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 13, 14, 15);

  private static List<OFTableFeatures> decode(int tables) throws Exception {
    List<OFTableFeatures> out = new ArrayList<>();
    for (OFMessage m : TableFeatures.reply(9, tables)) {
      ByteBuf b = Unpooled.buffer();
      m.writeTo(b);
      int len = b.getUnsignedShort(2);
      assertEquals(b.readableBytes(), len);
      assertTrue(len < 65536);
      OFMessage back = OFFactories.getGenericReader().readFrom(b);
      assertEquals(9, back.getXid());
      out.addAll(((OFTableFeaturesStatsReply) back).getEntries());
    }
    return out;
  }

  @Test
  void everyTableHasEveryPropertyWithItsMissTwin() throws Exception {
    List<OFTableFeatures> tfs = decode(252);
    assertEquals(252, tfs.size());
    for (int t = 0; t < tfs.size(); t++) {
      OFTableFeatures tf = tfs.get(t);
      assertEquals(t, tf.getTableId().getValue());
      Set<Integer> types = new java.util.HashSet<>();
      for (OFTableFeatureProp p : tf.getProperties()) {
        types.add(p.getType());
      }
      assertEquals(OF13_PROPS, types, "table " + t);
    }
  }

  @Test
  void missPropertiesAllowWhatATableMissFlowNeeds() throws Exception {
    List<OFTableFeatures> tfs = decode(4);
    for (OFTableFeatures tf : tfs) {
      Set<OFActionType> miss = EnumSet.noneOf(OFActionType.class);
      List<Integer> nextMiss = List.of();
      boolean gotoMiss = false;
      for (OFTableFeatureProp p : tf.getProperties()) {
        if (p instanceof OFTableFeaturePropApplyActionsMiss a) {
          a.getActionIds().forEach(id -> miss.add(id.getType()));
        } else if (p instanceof OFTableFeaturePropNextTablesMiss n) {
          nextMiss = n.getNextTableIds().stream().map(u -> (int) u.getValue()).toList();
        } else if (p instanceof OFTableFeaturePropInstructionsMiss i) {
          gotoMiss =
              i.getInstructionIds().stream()
                  .anyMatch(
                      id ->
                          id.getType()
                              == org.projectfloodlight.openflow.protocol.OFInstructionType
                                  .GOTO_TABLE);
        }
      }
      int t = tf.getTableId().getValue();
      assertTrue(miss.contains(OFActionType.OUTPUT), "table " + t);
      assertTrue(miss.contains(OFActionType.GROUP), "table " + t);
      assertEquals(java.util.stream.IntStream.range(t + 1, 4).boxed().toList(), nextMiss);
      assertEquals(t < 3, gotoMiss, "goto_table only where a later table exists");
    }
    assertFalse(tfs.isEmpty());
  }

  @Test
  void partsStayBelowTheMessageLimitAndKeepTableOrder() throws Exception {
    List<OFMessage> parts = TableFeatures.reply(1, 252);
    assertEquals(
        (252 + TableFeatures.TABLES_PER_PART - 1) / TableFeatures.TABLES_PER_PART, parts.size());
  }
}
