package gpureq

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseTRES(t *testing.T) {
	tests := []struct {
		in      string
		want    TRES
		wantErr string
	}{
		{in: "", want: TRES{}},
		{
			in:   "billing=1,cpu=1,gres/gpu:a100=1,gres/gpu=1,mem=1000M,node=1",
			want: TRES{"billing": 1, "cpu": 1, "gres/gpu:a100": 1, "gres/gpu": 1, "mem": 1000, "node": 1},
		},
		// sinfo --json "tres" of a testbed node
		{in: "cpu=8,mem=32000M,billing=8,gres/gpu=4,gres/gpu:a100=4", want: TRES{"cpu": 8, "mem": 32000, "billing": 8, "gres/gpu": 4, "gres/gpu:a100": 4}},
		{in: "mem=8G", want: TRES{"mem": 8192}},
		{in: "mem=2T", want: TRES{"mem": 2 << 20}},
		{in: "mem=1P", want: TRES{"mem": 1 << 30}},
		{in: "mem=1536K", want: TRES{"mem": 2}}, // rounds up
		{in: "mem=1K", want: TRES{"mem": 1}},
		{in: "mem=0", want: TRES{"mem": 0}},
		{in: "cpu=4,", want: TRES{"cpu": 4}},
		{in: "license/matlab=2,bb/datawarp=1G", want: TRES{"license/matlab": 2, "bb/datawarp": 1024}},
		// A remote license (sacctmgr add resource): any user allowed it may put it in a job.
		{in: "cpu=1,license/matlab@flex=1,gres/gpu=1", want: TRES{"cpu": 1, "license/matlab@flex": 1, "gres/gpu": 1}},
		{in: "energy=18446744073709551614", want: TRES{"energy": 18446744073709551614}},

		{in: "cpu", wantErr: `TRES: bad token "cpu": want NAME=VALUE`},
		{in: "cpu=x", wantErr: `value "x": not a number`},
		{in: "cpu=-1", wantErr: `value "-1"`},
		{in: "mem=1.5G", wantErr: `value "1.5G"`},
		{in: "mem=G", wantErr: `value "G"`},
		{in: "mem=", wantErr: `value "": empty`},
		{in: "=1", wantErr: `name "" is not a TRES name`},
		{in: "c pu=1", wantErr: `name "c pu"`},
		{in: "cpu=1,cpu=2", wantErr: "cpu given twice"},
		{in: "mem=99999999999999999999M", wantErr: "too large"},
		{in: "mem=17179869184P", wantErr: "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTRES(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTRES(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTRES(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseTRES(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestTRESStringIsSlurmOrder(t *testing.T) {
	// Strings captured from squeue --json on the testbed print back byte for byte.
	for _, s := range []string{
		"cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:v100=1",
		"cpu=2,mem=2000M,node=2,billing=2,gres/gpu=8,gres/gpu:a100=8",
		"cpu=8,mem=32000M,billing=8",
		"",
	} {
		tres, err := ParseTRES(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := tres.String(); got != s {
			t.Errorf("ParseTRES(%q).String() = %q", s, got)
		}
	}
	if got := (TRES{"mem": 8192, "gres/gpu": 2, "cpu": 4, "fs/disk": 10}).String(); got != "cpu=4,mem=8192M,fs/disk=10M,gres/gpu=2" {
		t.Errorf("String() = %q", got)
	}
}

func TestTRESGPUs(t *testing.T) {
	tres := TRES{"gres/gpu": 3, "gres/gpu:a100": 2, "gres/gpu:v100": 1, "gres/mps": 100}
	for typ, want := range map[string]uint64{"": 3, "a100": 2, "v100": 1, "h100": 0} {
		if got := tres.GPUs(typ); got != want {
			t.Errorf("GPUs(%q) = %d, want %d", typ, got, want)
		}
	}
}

func TestParseTRESIDs(t *testing.T) {
	tests := []struct {
		in      string
		want    TRESIDs
		wantErr string
	}{
		{in: "", want: TRESIDs{}},
		{in: "1=16,2=128000,4=2,1001=4", want: TRESIDs{1: 16, 2: 128000, 4: 2, 1001: 4}},
		{in: ",1=10,", want: TRESIDs{1: 10}},
		{in: "3=18446744073709551614", want: TRESIDs{3: 18446744073709551614}},
		{in: "cpu=1", wantErr: `TRES ids: bad token "cpu=1": id "cpu" is not a TRES id`},
		{in: "0=1", wantErr: `id "0"`},
		{in: "4294967296=1", wantErr: `id "4294967296"`},
		{in: "1=1M", wantErr: `value "1M": not a number`},
		{in: "1", wantErr: "want ID=VALUE"},
		{in: "1=1,1=2", wantErr: "id 1 given twice"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseTRESIDs(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseTRESIDs(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseTRESIDs(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseTRESIDs(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
	if got := (TRESIDs{1001: 4, 2: 128000, 1: 16}).String(); got != "1=16,2=128000,1001=4" {
		t.Errorf("String() = %q", got)
	}
}

func TestTRESIDsNamed(t *testing.T) {
	names := map[uint32]string{TRESCPU: "cpu", TRESMem: "mem", TRESNode: "node", 1001: "gres/gpu", 1002: "gres/gpu:a100"}
	got, err := TRESIDs{1: 16, 2: 128000, 1001: 4, 1002: 4}.Named(names)
	if err != nil {
		t.Fatal(err)
	}
	if want := (TRES{"cpu": 16, "mem": 128000, "gres/gpu": 4, "gres/gpu:a100": 4}); !reflect.DeepEqual(got, want) {
		t.Errorf("Named = %v, want %v", got, want)
	}
	if _, err := (TRESIDs{1003: 1}).Named(names); err == nil || !strings.Contains(err.Error(), "1003") {
		t.Errorf("an unknown id: error = %v, want one naming 1003", err)
	}
}
