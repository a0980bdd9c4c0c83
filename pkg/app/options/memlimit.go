package options

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-logr/logr"
)

// memoryLimitEnv is the Go runtime's own setting of its soft memory limit; when it is set, the
// binaries leave the limit to it (GOMEMLIMIT=off turns the limit off).
const memoryLimitEnv = "GOMEMLIMIT"

// minBinaryPages is what the soft memory limit leaves at least, below the container's limit, for
// what the Go runtime does not count: the binary's own pages (about 50 MiB of the manager's are
// resident) and the kernel's buffers of its sockets and files.
const minBinaryPages = 64 << 20

// unlimited is where cgroup v1 puts "no limit" (the largest page-aligned int64) and above.
const unlimited = int64(1) << 62

// containerMemoryLimit reads the memory limit of the process's cgroup under root ("/" in
// production): cgroup v2's memory.max, or v1's memory.limit_in_bytes. The cgroup is the one
// /proc/self/cgroup names, under /sys/fs/cgroup; inside a container, whose cgroup directory is
// mounted at the root of the hierarchy, the file at the root. ok is false when no limit is set or
// no file can be read; source names the file read.
func containerMemoryLimit(root string) (limit int64, source string, ok bool, err error) {
	self, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return 0, "", false, nil // not Linux, or no /proc: nothing to follow
		}
		return 0, "", false, fmt.Errorf("reading the process's cgroups: %w", err)
	}
	var candidates []string
	sc := bufio.NewScanner(bytes.NewReader(self))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir := filepath.Join(root, "sys/fs/cgroup")
			candidates = append(candidates, filepath.Join(dir, parts[2], "memory.max"), filepath.Join(dir, "memory.max"))
		case containsController(parts[1], "memory"):
			dir := filepath.Join(root, "sys/fs/cgroup/memory")
			candidates = append(candidates, filepath.Join(dir, parts[2], "memory.limit_in_bytes"), filepath.Join(dir, "memory.limit_in_bytes"))
		}
	}
	for _, path := range candidates {
		raw, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, "", false, fmt.Errorf("reading the memory limit: %w", err)
		}
		value := strings.TrimSpace(string(raw))
		if value == "max" {
			return 0, path, false, nil
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return 0, "", false, fmt.Errorf("reading the memory limit %s: %q is not a number of bytes", path, value)
		}
		if n <= 0 || n >= unlimited {
			return 0, path, false, nil
		}
		return n, path, true, nil
	}
	return 0, "", false, nil
}

func containsController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// SoftMemoryLimit is the Go soft memory limit the binaries set for a container memory limit: a
// tenth below it, and at least minBinaryPages below. It is 0 (none) when the limit leaves less
// than that.
func SoftMemoryLimit(limit int64) int64 {
	soft := limit - max(limit/10, minBinaryPages)
	if soft < minBinaryPages {
		return 0
	}
	return soft
}

// applyMemoryLimit sets Go's soft memory limit (with set: debug.SetMemoryLimit) from the memory
// limit of the container under root, unless GOMEMLIMIT is set. Near its soft limit the garbage
// collector runs more often instead of letting the heap grow to twice its live size: a burst
// (an inventory of thousands of VMs, a restart) then costs CPU, not an OOM kill.
func applyMemoryLimit(log logr.Logger, root string, lookupEnv func(string) (string, bool), set func(int64) int64) {
	if v, ok := lookupEnv(memoryLimitEnv); ok {
		log.V(1).Info("Leaving the Go soft memory limit to GOMEMLIMIT", "GOMEMLIMIT", v)
		return
	}
	limit, source, ok, err := containerMemoryLimit(root)
	switch {
	case err != nil:
		log.Info("Not setting a Go soft memory limit: the container's memory limit cannot be read", "error", err.Error())
		return
	case !ok:
		return
	}
	soft := SoftMemoryLimit(limit)
	if soft == 0 {
		log.Info("Not setting a Go soft memory limit: the container's memory limit leaves too little room; give it at least 128Mi",
			"containerLimit", limit, "source", source)
		return
	}
	set(soft)
	log.Info("Set the Go soft memory limit from the container's memory limit", "containerLimit", limit, "softLimit", soft, "source", source)
}
