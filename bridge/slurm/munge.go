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
	// EncodeHost is the address of the host whose munged encoded the credential (unmunge's
	// ENCODE_HOST, numeric): munged's own idea of its address (its host name resolved, or its
	// --origin), not the connection's source.
	EncodeHost string
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
	args = append(args, "--numeric", "--keys", "UID,ENCODE_HOST")
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

// ParseUnmunge reads `unmunge --numeric --keys UID,ENCODE_HOST` output: the metadata lines
// (ENCODE_HOST is optional here, so output of --keys UID reads too), a blank line, then the
// payload as it was encoded.
func ParseUnmunge(out string) (MungeIdentity, error) {
	meta, payload, ok := strings.Cut(out, "\n\n")
	if !ok {
		return MungeIdentity{}, fmt.Errorf("unmunge output has no payload: %q", out)
	}
	id := MungeIdentity{Payload: payload}
	var hasUID bool
	for line := range strings.SplitSeq(meta, "\n") {
		key, value, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(key) {
		case "UID":
			uid, err := strconv.ParseUint(strings.TrimSpace(value), 10, 32)
			if err != nil {
				return MungeIdentity{}, fmt.Errorf("unmunge UID %q: %w", value, err)
			}
			id.UID, hasUID = uint32(uid), true
		case "ENCODE_HOST":
			id.EncodeHost = strings.TrimSpace(value)
		}
	}
	if !hasUID {
		return MungeIdentity{}, fmt.Errorf("unmunge output has no UID: %q", out)
	}
	return id, nil
}
