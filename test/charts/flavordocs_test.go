package charts

import (
	"regexp"
	"sort"
	"strings"
	"testing"
)

// clusterctlOwnVariables are set by clusterctl's arguments, not documented per flavor.
var clusterctlOwnVariables = map[string]bool{
	"CLUSTER_NAME": true, "NAMESPACE": true, "KUBERNETES_VERSION": true, "CONTROL_PLANE_MACHINE_COUNT": true, "WORKER_MACHINE_COUNT": true,
}

var (
	backticked = regexp.MustCompile("`([A-Z][A-Z0-9_]*)`")
	notIn      = regexp.MustCompile("not in `([a-z-]+)`")
	flavorName = regexp.MustCompile("`([a-z-]+)`")
)

// flavorDoc is what docs/operations.md ("Cluster templates and flavors") says of the variables
// of one flavor: which apply to it and which of those it requires.
type flavorDoc struct{ all, required map[string]bool }

// documentedFlavorVariables reads the two variable tables of docs/operations.md (every flavor:
// a row applies to all but the flavors it names with "not in `flavor`"; one flavor: the first
// column names the flavors) and the topology paragraph ("Its clusterctl variables are those of
// the default flavor plus ..."), and returns the variables documented for flavor ("" is the
// default flavor).
func documentedFlavorVariables(t *testing.T, flavor string) flavorDoc {
	t.Helper()
	docs := string(mustRead(t, "docs/operations.md"))
	section := func(from, to string) []string {
		_, rest, ok := strings.Cut(docs, from)
		if !ok {
			t.Fatalf("docs/operations.md has no %q", from)
		}
		body, _, _ := strings.Cut(rest, to)
		return strings.Split(body, "\n")
	}
	d := flavorDoc{all: map[string]bool{}, required: map[string]bool{}}
	add := func(names []string, def string) {
		for _, n := range names {
			d.all[n] = true
			if strings.HasPrefix(strings.TrimSpace(def), "required") {
				d.required[n] = true
			}
		}
	}
	rows := func(lines []string) [][]string {
		var out [][]string
		for _, l := range lines {
			if strings.HasPrefix(l, "| `") {
				out = append(out, strings.Split(strings.Trim(l, "|"), "|"))
			}
		}
		return out
	}
	every := rows(section("Variables of every flavor", "Variables of one flavor:"))
	if len(every) < 15 {
		t.Fatalf("docs/operations.md: %d rows in the table of every flavor's variables", len(every))
	}
	for _, cells := range every {
		excluded := false
		for _, m := range notIn.FindAllStringSubmatch(strings.Join(cells, "|"), -1) {
			excluded = excluded || m[1] == flavor
		}
		if !excluded {
			add(names(backticked, cells[0]), cells[1])
		}
	}
	one := rows(section("Variables of one flavor:", "\n#"))
	if len(one) < 10 {
		t.Fatalf("docs/operations.md: %d rows in the table of one flavor's variables", len(one))
	}
	for _, cells := range one {
		for _, f := range names(flavorName, cells[0]) {
			if f == flavor {
				add(names(backticked, cells[1]), cells[2])
			}
		}
	}
	if flavor == "topology" {
		paragraph := section("Its clusterctl variables are those of the default flavor plus", "\n\n")
		extra := names(backticked, strings.Join(paragraph, " "))
		if len(extra) == 0 {
			t.Fatal("docs/operations.md: the topology flavor's own variables are not named")
		}
		add(extra, "")
	}
	return d
}

func names(re *regexp.Regexp, s string) []string {
	var out []string
	for _, m := range re.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// listedVariables parses `clusterctl generate cluster --list-variables`: the required and all
// variables, without clusterctl's own.
func listedVariables(out string) (required, all []string) {
	req, opt, _ := strings.Cut(out, "Optional Variables:")
	for i, part := range []string{req, opt} {
		for _, l := range strings.Split(part, "\n") {
			f := strings.Fields(l)
			if len(f) < 2 || f[0] != "-" || clusterctlOwnVariables[f[1]] {
				continue
			}
			all = append(all, f[1])
			if i == 0 {
				required = append(required, f[1])
			}
		}
	}
	sort.Strings(required)
	sort.Strings(all)
	return required, all
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
