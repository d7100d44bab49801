package segment

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// ErrStale: a flows table was destroyed or replaced since it was listed
// (ESTALE in C): list the tables again.
var ErrStale = errors.New("flows table destroyed or replaced")

// FlowsTable is a flows table of a segment (format 2.9; the writer's
// pcpu_segment_flows_create()): NFlows flows of len(Counters) counters,
// whose shared words ReadFlows reads. A table is not part of a Snapshot:
// a million flows are 16 MB of words.
type FlowsTable struct {
	Name     string
	Help     string // "" with HasHelp false: none
	HasHelp  bool
	NFlows   uint64
	Counters []string // label names, e.g. packets, bytes

	entry, seq, id, off uint64 // which entry, which table
}

// flowsEntryOK checks a FLOWS entry's fields against the header and the
// file's size, as the C reader does (reader_flows.c).
func flowsEntryOK(e *entry, h *header, size uint64) bool {
	if e.kind != kindFlows || e.seq&1 != 0 || e.u32b != 8 || e.u32a == 0 ||
		e.u32a > flowsMaxCounters || e.serial == 0 || e.flags&^eHasHelp != 0 {
		return false
	}
	if e.serial > flowsMaxKeys/uint64(e.u32a) {
		return false
	}
	words := e.serial * uint64(e.u32a) * 8
	if e.valueOff < tablesBase || e.valueOff%4096 != 0 || e.valueOff > size ||
		words > size-e.valueOff {
		return false
	}
	return e.blobLen != 0 && e.blobLen <= blobMax && e.blobOff <= h.stringsUsed &&
		uint64(e.blobLen) <= h.stringsUsed-e.blobOff
}

// parseFlowsBlob splits a FLOWS blob: name, help (with eHasHelp), the
// counter names, filling it exactly; valid and distinct.
func parseFlowsBlob(e *entry, blob []byte, t *FlowsTable) bool {
	want := 1 + int(e.u32a)
	if e.flags&eHasHelp != 0 {
		want++
	}
	parts := make([]string, 0, want)
	for len(parts) < want {
		i := bytes.IndexByte(blob, 0)
		if i < 0 {
			return false
		}
		parts = append(parts, string(blob[:i]))
		blob = blob[i+1:]
	}
	if len(blob) != 0 || !validMetricName(parts[0]) {
		return false
	}
	t.Name = parts[0]
	if e.flags&eHasHelp != 0 {
		if !validText(parts[1], statsHelpMax) {
			return false
		}
		t.Help, t.HasHelp = parts[1], true
	}
	t.Counters = parts[want-int(e.u32a):]
	seen := map[string]bool{}
	for _, c := range t.Counters {
		if !validLabelName(c) || seen[c] {
			return false
		}
		seen[c] = true
	}
	t.NFlows = e.serial
	return true
}

// FlowsTables lists the segment's flows tables now, in directory order
// (none in a segment of a writer before 2.9). Tables being made or
// destroyed during the read, and entries that fail validation, are left
// out. The writer's liveness is not checked. Cost: a read of the header,
// of the used directory (1,024 entries a read) and of each table's entry
// and names.
func (r *Reader) FlowsTables() ([]FlowsTable, error) {
	h, err := r.readHeader()
	if err != nil {
		return nil, err
	}
	size, err := r.src.size()
	if err != nil {
		return nil, err
	}
	esz := uint64(h.entrySize)
	var out []FlowsTable
	buf := make([]byte, 1024*esz)
	for i := uint64(0); i < h.entriesUsed; i += 1024 {
		k := min(h.entriesUsed-i, 1024)
		if err := r.src.readAt(buf[:k*esz], h.entriesOffset+i*esz); err != nil {
			return nil, err
		}
		for j := uint64(0); j < k; j++ {
			raw := buf[j*esz : j*esz+entrySize]
			e := decodeEntry(raw)
			if e.kind != kindFlows || !flowsEntryOK(&e, &h, size) {
				continue
			}
			blob := make([]byte, e.blobLen)
			again := make([]byte, entrySize)
			if err := r.src.readAt(blob, h.stringsOffset+e.blobOff); err != nil {
				return nil, err
			}
			if err := r.src.readAt(again, h.entriesOffset+(i+j)*esz); err != nil {
				return nil, err
			}
			var t FlowsTable
			if !bytes.Equal(raw, again) || !parseFlowsBlob(&e, blob, &t) {
				continue // changed meanwhile, or invalid
			}
			t.entry, t.seq, t.id, t.off = i+j, e.seq, e.familyID, e.valueOff
			out = append(out, t)
		}
	}
	return out, nil
}

// stillThere: the table's entry is unchanged since it was listed.
func (r *Reader) stillThere(h *header, t *FlowsTable) error {
	if t.entry >= h.entriesUsed {
		return fmt.Errorf("%w: %s", ErrStale, t.Name)
	}
	b := make([]byte, entrySize)
	if err := r.src.readAt(b, h.entriesOffset+t.entry*uint64(h.entrySize)); err != nil {
		return err
	}
	e := decodeEntry(b)
	if e.kind != kindFlows || e.seq != t.seq || e.familyID != t.id || e.valueOff != t.off ||
		e.serial != t.NFlows || int(e.u32a) != len(t.Counters) {
		return fmt.Errorf("%w: %s", ErrStale, t.Name)
	}
	return nil
}

// ReadFlows reads the counters of flows first .. first+n-1 of table t (one
// of FlowsTables') into out[(flow-first)*len(t.Counters)+counter]: the
// table's shared words, which hold every add that returned before the
// writer's last collection of its registry, and maybe later ones. The
// entry is read before and after the words: a table destroyed or replaced
// meanwhile is ErrStale, never another table's values. On a 32-bit target
// the words are copied three times and settled as a snapshot's values are
// (never a word torn between its halves; torn.go): a word that kept
// changing between its halves is ErrNotReady (try again). Cost: two reads
// of the entry and one of n*len(t.Counters)*8 bytes (three on a 32-bit
// target, with two more buffers of that size).
func (r *Reader) ReadFlows(t *FlowsTable, first, n uint64, out []uint64) error {
	nc := uint64(len(t.Counters))
	if n == 0 || first >= t.NFlows || n > t.NFlows-first || nc == 0 ||
		uint64(len(out)) < n*nc {
		return fmt.Errorf("segment: ReadFlows: invalid arguments")
	}
	h, err := r.readHeader()
	if err != nil {
		return err
	}
	if err := r.stillThere(&h, t); err != nil {
		return err
	}
	size, err := r.src.size()
	if err != nil {
		return err
	}
	if t.off > size || t.NFlows*nc*8 > size-t.off {
		return corrupt("flows table %s past the end of the file", t.Name)
	}
	// n*nc <= NFlows*nc, checked against the file's size; on a 32-bit
	// target that may still be more than a slice can hold.
	nb := n * nc * 8
	if nb > uint64(math.MaxInt)/r.copies() {
		return fmt.Errorf("segment: ReadFlows: %d bytes at once", nb)
	}
	b := make([]byte, nb*r.copies())
	if err := r.src.readAt(b[:nb], t.off+first*nc*8); err != nil {
		return err
	}
	if r.settleCopies { // a copy made 32 bits at a time may be torn
		if err := r.settle(nil, b[:nb], b[nb:2*nb], b[2*nb:], t.off+first*nc*8); err != nil {
			return err
		}
	}
	if err := r.stillThere(&h, t); err != nil {
		return err
	}
	for i := range n * nc {
		out[i] = ne.Uint64(b[i*8:])
	}
	return nil
}
