package leaderboard

import "testing"

func TestHashSlot(t *testing.T) {
	// Known values from Redis's CLUSTER KEYSLOT.
	for key, want := range map[string]int{"foo": 12182, "{user1000}.following": 3443, "bar": 5061, "": 0} {
		if got := HashSlot(key); got != want {
			t.Errorf("HashSlot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestSlotTagsCoverEverySlot(t *testing.T) {
	tags := slotTags()
	for slot, tag := range tags {
		if HashSlot("lb:{"+tag+"}:boards") != slot || tag[0] != '~' {
			t.Fatalf("slot %d: tag %q", slot, tag)
		}
	}
}
