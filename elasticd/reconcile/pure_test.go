package reconcile_test

import (
	"strings"
	"testing"

	"github.com/slurmbridge/slurmbridge/elasticd/elastictest"
)

// TestReconcileDoesNoIO fails when the package comes to import anything that reaches outside
// its arguments (files, processes, the network, Slurm, elasticd's state directory) or to read
// the clock: its decisions must follow from the state, the snapshot and the time it is given.
func TestReconcileDoesNoIO(t *testing.T) {
	elastictest.CheckNoIO(t, allowed...)
}

// allowed are what reconcile may import.
var allowed = []string{"fmt", "maps", "slices", "strconv", "time", "github.com/slurmbridge/slurmbridge/elasticd/policy"}

// The check itself catches the clock however "time" is imported: plainly, under another name
// or with a dot; time's values and durations are no I/O.
func TestImpuritiesFindTheClockUnderAnyName(t *testing.T) {
	tests := []struct {
		name, src string
		found     string // a part of the one problem found; "": none
	}{
		{name: "plain import", src: `import "time"; func f() time.Time { return time.Now() }`, found: "time.Now reads the clock"},
		{name: "aliased import", src: `import t "time"; func f() t.Time { return t.Now() }`, found: "t.Now reads the clock"},
		{name: "aliased import, method value", src: `import clock "time"; var f = clock.Since`, found: "clock.Since reads the clock"},
		{name: "dot import", src: `import . "time"; func f() Time { return Now() }`, found: "imports time with a dot"},
		{name: "a disallowed import", src: `import "os"; var f = os.Getpid`, found: "imports os"},
		{name: "time's values and durations", src: `import t "time"; func f(a t.Time) t.Time { return a.Add(t.Minute) }`},
		{name: "a method named like a clock function on a value", src: `import "time"; func f(a, b time.Time) bool { return a.After(b) }`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			problems, err := elastictest.Impurities("planted.go", "package reconcile\n"+tc.src+"\n", allowed)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.found == "" && len(problems) > 0:
				t.Errorf("problems %q, want none", problems)
			case tc.found != "" && (len(problems) != 1 || !strings.Contains(problems[0], tc.found)):
				t.Errorf("problems %q, want one saying %q", problems, tc.found)
			}
		})
	}
}
