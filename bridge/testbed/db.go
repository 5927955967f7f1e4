package testbed

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/slurmbridge/slurmbridge/bridge/slurmdbd"
)

// DBConfig reaches the testbed's MariaDB as quotad does, from the variables its env file exports.
func (c *Cluster) DBConfig() slurmdbd.Config {
	return slurmdbd.Config{Addr: c.Vars["SLURMBRIDGE_DB_ADDR"], User: c.Vars["SLURMBRIDGE_DB_USER"], PasswordFile: c.Vars["SLURMBRIDGE_DB_PASSWORD_FILE"]}
}

// OpenDB connects to one of the testbed's databases: SLURMBRIDGE_DB_NAME is slurmdbd's.
func (c *Cluster) OpenDB(ctx context.Context, name string) (*sqlx.DB, error) {
	return slurmdbd.Open(ctx, c.DBConfig(), name)
}
