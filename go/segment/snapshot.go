package segment

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
)

// Snapshot is one consistent read of a segment: every series in it has
// its own name, labels and value (docs/segment-format.md, "Writer and
// readers"). Families are sorted by name, series in creation order, as
// the C reader and the writing process's own snapshot have them.
type Snapshot struct {
	Name         string // the segment's name
	PID          int32  // the writer's (publisher's) pid
	UID          uint32 // the writer's effective uid
	CreatedNs    uint64 // CLOCK_REALTIME of publication
	VersionMinor uint16
	NSlots       uint32 // slots of every value, owned slots included
	OwnedSlots   uint32 // the last OwnedSlots of the NSlots are owned slots of pinned workers
	SlotIndex    uint32 // 1: CPU slots are CPU numbers; 2: rseq mm_cid
	Flags        uint32 // header flags (FlagClosed, FlagIncomplete, FlagNoSpace, FlagTree)
	Dropped      uint64 // registry changes the directory could not record
	NoSpaceCount uint64 // registrations refused for lack of space
	Stable       bool   // the directory did not change during the read
	Changed      int    // entries left out because they changed during the read
	State        State  // the writer's liveness at the read
	Families     []Family
}

// Incomplete says whether series may be missing (directory full or out of space).
func (s *Snapshot) Incomplete() bool { return s.Flags&(FlagIncomplete|FlagNoSpace) != 0 }

// Family is one metric family of a snapshot.
type Family struct {
	Name       string // counters without _total
	Help       string
	HasHelp    bool
	Unit       string // "" for none
	Type       MetricType
	Scale      int8 // exposed value = value * 10^Scale
	Info       bool // an info family (gauge x_info, every series 1)
	Nanos      bool // with fractions: counter or gauge (Series.Nanos, Series.Residue), or 2.8 histogram (Series.Residue)
	LabelNames []string

	// Histograms only.
	Scheme      int     // SchemeExplicit, SchemeLogLinear, SchemeExponential
	Upper       []int64 // inclusive upper bounds of the finite buckets (NBuckets-1)
	Schema      int     // exponential: the native schema (-4..8)
	NativeIndex int32   // exponential: native index of bucket 1
	Exported    []int   // finite buckets exposed as `le`; nil: every one
	// Sparse (2.10, PCPU_FAMILY_SPARSE): its series' buckets are stored
	// in groups made at their first record. Storage only: the values
	// read as a dense family's, missing groups as zero.
	Sparse bool

	Series []Series
}

// NBuckets is a histogram family's bucket count, +Inf included (0 otherwise).
func (f *Family) NBuckets() int {
	if f.Type != Histogram {
		return 0
	}
	return len(f.Upper) + 1
}

// ExposedBuckets returns the indices of the buckets the text exposition
// shows as `le` (the last, +Inf, always included), in order.
func (f *Family) ExposedBuckets() []int {
	n := f.NBuckets()
	if f.Exported == nil {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	out := append(make([]int, 0, len(f.Exported)+1), f.Exported...)
	return append(out, n-1)
}

// Series is one series of a family.
type Series struct {
	LabelValues []string
	// Counter: Value (u64, modulo 2^64); gauge: int64(Value); with
	// Family.Nanos, plus Nanos billionths; an info series is 1.
	Value uint64
	Nanos int64
	// 2.8, Family.Nanos: what the words cannot hold, added to the value
	// (Float()); a histogram's sum's, in exposed units (SumFloat()).
	Residue float64
	// Histogram: per-bucket counts (not cumulative) and the sum.
	Counts []uint64
	Sum    int64
	// Slots: each slot's part (word + mirror) when asked for; a
	// histogram's is the sum of its bucket counts. nil for group members,
	// which have no per-slot split.
	Slots []uint64
	Group bool // a consistent group's member (value from the group's copy)
}

// Float is a counter's or gauge's exposed value as the C library computes
// it (pcpu_snapshot_value(), pcpu_fraction_value()): units u = Value +
// Nanos / 10^9 (integer division, modulo 2^64; a gauge's read as int64),
// rest r = Nanos % 10^9; the residue alone where both are 0, else
// float64(u) + r / 1e9 + Residue, then scaled (a family with fractions has
// scale 0). Bit for bit the C reader's double.
func (s *Series) Float(f *Family) float64 {
	u := s.Value
	var r int64
	if f.Nanos {
		u += uint64(s.Nanos / 1e9)
		r = s.Nanos % 1e9
		if u == 0 && r == 0 {
			return s.Residue
		}
	}
	var v float64
	if f.Type == Counter {
		v = float64(u)
	} else {
		v = float64(int64(u))
	}
	if r != 0 {
		v += float64(r) / 1e9
	}
	return scaleDouble(v, f.Scale) + s.Residue
}

// SumFloat is a histogram series' exposed sum: Sum * 10^Scale plus the
// residue (pcpu_snapshot_sum()).
func (s *Series) SumFloat(f *Family) float64 {
	return scaleDouble(float64(s.Sum), f.Scale) + s.Residue
}

// scaleDouble is d * 10^scale as the C library's writers compute it (one
// multiplication or division by an exact power of ten).
func scaleDouble(d float64, scale int8) float64 {
	p := 1.0
	for k := int8(0); k < scale || k < -scale; k++ {
		p *= 10
	}
	if scale < 0 {
		return d / p
	}
	return d * p
}

// Count is a histogram series' number of observations.
func (s *Series) Count() uint64 {
	var n uint64
	for _, c := range s.Counts {
		n += c
	}
	return n
}

// parsed family and series, before the stability decision.
type fam struct {
	idx int
	e   entry
	bad string
	f   Family
}

type ser struct {
	idx    int
	e      entry
	bad    string
	fam    *fam
	group  bool
	places []place // 2.10, a sparse histogram's: its groups made when S was read
	values []string
	acc0   uint64
	acc1   uint64
	acc2   uint64    // 2.8: the residue's bits
	dslots []float64 // 2.8: a histogram's double sum, per slot
	counts []uint64
	slots  []uint64
}

func (s *ser) usable() bool { return s.bad == "" && s.fam != nil && s.fam.bad == "" }

// sparse: a valid family of sparse histograms (2.10), whose series' entries
// name tables of groups instead of values.
func (x *fam) sparse() bool { return x.bad == "" && x.f.Sparse }

// place is where part of a series' value lies, at the same offset in every
// slot and mirror region of a chunk: a dense series' whole value, or one
// group of a sparse histogram (2.10) or its pair of the per-slot double and
// the residue.
type place struct {
	s     *ser
	chunk uint32
	off   uint64
	size  uint64
	group int // a sparse histogram's group index (its word in the table); -1: the whole value
}

// appendPlaces appends where s's value lies.
func appendPlaces(v []place, s *ser) []place {
	if s.fam.sparse() {
		return append(v, s.places...)
	}
	return append(v, place{s: s, chunk: s.e.u32a, off: s.e.valueOff, size: uint64(s.e.u32b), group: -1})
}

// parse holds one attempt's copies.
type parse struct {
	h    *header
	E    []byte // the directory copy E1
	S    []byte // the strings copy
	used uint64
	esz  uint64
	fams []*fam
	sers []*ser
	b    *budget
}

func (p *parse) entryAt(i uint64) entry { return decodeEntry(p.E[i*p.esz:]) }

// blob returns e's blob in the strings copy, or nil if outside.
func (p *parse) blob(e *entry) []byte {
	if e.blobLen > blobMax {
		return nil
	}
	end := e.blobOff + uint64(e.blobLen)
	if end < e.blobOff || end > uint64(len(p.S)) {
		return nil
	}
	return p.S[e.blobOff:end]
}

// blobStr: the next NUL-terminated string of blob from *pos.
func blobStr(blob []byte, pos *int) (string, bool) {
	if *pos >= len(blob) {
		return "", false
	}
	i := bytes.IndexByte(blob[*pos:], 0)
	if i < 0 {
		return "", false
	}
	s := string(blob[*pos : *pos+i])
	*pos += i + 1
	return s, true
}

func valueSize(e *entry) uint64 {
	switch MetricType(e.typ) {
	case Counter, Gauge:
		if e.flags&eNanos != 0 {
			return 24 // 2.8 (a 2.7 writer's 16: see parseDirectory)
		}
		return 8
	}
	if e.u32a&schemeSparse != 0 { // 2.10: the series' table, a word per group (and the wide pair)
		n := sparseGroups(e.nbuckets)
		if e.u32a&schemeWide != 0 {
			n++
		}
		return 8 * n
	}
	if e.u32a&schemeWide != 0 {
		return 16 * (uint64(e.nbuckets) + 1)
	}
	if e.u32a&schemePairs != 0 {
		return 16 * uint64(e.nbuckets)
	}
	return 8 * (1 + uint64(e.nbuckets))
}

func (p *parse) parseFamily(x *fam) error {
	e := &x.e
	f := &x.f
	if e.typ < uint8(Counter) || e.typ > uint8(Histogram) {
		x.bad = "unknown metric type"
		return nil
	}
	if e.scale > statsScaleMax || e.scale < -statsScaleMax {
		x.bad = "scale out of range"
		return nil
	}
	if e.nlabels > statsLabelsMax {
		x.bad = "too many labels"
		return nil
	}
	if e.familyID == 0 {
		x.bad = "family id 0"
		return nil
	}
	blob := p.blob(e)
	if blob == nil {
		x.bad = "blob outside the string table"
		return nil
	}
	f.Type, f.Scale = MetricType(e.typ), e.scale
	pos := 0
	var ok bool
	if f.Name, ok = blobStr(blob, &pos); !ok {
		x.bad = "string not terminated"
		return nil
	}
	if e.flags&eHasHelp != 0 {
		f.HasHelp = true
		if f.Help, ok = blobStr(blob, &pos); !ok {
			x.bad = "string not terminated"
			return nil
		}
	}
	if f.Unit, ok = blobStr(blob, &pos); !ok {
		x.bad = "string not terminated"
		return nil
	}
	if !validMetricName(f.Name) {
		x.bad = "invalid metric name"
		return nil
	}
	if f.HasHelp && !validText(f.Help, statsHelpMax) {
		x.bad = "invalid help text"
		return nil
	}
	if f.Unit != "" && !validUnit(f.Name, f.Unit) {
		x.bad = "invalid unit"
		return nil
	}
	if err := p.b.charge(uint64(e.nlabels) * 16); err != nil {
		return err
	}
	f.LabelNames = make([]string, e.nlabels)
	for l := range f.LabelNames {
		n, ok := blobStr(blob, &pos)
		if !ok {
			x.bad = "label name not terminated"
			return nil
		}
		if !validLabelName(n) {
			x.bad = "invalid label name"
			return nil
		}
		if f.Type == Histogram && n == "le" {
			x.bad = `label "le" in a histogram`
			return nil
		}
		for _, m := range f.LabelNames[:l] {
			if m == n {
				x.bad = "label name twice"
				return nil
			}
		}
		f.LabelNames[l] = n
	}
	if e.flags&eInfo != 0 {
		if f.Type != Gauge || f.Unit != "" || e.scale != 0 || len(f.Name) <= 5 || f.Name[len(f.Name)-5:] != "_info" {
			x.bad = "info flag on a family that is not a gauge x_info"
			return nil
		}
		f.Info = true
	}
	if e.flags&eNanos != 0 { // a histogram's fractions are its scheme bit
		if f.Type != Counter && f.Type != Gauge || e.scale != 0 || f.Info {
			x.bad = "fraction flag on a family that is not a counter or gauge of scale 0"
			return nil
		}
		f.Nanos = true
	}
	if f.Type == Histogram {
		return p.parseHistogram(x, blob, pos)
	}
	if pos != len(blob) {
		x.bad = "trailing bytes in blob"
	}
	return nil
}

func (p *parse) parseHistogram(x *fam, blob []byte, pos int) error {
	e := &x.e
	f := &x.f
	if e.u32a&^uint32(schemePairs|schemeWide|schemeSparse|0xff) != 0 ||
		e.u32a&(schemeWide|schemeSparse) != 0 && e.u32a&schemePairs == 0 {
		x.bad = "unknown histogram scheme"
		return nil
	}
	f.Nanos = e.u32a&schemeWide != 0
	f.Sparse = e.u32a&schemeSparse != 0
	scheme := int(e.u32a & 0xff)
	if e.nbuckets < 2 || valueSize(e) > p.h.slotStride {
		x.bad = "bad bucket count"
		return nil
	}
	n := int(e.nbuckets - 1)
	f.Scheme = scheme
	switch scheme {
	case SchemeLogLinear:
		if !loglinValid(e.u32b, uint64(e.nbuckets)) {
			x.bad = "bad log-linear layout"
			return nil
		}
		if pos != len(blob) {
			x.bad = "trailing bytes in blob"
			return nil
		}
		if err := p.b.charge(uint64(n) * 8); err != nil {
			return err
		}
		f.Upper = make([]int64, n)
		for b := range f.Upper {
			f.Upper[b] = loglinUpper(e.u32b, uint64(b))
		}
		if e.valueOff == 0 {
			return nil
		}
		if e.valueOff > maxExportLg1 || e.valueOff-1 > uint64(e.u32b) {
			x.bad = "bad exported bounds per power of two"
			return nil
		}
		f.Exported = nonNil(exportList(f.Upper, uint(e.valueOff-1), int64(e.serial)))
		return nil
	case SchemeExplicit, SchemeExponential:
		pos = (pos + 7) &^ 7
		if n > maxBounds {
			x.bad = "too many bounds"
			return nil
		}
		if uint64(pos)+uint64(n)*8 != uint64(len(blob)) {
			x.bad = "bounds do not fill the blob"
			return nil
		}
		if err := p.b.charge(uint64(n) * 8); err != nil {
			return err
		}
		f.Upper = make([]int64, n)
		for b := range f.Upper {
			f.Upper[b] = int64(ne.Uint64(blob[pos+8*b:]))
		}
		for b := 1; b < n; b++ {
			if f.Upper[b] <= f.Upper[b-1] {
				x.bad = "bounds not increasing"
				return nil
			}
		}
		if scheme == SchemeExplicit {
			return nil
		}
		first := int64(e.valueOff)
		const lim = (1<<31 - 1) / 2
		// 2.8: u32b's high 16 bits, 1 + how many finite buckets the
		// export rule considers (0: all).
		schema, limit1 := e.u32b&(1<<exportLimitShift-1), e.u32b>>exportLimitShift
		if schema > schemaBias+8 || f.Upper[0] < 0 || first < -lim || first > lim ||
			limit1 > e.nbuckets {
			x.bad = "bad native histogram layout"
			return nil
		}
		f.Schema = int(schema) - schemaBias
		f.NativeIndex = int32(first)
		exportable := f.Upper
		if limit1 != 0 {
			exportable = f.Upper[:limit1-1]
		}
		if e.flags&eExportMask != 0 {
			lg1 := uint(e.flags&eExportMask) >> eExportShift
			if e.serial > 1<<63-1 {
				x.bad = "bad exported bounds of a native histogram"
				return nil
			}
			f.Exported = nonNil(nativeExportRule(exportable, f.NativeIndex, f.Schema, lg1-1, int64(e.serial)))
		} else {
			f.Exported = nonNil(nativeExportRule(exportable, f.NativeIndex, f.Schema, 2, 0))
		}
		return nil
	}
	x.bad = "unknown histogram scheme"
	return nil
}

func nonNil(x []int) []int {
	if x == nil {
		return []int{}
	}
	return x
}

func (p *parse) parseSeries(s *ser) error {
	e := &s.e
	if e.typ < uint8(Counter) || e.typ > uint8(Histogram) {
		s.bad = "unknown metric type"
		return nil
	}
	if e.nlabels > statsLabelsMax {
		s.bad = "too many labels"
		return nil
	}
	blob := p.blob(e)
	if blob == nil {
		s.bad = "blob outside the string table"
		return nil
	}
	if err := p.b.charge(uint64(e.nlabels) * 16); err != nil {
		return err
	}
	s.values = make([]string, e.nlabels)
	pos := 0
	for l := range s.values {
		v, ok := blobStr(blob, &pos)
		if !ok {
			s.bad = "label value not terminated"
			return nil
		}
		if !validText(v, statsLabelValueMax) {
			s.bad = "invalid label value"
			return nil
		}
		s.values[l] = v
	}
	if pos != len(blob) {
		s.bad = "trailing bytes in blob"
		return nil
	}
	if e.kind == kindGroupSeries {
		if MetricType(e.typ) == Histogram {
			s.bad = "a group member is a counter or a gauge"
			return nil
		}
		if e.u32a >= groupMax || e.u32b != 8 || e.valueOff >= p.used {
			s.bad = "group member: bad member index, size or group entry"
			return nil
		}
		s.group = true
	}
	// Where its value lies: parseDirectory(), by its family (a sparse
	// histogram's entry names a table instead).
	return nil
}

// checkValue checks where a dense series' value lies: inside its slot of
// a chunk the header counts.
func (p *parse) checkValue(s *ser) {
	e := &s.e
	if uint64(e.u32a) >= p.h.nchunks {
		s.bad = "chunk past the end"
		return
	}
	if e.valueOff%valueAlign != 0 {
		s.bad = "value not aligned to 8 bytes"
		return
	}
	end := e.valueOff + uint64(e.u32b)
	if end < e.valueOff || end > p.h.slotStride || e.u32b == 0 {
		s.bad = "value outside its slot"
	}
}

// parseTable reads a sparse histogram series' table of groups (2.10) from
// the strings copy into s.places. Its size was checked against the
// family's. A word goes from 0 to its place once, so a word with one half
// 0 is one being stored, copied 32 bits at a time: not made yet, as is a
// group in a chunk the header did not count when the strings were read
// (the writer grew the zone since; where in that chunk is not checked, as
// the C reader does not). Any other word that is not a place in a slot
// makes the series invalid. The C reader's checks, in its order
// (reader_parse.c sparse_parts(), format.h pcpu__seg_sparse_place()).
func (p *parse) parseTable(s *ser) error {
	e := &s.e
	end := e.valueOff + uint64(e.u32b)
	if e.u32a != 0 || e.valueOff%valueAlign != 0 || end < e.valueOff || end > uint64(len(p.S)) {
		s.bad = "sparse histogram: table outside the string table"
		return nil
	}
	groups := sparseGroups(s.fam.e.nbuckets)
	for k := uint64(0); k < uint64(e.u32b)/8; k++ {
		w := ne.Uint64(p.S[e.valueOff+8*k:])
		hi, lo := uint32(w>>32), uint32(w)
		if hi == 0 || lo == 0 {
			continue
		}
		if hi&1 == 0 || lo&1 == 0 {
			return p.badTable(s)
		}
		chunk, off := hi>>1, uint64(lo&^1)
		if uint64(chunk) >= p.h.nchunks {
			continue
		}
		size := uint64(sparseGroupSize)
		if k == groups { // the wide pair, after the groups
			size = sparseWideSize
		}
		if off%16 != 0 || off+size > p.h.slotStride {
			return p.badTable(s)
		}
		if err := p.b.charge(64); err != nil {
			return err
		}
		s.places = append(s.places, place{s: s, chunk: chunk, off: off, size: size, group: int(k)})
	}
	return nil
}

// badTable marks a sparse series invalid: none of its groups is read.
func (p *parse) badTable(s *ser) error {
	s.bad = "sparse histogram: a bad place in its table of groups"
	s.places = nil
	return nil
}

// parseDirectory parses every even-sequence family and series of E1 and
// links series to their families.
func (p *parse) parseDirectory() error {
	byID := map[uint64]*fam{}
	dup := map[uint64]bool{}
	for i := uint64(0); i < p.used; i++ {
		e := p.entryAt(i)
		if e.seq&1 != 0 {
			continue
		}
		switch e.kind {
		case kindFamily:
			if err := p.b.charge(256); err != nil {
				return err
			}
			x := &fam{idx: int(i), e: e}
			if err := p.parseFamily(x); err != nil {
				return err
			}
			p.fams = append(p.fams, x)
			if byID[e.familyID] != nil {
				dup[e.familyID] = true
			}
			byID[e.familyID] = x
		case kindSeries, kindGroupSeries:
			if err := p.b.charge(128); err != nil {
				return err
			}
			s := &ser{idx: int(i), e: e}
			if err := p.parseSeries(s); err != nil {
				return err
			}
			p.sers = append(p.sers, s)
		}
	}
	// Ids are never reused by a writer: two families with one id are a
	// forged directory.
	for _, x := range p.fams {
		if dup[x.e.familyID] {
			x.bad = "family id used twice"
		}
	}
	// Where a series' value lies is checked once its family is known to be
	// valid, as the C reader's link_series() does: a series without one
	// (an orphan, a bad family's) is never read, and is left out or
	// refused by decideKept().
	for _, s := range p.sers {
		if s.bad != "" {
			continue
		}
		f := byID[s.e.familyID]
		if f == nil {
			continue // orphan: flux or corruption, decided later
		}
		s.fam = f
		if f.bad != "" {
			continue
		}
		if f.e.typ != s.e.typ || f.e.nlabels != s.e.nlabels {
			s.bad = "type or labels differ from the family's"
		} else if !s.group && valueSize(&f.e) != uint64(s.e.u32b) &&
			!(f.e.flags&eNanos != 0 && s.e.u32b == 16) { // a 2.7 writer's, no residue
			s.bad = "value size does not match the type"
		} else if s.group {
			continue
		} else if f.sparse() { // 2.10: its entry names a table of groups
			if err := p.parseTable(s); err != nil {
				return err
			}
		} else {
			p.checkValue(s)
		}
	}
	return nil
}

// decideKept returns the families and series whose entries did not change
// between E1 and E2; an unchanged invalid entry is corruption.
func (a *attempt) decideKept() (map[*fam]bool, []*ser, error) {
	p := &a.p
	same := func(i uint64) bool {
		o := i * p.esz
		return bytes.Equal(a.E1[o:o+p.esz], a.E2[o:o+p.esz])
	}
	for i := uint64(0); i < p.used; i++ {
		e := p.entryAt(i)
		if !same(i) || e.seq&1 != 0 && e.kind != kindFree {
			a.changed++
		}
	}
	keptFam := map[*fam]bool{}
	for _, x := range p.fams {
		if !same(uint64(x.idx)) {
			continue
		}
		if x.bad != "" {
			return nil, nil, corrupt("directory entry %d (family): %s", x.idx, x.bad)
		}
		keptFam[x] = true
	}
	var kept []*ser
	for _, s := range p.sers {
		if !same(uint64(s.idx)) {
			continue
		}
		if s.bad != "" {
			return nil, nil, corrupt("directory entry %d (series): %s", s.idx, s.bad)
		}
		if s.fam == nil || !keptFam[s.fam] {
			if a.stable {
				return nil, nil, corrupt("directory entry %d: series of a family that does not exist", s.idx)
			}
			a.changed++
			continue
		}
		if s.group {
			gi := s.e.valueOff
			if !same(gi) {
				a.changed++
				continue
			}
			g := p.entryAt(gi)
			blob := p.blob(&g)
			if g.seq&1 != 0 || g.kind != kindGroup || g.u32a == 0 || g.u32a > groupMax ||
				uint64(g.blobLen) != 8*uint64(g.u32a) || blob == nil || s.e.u32a >= g.u32a {
				if !a.stable {
					a.changed++
					continue
				}
				return nil, nil, corrupt("directory entry %d: group member without a valid group entry %d", s.idx, gi)
			}
			s.acc0 = ne.Uint64(blob[8*s.e.u32a:])
		}
		kept = append(kept, s)
	}
	// Values of two series never overlap, nor do a sparse histogram's
	// groups (2.10) with anything (the zone hands out disjoint objects).
	var st []place
	for _, s := range kept {
		if !s.group {
			st = appendPlaces(st, s)
		}
	}
	sortByLoc(st)
	for k := 1; k < len(st); k++ {
		x, y := &st[k-1], &st[k]
		if y.chunk == x.chunk && y.off < x.off+x.size {
			return nil, nil, corrupt("entries %d and %d share storage", x.s.idx, y.s.idx)
		}
	}
	return keptFam, kept, nil
}

func sortByLoc(v []place) {
	slices.SortFunc(v, func(a, b place) int {
		if c := cmp.Compare(a.chunk, b.chunk); c != 0 {
			return c
		}
		return cmp.Compare(a.off, b.off)
	})
}

// build assembles the public snapshot: families by name, series by
// creation number; two series of a family with the same labels are
// corruption.
func build(keptFam map[*fam]bool, kept []*ser, perSlot bool) ([]Family, error) {
	members := map[*fam][]*ser{}
	for _, s := range kept {
		members[s.fam] = append(members[s.fam], s)
	}
	var fv []*fam
	for x := range keptFam {
		fv = append(fv, x)
	}
	// The writer's order: by name, a name's label sets (2.8) by their
	// label names (their number, then the names).
	slices.SortFunc(fv, func(a, b *fam) int {
		if c := strings.Compare(a.f.Name, b.f.Name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.f.LabelNames), len(b.f.LabelNames)); c != 0 {
			return c
		}
		if c := slices.Compare(a.f.LabelNames, b.f.LabelNames); c != 0 {
			return c
		}
		return cmp.Compare(a.idx, b.idx)
	})
	for i := 1; i < len(fv); i++ {
		if fv[i].f.Name == fv[i-1].f.Name && !sameMetric(&fv[i].f, &fv[i-1].f) {
			return nil, corrupt("two families named %.100s that are not two label sets of one metric", fv[i].f.Name)
		}
	}
	out := make([]Family, len(fv))
	for i, x := range fv {
		ss := members[x]
		// Two series of a family with the same labels are a forged
		// directory: sorted by labels, they are neighbours.
		slices.SortFunc(ss, func(a, b *ser) int { return slices.Compare(a.values, b.values) })
		for k := 1; k < len(ss); k++ {
			if slices.Equal(ss[k-1].values, ss[k].values) {
				return nil, corrupt("two series of %.100s with the same labels", x.f.Name)
			}
		}
		slices.SortStableFunc(ss, func(a, b *ser) int { return cmp.Compare(a.e.serial, b.e.serial) })
		f := x.f
		f.Series = make([]Series, len(ss))
		for k, s := range ss {
			se := &f.Series[k]
			se.LabelValues = s.values
			se.Group = s.group
			switch f.Type {
			case Counter, Gauge:
				se.Value = s.acc0
				if f.Nanos {
					se.Nanos = int64(s.acc1)
					se.Residue = math.Float64frombits(s.acc2)
				}
				if f.Info {
					se.Value = 1
				}
			default:
				se.Counts = s.counts
				se.Sum = int64(s.acc0)
				if f.Nanos { // the slots' doubles in slot order, then the residue
					var sum float64
					for _, d := range s.dslots {
						sum += d
					}
					se.Residue = sum + math.Float64frombits(s.acc2)
				}
			}
			if perSlot && !s.group {
				se.Slots = s.slots
			}
		}
		out[i] = f
	}
	return out, nil
}

// sameMetric: two families of one name are two label sets of one metric
// (2.8, PCPU_FAMILY_LABELSET): alike but for their label names, which are
// not the same set.
func sameMetric(a, b *Family) bool {
	if a.Type != b.Type || a.Scale != b.Scale || a.Info != b.Info || a.Nanos != b.Nanos ||
		a.HasHelp != b.HasHelp || a.Help != b.Help || a.Unit != b.Unit || a.Scheme != b.Scheme ||
		!slices.Equal(a.Upper, b.Upper) || !slices.Equal(a.Exported, b.Exported) ||
		(a.Exported == nil) != (b.Exported == nil) || a.Schema != b.Schema || a.NativeIndex != b.NativeIndex {
		return false
	}
	if len(a.LabelNames) != len(b.LabelNames) {
		return true
	}
	for _, n := range a.LabelNames {
		if !slices.Contains(b.LabelNames, n) {
			return true
		}
	}
	return false // the same names in another order: one label set twice
}

var _ = fmt.Sprintf
