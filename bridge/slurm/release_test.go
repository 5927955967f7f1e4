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

func TestReleaseFacts(t *testing.T) {
	type facts struct{ nodesInScontrol, modifyRefusal, restarts, splitTasks, sluid, concurrentSubmit, workersByCPUs bool }
	for _, tc := range []struct {
		release Release
		want    facts
	}{
		{Release{22, 5}, facts{}},
		{Release{23, 2}, facts{nodesInScontrol: true, modifyRefusal: true, splitTasks: true}},
		{Release{23, 11}, facts{true, true, true, true, false, true, false}},
		{Release{24, 11}, facts{true, true, true, true, false, true, false}},
		{Release{25, 5}, facts{true, true, true, true, false, true, true}},
		{Release{25, 11}, facts{true, true, true, true, false, true, true}},
		{Release{26, 5}, facts{true, true, true, true, true, true, true}},
	} {
		r := tc.release
		got := facts{r.NodesInScontrol(), r.ModifyRefusalReachesUser(), r.ReconfigureRestarts(), r.StartsSplitArrayTasks(), r.ScontrolNamesJobsBySLUID(),
			r.CallsJobSubmitConcurrently(), r.SizesWorkersByCPUs()}
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", r, got, tc.want)
		}
	}
}

func TestMicroVersion(t *testing.T) {
	for v, want := range map[string]uint32{"22.05.8": 0x160508, "23.11.10": 0x170b0a, "22.05.0-0rc1": 0x160500, " 21.08.8 ": 0x150808} {
		got, err := ParseMicroVersion(v)
		if err != nil || got.Number() != want {
			t.Errorf("%q: %#x, %v; want %#x", v, got.Number(), err, want)
		}
		if back := VersionOfNumber(want); back != got {
			t.Errorf("%#x reads back as %v, want %v", want, back, got)
		}
	}
	for _, v := range []string{"", "22.05", "22.x.1", "300.1.1"} {
		if _, err := ParseMicroVersion(v); err == nil {
			t.Errorf("%q accepted", v)
		}
	}
	if s := VersionOfNumber(0x160508).String(); s != "22.05.8" {
		t.Errorf("%s", s)
	}
}
