package segment

import (
	"errors"
	"fmt"
	"math/bits"
	"strings"
	"unicode/utf8"
)

// Sentinel errors: every error of this package wraps one of them, and
// Reason() turns them into the fixed vocabulary of pcpustat serve's
// pcpu_segment_up{reason} label (pcpu_reader_reason() in C).
var (
	// ErrCorrupt: the file is not a valid segment (EBADMSG in C).
	ErrCorrupt = errors.New("corrupted segment")
	// ErrIncompatible: another major version or byte order (EPROTONOSUPPORT).
	ErrIncompatible = errors.New("incompatible segment format")
	// ErrWriterGone: the writer closed the segment or exited (ESRCH).
	ErrWriterGone = errors.New("segment writer gone")
	// ErrNotReady: the segment is still being created, or kept changing
	// while it was read: its directory through every attempt, or (32-bit
	// targets) a value between its two halves (EAGAIN). Try again.
	ErrNotReady = errors.New("segment still being created")
	// ErrTooLarge: reading it would pass the byte budget (EFBIG).
	ErrTooLarge = errors.New("segment larger than the budget")
	// ErrPermission: not a regular file, a symlink, or not readable.
	ErrPermission = errors.New("segment not readable")
	// ErrMissing: no such segment.
	ErrMissing = errors.New("segment missing")
)

// Reason is the word pcpustat serve puts in pcpu_segment_up's reason
// label for err: "" for nil, else one of missing, permission,
// incompatible, corrupt, writer_gone, not_ready, too_large, error.
func Reason(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrMissing):
		return "missing"
	case errors.Is(err, ErrPermission):
		return "permission"
	case errors.Is(err, ErrIncompatible):
		return "incompatible"
	case errors.Is(err, ErrCorrupt):
		return "corrupt"
	case errors.Is(err, ErrWriterGone):
		return "writer_gone"
	case errors.Is(err, ErrNotReady):
		return "not_ready"
	case errors.Is(err, ErrTooLarge):
		return "too_large"
	}
	return "error"
}

func corrupt(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrCorrupt}, a...)...)
}

func isPow2(x uint64) bool { return x != 0 && x&(x-1) == 0 }

// checkHeaderStatic checks the fields that never change after publication
// (against the format's limits, with overflow-checked arithmetic).
func checkHeaderStatic(h *header) error {
	if string(h.magic[:]) != magic {
		if h.magic == [8]byte{} {
			return fmt.Errorf("%w: the segment is still being created", ErrNotReady)
		}
		return corrupt("not a pcpu statistics segment (bad magic)")
	}
	if h.byteOrder != byteOrderMark {
		return fmt.Errorf("%w: written with another byte order", ErrIncompatible)
	}
	if h.versionMajor != versionMajor {
		return fmt.Errorf("%w: segment format %d.%d is not supported by this reader (it reads 2.x)",
			ErrIncompatible, h.versionMajor, h.versionMinor)
	}
	if h.headerSize < headerSize || h.headerSize > headerRegion {
		return corrupt("header_size %d", h.headerSize)
	}
	if h.nslots == 0 || h.nslots > maxNSlots {
		return corrupt("nslots %d", h.nslots)
	}
	if h.ownedSlots >= h.nslots {
		return corrupt("owned_slots %d of nslots %d", h.ownedSlots, h.nslots)
	}
	if h.slotIndex != 1 && h.slotIndex != 2 {
		return corrupt("slot_index %d", h.slotIndex)
	}
	if !isPow2(h.slotStride) || h.slotStride < 16 || h.slotStride > 1<<maxStrideShift {
		return corrupt("slot_stride %d", h.slotStride)
	}
	if span := 2 * uint64(h.nslots) * h.slotStride; h.chunkSpan != span { // <= 2^57
		return corrupt("chunk_span %d, not 2 * nslots * slot_stride = %d", h.chunkSpan, span)
	}
	if h.entrySize < entrySize || h.entrySize > 4096 || h.entrySize%8 != 0 {
		return corrupt("entry_size %d", h.entrySize)
	}
	hi, entBytes := bits.Mul64(h.entriesCapacity, uint64(h.entrySize))
	entEnd, c1 := bits.Add64(entBytes, h.entriesOffset, 0)
	strEnd, c2 := bits.Add64(h.stringsOffset, h.stringsCapacity, 0)
	if h.entriesOffset < uint64(h.headerSize) || hi != 0 || c1 != 0 || entEnd > h.stringsOffset ||
		c2 != 0 || strEnd > h.dataOffset || h.dataOffset > 1<<63-1 {
		return corrupt("regions overlap or overflow")
	}
	if h.writerPID <= 0 {
		return corrupt("writer pid %d", h.writerPID)
	}
	n := 0
	for n < nameMax && h.name[n] != 0 {
		n++
	}
	if n == 0 || n == nameMax {
		return corrupt("name not terminated")
	}
	if !validSegmentName(string(h.name[:n])) {
		return corrupt("invalid name")
	}
	return nil
}

// checkHeaderDynamic checks the fields that grow, against the static ones
// and the file's size.
func checkHeaderDynamic(h *header, size uint64) error {
	if h.entriesUsed > h.entriesCapacity || h.stringsUsed > h.stringsCapacity {
		return corrupt("directory counts")
	}
	if size < h.dataOffset {
		return corrupt("truncated (file of %d bytes, data at %d)", size, h.dataOffset)
	}
	if max := (size - h.dataOffset) / h.chunkSpan; h.nchunks > max {
		return corrupt("truncated (%d chunks declared, %d in the file)", h.nchunks, max)
	}
	return nil
}

// sameStatic: whether two reads of the header agree on what never changes.
func sameStatic(a, b *header) bool {
	return a.magic == b.magic && a.versionMajor == b.versionMajor && a.headerSize == b.headerSize &&
		a.writerPID == b.writerPID && a.writerUID == b.writerUID && a.writerStart == b.writerStart &&
		a.nslots == b.nslots && a.ownedSlots == b.ownedSlots && a.slotStride == b.slotStride &&
		a.chunkSpan == b.chunkSpan && a.dataOffset == b.dataOffset &&
		a.entriesOffset == b.entriesOffset && a.entriesCapacity == b.entriesCapacity &&
		a.entrySize == b.entrySize && a.stringsOffset == b.stringsOffset &&
		a.stringsCapacity == b.stringsCapacity && a.name == b.name
}

// validSegmentName: [A-Za-z0-9_.-], 1..64 bytes, not starting with '.' or '-'.
func validSegmentName(s string) bool {
	if s == "" || len(s) > nameMax || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlpha(c) || isDigit(c) || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// checkName: Prometheus metric (colon) or label name rules, max bytes.
func checkName(s string, max int, colon bool) bool {
	if s == "" || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isAlpha(c) || c == '_' || colon && c == ':' || i > 0 && isDigit(c)) {
			return false
		}
	}
	return true
}

func validMetricName(s string) bool { return checkName(s, statsNameMax, true) }

func validLabelName(s string) bool {
	return checkName(s, statsLabelNameMax, false) && !strings.HasPrefix(s, "__")
}

// validText: well-formed UTF-8 of at most max bytes (Go's utf8.ValidString
// refuses overlong forms, surrogates and code points past U+10FFFF, as
// Unicode's table 3-7 does).
func validText(s string, max int) bool { return len(s) <= max && utf8.ValidString(s) }

// validUnit: letters, digits, '_' and ':', and the name ends in "_<unit>".
func validUnit(name, unit string) bool {
	if len(unit) > statsUnitMax {
		return false
	}
	for i := 0; i < len(unit); i++ {
		c := unit[i]
		if !(isAlpha(c) || isDigit(c) || c == '_' || c == ':') {
			return false
		}
	}
	return len(name) >= len(unit)+2 && strings.HasSuffix(name, "_"+unit)
}

// loglinValid: nbuckets = (k << p) + 1 with 2 <= k <= 64 - p, p <= 14.
func loglinValid(p uint32, nbuckets uint64) bool {
	if p > loglinMaxBits || nbuckets < 2 || (nbuckets-1)&(1<<p-1) != 0 {
		return false
	}
	k := (nbuckets - 1) >> p
	return k >= 2 && k <= 64-uint64(p)
}

// loglinUpper: the inclusive upper bound of finite log-linear bucket b.
func loglinUpper(p uint32, b uint64) int64 {
	g, j := b>>p, b&(1<<p-1)
	if g == 0 {
		return int64(j)
	}
	l := (1<<p + j) << (g - 1)
	return int64(l + 1<<(g-1) - 1)
}

// exportList: the log-linear `le` bounds exposed (2.2): u >= min, u >= 0,
// u + 1 with at most lg + 1 significant bits.
func exportList(upper []int64, lg uint, min int64) []int {
	var out []int
	for b, u := range upper {
		if u < min || u < 0 {
			continue
		}
		v := uint64(u) + 1
		top := uint(63 - bits.LeadingZeros64(v))
		if top <= lg || v&(1<<(top-lg)-1) == 0 {
			out = append(out, b)
		}
	}
	return out
}

// nativeExportRule: an exponential family's exposed `le` bounds: of the
// buckets with bound >= min (all for min <= 0), the zero bucket and native
// indices divisible by 2^(schema - lg).
func nativeExportRule(upper []int64, first int32, schema int, lg uint, min int64) []int {
	step := int64(1)
	if schema > int(lg) {
		step = 1 << (schema - int(lg))
	}
	var out []int
	for b := range upper {
		if min > 0 && upper[b] < min {
			continue
		}
		if b == 0 || (int64(first)+int64(b)-1)%step == 0 {
			out = append(out, b)
		}
	}
	return out
}
