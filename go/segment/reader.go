package segment

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// DefaultMaxBytes is the default budget of one snapshot: bytes allocated
// and read, plus 4 KiB per system call on the values and 64 bytes per
// region an extent of data covers (as the C reader charges them), so a
// sparse file that claims terabytes costs no more than its data.
const DefaultMaxBytes = 4 << 30

const (
	maxAttempts   = 4
	runGap        = 65536
	syscallCharge = 4096
	regionCharge  = 64
)

// source is where a segment's bytes come from: a file (with holes found
// by SEEK_DATA/SEEK_HOLE) or a byte slice (every byte is data).
type source interface {
	readAt(b []byte, off uint64) error // exactly len(b) bytes, or an error
	size() (uint64, error)
	// dataAt returns the start of the first data at or after pos and the
	// hole after it (hole = 0: not known), or ok = false when only holes
	// follow pos.
	dataAt(pos uint64) (d, hole uint64, ok bool)
	holeAt(d uint64) uint64
}

type memSource []byte

func (m memSource) readAt(b []byte, off uint64) error {
	if off > uint64(len(m)) || uint64(len(b)) > uint64(len(m))-off {
		return corrupt("truncated")
	}
	copy(b, m[off:])
	return nil
}
func (m memSource) size() (uint64, error)                    { return uint64(len(m)), nil }
func (m memSource) dataAt(pos uint64) (uint64, uint64, bool) { return pos, ^uint64(0), true }
func (m memSource) holeAt(d uint64) uint64                   { return ^uint64(0) }

type fileSource struct{ f *os.File }

func (s fileSource) readAt(b []byte, off uint64) error {
	if off > 1<<63-1 {
		return corrupt("offset past the file")
	}
	n, err := s.f.ReadAt(b, int64(off))
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return corrupt("truncated (short read at %d)", off)
	}
	return err
}

func (s fileSource) size() (uint64, error) {
	st, err := s.f.Stat()
	if err != nil {
		return 0, err
	}
	return uint64(st.Size()), nil
}

const (
	seekData = 3 // SEEK_DATA (Linux)
	seekHole = 4 // SEEK_HOLE
)

func (s fileSource) dataAt(pos uint64) (uint64, uint64, bool) {
	x, err := syscall.Seek(int(s.f.Fd()), int64(pos), seekData)
	if err == syscall.ENXIO {
		return 0, 0, false // only holes from pos on
	}
	if err != nil || x < 0 {
		return pos, 0, true // cannot tell: read it
	}
	return uint64(x), 0, true
}

func (s fileSource) holeAt(d uint64) uint64 {
	x, err := syscall.Seek(int(s.f.Fd()), int64(d), seekHole)
	if err != nil || x < 0 {
		return ^uint64(0)
	}
	return uint64(x)
}

// budget charges a snapshot's allocations, reads and system calls.
type budget struct{ left uint64 }

func (b *budget) charge(n uint64) error {
	if n > b.left {
		return fmt.Errorf("%w: reading the segment needs more than its budget", ErrTooLarge)
	}
	b.left -= n
	return nil
}

// Reader reads one segment. Its methods are not safe for concurrent use
// by several goroutines; distinct Readers are independent.
type Reader struct {
	src  source
	f    *os.File
	h    header // as first read, validated
	Path string
	// MaxBytes is the budget of one snapshot (DefaultMaxBytes if 0).
	MaxBytes uint64
	// AllowStale: snapshot segments whose writer closed them or is gone
	// (else Snapshot fails with ErrWriterGone).
	AllowStale bool
	// CheckLiveness: judge the writer's liveness from /proc (files only).
	CheckLiveness bool
	// settleCopies: copy values three times and keep what settled
	// (torn.go): tornCopies, or a test's choice.
	settleCopies bool
}

// Open opens the segment file at path for reading, with the C reader's
// checks before anything is read: not a symlink (ErrPermission), a regular
// file (OpenOwned says how), owned by the uid its header names as writer
// (ErrPermission), and its header valid (ErrCorrupt, ErrIncompatible,
// ErrNotReady). Cost: three opens, two fstats, one pread of 256 bytes.
func Open(path string) (*Reader, error) {
	return OpenOwned(path, -1)
}

// OpenOwned is Open that also requires the file to belong to uid owner
// (the C reader's default: the caller's own segments), unless owner < 0.
// The file is checked before it is opened for reading, as the C reader
// does it: an O_PATH descriptor (which opens nothing: no device driver
// runs, no FIFO end is taken) never through a symlink (ErrPermission),
// fstat (a regular file, else ErrPermission), then a reopen of that same
// inode through /proc/self/fd with O_RDONLY|O_NONBLOCK.
func OpenOwned(path string, owner int) (*Reader, error) {
	pfd, err := syscall.Open(path, unix.O_PATH|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
	if err != nil {
		switch err {
		case syscall.ENOENT:
			return nil, fmt.Errorf("%w: %s", ErrMissing, path)
		case syscall.ELOOP, syscall.EACCES, syscall.EPERM:
			return nil, fmt.Errorf("%w: %s: %v", ErrPermission, path, err)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	var st syscall.Stat_t
	err = syscall.Fstat(pfd, &st)
	if err == nil && st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		err = fmt.Errorf("%w: %s: not a regular file", ErrPermission, path)
	} else if err == nil && owner >= 0 && st.Uid != uint32(owner) {
		err = fmt.Errorf("%w: %s: owned by uid %d, not %d", ErrPermission, path, st.Uid, owner)
	}
	var fd int
	if err == nil {
		fd, err = syscall.Open("/proc/self/fd/"+strconv.Itoa(pfd), syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err == syscall.ENOENT { // no /proc: by name, and the inode must match
			fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		}
		if err == syscall.EACCES || err == syscall.EPERM {
			err = fmt.Errorf("%w: %s: %v", ErrPermission, path, err)
		}
	}
	syscall.Close(pfd)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), path)
	var st2 syscall.Stat_t
	if err := syscall.Fstat(fd, &st2); err != nil || st2.Dev != st.Dev || st2.Ino != st.Ino {
		f.Close()
		return nil, fmt.Errorf("%w: %s: replaced while it was opened", ErrPermission, path)
	}
	r := &Reader{src: fileSource{f}, f: f, Path: path, CheckLiveness: true, settleCopies: tornCopies}
	if err := r.init(); err != nil {
		f.Close()
		return nil, fmt.Errorf("segment %s: %w", filepath.Base(path), err)
	}
	if st.Uid != r.h.writerUID {
		f.Close()
		return nil, fmt.Errorf("%w: %s: owned by uid %d, written by uid %d", ErrPermission, path, st.Uid, r.h.writerUID)
	}
	return r, nil
}

// FromBytes returns a Reader of a segment held in memory (a copy of a
// file): every byte is data, liveness is not checked (the snapshot says
// Live unless the segment is closed). Errors as Open's.
func FromBytes(data []byte) (*Reader, error) {
	r := &Reader{src: memSource(data), Path: "(memory)", AllowStale: true, settleCopies: tornCopies}
	if err := r.init(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reader) init() error {
	var b [headerSize]byte
	if err := r.src.readAt(b[:], 0); err != nil {
		return err
	}
	r.h = decodeHeader(b[:])
	if err := checkHeaderStatic(&r.h); err != nil {
		return err
	}
	size, err := r.src.size()
	if err != nil {
		return err
	}
	return checkHeaderDynamic(&r.h, size)
}

// Close releases the file. Safe to call once.
func (r *Reader) Close() error {
	if r.f != nil {
		return r.f.Close()
	}
	return nil
}

// Name is the segment's name (from its header).
func (r *Reader) Name() string {
	n := 0
	for n < nameMax && r.h.name[n] != 0 {
		n++
	}
	return string(r.h.name[:n])
}

// PID is the writer's (for a tree, the publisher's) pid.
func (r *Reader) PID() int32 { return r.h.writerPID }

// CreatedNs is the segment's publication time (CLOCK_REALTIME, ns).
func (r *Reader) CreatedNs() uint64 { return r.h.createdNs }

func (r *Reader) readHeader() (header, error) {
	var b [headerSize]byte
	if err := r.src.readAt(b[:], 0); err != nil {
		return header{}, err
	}
	h := decodeHeader(b[:])
	if !sameStatic(&h, &r.h) {
		return h, corrupt("header changed")
	}
	size, err := r.src.size()
	if err != nil {
		return h, err
	}
	return h, checkHeaderDynamic(&h, size)
}

type attempt struct {
	r       *Reader
	h1, hb  header
	h2      header
	E1, E2  []byte
	p       parse
	b       budget
	changed int
	stable  bool
}

// Snapshot reads the segment once, consistently (docs/segment-format.md,
// "Writer and readers": header, directory, header, strings, values,
// directory, header; up to 4 tries while the directory changes, the last
// keeping what did not change). perSlot fills each series' Slots.
// On a 32-bit target (GOARCH=386, arm, mips, mipsle), where the kernel
// may copy a 64-bit word 32 bits at a time, the values are copied three
// times and each word kept only once its copies settle (never a value
// torn between its halves; torn.go), as the C reader does.
// Errors: ErrCorrupt for an invalid entry that did not change during the
// read (or any inconsistency in a stable read), ErrWriterGone for a closed
// or gone writer (unless AllowStale), ErrTooLarge past MaxBytes,
// ErrNotReady (32-bit targets) for a value whose halves kept changing
// through every attempt, I/O errors. Cost: O(directory + strings + data
// extents) reads, bounded by MaxBytes whatever the file claims; three
// times the values' reads on a 32-bit target.
func (r *Reader) Snapshot(perSlot bool) (*Snapshot, error) {
	state := StateUnknown
	checked := false
	for a := 0; a < maxAttempts; a++ {
		s, err := r.attempt(perSlot, a+1 == maxAttempts, &state, &checked)
		if err != nil || s != nil {
			if err != nil {
				return nil, fmt.Errorf("segment %s: %w", r.Name(), err)
			}
			return s, nil
		}
		runtime.Gosched() // let the writer finish its change
	}
	return nil, fmt.Errorf("segment %s: kept changing: %w", r.Name(), ErrNotReady)
}

func (r *Reader) attempt(perSlot, last bool, state *State, checked *bool) (*Snapshot, error) {
	a := &attempt{r: r}
	a.b.left = r.MaxBytes
	if a.b.left == 0 {
		a.b.left = DefaultMaxBytes
	}
	var err error
	if a.h1, err = r.readHeader(); err != nil {
		return nil, err
	}
	if !*checked || a.h1.flags&FlagClosed != 0 {
		*state = r.writerState(a.h1.flags)
		*checked = true
	}
	if (*state == StateClosed || *state == StateGone) && !r.AllowStale {
		if *state == StateClosed {
			return nil, fmt.Errorf("%w: closed by its writer (pid %d)", ErrWriterGone, a.h1.writerPID)
		}
		return nil, fmt.Errorf("%w: writer (pid %d) exited without unpublishing", ErrWriterGone, a.h1.writerPID)
	}
	used := a.h1.entriesUsed
	esz := uint64(a.h1.entrySize)
	elen := used * esz // used <= capacity, capacity * size checked
	if err := a.b.charge(2 * elen); err != nil {
		return nil, err
	}
	a.E1 = make([]byte, elen)
	a.E2 = make([]byte, elen)
	if err := r.src.readAt(a.E1, a.h1.entriesOffset); err != nil {
		return nil, err
	}
	// strings_used and nchunks after E1: whatever an entry of E1 names was
	// published before the entry.
	if a.hb, err = r.readHeader(); err != nil {
		return nil, err
	}
	if err := a.b.charge(a.hb.stringsUsed); err != nil {
		return nil, err
	}
	S := make([]byte, a.hb.stringsUsed)
	if err := r.src.readAt(S, a.hb.stringsOffset); err != nil {
		return nil, err
	}
	a.p = parse{h: &a.hb, E: a.E1, S: S, used: used, esz: esz, b: &a.b}
	if err := a.p.parseDirectory(); err != nil {
		return nil, err
	}
	if err := a.readValues(perSlot); err != nil {
		// A word whose halves kept changing (torn.go): the next
		// attempt reads it again; the last one fails with the error.
		var u *unsettledError
		if !last && errors.As(err, &u) {
			return nil, nil
		}
		return nil, err
	}
	// The second look: the directory, then the header (after it, as a
	// seqlock reader loads the sequence again after its data).
	if err := r.src.readAt(a.E2, a.h1.entriesOffset); err != nil {
		return nil, err
	}
	var hb [headerSize]byte
	if err := r.src.readAt(hb[:], 0); err != nil {
		return nil, err
	}
	a.h2 = decodeHeader(hb[:])
	a.stable = a.h1.generation == a.h2.generation && a.h1.generation&1 == 0
	if !a.stable && !last {
		return nil, nil
	}
	keptFam, kept, err := a.decideKept()
	if err != nil {
		return nil, err
	}
	fams, err := build(keptFam, kept, perSlot)
	if err != nil {
		return nil, err
	}
	st := *state
	if a.h2.flags&FlagClosed != 0 {
		st = StateClosed
	}
	return &Snapshot{
		Name: r.Name(), PID: a.h1.writerPID, UID: a.h1.writerUID, CreatedNs: a.h1.createdNs,
		VersionMinor: a.h1.versionMinor, NSlots: a.h1.nslots, OwnedSlots: a.h1.ownedSlots,
		SlotIndex: a.h1.slotIndex, Flags: a.h2.flags, Dropped: a.h2.dropped, NoSpaceCount: a.h2.nospace,
		Stable: a.stable, Changed: a.changed, State: st, Families: fams,
	}, nil
}

type run struct {
	lo, hi      uint64
	first, last int
}

// readValues sums every usable series' words over its chunk's slot and
// mirror regions, reading only where the file holds data. A sparse
// histogram's groups (2.10) are read as any value, each where it lies.
func (a *attempt) readValues(perSlot bool) error {
	p := &a.p
	h := p.h
	var v []place
	for _, s := range p.sers {
		if !s.usable() || s.group {
			continue
		}
		if s.fam.f.Type == Histogram {
			if err := a.b.charge(8 * uint64(s.fam.e.nbuckets)); err != nil {
				return err
			}
			s.counts = make([]uint64, s.fam.e.nbuckets)
			if s.fam.f.Nanos { // 2.8: its double sum, per slot
				if err := a.b.charge(8 * uint64(h.nslots)); err != nil {
					return err
				}
				s.dslots = make([]float64, h.nslots)
			}
		}
		if perSlot {
			if err := a.b.charge(8 * uint64(h.nslots)); err != nil {
				return err
			}
			s.slots = make([]uint64, h.nslots)
		}
		v = appendPlaces(v, s)
	}
	sortByLoc(v)
	var buf []byte
	for i := 0; i < len(v); {
		chunk := v[i].chunk
		var runs []run
		j := i
		for j < len(v) && v[j].chunk == chunk {
			lo, hi := v[j].off, v[j].off+v[j].size
			k := j + 1
			for k < len(v) && v[k].chunk == chunk && v[k].off <= hi+runGap {
				if e := v[k].off + v[k].size; e > hi {
					hi = e
				}
				k++
			}
			runs = append(runs, run{lo, hi, j, k})
			// Room for each copy of the run (torn.go).
			if need := a.r.copies() * (hi - lo); need > uint64(len(buf)) {
				if err := a.b.charge(need); err != nil {
					return err
				}
				buf = make([]byte, need)
			}
			j = k
		}
		if err := a.readChunk(v, chunk, runs, buf, perSlot); err != nil {
			return err
		}
		i = j
	}
	return nil
}

func (a *attempt) readChunk(v []place, chunk uint32, runs []run, buf []byte, perSlot bool) error {
	h := a.p.h
	src := a.r.src
	// chunk < nchunks and data_offset + nchunks * chunk_span <= file size
	// were checked; every run ends within slot_stride: no overflow, every
	// region read lies inside the file.
	base := h.dataOffset + uint64(chunk)*h.chunkSpan
	end := base + h.chunkSpan
	stride := h.slotStride
	nregions := 2 * uint64(h.nslots)
	wlo, whi := runs[0].lo, runs[len(runs)-1].hi
	pos := base + wlo
	cur, next := ^uint64(0), 0
	for pos < end {
		if err := a.b.charge(syscallCharge); err != nil {
			return err
		}
		d, hole, ok := src.dataAt(pos)
		if !ok || d >= end {
			break
		}
		if d < pos {
			d = pos
		}
		rg, rel := (d-base)/stride, (d-base)%stride
		if rel < wlo { // data before the window: look in the window
			pos = base + rg*stride + wlo
			continue
		}
		if rel >= whi { // after it: the next region's window
			if rg+1 >= nregions {
				break
			}
			pos = base + (rg+1)*stride + wlo
			continue
		}
		if hole == 0 {
			if err := a.b.charge(syscallCharge); err != nil {
				return err
			}
			hole = src.holeAt(d)
		}
		if hole > end {
			hole = end
		}
		if hole <= d {
			hole = d + 1 // changed under us: at least progress
		}
		// Every region the extent [d, hole) meets, in order.
		for ; rg < nregions && base+rg*stride < hole; rg++ {
			rs := base + rg*stride
			x := max(d, rs) - rs
			y := min(hole, rs+stride) - rs
			slot := int(rg % uint64(h.nslots)) // regions nslots.. mirror slots 0..
			if err := a.b.charge(regionCharge); err != nil {
				return err
			}
			if rg != cur { // a new region: none of its runs read yet
				cur, next = rg, 0
			}
			// Runs ending at or before x lie in a hole (they read as
			// zero); runs before next were read by an earlier extent of
			// this region: each run is read once per region.
			next += sort.Search(len(runs)-next, func(i int) bool { return runs[next+i].hi > x })
			for ; next < len(runs) && runs[next].lo < y; next++ {
				u := runs[next]
				if err := a.b.charge(u.hi - u.lo + syscallCharge); err != nil {
					return err
				}
				n := u.hi - u.lo
				b := buf[:n]
				if err := src.readAt(b, rs+u.lo); err != nil {
					return err
				}
				if a.r.settleCopies { // a copy made 32 bits at a time may be torn
					if err := a.r.settle(&a.b, b, buf[n:2*n], buf[2*n:3*n], rs+u.lo); err != nil {
						return err
					}
				}
				for k := u.first; k < u.last; k++ {
					accumulate(&v[k], b[v[k].off-u.lo:], slot, perSlot)
				}
			}
		}
		pos = hole
	}
	return nil
}

func accumulate(pl *place, v []byte, slot int, perSlot bool) {
	s := pl.s
	if pl.group >= 0 {
		accumulateGroup(s, pl.group, v, slot, perSlot)
		return
	}
	var part uint64
	f := &s.fam.f
	switch f.Type {
	case Counter, Gauge:
		part = ne.Uint64(v)
		s.acc0 += part
		if f.Nanos {
			s.acc1 += ne.Uint64(v[8:])
			if s.e.u32b == 24 { // 2.8: the residue's bits
				s.acc2 += ne.Uint64(v[16:])
			}
		}
	default:
		nb := len(s.counts)
		if s.fam.e.u32a&schemePairs != 0 { // 2.4: (count, sum) per bucket
			for b := 0; b < nb; b++ {
				c := ne.Uint64(v[16*b:])
				s.counts[b] += c
				s.acc0 += ne.Uint64(v[16*b+8:])
				part += c
			}
			if f.Nanos { // 2.8: a double per slot (its word, then its mirror's), the residue
				s.dslots[slot] += math.Float64frombits(ne.Uint64(v[16*nb:]))
				s.acc2 += ne.Uint64(v[16*nb+8:])
			}
		} else { // 2.0-2.3: [sum, bucket 0, ...]
			s.acc0 += ne.Uint64(v)
			for b := 0; b < nb; b++ {
				c := ne.Uint64(v[8*(1+b):])
				s.counts[b] += c
				part += c
			}
		}
	}
	if perSlot {
		s.slots[slot] += part
	}
}

// accumulateGroup adds one region's copy of group k of a sparse histogram
// (2.10) as the dense histogram's pairs are added: buckets 8k..8k+7 (none
// past nbuckets), or the group after the last, the pair of the per-slot
// double and the residue (the dense value's last pair).
func accumulateGroup(s *ser, k int, v []byte, slot int, perSlot bool) {
	nb := len(s.counts)
	first := k * sparseGroup
	if first >= nb {
		s.dslots[slot] += math.Float64frombits(ne.Uint64(v))
		s.acc2 += ne.Uint64(v[8:])
		return
	}
	var part uint64
	for b := 0; b < sparseGroup && first+b < nb; b++ {
		c := ne.Uint64(v[16*b:])
		s.counts[first+b] += c
		s.acc0 += ne.Uint64(v[16*b+8:])
		part += c
	}
	if perSlot {
		s.slots[slot] += part
	}
}
