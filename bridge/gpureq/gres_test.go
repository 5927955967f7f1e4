package gpureq

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func gpu(typ string, n uint64) Gres { return Gres{Name: "gpu", Type: typ, Count: n} }

func TestParseGres(t *testing.T) {
	tests := []struct {
		in      string
		want    []Gres
		wantErr string // substring of the error; "" = no error
	}{
		{in: "", want: nil},
		{in: "gres:gpu:a100:1", want: []Gres{gpu("a100", 1)}},
		{in: "gres:gpu:2", want: []Gres{gpu("", 2)}},
		{in: "gres:gpu", want: []Gres{gpu("", 1)}},
		{in: "gres:gpu:a100", want: []Gres{gpu("a100", 1)}},
		{in: "gres:gpu:a100:1,gres:gpu:v100:1", want: []Gres{gpu("a100", 1), gpu("v100", 1)}},
		{in: "gres:gpu:0", want: []Gres{gpu("", 0)}},
		{in: "gres:mps:100", want: []Gres{{Name: "mps", Count: 100}}},
		{in: "gres:gpu:1,gres:mps:50", want: []Gres{gpu("", 1), {Name: "mps", Count: 50}}},
		{in: "gres/gpu:v100:3", want: []Gres{gpu("v100", 3)}},
		{in: "gpu:4", want: []Gres{gpu("", 4)}},
		{in: "gres:gpu:1g.5gb:2", want: []Gres{gpu("1g.5gb", 2)}},
		{in: "gres:gpu:tesla_v100-sxm2:1", want: []Gres{gpu("tesla_v100-sxm2", 1)}},
		{in: "gres:mps:2k", want: []Gres{{Name: "mps", Count: 2048}}},
		{in: "gres:mps:1M", want: []Gres{{Name: "mps", Count: 1 << 20}}},
		{in: "gres:gpu:a100:1g", want: []Gres{gpu("a100", 1<<30)}},

		{in: "gres:gpu:a100:x", wantErr: `tres_per_node: bad token "gres:gpu:a100:x": count "x": not a number`},
		{in: "gres:gpu:a100:-1", wantErr: `count "-1"`},
		{in: "gres:gpu:a100:+1", wantErr: `count "+1"`},
		{in: "gres:gpu:a100: 1", wantErr: `count " 1"`},
		{in: "gres:gpu:a100:1:2", wantErr: "more than NAME:TYPE:COUNT"},
		{in: "gres:gpu:-1", wantErr: `"-1" is neither a count nor a type`},
		{in: "gres:gpu::1", want: []Gres{gpu("", 1)}},
		{in: "gres/gpu::2", want: []Gres{gpu("", 2)}},
		{in: "gres:gpu:a100:", wantErr: `count "": empty`},
		{in: "gres:gpu:1,", wantErr: `bad token "": empty entry`},
		{in: ",gres:gpu:1", wantErr: "empty entry"},
		{in: "gres:", wantErr: "empty entry"},
		{in: "gres::1", wantErr: `GRES name ""`},
		{in: "gres:g pu:1", wantErr: `GRES name "g pu"`},
		{in: "gres:gpu:a100:99999999999999999999", wantErr: "too large"},
		{in: "gres:gpu:a100:18014398509481984k", wantErr: "too large"},
		{in: "gres:gpu:a100:1\x00", wantErr: `"gres:gpu:a100:1\x00"`},
		{in: "gres:gpu:" + strings.Repeat("x", 200) + ":bad", wantErr: `xxx..."`}, // long tokens are cut
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseGres("tres_per_node", tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseGres(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				var se *SyntaxError
				if !errors.As(err, &se) || se.Field != "tres_per_node" {
					t.Errorf("error %v is not a *SyntaxError for tres_per_node", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseGres(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseGres(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestGresStringRoundTrip(t *testing.T) {
	for _, g := range []Gres{gpu("a100", 2), gpu("", 1), {Name: "mps", Count: 100}} {
		back, err := ParseGres("x", g.String())
		if err != nil || len(back) != 1 || back[0] != g {
			t.Errorf("ParseGres(%q) = %+v, %v; want %+v", g.String(), back, err, g)
		}
	}
}

func TestParseNodeGres(t *testing.T) {
	tests := []struct {
		in      string
		want    []Gres
		wantErr string
	}{
		{in: "", want: nil},
		{in: "(null)", want: nil},
		{in: "N/A", want: nil},
		{in: "gpu:a100:4", want: []Gres{gpu("a100", 4)}},
		{in: "gpu:a100:4(S:0)", want: []Gres{gpu("a100", 4)}},
		{in: "gpu:a100:2(IDX:0-1)", want: []Gres{gpu("a100", 2)}},
		{in: "gpu:a100:2(IDX:0,2),gpu:v100:1(IDX:1)", want: []Gres{gpu("a100", 2), gpu("v100", 1)}},
		{in: "gpu:a100:0(IDX:N/A)", want: []Gres{gpu("a100", 0)}},
		{in: "gpu:0", want: []Gres{gpu("", 0)}},
		{in: "gpu:4,mps:400", want: []Gres{gpu("", 4), {Name: "mps", Count: 400}}},
		{in: "gpu:a100:4:1", wantErr: "more than NAME:TYPE:COUNT"},
		{in: "gpu:a100:4(S:0", wantErr: "unbalanced '('"},
		{in: "gpu:a100:4)", wantErr: "unbalanced ')'"},
		{in: "gpu:a100:4(S:0)x", wantErr: "text after ')'"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseNodeGres(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseNodeGres(%q) error = %v, want it to contain %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseNodeGres(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseNodeGres(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

// Each release's spelling of the job_desc fields, as its clients write them
// (src/common/slurm_opt.c and src/common/proc_args.c at the release's tag).
func TestParseGresAcrossReleases(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Gres
	}{
		{"22.05 --gres=gpu:a100:1", "gres:gpu:a100:1", []Gres{gpu("a100", 1)}},
		{"22.05 --gpus=2", "gres:gpu:2", []Gres{gpu("", 2)}},
		{"23.11 --gres=gpu:a100:1", "gres/gpu:a100:1", []Gres{gpu("a100", 1)}},
		{"23.11 -c 4 in tres_per_task", "cpu:4", nil},
		{"23.11 -c 4 --gpus-per-task=a100:1", "cpu:4,gres/gpu:a100:1", []Gres{gpu("a100", 1)}},
		{"23.11 --tres-per-task license", "license:matlab:1,gres/gpu:1", []Gres{gpu("", 1)}},
		{"24.05+ --gpus-per-task=a100:1", "gres/gpu:a100=1", []Gres{gpu("a100", 1)}},
		{"24.05+ --gpus-per-task=2", "gres/gpu=2", []Gres{gpu("", 2)}},
		{"24.05+ -c 4", "cpu=4", nil},
		{"24.05+ -c 4 --gpus-per-task=2", "cpu=4,gres/gpu=2", []Gres{gpu("", 2)}},
		{"24.05+ --gpus-per-task first", "gres/gpu:a100=1,cpu=4", []Gres{gpu("a100", 1)}},
		{"24.05+ --tres-per-task=cpu=4,license/foo=1", "cpu=4,license/foo=1", nil},
		{"24.05+ --tres-per-task with a remote license", "license/matlab@flex=1,gres/gpu=1", []Gres{gpu("", 1)}},
		{"24.05+ --tres-per-task=gres/mps=50", "gres/mps=50", []Gres{{Name: "mps", Count: 50}}},
		{"24.05+ --gres=gpu:a100:1 stays colon", "gres/gpu:a100:1", []Gres{gpu("a100", 1)}},
		{"24.05+ zero count", "gres/gpu:a100=0", []Gres{gpu("a100", 0)}},
		{"mem entry from a non-CLI job_desc", "mem=4G,gres/gpu=1", []Gres{gpu("", 1)}},
		{"plain gpu:2", "gpu:2", []Gres{gpu("", 2)}},
		{"plain gpu=2", "gpu=2", []Gres{gpu("", 2)}},
		{"CPU in capitals", "CPU=4", nil},
		{"bare cpu", "cpu", nil},
		{"fs/disk and bb", "fs/disk=10G,bb/datawarp=1G", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseGres("tres_per_task", tt.in)
			if err != nil {
				t.Fatalf("ParseGres(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseGres(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseGresRefusesGarbageInNewForms(t *testing.T) {
	tests := []struct{ in, wantErr string }{
		{"gres/gpu:a100=x", `count "x": not a number`},
		{"gres/gpu=", `count "": empty`},
		{"gres/gpu:a100:1=2", `type "a100:1"`},
		{"gres/=2", `GRES name ""`},
		{"gres/gpu:=2", `type ""`},
		{"cpu=four", `count "four"`},
		{"cpu=-4", `count "-4"`},
		{"cpu=", `count "": empty`},
		{"cpu:4:5", `count "4:5"`},
		{"license/=1", `TRES name ""`},
		{"license/foo=", `count ""`},
		{"license/fo o=1", `TRES name "fo o"`},
		{"license/matlab@=1", `TRES name "matlab@"`},
		{"fs/disk@x=1", `TRES name "disk@x"`},
		{"mem=4Q", `count "4Q"`},
		{"cpu=4,", "empty entry"},
		{"=4", `GRES name ""`},
		{"cpu/x=1", "cpu has no name"},
		{"license=1", "want license/NAME"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			_, err := ParseGres("tres_per_task", tt.in)
			var se *SyntaxError
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.As(err, &se) || se.Field != "tres_per_task" {
				t.Fatalf("ParseGres(%q) error = %v, want a tres_per_task *SyntaxError containing %q", tt.in, err, tt.wantErr)
			}
		})
	}
}

// Node GRES strings are printed the same way from 22.05 to 26.05.
func TestParseNodeGresAcrossReleases(t *testing.T) {
	for _, in := range []string{"gpu:a100:4(S:0-1)", "gpu:a100:4(S:0-1),shard:a100:16(S:0-1)"} {
		got, err := ParseNodeGres(in)
		if err != nil || len(got) == 0 || got[0] != gpu("a100", 4) {
			t.Errorf("ParseNodeGres(%q) = %+v, %v", in, got, err)
		}
	}
}
