// Package segment reads pcpu statistics segments (docs/segment-format.md,
// format 2.x) in pure Go: the files a pcpu application publishes with
// pcpu_segment_publish(), read with pread(2) only (never mapped), validated
// as the C reader (src/segment/reader_*.c) validates them. A hostile or
// truncated file yields an error wrapping ErrCorrupt (or another of this
// package's sentinel errors), never a panic or a read outside the file.
//
// This is a second, independent implementation of the format: it was
// written from the document, with the C reader consulted only for facts the
// document leaves open.
package segment

import (
	"encoding/binary"
)

// Layout constants of format 2.x (src/segment/format.h says the same in C).
const (
	magic          = "PCPUSEG\x00"
	versionMajor   = 2
	byteOrderMark  = 0x01020304
	headerSize     = 256
	headerRegion   = 4096 // the header's page
	entrySize      = 64
	nameMax        = 64
	maxNSlots      = 65536
	maxStrideShift = 40
	valueAlign     = 8
	blobMax        = 128 * 1024
	maxBounds      = 4096
	groupMax       = 16
	maxExportLg1   = 7
	schemaBias     = 4
	// exportLimitShift: 2.8, an exponential family's u32b high 16 bits
	// (1 + the finite buckets its `le` export rule considers; 0: all).
	exportLimitShift = 16
	loglinMaxBits    = 14

	// Statistics-layer limits (include/pcpu/expose.h).
	statsNameMax       = 200
	statsLabelNameMax  = 100
	statsLabelValueMax = 2048
	statsHelpMax       = 2048
	statsUnitMax       = 64
	statsLabelsMax     = 32
	statsScaleMax      = 22
)

// Header flags.
const (
	FlagClosed     = 1 // the writer unpublished or destroyed the segment
	FlagIncomplete = 2 // the directory was full: some series are missing
	FlagNoSpace    = 4 // the writer's file system was full
	FlagTree       = 8 // shared by a process tree (2.5)
	// FlagTreeWrlock: each open file description of the tree's members
	// holds a write lock on one of the member bytes [1, 1025), and only a
	// write lock there is evidence of a live tree (format.h).
	FlagTreeWrlock = 16
)

// Entry kinds.
const (
	kindFree        = 0
	kindFamily      = 1
	kindSeries      = 2
	kindGroup       = 3
	kindGroupSeries = 4
	kindFlows       = 5 // 2.9: a flows table (flows.go)
)

// 2.9 flows tables (format.h): their words lie from this file offset up,
// outside every chunk; at most this many counters per flow, and keys.
const (
	tablesBase       = 1 << 43
	flowsMaxCounters = 64
	flowsMaxKeys     = 0xfffffffe
)

// Entry flags.
const (
	eHasHelp     = 1
	eInfo        = 4
	eNanos       = 16
	eExportShift = 8
	eExportMask  = 7 << eExportShift
)

// Histogram schemes (family u32a; 0x100 marks (count, sum) pairs, 2.4;
// 0x200 a histogram with fractions, 2.8: one more pair, a per-slot double
// sum and a residue; 0x400, with 0x100, a sparse histogram, 2.10).
const (
	SchemeExplicit    = 1
	SchemeLogLinear   = 2
	SchemeExponential = 3
	schemePairs       = 0x100
	schemeWide        = 0x200
	schemeSparse      = 0x400
)

// 2.10 sparse histograms (format.h PCPU__SEG_SPARSE_*): a series' buckets
// lie in groups of sparseGroup (count, sum) pairs, each made where the
// zone had room; its entry names a table of their places in the string
// table, one word per group (and, with schemeWide, one for the pair of
// the per-slot double and the residue).
const (
	sparseGroup     = 8
	sparseGroupSize = 16 * sparseGroup
	sparseWideSize  = 16
)

// sparseGroups is how many groups a sparse histogram of nbuckets has.
func sparseGroups(nbuckets uint32) uint64 {
	return (uint64(nbuckets) + sparseGroup - 1) / sparseGroup
}

// MetricType is a family's type, as the format numbers it.
type MetricType uint8

// The metric types of the format.
const (
	Counter   MetricType = 1
	Gauge     MetricType = 2
	Histogram MetricType = 3
)

// String names the type as the exposition does.
func (t MetricType) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return "unknown"
}

// ne is the writer's byte order; the header's byte_order field must read
// back as 0x01020304 in it, else the file is refused (as the C reader
// does: it reads only files of its own byte order).
var ne = binary.NativeEndian

// header is the 256-byte segment header, decoded.
type header struct {
	magic           [8]byte
	versionMajor    uint16
	versionMinor    uint16
	headerSize      uint32
	byteOrder       uint32
	flags           uint32
	generation      uint64
	writerPID       int32
	writerUID       uint32
	writerStart     uint64
	createdNs       uint64
	nslots          uint32
	slotIndex       uint32
	slotStride      uint64
	chunkSpan       uint64
	dataOffset      uint64
	nchunks         uint64
	entriesOffset   uint64
	entriesCapacity uint64
	entriesUsed     uint64
	entrySize       uint32
	ownedSlots      uint32
	stringsOffset   uint64
	stringsCapacity uint64
	stringsUsed     uint64
	nfamilies       uint64
	nseries         uint64
	dropped         uint64
	name            [nameMax]byte
	writerPidns     uint64
	nospace         uint64
}

func decodeHeader(b []byte) header {
	var h header
	copy(h.magic[:], b[0:8])
	h.versionMajor = ne.Uint16(b[8:])
	h.versionMinor = ne.Uint16(b[10:])
	h.headerSize = ne.Uint32(b[12:])
	h.byteOrder = ne.Uint32(b[16:])
	h.flags = ne.Uint32(b[20:])
	h.generation = ne.Uint64(b[24:])
	h.writerPID = int32(ne.Uint32(b[32:]))
	h.writerUID = ne.Uint32(b[36:])
	h.writerStart = ne.Uint64(b[40:])
	h.createdNs = ne.Uint64(b[48:])
	h.nslots = ne.Uint32(b[56:])
	h.slotIndex = ne.Uint32(b[60:])
	h.slotStride = ne.Uint64(b[64:])
	h.chunkSpan = ne.Uint64(b[72:])
	h.dataOffset = ne.Uint64(b[80:])
	h.nchunks = ne.Uint64(b[88:])
	h.entriesOffset = ne.Uint64(b[96:])
	h.entriesCapacity = ne.Uint64(b[104:])
	h.entriesUsed = ne.Uint64(b[112:])
	h.entrySize = ne.Uint32(b[120:])
	h.ownedSlots = ne.Uint32(b[124:])
	h.stringsOffset = ne.Uint64(b[128:])
	h.stringsCapacity = ne.Uint64(b[136:])
	h.stringsUsed = ne.Uint64(b[144:])
	h.nfamilies = ne.Uint64(b[152:])
	h.nseries = ne.Uint64(b[160:])
	h.dropped = ne.Uint64(b[168:])
	copy(h.name[:], b[176:240])
	h.writerPidns = ne.Uint64(b[240:])
	h.nospace = ne.Uint64(b[248:])
	return h
}

// entry is one 64-byte directory entry, decoded.
type entry struct {
	seq      uint64
	kind     uint16
	typ      uint8
	scale    int8
	nlabels  uint16
	flags    uint16
	familyID uint64
	blobOff  uint64
	blobLen  uint32
	nbuckets uint32
	u32a     uint32
	u32b     uint32
	valueOff uint64
	serial   uint64
}

func decodeEntry(b []byte) entry {
	return entry{
		seq:      ne.Uint64(b[0:]),
		kind:     ne.Uint16(b[8:]),
		typ:      b[10],
		scale:    int8(b[11]),
		nlabels:  ne.Uint16(b[12:]),
		flags:    ne.Uint16(b[14:]),
		familyID: ne.Uint64(b[16:]),
		blobOff:  ne.Uint64(b[24:]),
		blobLen:  ne.Uint32(b[32:]),
		nbuckets: ne.Uint32(b[36:]),
		u32a:     ne.Uint32(b[40:]),
		u32b:     ne.Uint32(b[44:]),
		valueOff: ne.Uint64(b[48:]),
		serial:   ne.Uint64(b[56:]),
	}
}
