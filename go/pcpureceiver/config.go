package pcpureceiver

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"

	"go.opentelemetry.io/collector/scraper/scraperhelper"

	"pcpu.invalid/go/segment"
)

// Config is the pcpu receiver's configuration:
//
//	receivers:
//	  pcpu:
//	    directory: /dev/shm/pcpu-1000   # default: /dev/shm/pcpu-<the collector's uid>
//	    segments: [myapp]               # default: every segment of the directory
//	    collection_interval: 10s        # default 1m (scraperhelper)
//	    per_slot: true                  # default false
//	    max_bytes: 1073741824           # default 4 GiB per segment
//	    owner: postgres                 # default: the collector's user (root: any)
type Config struct {
	scraperhelper.ControllerConfig `mapstructure:",squash"`

	// Directory holds the segments (pcpu.<pid>.<name>): the writers'
	// $PCPU_SEGMENT_DIR, or their per-user directory /dev/shm/pcpu-<uid>.
	Directory string `mapstructure:"directory"`
	// Segments, if not empty, are the segment names to read (every
	// process publishing one of them); others are ignored. A name no file
	// of the directory has is reported by pcpu_segment_up 0, reason
	// "missing", as pcpustat serve reports a named segment it cannot find.
	Segments []string `mapstructure:"segments"`
	// PerSlot adds each slot's part of every value, as `pcpustat -p`
	// shows it: metric <name>.slot, attribute slot = cpuN, cidN or ownedK.
	PerSlot bool `mapstructure:"per_slot"`
	// MaxBytes bounds what one segment's snapshot may read and allocate
	// (segment.Reader.MaxBytes); 0 is the reader's default, 4 GiB.
	MaxBytes uint64 `mapstructure:"max_bytes"`
	// Owner is the user whose segment files are read, a name or a uid
	// (pcpustat -u): a collector in a server's group (the segments 0640
	// with that group) reads the server's. Empty: the collector's own
	// user's files only, any user's when it runs as root. Each file must
	// still belong to the user its writer runs as.
	Owner string `mapstructure:"owner"`
}

// ownerUID is Owner as a uid, -1 when empty.
func (c *Config) ownerUID() (int, error) {
	if c.Owner == "" {
		return -1, nil
	}
	if n, err := strconv.Atoi(c.Owner); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("owner: %d is not a uid", n)
		}
		return n, nil
	}
	u, err := user.Lookup(c.Owner)
	if err != nil {
		return 0, fmt.Errorf("owner: %w", err)
	}
	return strconv.Atoi(u.Uid)
}

// Validate checks the configuration (called by the collector on load).
func (c *Config) Validate() error {
	if c.Directory == "" {
		return errors.New("directory must be set")
	}
	if c.CollectionInterval <= 0 {
		return errors.New("collection_interval must be positive")
	}
	for _, s := range c.Segments {
		if !validName(s) {
			return fmt.Errorf("segments: %q is not a segment name ([A-Za-z0-9_.-], 1 to 64 bytes)", s)
		}
	}
	if _, err := c.ownerUID(); err != nil {
		return err
	}
	return nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 || s[0] == '.' || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-') {
			return false
		}
	}
	return true
}

func createDefaultConfig() *Config {
	return &Config{
		ControllerConfig: scraperhelper.NewDefaultControllerConfig(),
		Directory:        fmt.Sprintf("/dev/shm/pcpu-%d", os.Geteuid()),
		MaxBytes:         segment.DefaultMaxBytes,
	}
}
