package segment

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
)

// State is a segment writer's liveness (docs/segment-format.md, "Liveness").
type State int

// The states: gone only on positive evidence; unknown is read as live.
const (
	StateLive    State = iota // the writer runs (or a process of its tree does)
	StateGone                 // it exited without unpublishing
	StateClosed               // it unpublished the segment (header flag 1)
	StateUnknown              // cannot tell (another pid namespace, /proc unreadable)
)

// String names the state as pcpustat's listing does.
func (s State) String() string {
	return [...]string{"live", "gone", "closed", "unknown"}[s]
}

const fOFDGetlk = 36 // F_OFD_GETLK (Linux 3.15)

// The member bytes of a tree with FlagTreeWrlock (format.h).
const treeMembersAt, treeMembers = 1, 1024

// treeMemberLives: whether a process of a tree holds its member lock: 1,
// 0, or -1 when it cannot tell. With wrlock (FlagTreeWrlock) the members
// hold write locks on member bytes and only a write lock there counts (a
// read lock's probe), so a process that can only read the file cannot keep
// a dead tree live with read locks; without it (older writers: a read lock
// on byte 0) any lock on byte 0 counts.
func treeMemberLives(f *os.File, wrlock bool) int {
	lk := syscall.Flock_t{Type: syscall.F_WRLCK, Whence: 0, Start: 0, Len: 1}
	if wrlock {
		lk = syscall.Flock_t{Type: syscall.F_RDLCK, Whence: 0, Start: treeMembersAt, Len: treeMembers}
	}
	if err := syscall.FcntlFlock(f.Fd(), fOFDGetlk, &lk); err != nil {
		return -1
	}
	if lk.Type != syscall.F_UNLCK {
		return 1
	}
	return 0
}

func pidns() uint64 {
	var st syscall.Stat_t
	if syscall.Stat("/proc/self/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}

// procStart: the start time of pid (/proc/<pid>/stat field 22), or an
// error: ESRCH on positive evidence that it does not run (no such
// process, or a zombie), anything else when it cannot tell.
func procStart(pid int32) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/stat")
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ESRCH) {
			if errors.Is(err, syscall.ESRCH) || syscall.Kill(int(pid), 0) == syscall.ESRCH {
				return 0, syscall.ESRCH
			}
			return 0, syscall.ENOENT // it exists, or cannot tell
		}
		return 0, err
	}
	// "pid (comm) state ...": comm may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) || b[i+1] != ' ' {
		return 0, syscall.EIO
	}
	if b[i+2] == 'Z' || b[i+2] == 'X' {
		return 0, syscall.ESRCH
	}
	fields := bytes.Fields(b[i+2:]) // field 3 on
	if len(fields) < 20 {
		return 0, syscall.EIO
	}
	return strconv.ParseUint(string(fields[19]), 10, 64)
}

// writerState judges the writer of r's segment: closed by flag, live if a
// tree member holds its lock, else by pid and start time.
func (r *Reader) writerState(flags uint32) State {
	if flags&FlagClosed != 0 {
		return StateClosed
	}
	if !r.CheckLiveness || r.f == nil {
		return StateLive
	}
	members := 0
	if flags&FlagTree != 0 {
		members = treeMemberLives(r.f, flags&FlagTreeWrlock != 0)
	}
	if members == 1 {
		return StateLive
	}
	if r.h.writerPidns != 0 && pidns() != r.h.writerPidns {
		return StateUnknown // its pids name other processes here
	}
	st := StateUnknown
	start, err := procStart(r.h.writerPID)
	switch {
	case err == nil && start == r.h.writerStart:
		st = StateLive
	case err == nil, errors.Is(err, syscall.ESRCH):
		st = StateGone
	}
	// A tree whose publisher is gone lives on in its other processes:
	// without OFD locks there is no evidence either way.
	if st == StateGone && members < 0 {
		st = StateUnknown
	}
	return st
}

// File is a segment file found in a directory.
type File struct {
	Path string
	PID  int32
	Name string
}

// parseFileName: "pcpu.<pid>.<name>", canonical (no leading zero).
func parseFileName(s string) (int32, string, bool) {
	const prefix = "pcpu."
	if len(s) <= len(prefix) || s[:len(prefix)] != prefix {
		return 0, "", false
	}
	s = s[len(prefix):]
	i := 0
	var v int64
	for i < len(s) && isDigit(s[i]) {
		v = v*10 + int64(s[i]-'0')
		i++
		if i > 10 {
			return 0, "", false
		}
	}
	if i == 0 || s[0] == '0' || i >= len(s) || s[i] != '.' || v == 0 || v > 1<<31-1 {
		return 0, "", false
	}
	name := s[i+1:]
	if !validSegmentName(name) {
		return 0, "", false
	}
	return int32(v), name, true
}

// List returns the segment files of dir (pcpu.<pid>.<name>, canonical
// names only), sorted by name then pid. It opens none of them.
// Errors: those of reading the directory.
func List(dir string) ([]File, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("segment directory %s: %w", dir, err)
	}
	var out []File
	for _, e := range ents {
		pid, name, ok := parseFileName(e.Name())
		if ok {
			out = append(out, File{Path: filepath.Join(dir, e.Name()), PID: pid, Name: name})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].PID < out[j].PID
	})
	return out, nil
}
