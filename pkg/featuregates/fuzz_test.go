package featuregates

import (
	"strings"
	"testing"
)

// FuzzParse checks that no --feature-gates value panics, that the result always renders back to
// a value that parses to the same gates without warnings, and that each warning names an item.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"", "disk-clone=true", "disk-keep-template-name=false,disk-add-vm-name=true", "=,=", "a=b=c", ",,,", "disk-clone=1,DISK-CLONE=0", "\x00=\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, warnings := Parse(in)
		back, w2 := Parse(got.String())
		if back != got || len(w2) != 0 {
			t.Fatalf("round trip of %q changed %+v to %+v (%v)", in, got, back, w2)
		}
		if len(warnings) > strings.Count(in, ",")+1 {
			t.Fatalf("more warnings (%d) than items in %q", len(warnings), in)
		}
	})
}
