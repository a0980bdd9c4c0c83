package harness

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// GeneratedSection is a block of a Markdown file that a tool (make bench, make chaos) rewrites
// on every run, between two HTML comment markers; the text around it is written by hand and kept.
type GeneratedSection struct {
	// Begin and End are the marker lines.
	Begin, End string
	// Title is the heading of a file that does not exist yet (or has no title).
	Title string
}

// Write replaces the section in the file at path with text. A file without the markers gets the
// section after its title; a missing file is created with Title.
func (s GeneratedSection) Write(path, text string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	doc := string(old)
	block := s.Begin + "\n" + text + s.End + "\n"
	switch i, j := strings.Index(doc, s.Begin), strings.Index(doc, s.End); {
	case i >= 0 && j > i:
		rest := doc[j+len(s.End):]
		rest = strings.TrimPrefix(rest, "\n")
		doc = doc[:i] + block + rest
	case strings.HasPrefix(doc, "# "):
		nl := strings.Index(doc, "\n")
		if nl < 0 {
			doc += "\n"
			nl = len(doc) - 1
		}
		doc = doc[:nl+1] + "\n" + block + doc[nl+1:]
	default:
		doc = "# " + s.Title + "\n\n" + block + doc
	}
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// MachineDescription names the cores, CPU model, memory and Go version of this machine, for the
// header of published measurements.
func MachineDescription() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb float64
		if _, err := fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %f kB", &kb); err == nil {
			mem = fmt.Sprintf(", %.0f GiB RAM", kb/(1<<20))
		}
	}
	return fmt.Sprintf("%d cores (%s)%s, %s/%s, %s", runtime.NumCPU(), model, mem, runtime.GOOS, runtime.GOARCH, runtime.Version())
}
