package slurm

import "testing"

func TestParseVersion(t *testing.T) {
	for _, tc := range []struct {
		in       string
		want     Release
		scontrol bool
		bad      bool
	}{
		{"slurm 22.05.8\n", Release{22, 5}, false, false},
		{"slurm 23.02.7", Release{23, 2}, true, false},
		{"slurm-wlm 24.11.5\n", Release{24, 11}, true, false},
		{"slurm-wlm 26.05.5", Release{26, 5}, true, false},
		{"slurm 25.11.0-0rc1", Release{25, 11}, true, false},
		{"", Release{}, false, true},
		{"sinfo: error: resolve_ctls_from_dns_srv", Release{}, false, true},
		{"slurm 24", Release{}, false, true},
		{"slurm 24.13.1", Release{}, false, true},
	} {
		got, err := ParseVersion(tc.in)
		if (err != nil) != tc.bad || got != tc.want || got.NodesInScontrol() != tc.scontrol {
			t.Errorf("ParseVersion(%q) = %v (scontrol %v), %v; want %v (scontrol %v, error %v)",
				tc.in, got, got.NodesInScontrol(), err, tc.want, tc.scontrol, tc.bad)
		}
	}
}

// Each named release predicate, on the supported releases and on 23.02 and 25.11, where some
// behaviours change.
func TestReleasePredicates(t *testing.T) {
	type facts struct{ nodesInScontrol, modifyRefusal, reconfigureRestarts, startsSplitTasks, sluid bool }
	for _, tc := range []struct {
		rel  Release
		want facts
	}{
		{Release{22, 5}, facts{false, false, false, false, false}},
		{Release{23, 2}, facts{true, true, false, true, false}},
		{Release{23, 11}, facts{true, true, true, true, false}},
		{Release{24, 11}, facts{true, true, true, true, false}},
		{Release{25, 11}, facts{true, true, true, true, true}},
		{Release{26, 5}, facts{true, true, true, true, true}},
	} {
		got := facts{tc.rel.NodesInScontrol(), tc.rel.ModifyRefusalReachesUser(), tc.rel.ReconfigureRestarts(),
			tc.rel.StartsSplitArrayTasks(), tc.rel.NamesJobsBySLUID()}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.rel, got, tc.want)
		}
	}
}
