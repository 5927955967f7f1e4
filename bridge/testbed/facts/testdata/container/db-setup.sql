-- The testbed's MariaDB, for both testbeds (testbed/testbed.sh and docker/slurm-testbed):
-- slurmdbd's accounting database and quotad's own schema (quota table, audit) beside it, both
-- for the user slurm from one client host. db-setup.sh renders it once per host (the local
-- testbed: 127.0.0.1 and localhost; the containers: '%') and both testbeds pipe it to the
-- server, never to a file with the password in it. Idempotent: a testbed up again keeps its data.
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE DATABASE IF NOT EXISTS slurmbridge;
CREATE USER IF NOT EXISTS 'slurm'@'%' IDENTIFIED BY '0123456789abcdef';
ALTER USER 'slurm'@'%' IDENTIFIED BY '0123456789abcdef';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'%';
GRANT ALL ON slurmbridge.* TO 'slurm'@'%';
