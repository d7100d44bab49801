package segment

import (
	"fmt"
	"math/bits"
)

// Torn copies. In the writer's memory a 64-bit word is never half-written,
// but a copy of it made 32 bits at a time can be: the kernel's copy of a
// file (the pread behind ReadAt) on a 32-bit target takes each half at its
// own moment, so a word that a writer moves across a multiple of 2^32
// while it is copied can come back as the low half of one value and the
// high half of another -- 2^32 x k away from anything the word held (a
// counter of 2^32 - 1 read as 0: issue 51, the C reader on ARMv7).
//
// The reader therefore copies a run of values three times and keeps each
// word from the middle copy when the three copies settle on it (settled()),
// reading the word alone again while they do not, settleMax more times at
// most; a word still unsettled then fails the read with an error wrapping
// ErrNotReady (the C reader's EAGAIN), and a snapshot tries again while it
// has attempts left. Never a value that may be torn. This is the C
// reader's rule and bound (src/core/core.h "torn copies", PCPU__SETTLE_MAX;
// src/segment/reader_input.c pcpu__rd_settle()).

// tornCopies: whether this target's copies of the file may be torn, and so
// whether a Reader settles what it copies. Where the native word is 32
// bits (GOARCH=386, arm, mips, mipsle), as the C library decides where its
// arch header does not say (pcpu/arch/generic.h: 32-bit pointers; arm.h:
// yes): the kernel's copy loops move words of that size.
const tornCopies = bits.UintSize == 32

// settleMax: a word whose copies never settle is read at most this many
// times more (after its three copies); then the read fails.
const settleMax = 64

// settled reports whether three copies a, b, c of one word, made in that
// order, settle on b: their high halves are equal, and b lies between a
// and c in the direction the word moved from a to c (modulo 2^64, so a
// gauge going from -1 to 0 moved up by 1).
//
// Equal high halves alone are not enough: a word going 2^32 - 1 -> 2^32 ->
// 2^32 - 1 while the middle copy is made, low half first, gives 0 between
// two copies of 2^32 - 1, all three with high half 0. A torn copy is
// 2^32 x k away from what the word held, so it is outside [a, c] unless a
// and c are torn alike; what is kept is a value between two copies.
func settled(a, b, c uint64) bool {
	if (a>>32) != (b>>32) || (b>>32) != (c>>32) {
		return false
	}
	if up := c - a; up < 1<<63 { // moved up by up (or stayed)
		return b-a <= up
	}
	return a-b <= a-c // moved down by a - c
}

// unsettledError: a word whose copies never settled. It wraps ErrNotReady
// (Reason: not_ready), as the C reader fails with EAGAIN.
type unsettledError struct {
	off   uint64 // the word's offset in the file
	reads int
}

func (e *unsettledError) Error() string {
	return fmt.Sprintf("the value at offset %d kept changing between its two halves (%d reads)", e.off, e.reads)
}

func (e *unsettledError) Unwrap() error { return ErrNotReady }

// settle takes buf, a copy of len(buf) bytes (8-byte words) at off, copies
// them twice more into b2 and b3 (each at least len(buf) bytes), and
// leaves in buf each word as settled() keeps it, reading a word alone
// again while its last three copies do not settle. Every read is charged
// to bud (nil: to nothing), as the C reader charges them: the two copies'
// bytes and a system call each, a system call per word read again.
// Returns an *unsettledError for a word that did not settle within
// settleMax more reads, or a read's or the budget's error.
func (r *Reader) settle(bud *budget, buf, b2, b3 []byte, off uint64) error {
	n := len(buf)
	b2, b3 = b2[:n], b3[:n]
	if bud != nil {
		if err := bud.charge(2 * (uint64(n) + syscallCharge)); err != nil {
			return err
		}
	}
	if err := r.src.readAt(b2, off); err != nil {
		return err
	}
	if err := r.src.readAt(b3, off); err != nil {
		return err
	}
	var w [8]byte
	for i := 0; i+8 <= n; i += 8 {
		x, y, z := ne.Uint64(buf[i:]), ne.Uint64(b2[i:]), ne.Uint64(b3[i:])
		for again := 0; !settled(x, y, z); again++ {
			if again == settleMax {
				return &unsettledError{off + uint64(i), settleMax + 3}
			}
			if bud != nil {
				if err := bud.charge(syscallCharge); err != nil {
					return err
				}
			}
			if err := r.src.readAt(w[:], off+uint64(i)); err != nil {
				return err
			}
			x, y, z = y, z, ne.Uint64(w[:])
		}
		ne.PutUint64(buf[i:], y)
	}
	return nil
}

// copies is how many copies of a run the reader makes: 3 where it
// settles them, else 1.
func (r *Reader) copies() uint64 {
	if r.settleCopies {
		return 3
	}
	return 1
}
