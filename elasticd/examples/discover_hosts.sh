#!/bin/sh
# Horovod host discovery: print "host:slots" per line. elasticd keeps the file current.
exec cat "${ELASTIC_HOSTS_FILE:?not an elastic job}"
