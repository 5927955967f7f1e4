// Package spankelastic holds the tests of the elastic SPANK plugin (spank_elastic.c, plain C
// that slurmstepd loads; the Makefile builds it): a fuzz harness of its option parsers and of
// its callbacks as slurmstepd calls them (testdata), and the attacks on it through a job's
// environment against the real testbed (TestAttack..., build tag integration).
package spankelastic
