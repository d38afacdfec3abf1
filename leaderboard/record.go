package leaderboard

import (
	"fmt"
	"strconv"
)

// The record format and the record hashes, and their one owner. common.lua writes every record (make_rec) and
// reads them (parse_rec, rec_ts, phash); Go reads them without a script (ranksplain.go, aroundplain.go). The
// layout's widths, separator and the hashes' constants are this file's: renderCommon renders them into common.lua
// where it says "-- @record" (luaRecord), so the scripts and Go cannot read a record differently. The tests hold
// the two codes to each other: FuzzRecordEncoding (make_rec read back by parse_rec and parseRecord, token against
// arrivalToken, phash against recordHash), FuzzParseRecord (parseRecord against parse_rec on any string),
// TestRecordHashSpreadsIDs and TestRecordHashVersion1Kept (recordLayout.key against the record hashes the scripts
// placed players in).
//
// A record is updatedAt (unix s) in exactly recordTimeDigits decimal digits, zero-padded, then the arrival number
// in decimal (1 to recordArrivalDigits digits), then for a tail player recordTailSep and its internal score.
const (
	recordTimeDigits    = 10  // 2000-01-01 .. 2286-11-20 (MinAchievedAt .. MaxAchievedAt) all take ten
	recordArrivalDigits = 19  // arrival numbers are below 2^63
	recordTailSep       = ':' // a byte that no number starts with, so every record has one reading
)

// recordHashPrime is the modulus of both record hashes: 2^32 - 5 (HP in common.lua).
const recordHashPrime = 1<<32 - 5

// recordHashVersion is the hash version a new window period places its records by (HASH_V in common.lua).
const recordHashVersion = 2

// The multipliers of the record hashes: version 1 takes a byte a step (HM1), version 2 three (HM2; below 2^20, so
// that h * HM2 + 2^24 stays below 2^53 and the Lua hash is exact in doubles).
const (
	recordHash1Mul = 257
	recordHash2Mul = 1000003
)

// recordMarker is the line of common.lua that renderCommon replaces with luaRecord.
const recordMarker = "-- @record (rendered from record.go)\n"

// luaRecord renders the record format and the record hashes' constants for common.lua.
func luaRecord() string {
	return fmt.Sprintf(`-- rendered from record.go (luaRecord): the record format and the record hashes' constants
local REC_TS, REC_MAX, REC_TS_FMT = %d, %d, '%%0%dd'
local REC_SEP, REC_SEP_BYTE = '%c', %d
local HASH_V, HP, HM1, HM2 = %d, %d, %d, %d
`, recordTimeDigits, recordTimeDigits+recordArrivalDigits, recordTimeDigits, recordTailSep, recordTailSep,
		recordHashVersion, recordHashPrime, recordHash1Mul, recordHash2Mul)
}

// recordHash is common.lua's phash of a player id for hash version hv (1: phash1, else phash2).
func recordHash(hv int, id string) uint64 {
	if hv == 1 {
		var h uint64
		for i := 0; i < len(id); i++ {
			h = (h*recordHash1Mul + uint64(id[i])) % recordHashPrime
		}
		return h
	}
	h := uint64(len(id))
	for i := 0; i < len(id); i += 3 {
		var v uint64 // three bytes, big-endian, missing ones 0
		for k := i; k < i+3; k++ {
			v <<= 8
			if k < len(id) {
				v |= uint64(id[k])
			}
		}
		h = (h*recordHash2Mul + v) % recordHashPrime
	}
	return h * recordHash2Mul % recordHashPrime
}

// recordLayout is how a window period places its records (load_state's lvl, sp and hv).
type recordLayout struct {
	lvl, sp, hv int
}

// layoutOf reads a layout from the lvl, sp and hv fields of a period's state (nil: absent) and whether the period
// has a state at all (cnt). A period without one takes the current hash version, as load_state does.
func layoutOf(cnt, lvl, sp, hv any) recordLayout {
	l := recordLayout{lvl: int(toInt(lvl)), sp: int(toInt(sp)), hv: int(toInt(hv))}
	if hv == nil {
		l.hv = recordHashVersion
		if cnt != nil {
			l.hv = 1 // written before hv was recorded
		}
	}
	return l
}

// bucket is the number of the record hash that holds a player (record_key; linear hashing).
func (l recordLayout) bucket(id string) uint64 {
	h := recordHash(l.hv, id)
	m := uint64(1) << l.lvl
	b := h % m
	if b < uint64(l.sp) {
		b = h % (2 * m)
	}
	return b
}

// key is the record hash of a player in the period whose record keys all start with prefix (rkey with no n).
func (l recordLayout) key(prefix, id string) string {
	return prefix + strconv.FormatUint(l.bucket(id), 10)
}

// parseRecord reads a record as parse_rec does: updatedAt (unix s), the arrival number, and whether a tail
// score follows (after recordTailSep). ok is false for anything that is not a record, and for an arrival number of
// 2^63 or more, which no script writes (a reader without a script leaves both to the scripts).
func parseRecord(v string) (ts int64, arrival uint64, tail, ok bool) {
	n := 0
	for n < len(v) && v[n] >= '0' && v[n] <= '9' {
		n++
	}
	if n < len(v) && v[n] != recordTailSep {
		return 0, 0, false, false
	}
	if n <= recordTimeDigits || n > recordTimeDigits+recordArrivalDigits {
		return 0, 0, false, false
	}
	ts, _ = strconv.ParseInt(v[:recordTimeDigits], 10, 64)
	arrival, err := strconv.ParseUint(v[recordTimeDigits:n], 10, 64)
	if err != nil || arrival >= 1<<63 {
		return 0, 0, false, false
	}
	return ts, arrival, n < len(v), true
}

// recordMember reads the record of player id (parseRecord) and gives its sorted-set member, arrival token .. id,
// which is only in the sorted set when the player is not a tail player (tail false).
func recordMember(rec, id string) (ts int64, member string, tail, ok bool) {
	ts, n, tail, ok := parseRecord(rec)
	if !ok {
		return 0, "", false, false
	}
	return ts, arrivalToken(n) + id, tail, true
}

// arrivalToken is token() of common.lua: the number of base-62 digits as one base-62 digit, then the digits, so
// that byte order is numeric order. It prefixes the player id in the sorted set.
func arrivalToken(n uint64) string {
	const b62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var d [12]byte // 11 digits at most below 2^64, and their count
	i := len(d)
	for {
		i--
		d[i] = b62[n%62]
		n /= 62
		if n == 0 {
			break
		}
	}
	i--
	d[i] = b62[len(d)-1-i]
	return string(d[i:])
}

// memberPlayer is member_player of common.lua: the player id of a sorted-set member (its token's length is its
// first digit, plus one; a member without a token's first digit loses its first byte, as in the script).
func memberPlayer(m string) string {
	n := 1
	if len(m) > 0 {
		if d := d62(m[0]); d >= 1 && d <= 11 {
			n = d + 1
		}
	}
	if n > len(m) {
		return ""
	}
	return m[n:]
}

// d62 is the value of a base-62 digit, or -1 (d62 of common.lua).
func d62(b byte) int {
	switch {
	case b >= '0' && b <= '9':
		return int(b - '0')
	case b >= 'A' && b <= 'Z':
		return int(b-'A') + 10
	case b >= 'a' && b <= 'z':
		return int(b-'a') + 36
	}
	return -1
}
