package zookeeper

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/minidubbo/minidubbo/protocol"
)

// frame is a ZooKeeper answer: length, xid, zxid, err, then body.
func frame(xid int32, zxid int64, body int) []byte {
	b := make([]byte, 4+16+body)
	binary.BigEndian.PutUint32(b[0:4], uint32(16+body))
	binary.BigEndian.PutUint32(b[4:8], uint32(xid))
	binary.BigEndian.PutUint64(b[8:16], uint64(zxid))
	for i := 20; i < len(b); i++ {
		b[i] = byte(i)
	}
	return b
}

// request is a request packet: length, xid, opcode, then a body.
func request(xid, op int32) []byte {
	b := make([]byte, 4+8+4)
	binary.BigEndian.PutUint32(b[0:4], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[4:8], uint32(xid))
	binary.BigEndian.PutUint32(b[8:12], uint32(op))
	return b
}

// gatePair dials a gated handshakeConn to a loopback listener and plays
// the session handshake (a request, then a 36-byte answer read the way
// go-zookeeper reads it), returning both ends.
func gatePair(t *testing.T, socks *sockets, onSetWatches func()) (*handshakeConn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	nc, err := handshakeDialer(time.Minute, socks, onSetWatches)("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c := nc.(*handshakeConn)
	t.Cleanup(func() { c.Close() })
	srv := <-accepted
	if srv == nil {
		t.Fatal("no connection accepted")
	}
	t.Cleanup(func() { srv.Close() })
	_ = srv.SetDeadline(time.Now().Add(time.Minute))
	if _, err := c.Write(make([]byte, 48)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(srv, make([]byte, 48)); err != nil {
		t.Fatal(err)
	}
	answer := make([]byte, 40)
	binary.BigEndian.PutUint32(answer, 36)
	if _, err := srv.Write(answer); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute))
	if _, err := io.ReadFull(c, answer[:4]); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Time{}) // the handshake is done
	if _, err := io.ReadFull(c, answer[:36]); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Minute)) // bounds every read below
	return c, srv
}

// readFrame reads one answer as go-zookeeper's receive loop does.
func readFrame(c net.Conn) (xid int32, zxid int64, err error) {
	var l [4]byte
	if _, err := io.ReadFull(c, l[:]); err != nil {
		return 0, 0, err
	}
	b := make([]byte, binary.BigEndian.Uint32(l[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return 0, 0, err
	}
	return int32(binary.BigEndian.Uint32(b[0:4])), int64(binary.BigEndian.Uint64(b[4:12])), nil
}

type answer struct {
	xid  int32
	zxid int64
	err  error
}

// within bounds a wait in these tests.
const within = 30 * time.Second

func waitHeld(t *testing.T, held <-chan *handshakeConn, want *handshakeConn) {
	t.Helper()
	select {
	case h := <-held:
		if h != want {
			t.Fatal("another connection held")
		}
	case <-time.After(within):
		t.Fatalf("no answer held within %v", within)
	}
}

func waitAnswer(t *testing.T, got <-chan answer) answer {
	t.Helper()
	select {
	case a := <-got:
		return a
	case <-time.After(within):
		t.Fatalf("no answer read within %v", within)
		return answer{}
	}
}

// holdHook reports each Read held at the gate on the returned channel.
func holdHook(t *testing.T) <-chan *handshakeConn {
	held := make(chan *handshakeConn, 8)
	h := func(c *handshakeConn) { held <- c }
	testHookGateHeld.Store(&h)
	t.Cleanup(func() { testHookGateHeld.Store(nil) })
	return held
}

// Until the SetWatches packet is written on a connection, an answer to a
// request (xid >= 0, other than credentials) is not handed to
// go-zookeeper: its receive loop would write the last zxid that
// sendSetWatches may be reading. Pings, watch events and the credentials'
// answers pass; so does everything once the packet is written.
func TestGateHoldsAnswersUntilSetWatches(t *testing.T) {
	held := holdHook(t)
	setWatches := 0
	c, srv := gatePair(t, &sockets{}, func() { setWatches++ })

	if _, err := c.Write(request(1, opSetAuth)); err != nil {
		t.Fatal(err)
	}
	for _, f := range [][]byte{frame(-2, 0, 0), frame(-1, 0, 12), frame(1, 0, 0)} {
		if _, err := srv.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []int32{-2, -1, 1} {
		xid, _, err := readFrame(c)
		if err != nil || xid != want {
			t.Fatalf("read xid %d, %v; want %d passed", xid, err, want)
		}
	}

	// A request queued before a disconnect, written at once: its answer,
	// then a ping's.
	if _, err := srv.Write(append(frame(7, 42, 30), frame(-2, 0, 0)...)); err != nil {
		t.Fatal(err)
	}
	got := make(chan answer, 2)
	go func() {
		for range 2 {
			xid, zxid, err := readFrame(c)
			got <- answer{xid, zxid, err}
		}
	}()
	waitHeld(t, held, c)
	select {
	case a := <-got:
		t.Fatalf("answer %+v handed over before the SetWatches packet was written", a)
	default:
	}
	if _, err := c.Write(request(8, opSetWatches)); err != nil {
		t.Fatal(err)
	}
	if setWatches != 1 {
		t.Fatalf("onSetWatches called %d times, want 1", setWatches)
	}
	if a := waitAnswer(t, got); a.err != nil || a.xid != 7 || a.zxid != 42 {
		t.Fatalf("after SetWatches: %+v, want xid 7 zxid 42", a)
	}
	if a := waitAnswer(t, got); a.err != nil || a.xid != -2 {
		t.Fatalf("after SetWatches: %+v, want the ping's answer", a)
	}
	// Released: answers flow without the gate.
	if _, err := srv.Write(frame(9, 43, 5)); err != nil {
		t.Fatal(err)
	}
	if xid, _, err := readFrame(c); err != nil || xid != 9 {
		t.Fatalf("read xid %d, %v; want 9", xid, err)
	}
	// ... and cost no allocation.
	f := frame(10, 44, 20)
	var many []byte
	for range 101 {
		many = append(many, f...)
	}
	if _, err := srv.Write(many); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(f))
	if allocs := testing.AllocsPerRun(100, func() {
		if _, err := io.ReadFull(c, buf[:4]); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf[4:]); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per answer read after release, want 0", allocs)
	}
	if len(held) != 0 {
		t.Fatalf("%d more reads held", len(held))
	}
}

// The registry releases its connections when the session settles without
// a SetWatches packet (go-zookeeper holds no watch), and closing a
// connection wakes a Read held at its gate.
func TestGateReleasedBySettleOrClose(t *testing.T) {
	held := holdHook(t)
	socks := &sockets{}
	c, srv := gatePair(t, socks, nil)
	if _, err := srv.Write(frame(3, 5, 0)); err != nil {
		t.Fatal(err)
	}
	got := make(chan answer, 1)
	go func() {
		xid, zxid, err := readFrame(c)
		got <- answer{xid, zxid, err}
	}()
	waitHeld(t, held, c)
	socks.release(0)
	if a := waitAnswer(t, got); a.err != nil || a.xid != 3 {
		t.Fatalf("after release: %+v, want xid 3", a)
	}

	c2, srv2 := gatePair(t, &sockets{}, nil)
	if _, err := srv2.Write(frame(4, 6, 0)); err != nil {
		t.Fatal(err)
	}
	go func() {
		xid, zxid, err := readFrame(c2)
		got <- answer{xid, zxid, err}
	}()
	waitHeld(t, held, c2)
	c2.Close()
	if a := waitAnswer(t, got); !errors.Is(a.err, net.ErrClosed) {
		t.Fatalf("held read after Close: %+v, want net.ErrClosed", a)
	}
}

// A request go-zookeeper queued while the connection was down is written
// first on the new one, before the SetWatches packet that re-sends the
// watches; go-zookeeper read its last zxid for that packet before it
// queued it. Here the SetWatches packet's write waits until the request
// was answered (or its answer is held back): without the gate the receive
// loop writes the last zxid unordered with that read, and -race reports
// the library's race (go-zookeeper/zk#35). With it the answer waits until
// the packet is written, and the request then succeeds.
func TestQueuedRequestAnsweredAfterSetWatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	noFallback(t)
	r, px := proxiedRegistry(t)
	const iface = "test.Gate"
	if err := r.Register(ctx, protocol.NewURL("dubbo", "127.0.0.1", 20611, iface, map[string]string{protocol.KeyInterface: iface})); err != nil {
		t.Fatal(err)
	}
	lists := make(listsListener, 64)
	c := protocol.NewURL("consumer", "127.0.0.1", 0, iface, map[string]string{protocol.KeyInterface: iface, protocol.KeySide: "consumer"})
	if err := r.Subscribe(c, lists); err != nil {
		t.Fatal(err)
	}
	waitLen(ctx, t, lists, 1) // go-zookeeper holds a watch now

	px.Block()
	waitUntil(ctx, t, "disconnected", func() bool { return !r.Stats().HasSession })
	sid := r.Stats().SessionID
	r.mu.Lock()
	conn := r.conn
	r.mu.Unlock()
	var existsErr error
	answered := make(chan struct{}) // closed when Exists returned
	go func() {
		defer close(answered)
		_, _, existsErr = conn.Exists("/")
	}()
	buf := make([]byte, 1<<20)
	waitUntil(ctx, t, "request queued", func() bool { return queued(buf) })

	held := make(chan struct{}, 8)
	gh := func(*handshakeConn) { held <- struct{}{} }
	testHookGateHeld.Store(&gh)
	t.Cleanup(func() { testHookGateHeld.Store(nil) })
	wasHeld, wasAnswered := false, false
	var once sync.Once
	hookDone := make(chan struct{})
	sh := func(*handshakeConn) {
		once.Do(func() {
			defer close(hookDone)
			select {
			case <-held:
				wasHeld = true
			case <-answered:
				wasAnswered = true
			case <-ctx.Done():
			}
		})
	}
	testHookSetWatches.Store(&sh)
	t.Cleanup(func() { testHookSetWatches.Store(nil) })
	px.Unblock()

	select {
	case <-answered:
		if existsErr != nil {
			t.Fatalf("queued request: %v", existsErr)
		}
	case <-ctx.Done():
		t.Fatal("the queued request was not answered")
	}
	waitUntil(ctx, t, "settled", func() bool { _, _, _, ok := r.ready(); return ok })
	select {
	case <-hookDone:
	case <-ctx.Done():
		t.Fatal("no SetWatches packet written")
	}
	if wasAnswered {
		t.Fatal("the queued request was answered before the SetWatches packet was written")
	}
	if !wasHeld {
		t.Fatal("no answer held back before the SetWatches packet was written")
	}
	if got := r.Stats().SessionID; got != sid {
		t.Fatalf("session %x -> %x, want it kept (the test is about a reconnect)", sid, got)
	}
	fallbackUnused(t, r)
}

// watchPacket is a ChildrenW or ExistsW request packet: length, xid,
// opcode, path, watch flag.
func watchPacket(xid, op int32, path string, watch bool) []byte {
	b := make([]byte, 16+len(path)+1)
	binary.BigEndian.PutUint32(b[0:4], uint32(len(b)-4))
	binary.BigEndian.PutUint32(b[4:8], uint32(xid))
	binary.BigEndian.PutUint32(b[8:12], uint32(op))
	binary.BigEndian.PutUint32(b[12:16], uint32(len(path)))
	copy(b[16:], path)
	if watch {
		b[len(b)-1] = 1
	}
	return b
}

// codeFrame is an answer with no body and error code code.
func codeFrame(xid, code int32) []byte {
	b := frame(xid, 9, 0)
	binary.BigEndian.PutUint32(b[16:20], uint32(code))
	return b
}

// The gate counts the registry's watch calls by what became of their
// requests: an answer that makes go-zookeeper add a watch (ChildrenW
// answered, ExistsW answered or "no node"), one that does not, and
// requests whose connection ended unanswered. Requests without the watch
// flag, or of no call of the registry's, are not counted.
func TestGateCountsWatchRequests(t *testing.T) {
	socks := &sockets{}
	c, srv := gatePair(t, socks, nil)
	socks.release(0)
	kc, ke := watchKey{opGetChildren2, "/a"}, watchKey{opExists, "/b"}
	for _, k := range []watchKey{kc, kc, ke, ke} {
		socks.watchBegin(k)
	}
	want := func(what string, added, pending int) {
		t.Helper()
		if a, p := socks.watchState(); a != added || p != pending {
			t.Fatalf("%s: %d calls answered adding a watch, %d pending; want %d, %d", what, a, p, added, pending)
		}
	}
	want("before any write", 0, 4)
	var reqs []byte
	for _, p := range [][]byte{
		watchPacket(1, opGetChildren2, "/a", true), watchPacket(2, opGetChildren2, "/a", true),
		watchPacket(3, opExists, "/b", true), watchPacket(4, opExists, "/b", true),
		watchPacket(5, opExists, "/b", false), watchPacket(6, opGetChildren2, "/c", true),
	} {
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, p...)
	}
	if _, err := io.ReadFull(srv, make([]byte, len(reqs))); err != nil {
		t.Fatal(err)
	}
	want("written", 0, 4)
	for _, f := range [][]byte{codeFrame(1, 0), codeFrame(2, errNoNode), codeFrame(3, errNoNode), codeFrame(5, 0), codeFrame(6, 0)} {
		if _, err := srv.Write(f); err != nil {
			t.Fatal(err)
		}
		if _, _, err := readFrame(c); err != nil {
			t.Fatal(err)
		}
	}
	want("answered but xid 4", 2, 1)
	srv.Close()
	if _, _, err := readFrame(c); err == nil {
		t.Fatal("read after the server closed: no error")
	}
	want("connection ended", 2, 0)
	// go-zookeeper's send loop may write one more after that: it is
	// never answered either.
	socks.watchBegin(kc)
	_, _ = c.Write(watchPacket(7, opGetChildren2, "/a", true))
	want("written after the connection ended", 2, 0)
	socks.watchEnd(kc, false)
	socks.watchEnd(kc, true)
	socks.watchEnd(kc, false)
	want("ChildrenW calls returned", 1, 0)
	socks.watchEnd(ke, true)
	socks.watchEnd(ke, false)
	want("all returned", 0, 0)
	socks.mu.Lock()
	left := len(socks.calls)
	socks.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d keys still counted after every call returned", left)
	}
}

// A session settled with no watch held lets answers through at once.
// Once one of them added a watch (go-zookeeper's sendSetWatches may then
// read its last zxid), the answers after it carry no zxid, so that the
// receive loop writes none, until the SetWatches packet is written or the
// time given to release has passed. The watch answer itself keeps its
// zxid (written before the watch is added, under the lock sendSetWatches
// takes).
func TestGateZeroesZxidAfterWatchUntilSetWatches(t *testing.T) {
	read := func(c net.Conn) answer {
		t.Helper()
		got := make(chan answer, 1)
		go func() {
			xid, zxid, err := readFrame(c)
			got <- answer{xid, zxid, err}
		}()
		return waitAnswer(t, got)
	}
	send := func(srv net.Conn, f []byte) {
		t.Helper()
		if _, err := srv.Write(f); err != nil {
			t.Fatal(err)
		}
	}
	// watchCall writes a registry ExistsW request on c.
	watchCall := func(socks *sockets, c *handshakeConn, srv net.Conn, xid int32) {
		t.Helper()
		socks.watchBegin(watchKey{opExists, "/s"})
		p := watchPacket(xid, opExists, "/s", true)
		if _, err := c.Write(p); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(srv, make([]byte, len(p))); err != nil {
			t.Fatal(err)
		}
	}
	withZxid := func(f []byte, zxid int64) []byte {
		binary.BigEndian.PutUint64(f[8:16], uint64(zxid))
		return f
	}
	socks := &sockets{}
	c, srv := gatePair(t, socks, nil)
	socks.release(time.Hour)
	send(srv, frame(3, 5, 4))
	if a := read(c); a.err != nil || a.xid != 3 || a.zxid != 5 {
		t.Fatalf("answer before any watch: %+v, want xid 3, zxid 5", a)
	}
	watchCall(socks, c, srv, 4)
	send(srv, withZxid(codeFrame(4, errNoNode), 6))
	if a := read(c); a.err != nil || a.xid != 4 || a.zxid != 6 {
		t.Fatalf("the answer adding a watch: %+v, want xid 4, zxid 6", a)
	}
	send(srv, frame(5, 7, 4))
	if a := read(c); a.err != nil || a.xid != 5 || a.zxid != 0 {
		t.Fatalf("answer after a watch was added: %+v, want xid 5, zxid 0", a)
	}
	send(srv, frame(-1, 8, 4)) // a watch event: not a request's
	if a := read(c); a.err != nil || a.xid != -1 || a.zxid != 8 {
		t.Fatalf("watch event: %+v, want xid -1, zxid 8 (untouched)", a)
	}
	if _, err := c.Write(request(6, opSetWatches)); err != nil {
		t.Fatal(err)
	}
	send(srv, frame(6, 9, 0))
	if a := read(c); a.err != nil || a.xid != 6 || a.zxid != 9 {
		t.Fatalf("answer after the SetWatches packet: %+v, want xid 6, zxid 9", a)
	}
	if n := c.zeroed.Load(); n != 1 {
		t.Fatalf("%d answers zeroed, want 1", n)
	}

	// Once the time has passed, zxids pass too.
	socks2 := &sockets{}
	c2, srv2 := gatePair(t, socks2, nil)
	socks2.release(time.Nanosecond)
	watchCall(socks2, c2, srv2, 1)
	send(srv2, codeFrame(1, 0))
	read(c2)
	send(srv2, frame(2, 8, 0))
	if a := read(c2); a.err != nil || a.xid != 2 || a.zxid != 8 {
		t.Fatalf("answer after the zero time: %+v, want xid 2, zxid 8", a)
	}
	// Released by the SetWatches packet: nothing zeroed.
	socks3 := &sockets{}
	c3, srv3 := gatePair(t, socks3, nil)
	if _, err := c3.Write(request(1, opSetWatches)); err != nil {
		t.Fatal(err)
	}
	watchCall(socks3, c3, srv3, 2)
	send(srv3, codeFrame(2, 0))
	read(c3)
	send(srv3, frame(3, 9, 0))
	if a := read(c3); a.err != nil || a.xid != 3 || a.zxid != 9 {
		t.Fatalf("answer after the SetWatches packet: %+v, want xid 3, zxid 9", a)
	}
}
