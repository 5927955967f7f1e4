package gpureq

import (
	"reflect"
	"strings"
	"testing"
)

// The fuzz targets check properties, not just "no panic": what parses prints back to
// something that parses to the same value, and every error names a field and a token.

func FuzzParseGres(f *testing.F) {
	for _, s := range []string{
		"", "gres:gpu:a100:1", "gres:gpu:2", "gres:gpu:a100:1,gres:gpu:v100:1", "gres:mps:100",
		"gres/gpu:1k", "gpu", "gres:gpu:1g.5gb:1", "gres:gpu:a100:x", "gres:gpu::", ",", "gres:gpu:18446744073709551615",
		"gres/gpu:a100=1", "gres/gpu=2", "cpu=4,gres/gpu=2", "cpu:4", "license/foo=1", "mem=4G", "gpu=2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		entries, err := ParseGres("tres_per_node", s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tres_per_node: bad token ") {
				t.Fatalf("error %q does not name the field and token", err)
			}
			return
		}
		var b strings.Builder
		for i, g := range entries {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(g.String())
		}
		back, err := ParseGres("tres_per_node", b.String())
		if err != nil || !reflect.DeepEqual(back, entries) {
			t.Fatalf("%q parsed to %+v, printed as %q, which parsed to %+v, %v", s, entries, b.String(), back, err)
		}
	})
}

func FuzzParse(f *testing.F) {
	f.Add("gres:gpu:3", "gres:gpu:a100:1", "", "gres:gpu:1", uint64(2), uint64(2), uint64(1))
	f.Add("", "gres:gpu:a100:1,gres:mps:10", "gres:gpu:1", "", uint64(0), uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, job, node, socket, task string, nodes, tpn, sockets uint64) {
		r, err := Parse(Fields{PerJob: job, PerNode: node, PerSocket: socket, PerTask: task})
		if err != nil {
			return
		}
		perNode := r.GPUsPerNode(nodes, tpn, sockets)
		if r.IsGPU() != (perNode > 0) {
			t.Fatalf("IsGPU = %v but GPUsPerNode = %d", r.IsGPU(), perNode)
		}
		if total := r.TotalGPUs(nodes, tpn, sockets); total < r.Sum(PerJob) || total < r.Sum(PerNode) {
			t.Fatalf("TotalGPUs = %d is below a scope's sum", total)
		}
	})
}

// Entries of other TRES around a value change nothing in the GPU request, whatever the release
// spelling: a cpu, mem or license entry never counts GPUs.
func FuzzOtherTRESNeverCountGPUs(f *testing.F) {
	for _, s := range []string{"gres/gpu:a100=1", "gres:gpu:2", "gpu:2", "gres/mps=10", "cpu=4", "gres/gpu:a100:1,gres/gpu=1"} {
		f.Add(s, "cpu=4", "license/matlab=2")
		f.Add(s, "cpu:4", "mem=8G")
	}
	f.Fuzz(func(t *testing.T, s, before, after string) {
		want, err := Parse(Fields{PerTask: s})
		if err != nil || s == "" {
			return
		}
		for _, other := range []string{before, after} {
			if entries, err := ParseGres("x", other); err != nil || len(entries) != 0 || other == "" {
				return // not a non-GRES TRES list
			}
		}
		got, err := Parse(Fields{PerTask: before + "," + s + "," + after})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q around %q changed %+v into %+v, %v", before+"/"+after, s, want, got, err)
		}
	})
}

func FuzzParseNodeGres(f *testing.F) {
	for _, s := range []string{"gpu:a100:4(S:0)", "gpu:a100:2(IDX:0,2),gpu:v100:1", "(null)", "gpu:0", "gpu:a100:4(S:0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		entries, err := ParseNodeGres(s)
		if err != nil {
			return
		}
		for _, g := range entries {
			if !ValidName(g.Name) || (g.Type != "" && !ValidName(g.Type)) || strings.ContainsAny(g.Name+g.Type, "(),:") {
				t.Fatalf("%q gave the entry %+v", s, g)
			}
		}
	})
}

func FuzzParseTRES(f *testing.F) {
	for _, s := range []string{
		"billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1000M,node=1", "mem=8G", "mem=1536K", "cpu=1,cpu=2", "=", ",,",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tres, err := ParseTRES(s)
		if err != nil {
			return
		}
		back, err := ParseTRES(tres.String())
		if err != nil || !reflect.DeepEqual(back, tres) {
			t.Fatalf("%q parsed to %v, printed as %q, which parsed to %v, %v", s, tres, tres.String(), back, err)
		}
	})
}

func FuzzParseTRESIDs(f *testing.F) {
	for _, s := range []string{"1=16,2=128000,4=2,1001=4", ",1=10,", "0=1", "1=1,1=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tres, err := ParseTRESIDs(s)
		if err != nil {
			return
		}
		back, err := ParseTRESIDs(tres.String())
		if err != nil || !reflect.DeepEqual(back, tres) {
			t.Fatalf("%q parsed to %v, printed as %q, which parsed to %v, %v", s, tres, tres.String(), back, err)
		}
	})
}
