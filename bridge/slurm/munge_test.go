package slurm

import (
	"context"
	"strings"
	"testing"
)

func TestParseUnmunge(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		uid       uint32
		payload   string
		wantErr   string
	}{
		{"uid and payload", "UID:             1001\n\nquotad-api GET /api/v1/jobs/7", 1001, "quotad-api GET /api/v1/jobs/7", ""},
		{"root, empty payload", "UID:             0\n\n", 0, "", ""},
		{"payload with blank lines kept", "UID: 5\n\na\n\nb", 5, "a\n\nb", ""},
		{"no blank line", "UID: 5\n", 0, "", "no payload"},
		{"no uid", "GID: 5\n\nx", 0, "", "no UID"},
		{"bad uid", "UID: alice (1001)\n\nx", 0, "", "unmunge UID"},
		{"encode host", "ENCODE_HOST:     10.1.2.3\nUID:             0\n\nsignals", 0, "signals", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id, err := ParseUnmunge(tc.out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			wantHost := ""
			if strings.Contains(tc.out, "ENCODE_HOST") {
				wantHost = "10.1.2.3"
			}
			if err != nil || id.UID != tc.uid || id.Payload != tc.payload || id.EncodeHost != wantHost {
				t.Fatalf("ParseUnmunge = %+v, %v", id, err)
			}
		})
	}
}

type mungeRunner struct {
	argv  []string
	stdin string
	out   string
}

func (r *mungeRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.argv = append([]string{name}, args...)
	return []byte(r.out), nil
}

func (r *mungeRunner) RunInput(_ context.Context, stdin []byte, name string, args ...string) ([]byte, error) {
	r.stdin = string(stdin)
	return r.Run(context.Background(), name, args...)
}

func TestMungeArgvKeepsTheCredentialOffTheCommandLine(t *testing.T) {
	r := &mungeRunner{out: "MUNGE:AwQFAAB=:\n"}
	cred, err := Client{Runner: r}.MungeEncode(context.Background(), "/run/m.sock", "quotad-api GET /x")
	if err != nil || cred != "MUNGE:AwQFAAB=:" {
		t.Fatalf("MungeEncode = %q, %v", cred, err)
	}
	if got := strings.Join(r.argv, " "); got != "munge --socket /run/m.sock --string quotad-api GET /x" {
		t.Errorf("munge argv = %q", got)
	}
	r.out = "ENCODE_HOST:     192.0.2.7\nUID: 1002\n\nquotad-api GET /x"
	id, err := Client{Runner: r}.MungeDecode(context.Background(), "", cred)
	if err != nil || id.UID != 1002 || id.Payload != "quotad-api GET /x" || id.EncodeHost != "192.0.2.7" {
		t.Fatalf("MungeDecode = %+v, %v", id, err)
	}
	if got := strings.Join(r.argv, " "); got != "unmunge --numeric --keys UID,ENCODE_HOST" || r.stdin != cred+"\n" {
		t.Errorf("unmunge argv %q stdin %q: want the default socket and the credential on stdin", got, r.stdin)
	}
	r.out = "nothing"
	if _, err := (Client{Runner: r}).MungeEncode(context.Background(), "", "p"); err == nil {
		t.Error("output without a credential accepted")
	}
}
