package slurm

import (
	"reflect"
	"testing"
)

func TestExpandHostList(t *testing.T) {
	for in, want := range map[string][]string{
		"a100-1":                 {"a100-1"},
		"a100-[1-2,4],v100-1":    {"a100-1", "a100-2", "a100-4", "v100-1"},
		"n[01-03]":               {"n01", "n02", "n03"},
		"rack[1-2]-gpu":          {"rack1-gpu", "rack2-gpu"},
		"None assigned":          nil,
		"":                       nil,
		"a100-spot-1,a100-[1-2]": {"a100-spot-1", "a100-1", "a100-2"},
	} {
		got, err := ExpandHostList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ExpandHostList(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"n[1-", "n[2-1]", "n[a-b]", "n[0-999999999]", "n]", "n[1]x[2]"} {
		if got, err := ExpandHostList(bad); err == nil {
			t.Errorf("ExpandHostList(%q) = %q, want an error", bad, got)
		}
	}
}
