package net.uno.oneswitch.translate;

import static net.uno.oneswitch.translate.Fixtures.assertOfError;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class TagAllocatorTest {
  @Test
  void refcountsKeepTheIdUntilTheLastRelease() throws OfError {
    TagAllocator a = new TagAllocator(1, 3);
    int t = a.acquire(10);
    assertEquals(t, a.acquire(10));
    assertEquals(2, a.refs(10));
    a.release(10);
    assertEquals(t, a.tagOf(10).getAsInt());
    a.release(10);
    assertTrue(a.tagOf(10).isEmpty());
    assertThrows(IllegalStateException.class, () -> a.release(10));
  }

  @Test
  void idsAreUniqueAndReusedAfterRelease() throws OfError {
    TagAllocator a = new TagAllocator(1, 3);
    int x = a.acquire(1);
    int y = a.acquire(2);
    int z = a.acquire(3);
    assertEquals(3, java.util.Set.of(x, y, z).size());
    assertOfError("FlowModFailed/TABLE_FULL", () -> a.acquire(4));
    a.release(2);
    assertEquals(y, a.acquire(4), "freed id reused");
    assertEquals(java.util.Map.of(1L, x, 3L, z, 4L, y), a.live());
  }

  @Test
  void vlanCarrierRange() throws OfError {
    TagAllocator a = TagAllocator.vlan();
    for (int v = 0; v < 4094; v++) {
      int t = a.acquire(v);
      assertTrue(t >= 1 && t <= 4094);
    }
    assertThrows(OfError.class, () -> a.acquire(5000));
  }

  @Test
  void generationMovesExactlyWhenTheLiveIdsChange() throws OfError {
    CarrierTags tags = new CarrierTags();
    long g = tags.generation();
    tags.acquire(Translator.tagKey(200, 0));
    assertTrue(tags.generation() != g, "a new id");
    g = tags.generation();
    java.util.Map<Long, Integer> live = tags.live();
    tags.acquire(Translator.tagKey(200, 0)); // one more reference: same ids
    tags.release(Translator.tagKey(200, 0));
    assertEquals(g, tags.generation());
    assertEquals(live, tags.live());
    long label = Carrier.mplsKey(201, 0x0800);
    tags.acquire(label);
    assertTrue(tags.generation() != g, "a new label");
    g = tags.generation();
    tags.release(label);
    assertTrue(tags.generation() != g, "a freed label");
    assertEquals(live, tags.live());
  }
}
