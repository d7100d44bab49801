package pcpureceiver

import (
	"errors"
	"fmt"
	"os"

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
