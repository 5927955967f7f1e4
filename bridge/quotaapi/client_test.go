package quotaapi

import "testing"

func TestBaseURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                          "http://127.0.0.1:9817",
		"127.0.0.1:19817":           "http://127.0.0.1:19817",
		":9817":                     "http://127.0.0.1:9817",
		"0.0.0.0:9817":              "http://127.0.0.1:9817",
		"[::]:9817":                 "http://127.0.0.1:9817",
		"http://ctl.example:9817/":  "http://ctl.example:9817",
		"https://ctl.example:443":   "https://ctl.example:443",
		" http://10.0.0.5:9817?x=1": "http://10.0.0.5:9817",
	} {
		if got, err := BaseURL(in); err != nil || got != want {
			t.Errorf("BaseURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"ctl.example", "ftp://ctl:21", "http://ctl"} {
		if got, err := BaseURL(bad); err == nil {
			t.Errorf("BaseURL(%q) = %q, want an error", bad, got)
		}
	}
}
