package daemon

import (
	"container/list"
	"crypto/ecdh"
	"crypto/hmac"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/slurmbridge/slurmbridge/bridge/auth"
	"github.com/slurmbridge/slurmbridge/elasticd/api"
)

// Signals sessions. A MUNGE credential per report costs elasticd an unmunge process per agent
// and interval: with a thousand GPU nodes, a hundred forks a second, each holding one of the
// few decode slots every person's request shares. So an agent proves who it is once per
// session: it posts an ephemeral X25519 public key under a MUNGE credential made for exactly
// that body, checked as a report's was (root or an agent uid, decoded once, bounded), and
// elasticd answers its own ephemeral public key. Both derive the session's key from the X25519
// shared secret (api.SessionKey); every report then carries the session id, a sequence number
// above the last one taken, and an HMAC of both and the body, verified here without a fork.
//
// The key is never sent: root on any node can decode any MUNGE credential, so a key carried in a
// credential or an answer would be read by root on another node sniffing the wire, while X25519
// shows a sniffer public keys only. The session keeps the credential's uid and ENCODE_HOST, and
// each report is still checked against the nodes it names, so root on one node still cannot
// speak for another. Sessions live in memory: a restarted elasticd answers the next report
// api.SessionUnknown and each agent sets up again (one decode per agent).

// DefaultSessionTTL is how long a session lasts; agents renew it before.
const DefaultSessionTTL = time.Hour

// DefaultMaxSessions bounds the sessions held: more than a site's GPU nodes. Only a valid
// credential of root or an agent uid makes one; beyond the bound the oldest goes, and its agent
// sets up again.
const DefaultMaxSessions = 16384

// maxSessionRequest bounds a set-up's body: a node list and a 32-byte key.
const maxSessionRequest = 4 << 10

// originRecheck: a session's report naming the same nodes as its last checked one skips the
// origin check (NodeAddr names resolved each time) while the nodes' addresses are as then
// and for at most this long.
const originRecheck = 5 * time.Minute

var (
	errSessionUnknown = errors.New(api.SessionUnknown + " (expired, evicted, or elasticd restarted): set up a new one")
	errSessionMAC     = errors.New("the report's MAC does not verify under its session's key")
	errSessionReplay  = errors.New("replayed or reordered report")
)

// agentSession is one agent's session.
type agentSession struct {
	id      string
	uid     uint32 // who set it up: root or an agent uid
	host    string // the set-up credential's ENCODE_HOST
	key     []byte // never changed once made
	seq     uint64 // the last sequence number taken
	expires time.Time
	// The report nodes last found to be host's, at nodeAddrs generation originGen.
	originNodes string
	originGen   uint64
	originAt    time.Time
	elem        *list.Element
}

// sessionTable holds the sessions, at most max. All have the same lifetime, so the order of
// set-up is the order of expiry: the oldest is at the front, evicted first.
type sessionTable struct {
	mu    sync.Mutex
	byID  map[string]*agentSession
	order *list.List
	max   int
	ttl   time.Duration
}

func newSessionTable(maxSessions int, ttl time.Duration) *sessionTable {
	if maxSessions <= 0 {
		maxSessions = DefaultMaxSessions
	}
	if ttl <= 0 {
		ttl = DefaultSessionTTL
	}
	return &sessionTable{byID: map[string]*agentSession{}, order: list.New(), max: maxSessions, ttl: ttl}
}

func (t *sessionTable) removeLocked(s *agentSession) {
	t.order.Remove(s.elem)
	delete(t.byID, s.id)
}

// add holds s, dropping expired sessions and then, at the bound, the oldest; it returns how many
// live ones went.
func (t *sessionTable) add(s *agentSession, now time.Time) (evicted int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for e := t.order.Front(); e != nil && !now.Before(e.Value.(*agentSession).expires); e = t.order.Front() {
		t.removeLocked(e.Value.(*agentSession))
	}
	for len(t.byID) >= t.max {
		t.removeLocked(t.order.Front().Value.(*agentSession))
		evicted++
	}
	s.elem = t.order.PushBack(s)
	t.byID[s.id] = s
	return evicted
}

// liveLocked is session id unless it is missing or expired (then dropped).
func (t *sessionTable) liveLocked(id string, now time.Time) *agentSession {
	s := t.byID[id]
	if s != nil && !now.Before(s.expires) {
		t.removeLocked(s)
		s = nil
	}
	return s
}

// accept checks a report of session id: its MAC over seq and body under the session's key
// (outside the lock: a body is up to 1 MiB), then takes seq if it is above the last one taken.
// A replay, even racing its original, finds its seq taken.
func (t *sessionTable) accept(id string, seq uint64, mac, body []byte, now time.Time) (agentSession, error) {
	t.mu.Lock()
	s := t.liveLocked(id, now)
	var key []byte
	if s != nil {
		key = s.key
	}
	t.mu.Unlock()
	if s == nil {
		return agentSession{}, errSessionUnknown
	}
	if !hmac.Equal(mac, api.ReportMAC(key, id, seq, body)) {
		return agentSession{}, errSessionMAC
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s = t.liveLocked(id, now); s == nil {
		return agentSession{}, errSessionUnknown
	}
	if seq <= s.seq {
		return agentSession{}, fmt.Errorf("%w: sequence number %d is not above the session's last, %d", errSessionReplay, seq, s.seq)
	}
	s.seq = seq
	return *s, nil
}

// originKnown says whether session s's last checked report named nodes, at gen, recently.
func originKnown(s agentSession, nodes string, gen uint64, now time.Time) bool {
	return s.originNodes == nodes && s.originGen == gen && now.Sub(s.originAt) < originRecheck
}

// noteOrigin remembers that nodes are session id's host's at gen.
func (t *sessionTable) noteOrigin(id, nodes string, gen uint64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s := t.byID[id]; s != nil {
		s.originNodes, s.originGen, s.originAt = nodes, gen, now
	}
}

// len is how many sessions are held.
func (t *sessionTable) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// serveSession sets up a session: the credential first (as a report's before sessions), then
// the key exchange. A refused set-up holds nothing.
func (d *Daemon) serveSession(w http.ResponseWriter, r *http.Request, agents *AgentAuth, table *sessionTable) {
	if agents == nil || agents.Identity == nil || table == nil {
		http.Error(w, "this elasticd takes no signal reports (no MUNGE authentication configured)", http.StatusServiceUnavailable)
		return
	}
	if r.Header.Get("Authorization") == "" {
		w.Header().Set("WWW-Authenticate", auth.Scheme)
		http.Error(w, fmt.Sprintf("signals sessions are set up by elasticd's node agents: send \"Authorization: %s <credential>\" with a credential of root or the agents' user from `munge --string 'slurmbridge-elasticd-signals-session POST %s sha256=<hex SHA-256 of the body>'` (elasticd agent does)",
			auth.Scheme, api.SignalsSessionPath), http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxSessionRequest))
	if err != nil {
		http.Error(w, "session request unreadable or over "+strconv.Itoa(maxSessionRequest)+" bytes: "+err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	d.metrics.agentDecodes.WithLabelValues("session").Inc()
	id, ok := agentIdentity(w, r, agents, api.SessionPayload(body))
	if !ok {
		return
	}
	if agents.CheckOrigin && net.ParseIP(id.EncodeHost) == nil {
		http.Error(w, fmt.Sprintf("session refused: the credential names no encoding host address (unmunge said %q)", id.EncodeHost), http.StatusForbidden)
		return
	}
	var req api.SessionRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, "bad session request: "+err.Error(), http.StatusBadRequest)
		return
	}
	peer, err := ecdh.X25519().NewPublicKey(req.PublicKey)
	if err != nil {
		http.Error(w, "bad session request: public key: "+err.Error(), http.StatusBadRequest)
		return
	}
	priv, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		http.Error(w, "making a key: "+err.Error(), http.StatusInternalServerError)
		return
	}
	shared, err := priv.ECDH(peer)
	if err != nil {
		http.Error(w, "bad session request: public key: "+err.Error(), http.StatusBadRequest)
		return
	}
	sid := rand.Text()
	key, err := api.SessionKey(shared, req.PublicKey, priv.PublicKey().Bytes(), sid)
	if err != nil {
		http.Error(w, "deriving the session key: "+err.Error(), http.StatusInternalServerError)
		return
	}
	now := d.now()
	if n := table.add(&agentSession{id: sid, uid: id.UID, host: id.EncodeHost, key: key, expires: now.Add(table.ttl)}, now); n > 0 {
		d.log.Warn().Int("evicted", n).Int("max", table.max).Msg("signals sessions at their bound: the oldest evicted (its agent sets up again)")
	}
	d.metrics.agentSessions.Set(float64(table.len()))
	d.log.Debug().Str("node", req.Node).Str("host", id.EncodeHost).Uint32("uid", id.UID).Msg("signals session set up")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(api.SessionAnswer{ID: sid, PublicKey: priv.PublicKey().Bytes(), ExpiresInSeconds: int64(table.ttl / time.Second)})
}
