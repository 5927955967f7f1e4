package jobreason

import "testing"

func TestReasons(t *testing.T) {
	for _, tc := range []struct {
		reason       string
		notStartable bool
		startsOnFree bool
	}{
		{"Priority", false, true},
		{"Resources", false, true},
		{"None", false, true},
		{"QOSGrpGRES", false, false},
		{"QOSGrpTRES", false, false},
		{"JobHeldUser", true, false},
		{"JobHeldAdmin", true, false},
		{"Dependency", true, false},
		{"BeginTime", true, false},
		{"Reservation", true, false},
		{"AssocGrpGRES", false, false},
		{"PartitionTimeLimit", false, false},
		{"QOSMaxJobsPerUserLimit", false, false},
	} {
		if got := NotStartable(tc.reason) != ""; got != tc.notStartable {
			t.Errorf("NotStartable(%q) = %v, want %v", tc.reason, got, tc.notStartable)
		}
		if got := StartsWhenGPUsFree(tc.reason); got != tc.startsOnFree {
			t.Errorf("StartsWhenGPUsFree(%q) = %v, want %v", tc.reason, got, tc.startsOnFree)
		}
	}
}
