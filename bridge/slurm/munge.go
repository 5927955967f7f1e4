package slurm

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// MUNGE is how Slurm authenticates a user across hosts, and so how a daemon beside slurmctld
// learns who asks: the client encodes a credential with its munged (which vouches for its
// uid), the daemon decodes it with its own. Both go through the munge and unmunge commands that
// come with every Slurm installation.

// MungeIdentity is what a decoded credential says.
type MungeIdentity struct {
	UID     uint32
	Payload string
}

// MungeEncode returns a credential for payload from the local munged (socket "" is munged's
// default). The credential goes to stdout, never to a command line.
func (f Client) MungeEncode(ctx context.Context, socket, payload string) (string, error) {
	args := mungeSocket(socket)
	args = append(args, "--string", payload)
	out, err := f.Runner.Run(ctx, "munge", args...)
	if err != nil {
		return "", fmt.Errorf("munge: %w", err)
	}
	cred := strings.TrimSpace(string(out))
	if !strings.HasPrefix(cred, "MUNGE:") {
		return "", fmt.Errorf("munge printed no credential: %q", cred)
	}
	return cred, nil
}

// MungeDecode validates a credential with the local munged and returns its uid and payload. It
// fails for a forged, expired or replayed credential (munged decodes each one once). The
// credential is fed on stdin: another user's ps must not see it.
func (f Client) MungeDecode(ctx context.Context, socket, cred string) (MungeIdentity, error) {
	in, ok := f.Runner.(InputRunner)
	if !ok {
		return MungeIdentity{}, errors.New("unmunge: the runner cannot feed standard input")
	}
	args := mungeSocket(socket)
	args = append(args, "--numeric", "--keys", "UID")
	out, err := in.RunInput(ctx, []byte(cred+"\n"), "unmunge", args...)
	if err != nil {
		return MungeIdentity{}, fmt.Errorf("unmunge: %w", err)
	}
	return ParseUnmunge(string(out))
}

func mungeSocket(socket string) []string {
	if socket == "" {
		return nil
	}
	return []string{"--socket", socket}
}

// ParseUnmunge reads `unmunge --numeric --keys UID` output: the metadata line, a blank line,
// then the payload as it was encoded.
func ParseUnmunge(out string) (MungeIdentity, error) {
	meta, payload, ok := strings.Cut(out, "\n\n")
	if !ok {
		return MungeIdentity{}, fmt.Errorf("unmunge output has no payload: %q", out)
	}
	for line := range strings.SplitSeq(meta, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(key) != "UID" {
			continue
		}
		uid, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32)
		if err != nil {
			return MungeIdentity{}, fmt.Errorf("unmunge UID %q: %w", value, err)
		}
		return MungeIdentity{UID: uint32(uid), Payload: payload}, nil
	}
	return MungeIdentity{}, fmt.Errorf("unmunge output has no UID: %q", out)
}
