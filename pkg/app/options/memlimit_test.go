package options

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	. "github.com/onsi/gomega"
)

// fakeRoot writes files under a temporary root: path → content.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestTheContainerMemoryLimitIsReadWhereKubernetesPutsIt: cgroup v2 (with and without a cgroup
// namespace), cgroup v1 (a container sees its own cgroup at the root of the hierarchy, the host
// path in /proc/self/cgroup), no limit in either, and what cannot be read.
func TestTheContainerMemoryLimitIsReadWhereKubernetesPutsIt(t *testing.T) {
	const podPath = "/kubepods/burstable/pod1/abc"
	for _, tc := range []struct {
		name   string
		files  map[string]string
		limit  int64
		source string
		ok     bool
		err    string
	}{
		{name: "v2 in a cgroup namespace", files: map[string]string{
			"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "536870912\n"},
			limit: 512 << 20, source: "sys/fs/cgroup/memory.max", ok: true},
		{name: "v2 seen from the host", files: map[string]string{
			"proc/self/cgroup": "0::" + podPath + "\n", "sys/fs/cgroup" + podPath + "/memory.max": "268435456\n", "sys/fs/cgroup/memory.max": "max\n"},
			limit: 256 << 20, source: "sys/fs/cgroup" + podPath + "/memory.max", ok: true},
		{name: "v2 without a limit", files: map[string]string{
			"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max\n"},
			source: "sys/fs/cgroup/memory.max"},
		{name: "v1 in a container", files: map[string]string{
			"proc/self/cgroup":                           "12:pids:" + podPath + "\n4:memory:" + podPath + "\n1:name=systemd:" + podPath + "\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n"},
			limit: 512 << 20, source: "sys/fs/cgroup/memory/memory.limit_in_bytes", ok: true},
		{name: "v1 with memory among other controllers", files: map[string]string{
			"proc/self/cgroup": "4:cpu,memory:/x\n", "sys/fs/cgroup/memory/x/memory.limit_in_bytes": "1073741824"},
			limit: 1 << 30, source: "sys/fs/cgroup/memory/x/memory.limit_in_bytes", ok: true},
		{name: "v1 without a limit", files: map[string]string{
			"proc/self/cgroup": "4:memory:/\n", "sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"},
			source: "sys/fs/cgroup/memory/memory.limit_in_bytes"},
		{name: "no cgroup file", files: map[string]string{"proc/self/cgroup": "0::/\n"}},
		{name: "no /proc", files: map[string]string{}},
		{name: "not a number", files: map[string]string{
			"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots\n"},
			err: `reading the memory limit ` + "ROOT/sys/fs/cgroup/memory.max" + `: "lots" is not a number of bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := fakeRoot(t, tc.files)
			limit, source, ok, err := containerMemoryLimit(root)
			if tc.err != "" {
				g.Expect(err).To(MatchError(strings.ReplaceAll(tc.err, "ROOT", root)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(ok).To(Equal(tc.ok))
			g.Expect(limit).To(Equal(tc.limit))
			if tc.source != "" {
				g.Expect(source).To(Equal(filepath.Join(root, tc.source)))
			} else {
				g.Expect(source).To(BeEmpty())
			}
		})
	}
}

// TestTheSoftMemoryLimitLeavesRoomForTheBinary: a tenth below the container's limit, at least
// 64 MiB below it, and none when that leaves less than 64 MiB.
func TestTheSoftMemoryLimitLeavesRoomForTheBinary(t *testing.T) {
	g := NewWithT(t)
	const mib = int64(1) << 20
	g.Expect(SoftMemoryLimit(1024 * mib)).To(Equal(1024*mib - 1024*mib/10))
	g.Expect(SoftMemoryLimit(512 * mib)).To(Equal(448 * mib))
	g.Expect(SoftMemoryLimit(256 * mib)).To(Equal(192 * mib))
	g.Expect(SoftMemoryLimit(128 * mib)).To(Equal(64 * mib))
	g.Expect(SoftMemoryLimit(100 * mib)).To(BeZero())
}

// TestTheBinariesSetTheirSoftMemoryLimitFromTheContainer: the limit is set and logged; GOMEMLIMIT
// wins; an unreadable limit is logged and changes nothing; no limit changes nothing.
func TestTheBinariesSetTheirSoftMemoryLimitFromTheContainer(t *testing.T) {
	g := NewWithT(t)
	limited := fakeRoot(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "536870912\n"})
	run := func(root string, env map[string]string) (set []int64, logs string) {
		var b strings.Builder
		log := funcr.New(func(prefix, args string) { b.WriteString(args + "\n") }, funcr.Options{Verbosity: 1})
		lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		applyMemoryLimit(log, root, lookup, func(n int64) int64 { set = append(set, n); return 0 })
		return set, b.String()
	}

	set, logs := run(limited, nil)
	g.Expect(set).To(Equal([]int64{448 << 20}))
	g.Expect(logs).To(ContainSubstring(`"msg"="Set the Go soft memory limit from the container's memory limit" "containerLimit"=536870912 "softLimit"=469762048`))

	set, logs = run(limited, map[string]string{"GOMEMLIMIT": "300MiB"})
	g.Expect(set).To(BeEmpty())
	g.Expect(logs).To(ContainSubstring(`"GOMEMLIMIT"="300MiB"`))

	set, logs = run(fakeRoot(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "lots"}), nil)
	g.Expect(set).To(BeEmpty())
	g.Expect(logs).To(ContainSubstring("cannot be read"))

	set, _ = run(fakeRoot(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "max"}), nil)
	g.Expect(set).To(BeEmpty())

	set, logs = run(fakeRoot(t, map[string]string{"proc/self/cgroup": "0::/\n", "sys/fs/cgroup/memory.max": "67108864"}), nil)
	g.Expect(set).To(BeEmpty())
	g.Expect(logs).To(ContainSubstring("leaves too little"))
}
