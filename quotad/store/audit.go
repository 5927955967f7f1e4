package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Audit kinds.
const (
	KindQuota   = "quota"   // a quota table change (quotactl set/import)
	KindQOS     = "qos"     // a QOS created or modified by quotad
	KindAccount = "account" // an account's QOS list or default QOS rewritten by quotad
	KindMove    = "move"    // a pending job moved between QOS (lend or return)
	KindReclaim = "reclaim" // borrowers Slurm preempted for a claim, judged by quotad (who claimed, who lost what, minimal or not)
)

// Entry is one audit row: who changed what, when, from what to what.
type Entry struct {
	ID      uint64    `db:"id" json:"id"`
	At      time.Time `db:"at" json:"at"`
	Actor   string    `db:"actor" json:"actor"`
	Kind    string    `db:"kind" json:"kind"`
	Subject string    `db:"subject" json:"subject"`
	Old     string    `db:"old_value" json:"old"`
	New     string    `db:"new_value" json:"new"`
	Detail  string    `db:"detail" json:"detail,omitempty"`
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// auditRowsPerInsert bounds the rows of one INSERT: 7 placeholders a row, well within the
// server's 65,535 and its max_allowed_packet for rows of this size.
const auditRowsPerInsert = 500

// insertAudits writes audit rows in as few INSERT statements as auditRowsPerInsert allows; a
// row without a time gets now. Each statement is atomic: its rows are all written or none is.
func insertAudits(ctx context.Context, tx execer, entries []Entry) error {
	now := time.Now()
	for len(entries) > 0 {
		chunk := entries[:min(len(entries), auditRowsPerInsert)]
		entries = entries[len(chunk):]
		query := "INSERT INTO audit (at, actor, kind, subject, old_value, new_value, detail) VALUES " +
			strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, ?, ?, ?), ", len(chunk)), ", ")
		args := make([]any, 0, 7*len(chunk))
		for _, e := range chunk {
			if e.At.IsZero() {
				e.At = now
			}
			args = append(args, e.At.UTC(), e.Actor, e.Kind, e.Subject, e.Old, e.New, e.Detail)
		}
		if _, err := tx.ExecContext(ctx, query, args...); err != nil {
			return fmt.Errorf("writing audit (%d rows): %w", len(chunk), err)
		}
	}
	return nil
}

// Record writes one audit row outside a transaction (quotad's own actions).
func (s *Store) Record(ctx context.Context, e Entry) error {
	return s.RecordAll(ctx, []Entry{e})
}

// RecordAll writes many audit rows outside a transaction, in as few statements as it can: a
// cycle that moves hundreds of jobs audits each chunk of moves so, rather than one commit per job.
func (s *Store) RecordAll(ctx context.Context, entries []Entry) error {
	return insertAudits(ctx, s.DB, entries)
}

// History returns the latest audit rows, newest last; kind "" means all.
func (s *Store) History(ctx context.Context, kind string, limit int) ([]Entry, error) {
	if limit <= 0 {
		limit = 50
	}
	var rows []Entry
	q := "SELECT id, at, actor, kind, subject, old_value, new_value, detail FROM audit"
	args := []any{}
	if kind != "" {
		q += " WHERE kind = ?"
		args = append(args, kind)
	}
	q += " ORDER BY id DESC LIMIT ?"
	args = append(args, limit)
	if err := s.DB.SelectContext(ctx, &rows, q, args...); err != nil {
		return nil, fmt.Errorf("reading audit: %w", err)
	}
	for i, j := 0, len(rows)-1; i < j; i, j = i+1, j-1 {
		rows[i], rows[j] = rows[j], rows[i]
	}
	return rows, nil
}
