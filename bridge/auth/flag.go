package auth

import "github.com/urfave/cli/v2"

// MungeSocketFlag names munged's socket: the daemons decode their API's credentials with it,
// the clients (quotactl, elasticd status, pin and unpin, elasticd's node agent) make theirs.
func MungeSocketFlag() cli.Flag {
	return &cli.StringFlag{Name: "munge-socket", Usage: "munged's socket (empty: MUNGE's default)", EnvVars: []string{"SLURMBRIDGE_MUNGE_SOCKET"}}
}
