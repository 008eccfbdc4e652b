package transport_test

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/minidubbo/minidubbo/internal/testcert"
	"github.com/minidubbo/minidubbo/transport"
)

// closeLog echoes frames (answers 64 KiB when big is set) and keeps the
// error each connection closed with.
type closeLog struct {
	big    bool
	closed chan error
}

func newCloseLog(big bool) *closeLog { return &closeLog{big: big, closed: make(chan error, 1000)} }

func (h *closeLog) Serve(c *transport.Conn, f *transport.Buffer) {
	if h.big {
		bigAnswers{}.Serve(c, f)
		return
	}
	_ = c.Send(f)
}

func (h *closeLog) Closed(_ *transport.Conn, err error) { h.closed <- err }

// closeErrors takes n close errors from h, within 20 s.
func closeErrors(t *testing.T, h *closeLog, n int) []error {
	t.Helper()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	errs := make([]error, 0, n)
	for len(errs) < n {
		select {
		case err := <-h.closed:
			errs = append(errs, err)
		case <-timeout.C:
			t.Fatalf("%d connections closed of %d: %v", len(errs), n, errs)
		}
	}
	return errs
}

// TestReclaimFramesBehindPace: 32 peers each send a 16-byte header that
// declares an 8 MiB frame, and nothing more. Their frames are charged
// whole when their headers are read, so they hold the whole default
// budget of 256 MiB (about 2 MiB allocated), and a polite peer's 64 KiB
// call waits for room. While it waits, the frames far behind the pace
// their FrameTimeout implies (8 MiB per 10 s here, after 1 s) are cut
// off: closed with ErrSlowFrame and counted (Reclaimed), and the polite
// call is answered, instead of waiting for the peers' FrameTimeout to cut
// them off (10 s here, 5 s by default; and the peers may start again).
// The reclaimer looks only while a connection waits: the peers whose
// frames had not fallen behind yet when the call got its room are left.
func TestReclaimFramesBehindPace(t *testing.T) {
	const (
		n    = 32
		body = 8<<20 - transport.HeaderSize
	)
	h := newCloseLog(false)
	s, addr := serve(t, h, &transport.Options{FrameTimeout: 10 * time.Second, MaxMemoryPerIP: transport.DefaultMaxMemory})
	b := s.Budget()
	require.Equal(t, transport.DefaultMaxMemory, b.Limit())
	polite, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer polite.Close()
	politeRoundTrip(t, polite, "warm")
	require.Eventually(t, func() bool { return b.Used() == 0 }, 10*time.Second, time.Millisecond, "the warm frame was released")

	peers := make([]net.Conn, n)
	for i := range peers {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		peers[i] = c
		_, err = c.Write(header(uint64(i), body))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return b.Used() == b.Limit() }, 20*time.Second, time.Millisecond,
		"32 headers hold the budget")
	start := time.Now()
	politeRoundTrip(t, polite, strings.Repeat("p", 64<<10))
	t.Logf("a 64 KiB call with %d peers holding 8 MiB frames by their headers: answered in %v", n, time.Since(start))
	require.Equal(t, uint64(1), s.Throttled(), "only the polite call waited")
	for _, c := range peers {
		c.Close()
	}
	cut := uint64(0)
	for _, err := range closeErrors(t, h, n) {
		if errors.Is(err, transport.ErrSlowFrame) {
			require.ErrorContains(t, err, "sent 0 bytes of a 8388592-byte body in")
			require.ErrorContains(t, err, "while other connections waited for memory")
			cut++
		}
	}
	require.NotZero(t, cut)
	// Counted just after the close.
	require.Eventually(t, func() bool { return s.Reclaimed() == cut && b.Reclaimed() == cut }, 10*time.Second, time.Millisecond,
		"the peers closed by the budget")
	require.Eventually(t, func() bool { return b.Used() == 0 }, 10*time.Second, time.Millisecond, "frames not given back")
}

// TestReclaimPipelinedClientThatReadsLast: a client writes a batch of
// 16,384 requests of 1 KiB before it reads any answer (64 KiB each), into
// a server whose budget is 1 MiB and whose send buffer is 32 KiB. The
// answers the socket does not take use up the budget, so the server stops
// reading the client, whose write then never ends: it would read once
// its batch is written. Since nothing else would ever end it, the peer
// that took none of its answers for FrameTimeout while a connection waits
// for memory is closed (ErrSlowPeer, Reclaimed), its write fails instead
// of hanging, and the budget is given back.
func TestReclaimPipelinedClientThatReadsLast(t *testing.T) {
	h := newCloseLog(true)
	s, addr := serveSmallSends(t, h, &transport.Options{MaxMemory: 1 << 20, MaxPayload: 256 << 10, FrameTimeout: 300 * time.Millisecond})
	b := s.Budget()

	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.(*net.TCPConn).SetReadBuffer(32<<10))
	require.NoError(t, c.(*net.TCPConn).SetWriteBuffer(32<<10))
	var batch []byte
	for i := range 16384 {
		batch = append(batch, frame(uint64(i), strings.Repeat("r", 1<<10)).B...)
	}
	_ = c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	_, err = c.Write(batch)
	require.Error(t, err, "the whole batch was read")
	require.False(t, errors.Is(err, os.ErrDeadlineExceeded), "the write waited for ever: %v", err)
	errs := closeErrors(t, h, 1)
	require.ErrorIs(t, errs[0], transport.ErrSlowPeer)
	require.ErrorContains(t, errs[0], "took none of its answers")
	require.Eventually(t, func() bool { return s.Reclaimed() == 1 }, 10*time.Second, time.Millisecond)
	require.NotZero(t, s.Throttled())
	require.Eventually(t, func() bool { return b.Used() == 0 }, 10*time.Second, time.Millisecond, "frames not given back")
}

// TestReclaimLargestNonReader: three peers send requests and never read
// their 64 KiB answers, which use up a 4 MiB budget; a polite peer's
// 256 KiB call then waits for room. The peer holding the most answers
// that took none of them for FrameTimeout is closed, and more while the
// call still would not fit; the call is answered, and the peers that are
// left keep their answers (one closed at least, not all three
// necessarily).
func TestReclaimLargestNonReader(t *testing.T) {
	h := newCloseLog(false)
	s, addr := serveSmallSends(t, reclaimEcho{h}, &transport.Options{MaxMemory: 4 << 20, MaxPayload: 1 << 20, FrameTimeout: 300 * time.Millisecond})
	b := s.Budget()

	var reqs []byte
	for i := range 30 {
		reqs = append(reqs, frame(uint64(i), "q").B...)
	}
	for range 3 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer c.Close()
		require.NoError(t, c.(*net.TCPConn).SetReadBuffer(32<<10))
		_, err = c.Write(reqs)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return b.Used()+transport.HeaderSize+256<<10 > b.Limit() && s.Throttled() > 0 },
		20*time.Second, time.Millisecond, "unread answers use up the budget")
	polite, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer polite.Close()
	politeRoundTrip(t, polite, strings.Repeat("p", 256<<10))
	// At least one closed; each counted just after its close.
	err = closeErrors(t, h, 1)[0]
	require.ErrorIs(t, err, transport.ErrSlowPeer)
	require.ErrorContains(t, err, "took none of its answers")
	require.Eventually(t, func() bool { return s.Reclaimed() > 0 }, 10*time.Second, time.Millisecond)
}

// reclaimEcho echoes frames with a 1 KiB body or more, answers the others
// with 64 KiB, and logs closes.
type reclaimEcho struct{ *closeLog }

func (h reclaimEcho) Serve(c *transport.Conn, f *transport.Buffer) {
	if binary.BigEndian.Uint32(f.B[12:16]) >= 1<<10 {
		_ = c.Send(f)
		return
	}
	bigAnswers{}.Serve(c, f)
}

// bigOnA answers a frame whose body is "A" with a 3.5 MiB frame, and
// echoes the others.
type bigOnA struct{ *closeLog }

func (h bigOnA) Serve(c *transport.Conn, f *transport.Buffer) {
	if string(f.B[transport.HeaderSize:]) != "A" {
		_ = c.Send(f)
		return
	}
	f.Release()
	const n = 7 << 19
	a := transport.GetBuffer()
	a.Grow(transport.HeaderSize + n)
	a.B = append(a.B, header(1, n)...)
	a.B = a.B[:transport.HeaderSize+n]
	_ = c.Send(a)
}

// TestReclaimSparesSlowReader: a peer reads its 3.5 MiB answer at about
// 1 MiB/s (64 KiB every 50 ms: a slow reader, not one that stopped), so
// the answer stays queued for about 3 s, longer than FrameTimeout (1 s:
// a test reader descheduled for a while is not taken for one that
// stopped), while another peer's 1 MiB frame waits for the memory it
// holds. The slow reader takes part of its answer at every write the
// socket has room for, so it is not closed: its answer is read whole,
// then the waiting frame is read and echoed, and nothing was reclaimed.
// (Counting only whole batches written, as the queue's own count does,
// closed it.)
func TestReclaimSparesSlowReader(t *testing.T) {
	h := newCloseLog(false)
	s, addr := serveSmallSends(t, bigOnA{h}, &transport.Options{MaxMemory: 4 << 20, MaxPayload: 7 << 19, FrameTimeout: time.Second})

	slow, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer slow.Close()
	require.NoError(t, slow.(*net.TCPConn).SetReadBuffer(32<<10))
	spareSlowReader(t, s, slow, func() (net.Conn, error) { return net.Dial("tcp", addr) })
}

// spareSlowReader runs the part TestReclaimSparesSlowReader and its TLS
// twin share: slow asks bigOnA for its 3.5 MiB answer; once it is queued
// a 1 MiB frame from another connection waits for memory; slow reads the
// answer at about 1 MiB/s and is not closed; then the waiting frame is
// read and echoed, and nothing was reclaimed.
func spareSlowReader(t *testing.T, s *transport.Server, slow net.Conn, dialOther func() (net.Conn, error)) {
	t.Helper()
	_, err := slow.Write(frame(1, "A").B)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Budget().Used() > 7<<19 }, 10*time.Second, time.Millisecond, "the answer is queued")

	other, err := dialOther()
	require.NoError(t, err)
	defer other.Close()
	body := strings.Repeat("o", 1<<20)
	_, err = other.Write(frame(2, body).B)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, 10*time.Second, time.Millisecond, "the 1 MiB frame waits")

	// The slow reader's pace is what this test is about.
	_ = slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	got, buf := 0, make([]byte, 64<<10)
	for got < transport.HeaderSize+7<<19 {
		k, err := io.ReadFull(slow, buf[:min(len(buf), transport.HeaderSize+7<<19-got)])
		require.NoError(t, err, "the slow reader was closed after %d bytes", got+k)
		got += k
		<-time.After(50 * time.Millisecond)
	}
	_ = other.SetReadDeadline(time.Now().Add(10 * time.Second))
	echo := make([]byte, transport.HeaderSize+len(body))
	_, err = io.ReadFull(other, echo)
	require.NoError(t, err)
	require.Equal(t, body, string(echo[transport.HeaderSize:]))
	require.Zero(t, s.Reclaimed())
}

// frozenFrom is a listener whose connections from ip never take a byte
// of what is written to them: a write waits until the connection is
// closed or given a write deadline (a graceful close), so their answers
// stay queued whole, with no progress, from the first write on.
type frozenFrom struct {
	net.Listener
	ip string
}

func (l frozenFrom) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil && c.RemoteAddr().(*net.TCPAddr).IP.String() == l.ip {
		return &frozenWrites{Conn: c, done: make(chan struct{})}, nil
	}
	return c, err
}

type frozenWrites struct {
	net.Conn
	once sync.Once
	done chan struct{}
}

func (c *frozenWrites) Write([]byte) (int, error) {
	<-c.done
	return 0, net.ErrClosed
}

func (c *frozenWrites) SetWriteDeadline(time.Time) error {
	c.once.Do(func() { close(c.done) })
	return nil
}

func (c *frozenWrites) Close() error {
	c.once.Do(func() { close(c.done) })
	return c.Conn.Close()
}

// mibOnA answers a frame whose body is "A" with a 1 MiB frame.
type mibOnA struct{ *closeLog }

func (h mibOnA) Serve(c *transport.Conn, f *transport.Buffer) {
	f.Release()
	a := transport.GetBuffer()
	a.Grow(transport.HeaderSize + 1<<20)
	a.B = append(a.B, header(1, 1<<20)...)
	a.B = a.B[:transport.HeaderSize+1<<20]
	_ = c.Send(a)
}

// dialFrom dials addr from the loopback address ip (127.0.0.2 and up
// work on Linux), so that a server sees a peer of its own.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 10 * time.Second}
	c, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// TestReclaimEnoughForReservedFrame: three peers never take their 1 MiB
// answers, which with a frame the handler keeps use up a 4 MiB budget;
// the keeper's connection then waits with a 3000-byte frame (the first
// in the queue: the smallest) and another peer with a 2.5 MiB frame, for
// which the budget is reserved. When the non-readers have taken nothing
// for FrameTimeout, one look of the reclaimer closes all three, enough
// for the reserved frame, not only for the smallest waiting one (which
// the reservation does not let in: 5ec4eaf; before it one look closed
// one non-reader, and the reserved frame waited a look per non-reader).
// Both waiting frames are then read.
func TestReclaimEnoughForReservedFrame(t *testing.T) {
	const big = 5 << 19
	shared := transport.NewBudget(4 << 20)
	h := newCloseLog(false)
	frozen := transport.NewServer(mibOnA{h}, &transport.Options{Budget: shared, FrameTimeout: 3 * time.Second})
	l, err := transport.Listen("127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan struct{})
	go func() { defer close(served); _ = frozen.Serve(frozenFrom{l, "127.0.0.2"}) }()
	t.Cleanup(func() { frozen.Close(); <-served })
	k := keeper{kept: make(chan *transport.Buffer, 4)}
	// FrameTimeout 2 s (1 s before): the 2.5 MiB frame, once let in, is
	// read under it and the pace it implies; under -race that took 70-270 ms
	// at load ~15, and once at load ~30 the frame was let in and never
	// arrived ("waiters 0 queue 0"). Its tenth, 200 ms, still reserves the
	// budget long before the non-readers' 3 s are up.
	s, addr := serve(t, k, &transport.Options{Budget: shared, MaxPayload: big, FrameTimeout: 2 * time.Second})

	looks := make(chan int, 100)
	defer transport.OnStuckClosed(func(n int) { looks <- n })()

	for range 3 {
		_, err := dialFrom(t, "127.0.0.2", l.Addr().String()).Write(frame(1, "A").B)
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return shared.Used() >= 3*(transport.HeaderSize+1<<20) }, 10*time.Second, time.Millisecond,
		"three answers queued")
	holder, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer holder.Close()
	go func() { _, _ = holder.Write(wholeFrame(2, shared.Limit()-shared.Used()-transport.HeaderSize-1024)) }()
	var kept []*transport.Buffer
	defer func() {
		for _, f := range kept {
			f.Release()
		}
	}()
	timeout := time.NewTimer(20 * time.Second)
	defer timeout.Stop()
	select {
	case f := <-k.kept:
		kept = append(kept, f)
	case <-timeout.C:
		t.Fatal("the holder's frame was not read")
	}
	small := frame(3, strings.Repeat("s", 3000)).B
	_, err = holder.Write(small)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, 10*time.Second, time.Millisecond, "the small frame waits")
	waiter, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer waiter.Close()
	go func() { _, _ = waiter.Write(wholeFrame(4, big)) }() // waits in TCP
	require.Eventually(t, func() bool { return transport.Reservations(shared) == 1 }, 10*time.Second, time.Millisecond,
		"the budget is reserved for the 2.5 MiB frame: %s", transport.BudgetState(shared))

	select {
	case n := <-looks:
		require.Equal(t, 3, n, "non-readers closed by the look that closed the first: %s", transport.BudgetState(shared))
	case <-timeout.C:
		t.Fatalf("no non-reader closed: %s", transport.BudgetState(shared))
	}
	select {
	case f := <-k.kept:
		kept = append(kept, f)
		require.Len(t, f.B, transport.HeaderSize+big)
	case <-timeout.C:
		t.Fatalf("the reserved frame was not read: %s", transport.BudgetState(shared))
	}
	politeEcho := make([]byte, len(small))
	_ = holder.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadFull(holder, politeEcho)
	require.NoError(t, err)
	require.Equal(t, small, politeEcho)
	for _, err := range closeErrors(t, h, 3) {
		require.ErrorIs(t, err, transport.ErrSlowPeer)
	}
	require.Equal(t, uint64(3), frozen.Reclaimed())
}

// paceSetup serves a budget of 4 MiB whose 2.5 MiB are held by a kept
// frame, starts a 1 MiB frame on a new connection with the first bytes
// of its body (charged whole: 3.5 MiB), then makes a 1 MiB frame of a third
// connection wait for room, so that the reclaimer looks. FrameTimeout is
// 2 s. It returns the server, the kept frames, the started connection
// with the rest of its frame, and a time before its frame was charged.
func paceSetup(t *testing.T, h *closeLog, first int) (*transport.Server, chan *transport.Buffer, net.Conn, []byte, time.Time) {
	t.Helper()
	k := keeper{kept: make(chan *transport.Buffer, 4)}
	s, addr := serve(t, closeKeeper{k, h}, &transport.Options{MaxMemory: 4 << 20, MaxMemoryPerIP: 4 << 20, MaxPayload: 5 << 19, FrameTimeout: 2 * time.Second})
	b := s.Budget()
	holder, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { holder.Close() })
	go func() { _, _ = holder.Write(wholeFrame(1, 5<<19)) }()
	select {
	case f := <-k.kept:
		t.Cleanup(f.Release)
	case <-time.After(20 * time.Second):
		t.Fatal("the holder's frame was not read")
	}
	peer, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { peer.Close() })
	f := wholeFrame(2, 1<<20)
	start := time.Now()
	_, err = peer.Write(f[:transport.HeaderSize+first])
	require.NoError(t, err)
	require.Eventually(t, func() bool { return b.Used() >= 5<<19+1<<20 }, 10*time.Second, time.Millisecond, "the frame is charged")
	waiter, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { waiter.Close() })
	go func() { _, _ = waiter.Write(wholeFrame(3, 1<<20)) }()
	require.Eventually(t, func() bool { return s.Throttled() == 1 }, 10*time.Second, time.Millisecond, "a frame waits for room")
	return s, k.kept, peer, f[transport.HeaderSize+first:], start
}

// closeKeeper keeps frames as keeper does and logs closes as closeLog.
type closeKeeper struct {
	keeper
	*closeLog
}

func (h closeKeeper) Serve(c *transport.Conn, f *transport.Buffer) { h.keeper.Serve(c, f) }
func (h closeKeeper) Closed(c *transport.Conn, err error)          { h.closeLog.Closed(c, err) }

// TestPaceSparesPausedPeer: a peer sends the first quarter of a 1 MiB
// frame at once and then nothing for a second (half its FrameTimeout of
// 2 s: its process was short of CPU, say) before the rest, while another
// frame waits for memory. Its frame ends well within FrameTimeout, so it
// is not closed: the pace asked is half the declared length per
// FrameTimeout (after a tenth of it, 64 KiB of slack), so a peer that
// keeps up on average may pause. (At the full pace, 1 MiB per 2 s, it was
// closed after about 0.83 s of its frame, "sent 262144 bytes of a
// 1048576-byte body": a consumer whose writer was descheduled, 1 call in
// 240 at FrameTimeout 1 s, load 19.) The pause is counted from before
// the frame's header was sent, so the frame is at most about a second old
// when the rest comes, whatever the setup after it took (the rule cuts at
// about 1.45 s; paceSetup's waiter once took some of that margin under
// load).
func TestPaceSparesPausedPeer(t *testing.T) {
	h := newCloseLog(false)
	s, kept, peer, rest, start := paceSetup(t, h, 256<<10)
	// The pause is what this test is about.
	time.Sleep(time.Until(start.Add(time.Second)))
	if _, err := peer.Write(rest); err != nil {
		t.Fatalf("the paused peer was closed: %v (%v)", closeErrors(t, h, 1)[0], err)
	}
	select {
	case f := <-kept:
		require.Len(t, f.B, transport.HeaderSize+1<<20)
		require.Equal(t, uint64(2), binary.BigEndian.Uint64(f.B[4:12]))
		f.Release()
	case err := <-h.closed:
		t.Fatalf("the paused peer was closed: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("the paused peer's frame was not read")
	}
	require.Zero(t, s.Reclaimed())
}

// TestPaceClosesTrickler: a peer that sends a 1 MiB frame at 80 KiB/s
// from its header on (8 KiB every 100 ms: it would take 13 s, a
// FrameTimeout of 2 s ends it anyway) while another frame waits for
// memory is far behind even half the pace of its FrameTimeout (after
// about 0.65 s), and is closed by the reclaimer, counted, before its
// FrameTimeout.
func TestPaceClosesTrickler(t *testing.T) {
	h := newCloseLog(false)
	s, _, peer, rest, _ := paceSetup(t, h, 0)
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() {
		defer close(trickled)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := 0; i+8<<10 <= len(rest); i += 8 << 10 {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := peer.Write(rest[i : i+8<<10]); err != nil {
				return
			}
		}
	}()
	defer func() { close(stop); <-trickled }()
	err := closeErrors(t, h, 1)[0]
	require.ErrorIs(t, err, transport.ErrSlowFrame)
	require.ErrorContains(t, err, "while other connections waited for memory", "closed by the reclaimer, not by FrameTimeout")
	require.Eventually(t, func() bool { return s.Reclaimed() == 1 }, 10*time.Second, time.Millisecond)
}

// TestReclaimSparesSlowReaderOverTLS: TestReclaimSparesSlowReader over
// TLS. The 3.5 MiB answer is one batch, which TLS writes record by
// record; the writes under TLS that take bytes count as the peer's
// progress, so the slow reader (about 1 MiB/s, FrameTimeout 1 s) is not
// closed as one that took none of its answers. (Counting whole batches,
// as before, closed it: the batch takes about 3 s.)
func TestReclaimSparesSlowReaderOverTLS(t *testing.T) {
	serverTLS, clientTLS := testcert.SelfSigned(t)
	clientTLS = clientTLS.Clone()
	clientTLS.ServerName = "127.0.0.1"
	h := newCloseLog(false)
	s, addr := serveSmallSends(t, bigOnA{h}, &transport.Options{TLS: serverTLS, MaxMemory: 4 << 20, MaxPayload: 7 << 19, FrameTimeout: time.Second})

	raw, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer raw.Close()
	require.NoError(t, raw.(*net.TCPConn).SetReadBuffer(32<<10))
	slow := tls.Client(raw, clientTLS)
	_ = slow.SetDeadline(time.Now().Add(30 * time.Second))
	require.NoError(t, slow.Handshake())
	spareSlowReader(t, s, slow, func() (net.Conn, error) { return tls.Dial("tcp", addr, clientTLS) })
}
