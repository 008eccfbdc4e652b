//go:build linux

package transport

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/minidubbo/minidubbo/internal/readhook"
)

// rawReader reads a socket through its RawConn with a raw read(2): the
// socket is non-blocking (Go's poller waits for it), so the read never
// blocks, and it is made without the runtime's syscall bookkeeping
// (entersyscall), which wakes the runtime's sysmon thread whenever that
// thread sleeps because every P was idle: on a connection with one call at
// a time that was a futex wake-up of another thread, on the call's path,
// for nearly every request (and sysmon's polling after it).
type rawReader struct {
	raw syscall.RawConn
	nc  net.Conn
	fn  func(fd uintptr) bool
	p   []byte
	n   int
	err syscall.Errno
	// took, when set (countReads), counts the bytes the reads took
	// from the socket, shifted left by one; its lowest bit is set while
	// a read(2) is under way and its bytes are not counted yet.
	took *atomic.Int64
}

// countReads makes rd, when it reads a socket with read(2) itself (a
// rawReader), or is a TLS connection Dial made over one (readUnder),
// count the bytes it takes from the socket in *took (see rawReader.took),
// and reports whether it does. Under TLS they are ciphertext: more than
// the frames' bytes, so only whether took moved tells anything.
func countReads(rd io.Reader, took *atomic.Int64) bool {
	r, ok := rd.(*rawReader)
	if !ok {
		r, ok = readerUnder(rd).(*rawReader)
	}
	if ok {
		r.took = took
	}
	return ok
}

// newReader returns what the read loop reads nc with.
func newReader(nc net.Conn) io.Reader {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nc
	}
	switch nc.(type) {
	case *net.TCPConn, *net.UnixConn:
	default:
		return nc
	}
	raw, err := sc.SyscallConn()
	if err != nil || !nonblocking(raw) {
		return nc
	}
	r := &rawReader{raw: raw, nc: nc}
	r.fn = r.once
	return r
}

func (r *rawReader) once(fd uintptr) bool {
	if r.took != nil {
		// Under way: bytes leave the socket before they are counted,
		// and whoever looks in between sees the bit (Conn.Reading).
		r.took.Add(1)
	}
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&r.p[0])), uintptr(len(r.p)))
		switch e {
		case 0:
			r.n = int(n)
			if r.took != nil {
				if h := readhook.Taken.Load(); h != nil && n > 0 {
					(*h)()
				}
				r.took.Add(int64(n)<<1 - 1)
			}
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if r.took != nil {
				r.took.Add(-1)
			}
			return false // the poller waits for more
		}
		if r.took != nil {
			r.took.Add(-1)
		}
		r.n, r.err = 0, e
		return true
	}
}

// Read reads what the socket has, waiting for something as net.Conn's
// Read does (deadlines included).
func (r *rawReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	r.p = p
	err := r.raw.Read(r.fn)
	n, e := r.n, r.err
	r.p, r.n, r.err = nil, 0, 0
	if err != nil {
		return 0, err
	}
	if e != 0 {
		return 0, opError(r.nc, "read", e)
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// rawWrite is write(2) without the runtime's syscall bookkeeping (see
// rawReader): the socket is non-blocking.
func rawWrite(fd uintptr, b []byte) (int, syscall.Errno) {
	if len(b) == 0 {
		return 0, 0
	}
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}

// rawWritev is writev(2) likewise.
func rawWritev(fd uintptr, iov []syscall.Iovec) (int, syscall.Errno) {
	n, _, e := syscall.RawSyscall(syscall.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
	return int(n), e
}

// writeFD is the direct write's write(2).
func writeFD(fd uintptr, b []byte) (int, error) {
	n, e := rawWrite(fd, b)
	if e != 0 {
		return 0, e
	}
	return n, nil
}

// waitHook: writeBuffers calls directWrite.beforeWait before it waits.
const waitHook = true

// writeBuffers writes all of bufs (consuming them), waiting for room in
// the socket as net.Buffers' WriteTo does, with raw writev calls. Only the
// connection's writer goroutine uses it (d.all*).
func writeBuffers(d *directWrite, nc net.Conn, bufs *net.Buffers) error {
	if d == nil {
		_, err := bufs.WriteTo(nc)
		return err
	}
	d.all = *bufs
	err := d.raw.Write(d.allFn)
	werr := d.allErr
	d.all, d.allErr = nil, 0
	*bufs = nil
	if err != nil {
		return err
	}
	if werr != 0 {
		return opError(nc, "writev", werr)
	}
	return nil
}

func (d *directWrite) writeAll(fd uintptr) bool {
	for len(d.all) > 0 {
		iov := d.allIov[:0]
		for _, b := range d.all {
			if len(iov) == maxIov {
				break
			}
			if len(b) == 0 {
				continue
			}
			v := syscall.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
		d.allIov = iov
		if len(iov) == 0 {
			d.all = nil
			break
		}
		n, e := rawWritev(fd, iov)
		clear(iov)
		switch e {
		case 0:
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			if d.beforeWait != nil {
				// Nothing it holds may be read after this (Loan).
				d.beforeWait(d.all)
				d.beforeWait = nil
			}
			return false // the poller waits for room
		default:
			d.allErr = e
			return true
		}
		if n > 0 {
			d.sent.Add(1)
		}
		// Consume n bytes.
		for n > 0 && len(d.all) > 0 {
			if l := len(d.all[0]); l <= n {
				n -= l
				d.all[0] = nil
				d.all = d.all[1:]
			} else {
				d.all[0] = d.all[0][n:]
				n = 0
			}
		}
		for len(d.all) > 0 && len(d.all[0]) == 0 {
			d.all = d.all[1:]
		}
	}
	return true
}

// opError is the *net.OpError net.Conn's Read or Write would return for
// errno e. A connection whose addresses could not be read has nil ones,
// so the network's name is taken from whichever address there is.
func opError(nc net.Conn, call string, e syscall.Errno) error {
	op := "read"
	if call != "read" {
		op = "write"
	}
	la, ra := nc.LocalAddr(), nc.RemoteAddr()
	network := ""
	switch {
	case la != nil:
		network = la.Network()
	case ra != nil:
		network = ra.Network()
	}
	return &net.OpError{Op: op, Net: network, Source: la, Addr: ra, Err: os.NewSyscallError(call, e)}
}

// socketUnread returns the bytes that have arrived in nc's socket (under
// a TLS connection, its TCP connection's) and were not read yet, or 0
// when that cannot be told. The budget's reclaimer counts them as sent
// by the peer: a frame whose bytes wait in the socket is not behind
// because the server, short of CPU, has not read them yet.
func socketUnread(nc net.Conn) int {
	if tc, ok := nc.(*tls.Conn); ok {
		nc = tc.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return 0
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	var v int32
	_ = raw.Control(func(fd uintptr) {
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCINQ, uintptr(unsafe.Pointer(&v))); e != 0 {
			v = 0
		}
	})
	return int(max(v, 0))
}

// socketReceived returns how many bytes the kernel has received on nc's
// TCP socket (under a TLS connection, its TCP connection's) since it was
// opened, in order (TCP_INFO's tcpi_bytes_received, Linux 4.1 on), and
// ok false when that cannot be told. It moves as bytes arrive, before
// anything reads them: a count of what came that a reader this process
// does not control (a caller's own tls.Conn, which takes bytes from the
// socket into its own buffer) cannot hide.
func socketReceived(nc net.Conn) (n int64, ok bool) {
	if tc, isTLS := nc.(*tls.Conn); isTLS {
		nc = tc.NetConn()
	}
	sc, isSC := nc.(syscall.Conn)
	if !isSC {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	_ = raw.Control(func(fd uintptr) {
		if info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO); err == nil {
			n = int64(info.Bytes_received)
		}
	})
	// 0 also when the kernel's tcp_info has no such field (before
	// 4.1): a connection that did its TLS handshake has received bytes.
	return n, n > 0
}
