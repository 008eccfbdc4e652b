package zookeeper

import (
	"errors"
	"fmt"
	"strings"

	"github.com/go-zookeeper/zk"
	"go.uber.org/zap"
)

// A node with too many children, or names long enough that listing it
// would return more than Options.MaxBufferSize, is not listed: go-zookeeper
// (v1.0.4) answers an oversized response by dropping the connection, which
// fails every request in flight, and a client that lists the node again
// after reconnecting drops it again, for every service on the session.
//
// So before listing, the registry reads the node's Stat (a few dozen bytes
// whatever the node holds) and skips the node when NumChildren is over
// Options.MaxChildren, or when NumChildren times the bytes per child
// learnt for that node would not fit the buffer. Names can be longer than
// the last listing suggested; when a response still overflows, the log
// line go-zookeeper writes as it drops the connection gives the response
// size, the listing in flight with the most children is blamed, its bytes
// per child are learnt from that size, and the next Stat check skips it. A
// node is so listed over the bound at most once while it stays over it.
//
// A skipped node is reported once (a warning and Stats.Oversized) until it
// is listed again; the listener keeps the last list it got (or the cached
// one), and the node's Stat is looked at again with a backoff that grows to
// Options.Resync.

// listOverhead is the bytes of a children response besides the names:
// reply header (16), count (4) and the Stat (68), rounded up.
const listOverhead = 128

// bigGuard is the per-subscription state of the size check (only its
// goroutine touches it, except blamed, which is guarded by Registry.mu).
type bigGuard struct {
	// perChild is the largest bytes per child (name length + 4) seen or
	// learnt for the node; 0 when unknown.
	perChild int
	// over is set while the node is skipped (reported once per episode).
	over bool
}

// errOversized tells a skipped listing from a failed one.
var errOversized = errors.New("zookeeper registry: node over the size bounds")

// oversizedMsg is what go-zookeeper logs when it drops a connection over a
// response larger than its buffer.
const oversizedMsg = "received packet from server with length "

// onZKLog looks at go-zookeeper's log lines for an oversized response,
// and counts session handshakes a server closed or reset (see watchdog);
// an expired session and a handshake that timed out are told apart. The
// lines of a zk.Conn the watchdog replaced (gen is not the registry's)
// are not the current connection's news: the watchdog closes its sockets,
// which fails its handshake, and that is no server's refusal.
func (r *Registry) onZKLog(gen uint64, line string) {
	r.mu.Lock()
	stale := gen != r.gen
	r.mu.Unlock()
	if stale {
		return
	}
	// A handshake that timed out is no refusal: the server may be slow.
	if strings.HasPrefix(line, "authentication failed: ") && !strings.Contains(line, "expired") && !strings.Contains(line, "timeout") {
		r.mu.Lock()
		r.handshakeEOFs++
		r.mu.Unlock()
		return
	}
	i := strings.Index(line, oversizedMsg)
	if i < 0 {
		return
	}
	var n int
	if _, err := fmt.Sscanf(line[i+len(oversizedMsg):], "%d", &n); err != nil || n <= 0 {
		n = r.opts.MaxBufferSize + 1
	}
	r.oversizedResp.Add(1)
	r.mu.Lock()
	var culprit *sub
	for s, kids := range r.listing {
		if culprit == nil || kids > r.listing[culprit] {
			culprit = s
		}
	}
	if culprit != nil {
		culprit.blamed = n
	}
	r.mu.Unlock()
	r.log.Warn("zookeeper: a response was larger than the client's buffer; go-zookeeper dropped the connection (it reconnects with the same session)",
		zap.Int("bytes", n), zap.Int("max_buffer_size", r.opts.MaxBufferSize))
}

// guardedChildrenW lists p and leaves a watch on it, unless p is over the
// size bounds: then it returns errOversized and does not list.
func (r *Registry) guardedChildrenW(conn *zk.Conn, s *sub, p string) ([]string, <-chan zk.Event, error) {
	ok, st, err := conn.Exists(p)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return r.childrenW(conn, p)
	}
	n := int(st.NumChildren)
	if why := r.overBounds(s, n); why != "" {
		r.reportOversized(s, p, n, why)
		return nil, nil, errOversized
	}
	r.mu.Lock()
	r.listing[s] = n
	s.blamed = 0
	r.mu.Unlock()
	kids, ch, err := r.childrenW(conn, p)
	r.mu.Lock()
	delete(r.listing, s)
	blamed := s.blamed
	r.mu.Unlock()
	if err != nil {
		if blamed > 0 {
			s.big.perChild = max(s.big.perChild, (blamed-listOverhead)/max(n, 1)+1)
			r.reportOversized(s, p, n, fmt.Sprintf("its listing (%d bytes) was over max_buffer_size", blamed))
			return nil, nil, errOversized
		}
		return nil, nil, err
	}
	if len(kids) > r.opts.MaxChildren {
		// It grew between the Stat and the listing.
		r.reportOversized(s, p, len(kids), fmt.Sprintf("more than max_children (%d)", r.opts.MaxChildren))
		return nil, ch, errOversized
	}
	if len(kids) > 0 {
		total := 0
		for _, k := range kids {
			total += len(k) + 4
		}
		s.big.perChild = max(s.big.perChild, (total+len(kids)-1)/len(kids))
	}
	if s.big.over {
		s.big.over = false
		r.log.Info("zookeeper: node within the size bounds again; listed", zap.String("node", p), zap.Int("children", len(kids)))
	}
	return kids, ch, nil
}

// overBounds says why a node with n children is not to be listed, or "".
func (r *Registry) overBounds(s *sub, n int) string {
	if n > r.opts.MaxChildren {
		return fmt.Sprintf("more than max_children (%d)", r.opts.MaxChildren)
	}
	if s.big.perChild > 0 {
		if need := listOverhead + n*s.big.perChild; need > r.opts.MaxBufferSize {
			return fmt.Sprintf("its listing (about %d bytes) would be over max_buffer_size (%d)", need, r.opts.MaxBufferSize)
		}
	}
	return ""
}

// reportOversized logs and counts a skipped node once per episode.
func (r *Registry) reportOversized(s *sub, p string, n int, why string) {
	if s.big.over {
		return
	}
	s.big.over = true
	r.oversized.Add(1)
	r.log.Warn("zookeeper: node too big to list; skipped, keeping the last list (raise max_children or max_buffer_size, or clean the node up)",
		zap.String("node", p), zap.Int("children", n), zap.String("reason", why))
}
