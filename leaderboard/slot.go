package leaderboard

import (
	"strconv"
	"strings"
	"sync"
)

// HashSlot is Redis Cluster's key slot of key: CRC16 (XMODEM) of its hash tag (or of the whole key when it has
// none), modulo 16384.
func HashSlot(key string) int {
	if s := strings.IndexByte(key, '{'); s >= 0 {
		if e := strings.IndexByte(key[s+1:], '}'); e > 0 {
			key = key[s+1 : s+1+e]
		}
	}
	var crc uint16
	for i := 0; i < len(key); i++ {
		crc ^= uint16(key[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc % 16384)
}

var (
	slotTagsOnce sync.Once
	slotTagList  []string
)

// slotTags returns, for every cluster slot, a short hash tag in it: "~" and the smallest base-36 number whose
// tag lands in that slot. '~' never occurs in board tags (base64url), so these keys are apart from every board.
func slotTags() []string {
	slotTagsOnce.Do(func() {
		tags := make([]string, 16384)
		left := len(tags)
		for n := 0; left > 0; n++ {
			tag := "~" + strconv.FormatInt(int64(n), 36)
			if slot := HashSlot(tag); tags[slot] == "" {
				tags[slot] = tag
				left--
			}
		}
		slotTagList = tags
	})
	return slotTagList
}

func slotTag(slot int) string { return slotTags()[slot] }
